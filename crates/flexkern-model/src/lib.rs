//! flexkern-model: the llama-family forward pass (llama, mistral, qwen2 GGUF files) on
//! flexkern's backend traits, a KV cache, token sampling and the generation loop.
//!
//! `Model::load(&gguf, backend, progress)` → `Model::forward(&mut cache, tokens, Logits)`;
//! `generate` streams tokens through a callback. `Model::forward_batch` runs one step over
//! several sequences of a shared cache and `generate_batch` schedules prompts over it
//! (continuous batching). `reference` is the f64 forward used by tests; `check` compares the
//! model on two backends position by position (`flexkern verify-model`).

pub mod batch;
mod buffers;
pub mod check;
pub mod config;
mod decode_graph;
pub mod error;
pub mod forward;
pub mod generate;
pub mod kv;
pub mod perplexity;
pub mod prepared;
pub mod reference;
pub mod sampler;
pub mod synth;
pub mod weights;

pub use batch::{generate_batch, BatchConfig, BatchStats, Finish, SeqOutput};
pub use check::{check_models, check_models_around, CheckSummary, PositionCheck, Tolerance};
pub use config::Config;
pub use error::{ModelError, Result};
pub use flexkern_quant::Precision;
pub use forward::{Logits, Model, SeqTokens};
pub use generate::{generate, Flow, GenStats};
pub use kv::KvCache;
pub use sampler::{argmax, largest, Sampler, SamplerConfig};
pub use weights::Weights;
