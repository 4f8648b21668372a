//! Tokenizers built from GGUF metadata: byte-level BPE (`gpt2`) and SentencePiece BPE (`llama`).

pub mod bpe;
pub mod pretokenize;
pub mod spm;
mod stream;

use std::collections::{BTreeSet, HashMap};

use crate::error::{GgufError, Result};
use crate::reader::GgufFile;
use bpe::{byte_to_char_table, BpeMerges};
use pretokenize::PreTokenizer;
pub use stream::StreamDecoder;

/// `tokenizer.ggml.token_type` values.
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// Which algorithm the vocab uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// `gpt2`: byte-level BPE with ranked merges and a pre-tokenizer regex.
    Bpe,
    /// `llama`: SentencePiece BPE with scores and `<0xXX>` byte fallback.
    Spm,
}

/// Texts that end a turn or generation in common chat vocabs (as llama.cpp recognises them).
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<EOT>",
    "<|end_of_text|>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];

struct Bpe {
    merges: BpeMerges,
    pre: PreTokenizer,
    /// Token id of each byte's single-char form.
    byte_ids: [Option<u32>; 256],
    char_to_byte: HashMap<char, u8>,
    /// Llama 3 looks up whole words before merging (HF `ignore_merges`).
    ignore_merges: bool,
}

struct Spm {
    scores: Vec<f32>,
    byte_ids: [Option<u32>; 256],
}

/// A tokenizer loaded from GGUF metadata.
pub struct Tokenizer {
    kind: TokenizerKind,
    tokens: Vec<String>,
    types: Vec<i32>,
    vocab: HashMap<String, u32>,
    bpe: Option<Bpe>,
    spm: Option<Spm>,
    /// Control and user-defined tokens, longest first, for matching in text.
    specials: Vec<u32>,
    special_first_bytes: [bool; 256],
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    eog: BTreeSet<u32>,
}

enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

fn tok_err(msg: impl Into<String>) -> GgufError {
    GgufError::Tokenizer(msg.into())
}

impl Tokenizer {
    /// Builds the tokenizer described by `tokenizer.ggml.*` metadata.
    pub fn from_gguf(f: &GgufFile) -> Result<Self> {
        let model = f.get_str("tokenizer.ggml.model")?;
        let kind = match model {
            "gpt2" => TokenizerKind::Bpe,
            "llama" => TokenizerKind::Spm,
            other => {
                return Err(tok_err(format!(
                    "unsupported tokenizer.ggml.model {other:?} (supported: gpt2, llama)"
                )))
            }
        };
        let tokens: Vec<String> = f
            .get_str_array("tokenizer.ggml.tokens")?
            .into_iter()
            .map(str::to_string)
            .collect();
        let n = tokens.len();
        if n == 0 || n > u32::MAX as usize {
            return Err(tok_err(format!("tokenizer.ggml.tokens has {n} entries")));
        }
        let len_check = |key: &str, len: usize| {
            if len == n {
                Ok(())
            } else {
                Err(tok_err(format!("{key} has {len} entries, vocab has {n}")))
            }
        };
        let types: Vec<i32> =
            match f.get_opt("tokenizer.ggml.token_type", GgufFile::get_i64_array)? {
                Some(t) => {
                    len_check("tokenizer.ggml.token_type", t.len())?;
                    t.into_iter()
                        .map(|v| v.clamp(0, i32::MAX as i64) as i32)
                        .collect()
                }
                None => vec![token_type::NORMAL; n],
            };
        let mut vocab = HashMap::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            // Keep the first id for duplicate texts, as HF does.
            vocab.entry(t.clone()).or_insert(i as u32);
        }
        let id_key = |key: &str| -> Result<Option<u32>> {
            match f.get_opt(key, GgufFile::get_u32)? {
                Some(id) if id as usize >= n => Err(GgufError::TokenOutOfRange { id, n_vocab: n }),
                other => Ok(other),
            }
        };
        let bos = id_key("tokenizer.ggml.bos_token_id")?;
        let eos = id_key("tokenizer.ggml.eos_token_id")?;
        let unk = id_key("tokenizer.ggml.unknown_token_id")?;
        let pad = id_key("tokenizer.ggml.padding_token_id")?;
        let find = |texts: &[&str]| texts.iter().find_map(|t| vocab.get(*t).copied());
        let eot = id_key("tokenizer.ggml.eot_token_id")?.or_else(|| find(EOT_TEXTS));
        let eom = id_key("tokenizer.ggml.eom_token_id")?.or_else(|| find(EOM_TEXTS));
        let is_spm = kind == TokenizerKind::Spm;
        let flag = |key: &str, default: bool| -> Result<bool> {
            Ok(f.get_opt(key, GgufFile::get_bool)?.unwrap_or(default))
        };
        let add_bos = flag("tokenizer.ggml.add_bos_token", is_spm)?;
        let add_eos = flag("tokenizer.ggml.add_eos_token", false)?;
        let add_space_prefix = flag("tokenizer.ggml.add_space_prefix", is_spm)?;

        let (bpe, spm) = match kind {
            TokenizerKind::Bpe => (Some(Self::load_bpe(f, &vocab)?), None),
            TokenizerKind::Spm => (None, Some(Self::load_spm(f, &vocab, n)?)),
        };

        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&i| {
                let t = types[i as usize];
                (t == token_type::CONTROL || t == token_type::USER_DEFINED)
                    && !tokens[i as usize].is_empty()
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].len()));
        let mut special_first_bytes = [false; 256];
        for &i in &specials {
            special_first_bytes[tokens[i as usize].as_bytes()[0] as usize] = true;
        }

        let mut eog: BTreeSet<u32> = [eos, eot, eom].into_iter().flatten().collect();
        for t in EOT_TEXTS.iter().chain(EOM_TEXTS) {
            if let Some(&id) = vocab.get(*t) {
                if types[id as usize] == token_type::CONTROL {
                    eog.insert(id);
                }
            }
        }
        Ok(Self {
            kind,
            tokens,
            types,
            vocab,
            bpe,
            spm,
            specials,
            special_first_bytes,
            bos,
            eos,
            eot,
            unk,
            pad,
            add_bos,
            add_eos,
            add_space_prefix,
            eog,
        })
    }

    fn load_bpe(f: &GgufFile, vocab: &HashMap<String, u32>) -> Result<Bpe> {
        let merges = f.get_str_array("tokenizer.ggml.merges")?;
        // "left right", split at the first space after the first character as llama.cpp
        // does (which asserts); a line without one was silently skipped.
        if let Some((i, line)) = merges.iter().enumerate().find(|(_, l)| {
            let first = l.chars().next().map_or(0, char::len_utf8);
            l[first..]
                .find(' ')
                .is_none_or(|p| first + p + 1 >= l.len())
        }) {
            return Err(GgufError::Tokenizer(format!(
                "tokenizer.ggml.merges: entry {i} {line:?} is not two tokens separated by a space"
            )));
        }
        let pre_name = f
            .get_opt("tokenizer.ggml.pre", GgufFile::get_str)?
            .unwrap_or("default");
        let pre = PreTokenizer::from_name(pre_name)?;
        let (merges, _skipped) = BpeMerges::new(&merges, vocab);
        let table = byte_to_char_table();
        let mut byte_ids = [None; 256];
        let mut char_to_byte = HashMap::with_capacity(256);
        for (b, &c) in table.iter().enumerate() {
            byte_ids[b] = vocab.get(c.encode_utf8(&mut [0; 4]) as &str).copied();
            char_to_byte.insert(c, b as u8);
        }
        let ignore_merges = matches!(pre_name, "llama3" | "llama-v3" | "llama-bpe" | "falcon3");
        Ok(Bpe {
            merges,
            pre,
            byte_ids,
            char_to_byte,
            ignore_merges,
        })
    }

    fn load_spm(f: &GgufFile, vocab: &HashMap<String, u32>, n: usize) -> Result<Spm> {
        let scores = match f.get_opt("tokenizer.ggml.scores", GgufFile::get_f32_array)? {
            Some(s) if s.len() != n => {
                return Err(tok_err(format!(
                    "tokenizer.ggml.scores has {} entries, vocab has {n}",
                    s.len()
                )))
            }
            Some(s) => s,
            None => vec![0.0; n],
        };
        let mut byte_ids = [None; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = vocab.get(&format!("<0x{b:02X}>")).copied();
        }
        Ok(Spm { scores, byte_ids })
    }

    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
    pub fn n_vocab(&self) -> usize {
        self.tokens.len()
    }
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }
    /// End-of-turn token (`<|im_end|>`, `<|eot_id|>`...), if the vocab has one.
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }
    pub fn unk(&self) -> Option<u32> {
        self.unk
    }
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
    /// True for any end-of-generation token (eos, eot, eom and known end-of-turn controls).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }
    /// All end-of-generation ids.
    pub fn eog_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.eog.iter().copied()
    }
    /// The stored text of a token (byte-level or `▁`-escaped form).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }
    pub fn token_type(&self, id: u32) -> Option<i32> {
        self.types.get(id as usize).copied()
    }
    /// Id of an exact token text.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.get(text).copied()
    }

    /// Text to ids. `add_special` adds BOS/EOS as the vocab asks; `parse_special` lets control
    /// tokens written in the text (e.g. `<|im_start|>`) match as single tokens.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        let frags = self.split_specials(text, parse_special);
        let mut prev_special = true;
        for frag in frags {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(t) => {
                    if let Some(b) = &self.bpe {
                        self.encode_bpe(b, t, &mut out);
                    } else if let Some(s) = &self.spm {
                        // SentencePiece adds a leading space at the start and after specials.
                        let mut esc = String::with_capacity(t.len() + 3);
                        if self.add_space_prefix && prev_special {
                            esc.push(spm::SPACE);
                        }
                        esc.extend(t.chars().map(|c| if c == ' ' { spm::SPACE } else { c }));
                        spm::encode(
                            &esc,
                            &self.vocab,
                            &s.scores,
                            &s.byte_ids,
                            self.unk,
                            &mut out,
                        );
                    }
                    prev_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        out
    }

    fn split_specials<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        let mut frags = Vec::new();
        let bytes = text.as_bytes();
        let (mut start, mut i) = (0, 0);
        while i < bytes.len() {
            let hit = if self.special_first_bytes[bytes[i] as usize] && text.is_char_boundary(i) {
                self.specials.iter().copied().find(|&id| {
                    let allowed =
                        parse_special || self.types[id as usize] == token_type::USER_DEFINED;
                    allowed && text[i..].starts_with(self.tokens[id as usize].as_str())
                })
            } else {
                None
            };
            match hit {
                Some(id) => {
                    if start < i {
                        frags.push(Fragment::Text(&text[start..i]));
                    }
                    frags.push(Fragment::Token(id));
                    i += self.tokens[id as usize].len();
                    start = i;
                }
                None => i += 1,
            }
        }
        if start < bytes.len() {
            frags.push(Fragment::Text(&text[start..]));
        }
        frags
    }

    fn encode_bpe(&self, b: &Bpe, text: &str, out: &mut Vec<u32>) {
        let table = byte_to_char_table();
        for word in b.pre.split(text) {
            if b.ignore_merges {
                let mapped: String = word.bytes().map(|x| table[x as usize]).collect();
                if let Some(&id) = self.vocab.get(&mapped) {
                    out.push(id);
                    continue;
                }
            }
            let mut syms: Vec<u32> = word
                .bytes()
                .filter_map(|x| b.byte_ids[x as usize].or(self.unk))
                .collect();
            b.merges.apply(&mut syms);
            out.extend(syms);
        }
    }

    /// The bytes a token stands for; control tokens give their text. Out-of-range ids give
    /// nothing (see [`Tokenizer::try_token_to_piece`] for the checked form).
    pub fn token_to_piece(&self, id: u32) -> Vec<u8> {
        self.try_token_to_piece(id).unwrap_or_default()
    }

    pub fn try_token_to_piece(&self, id: u32) -> Result<Vec<u8>> {
        let text = self
            .tokens
            .get(id as usize)
            .ok_or(GgufError::TokenOutOfRange {
                id,
                n_vocab: self.tokens.len(),
            })?;
        let ty = self.types[id as usize];
        if ty == token_type::CONTROL {
            return Ok(text.as_bytes().to_vec());
        }
        if let Some(b) = &self.bpe {
            if ty == token_type::USER_DEFINED {
                return Ok(text.as_bytes().to_vec());
            }
            let mut out = Vec::with_capacity(text.len());
            for c in text.chars() {
                match b.char_to_byte.get(&c) {
                    Some(&x) => out.push(x),
                    None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            return Ok(out);
        }
        if ty == token_type::BYTE {
            if let Some(x) = spm::parse_byte_token(text) {
                return Ok(vec![x]);
            }
        }
        Ok(text.replace(spm::SPACE, " ").into_bytes())
    }

    /// Ids to text (invalid UTF-8 replaced). SentencePiece's added leading space is removed.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        let mut at_start = true;
        for &id in ids {
            let mut piece = self.token_to_piece(id);
            let ty = self.types.get(id as usize).copied();
            if at_start && ty != Some(token_type::CONTROL) {
                if self.kind == TokenizerKind::Spm
                    && self.add_space_prefix
                    && piece.first() == Some(&b' ')
                {
                    piece.remove(0);
                }
                at_start = false;
            }
            bytes.extend(piece);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests;
