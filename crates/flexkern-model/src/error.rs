//! One typed error for loading and running a model; each variant names what was wrong.

use flexkern_gguf::GgufError;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("unsupported architecture {0:?} (supported: llama, mistral, qwen2)")]
    UnsupportedArch(String),
    #[error("metadata {key}: {msg}")]
    Config { key: String, msg: String },
    #[error("tensor {0:?} is missing")]
    MissingTensor(String),
    #[error("tensor {name:?} has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("tensor {name:?}: type {ty} is not supported")]
    UnsupportedType { name: String, ty: String },
    #[error("context full: {needed} positions needed, the KV cache holds {max} (--ctx, at most the model's context length)")]
    ContextFull { needed: usize, max: usize },
    #[error("token {id} is out of range (vocab size {vocab})")]
    TokenOutOfRange { id: u32, vocab: usize },
    #[error("argument `{arg}`: {msg}")]
    InvalidArgument { arg: &'static str, msg: String },
    #[error(transparent)]
    Kernel(#[from] flexkern::Error),
    #[error(transparent)]
    Quant(#[from] flexkern_quant::QuantError),
    #[error(transparent)]
    Alloc(#[from] flexkern_quant::mem::AllocError),
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

pub(crate) fn config_err(key: &str, msg: impl Into<String>) -> ModelError {
    ModelError::Config {
        key: key.to_string(),
        msg: msg.into(),
    }
}
