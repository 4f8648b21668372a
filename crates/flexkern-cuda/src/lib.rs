//! flexkern's CUDA backend: a runtime over the driver API (context, stream, caching allocator,
//! events, NVRTC module cache), variant code generation (the lowered mask/score programs as CUDA
//! device functions), and attention over strided and paged KV with split-KV and a merge.
//!
//! cudarc loads libcuda and NVRTC at run time: this crate builds on any machine, and without a
//! driver every entry point returns [`CudaError::NoDevice`].

pub mod attention;
pub mod backend;
pub mod bench;
pub mod codegen;
mod device_struct;
pub mod error;
mod graphs;
mod headers;
pub mod host;
pub mod plan;
pub mod quant;
pub mod runtime;
pub mod tensor_ops;
mod top_k;
pub mod verify;

pub use error::{CudaError, Result};
pub use runtime::Device;
