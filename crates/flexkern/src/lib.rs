//! flexkern: attention (every FlexAttention-style variant, ragged and paged batches) and
//! quantized GEMV kernels for LLM inference, on the CPU today and behind one backend trait.
//!
//! Data flow: [`attention::AttentionArgs`] → validated [`attention::problem::Problem`] (shapes
//! and layouts, no data) → [`attention::plan::plan`] with the device's [`device::Caps`]
//! (kernel choice, tiles, [`variant::BlockMask`]; plain data) → [`backend::Backend::attention`]
//! over buffers the backend owns. The f64 [`reference`] oracle checks every kernel.

pub mod attention;
pub mod backend;
pub mod device;
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
pub mod tune;
pub mod variant;
pub mod verify;

pub use attention::{attention, AttentionArgs};
pub use backend::cpu::CpuBackend;
pub use backend::{Backend, Buffer};
pub use device::Caps;
pub use dtype::DType;
pub use error::{Error, Result};
pub use flexkern_quant as quant;
pub use tensor::{HostData, TensorView};
pub use variant::{builtins, expr, BlockMask, Variant};
