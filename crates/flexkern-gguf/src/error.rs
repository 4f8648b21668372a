//! Typed errors for the reader, writer, tokenizer and chat template.

use std::path::PathBuf;

/// Everything that can go wrong in this crate; each variant names the offending argument or field.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The OS error is the `source` only, so an error chain prints it once.
    #[error("cannot read GGUF file {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("bad magic {found:#010x} (expected \"GGUF\")")]
    BadMagic { found: u32 },
    #[error("unsupported GGUF version {0} (supported: 2, 3; big-endian files are not supported)")]
    UnsupportedVersion(u32),
    #[error("file truncated: needed {needed} bytes at offset {offset} while reading {what}, file has {len}")]
    Truncated {
        what: String,
        offset: usize,
        needed: u64,
        len: usize,
    },
    #[error("{what} count {count} cannot fit in the remaining {remaining} bytes")]
    CountTooLarge {
        what: String,
        count: u64,
        remaining: usize,
    },
    #[error("unknown metadata value type {id} for key {key:?}")]
    UnknownValueType { key: String, id: u32 },
    #[error("metadata arrays nested deeper than {max} levels in key {key:?}")]
    NestingTooDeep { key: String, max: usize },
    #[error("string in {what} is not valid UTF-8")]
    InvalidUtf8 { what: String },
    #[error("duplicate metadata key {0:?}")]
    DuplicateKey(String),
    #[error("duplicate tensor name {0:?}")]
    DuplicateTensor(String),
    #[error("unknown ggml tensor type {id} for tensor {tensor:?}")]
    UnknownTensorType { tensor: String, id: u32 },
    #[error("tensor {tensor:?}: {reason}")]
    BadTensor { tensor: String, reason: String },
    #[error("bad alignment {0} (must be a non-zero power of two)")]
    BadAlignment(u64),
    #[error("tensor {tensor:?}: data [{offset}, +{size}) lies past the end of the data section ({data_len} bytes)")]
    TensorOutOfBounds {
        tensor: String,
        offset: u64,
        size: u64,
        data_len: usize,
    },
    #[error("no tensor named {0:?}")]
    TensorNotFound(String),
    #[error("metadata key {0:?} not found")]
    KeyNotFound(String),
    #[error("metadata key {key:?} has type {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("metadata key {key:?}: value {value} does not fit in {target}")]
    OutOfRange {
        key: String,
        value: String,
        target: &'static str,
    },
    #[error("invalid writer argument {arg}: {reason}")]
    Writer { arg: String, reason: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("tokenizer: token id {id} out of range (vocab size {n_vocab})")]
    TokenOutOfRange { id: u32, n_vocab: usize },
    #[error("chat template: {0}")]
    ChatTemplate(String),
}

pub type Result<T> = std::result::Result<T, GgufError>;
