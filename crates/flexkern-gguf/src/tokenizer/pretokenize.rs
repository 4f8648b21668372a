//! Pre-tokenizer: the regex sequence a byte-level BPE vocab was trained with, chosen from
//! `tokenizer.ggml.pre` the way llama.cpp's vocab loader names them.

use fancy_regex::Regex;

use crate::error::{GgufError, Result};

/// GPT-2's split: contractions, letters, numbers, punctuation runs, whitespace.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Llama 3: case-insensitive contractions, numbers in groups of up to three.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2: as Llama 3 but single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Isolated single digits (HF `Digits(individual_digits=true)`).
const DIGITS: &str = r"\p{N}";

/// Applies regexes in turn; each splits every piece the previous one produced, keeping both the
/// matches and the text between them (HF `Split(..., Isolated)` semantics).
pub struct PreTokenizer {
    stages: Vec<Regex>,
}

impl PreTokenizer {
    /// The sequence for a `tokenizer.ggml.pre` name; unknown names are an error.
    pub fn from_name(pre: &str) -> Result<Self> {
        let pats: &[&str] = match pre {
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => &[LLAMA3],
            "qwen2" | "deepseek-r1-qwen" | "megrez" | "hunyuan" => &[QWEN2],
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva" => &[DIGITS, GPT2],
            "gpt-2" | "gpt2" | "phi-2" | "jina-es" | "jina-de" | "olmo" | "jais"
            | "roberta-bpe" => &[GPT2],
            // llama.cpp's fallback for unnamed BPE vocabs.
            "default" => &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
            other => {
                return Err(GgufError::Tokenizer(format!(
                    "unsupported pre-tokenizer tokenizer.ggml.pre = {other:?}"
                )))
            }
        };
        let stages = pats
            .iter()
            .map(|p| Regex::new(p).map_err(|e| GgufError::Tokenizer(format!("regex {p:?}: {e}"))))
            .collect::<Result<_>>()?;
        Ok(Self { stages })
    }

    /// Splits `text` into words (sub-slices, in order, covering all of it).
    pub fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let mut pieces = vec![text];
        for re in &self.stages {
            let mut next = Vec::with_capacity(pieces.len());
            for p in pieces {
                split_one(re, p, &mut next);
            }
            pieces = next;
        }
        pieces
    }
}

fn split_one<'t>(re: &Regex, text: &'t str, out: &mut Vec<&'t str>) {
    let mut last = 0;
    for m in re.find_iter(text) {
        // A regex runtime error (backtrack limit) leaves the rest unsplit rather than failing.
        let Ok(m) = m else { break };
        if m.start() > last {
            out.push(&text[last..m.start()]);
        }
        if m.end() > m.start() {
            out.push(m.as_str());
        }
        last = m.end();
    }
    if last < text.len() {
        out.push(&text[last..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smollm_isolates_digits() {
        let p = PreTokenizer::from_name("smollm").unwrap();
        assert_eq!(
            p.split("abc 123  x's"),
            vec!["abc", " ", "1", "2", "3", " ", " x", "'s"]
        );
    }

    #[test]
    fn llama3_groups_three_digits() {
        let p = PreTokenizer::from_name("llama-bpe").unwrap();
        assert_eq!(p.split("12345 HE'LL"), vec!["123", "45", " HE", "'LL"]);
    }

    #[test]
    fn unknown_name_is_an_error() {
        assert!(PreTokenizer::from_name("nope").is_err());
    }
}
