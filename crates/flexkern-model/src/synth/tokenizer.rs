//! The synthetic model's vocabulary: every `tokenizer.*` key of a donor GGUF (the default
//! model: its BPE, special tokens and chat template), or a built-in byte-level vocabulary;
//! padded with unused tokens up to the requested vocabulary size.

use super::{invalid, SynthError};
use flexkern_gguf::tokenizer::bpe::byte_to_char_table;
use flexkern_gguf::tokenizer::token_type;
use flexkern_gguf::{GgufFile, Value, ValueType};

/// The largest `--vocab`: 4x the largest published vocabularies.
pub const MAX_VOCAB: usize = 1 << 20;

/// Where the vocabulary comes from.
pub enum TokenizerSource<'a> {
    /// Copy `tokenizer.*` from this file.
    Gguf(&'a GgufFile),
    /// 256 byte tokens (GPT-2's byte-to-char table, no merges) and `<|endoftext|>`.
    Bytes,
}

/// The metadata keys, and the vocabulary size (`want`, or the tokenizer's).
pub(super) fn metadata(
    src: &TokenizerSource,
    want: Option<usize>,
) -> Result<(Vec<(String, Value)>, usize), SynthError> {
    let mut keys: Vec<(String, Value)> = match src {
        TokenizerSource::Gguf(f) => f
            .metadata()
            .iter()
            .filter(|(k, _)| k.starts_with("tokenizer."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        TokenizerSource::Bytes => bytes(),
    };
    let count = match keys.iter().find(|(k, _)| k == "tokenizer.ggml.tokens") {
        Some((_, Value::Array(ValueType::String, items))) => items.len(),
        _ => {
            return Err(invalid(
                "tokenizer",
                "the donor file has no tokenizer.ggml.tokens string array",
            ))
        }
    };
    let vocab = want.unwrap_or(count);
    if vocab < count {
        return Err(invalid(
            "vocab",
            format!("{vocab} is below the tokenizer's {count} tokens"),
        ));
    }
    // Checked before the padding is built (one metadata string per token).
    if vocab > MAX_VOCAB {
        return Err(invalid(
            "vocab",
            format!(
                "{vocab} is above {MAX_VOCAB} (the largest published vocabularies are about 256K)"
            ),
        ));
    }
    // Pad every per-token array; a bad donor array (other length) is refused by its reader.
    for (k, v) in keys.iter_mut() {
        let Value::Array(ty, items) = v else { continue };
        if items.len() != count {
            continue;
        }
        let extra = count..vocab;
        match (k.as_str(), *ty) {
            ("tokenizer.ggml.tokens", ValueType::String) => {
                items.extend(extra.map(|i| Value::String(format!("<|synth_unused_{i}|>"))))
            }
            ("tokenizer.ggml.token_type", ValueType::I32) => {
                items.extend(extra.map(|_| Value::I32(token_type::UNUSED)))
            }
            ("tokenizer.ggml.scores", ValueType::F32) => {
                items.extend(extra.map(|_| Value::F32(0.0)))
            }
            _ => {}
        }
    }
    Ok((keys, vocab))
}

fn bytes() -> Vec<(String, Value)> {
    let table = byte_to_char_table();
    let mut tokens: Vec<String> = table.iter().map(|c| c.to_string()).collect();
    tokens.push("<|endoftext|>".into());
    let mut types = vec![token_type::NORMAL; 256];
    types.push(token_type::CONTROL);
    let eot = Value::U32(256);
    vec![
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String("gpt-2".into())),
        ("tokenizer.ggml.tokens".into(), Value::str_array(&tokens)),
        ("tokenizer.ggml.token_type".into(), Value::i32_array(&types)),
        (
            "tokenizer.ggml.merges".into(),
            Value::Array(ValueType::String, vec![]),
        ),
        ("tokenizer.ggml.bos_token_id".into(), eot.clone()),
        ("tokenizer.ggml.eos_token_id".into(), eot),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
    ]
}
