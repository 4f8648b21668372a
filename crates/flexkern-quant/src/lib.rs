//! flexkern-quant: GGUF block formats and MLX affine quantization, byte-identical to the files,
//! with quantize / dequantize and a generic CPU GEMV driver.
//!
//! Layout: `format` (catalogue and the `QuantBlock` trait), one module per format family
//! (`float`, `legacy`, `k_quants`, `lut4` for the table formats IQ4_NL / IQ4_XS / MXFP4,
//! and `mlx`), `gemv` (the driver), `interleave` (the 8-row
//! repacked layout), `matrix` (the public
//! `QuantMatrix`), `codec` (whole-tensor quantize / dequantize), `precise` (GEMV with the
//! activation kept in f32).

pub mod codec;
pub mod cpu;
mod dispatch;
pub mod error;
pub mod float;
pub mod format;
mod gemv;
mod interleave;
pub mod k_quants;
pub mod legacy;
pub mod lut4;
pub mod matrix;
pub mod mem;
pub mod mlx;
mod precise;
mod rows;
mod rows4;
#[cfg(target_arch = "x86_64")]
mod simd;
mod storage;

pub use codec::{dequantize, quantize, quantize_activation};
pub use error::{QuantError, Result};
pub use format::{Format, MlxScale, QuantBlock};
pub use matrix::{down_with_swiglu, gemv_many, swiglu_gate_up, Activation, QuantMatrix};
pub use precise::Precision;
