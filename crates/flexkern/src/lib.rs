//! flexkern: attention (every FlexAttention-style variant, ragged and paged batches) and
//! quantized GEMV kernels for LLM inference, on the CPU today and behind one backend trait.
//!
//! Data flow: [`attention::AttentionArgs`] → validated [`attention::problem::Problem`] →
//! [`attention::plan::plan`] (kernel choice, tiles, [`variant::BlockMask`]) →
//! [`backend::Backend::attention`]. The f64 [`reference`] oracle checks every kernel.

pub mod attention;
pub mod backend;
pub mod dtype;
pub mod error;
pub mod kv_cache;
mod kv_quant_lut;
/// Huge-page host buffers (defined in `flexkern-quant`, which the repacked weights use too).
pub use flexkern_quant::mem;
pub mod npy;
pub mod ops;
pub mod reference;
pub mod tensor;
pub mod variant;
pub mod verify;

pub use attention::{attention, AttentionArgs};
pub use backend::cpu::CpuBackend;
pub use backend::Backend;
pub use dtype::DType;
pub use error::{Error, Result};
pub use flexkern_quant as quant;
pub use tensor::{HostData, TensorView};
pub use variant::{builtins, expr, BlockMask, Variant};
