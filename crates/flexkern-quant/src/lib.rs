//! flexkern-quant: GGUF block formats and MLX affine quantization, byte-identical to the files,
//! with quantize / dequantize and a generic CPU GEMV driver.

pub mod error;
pub mod format;

pub use error::{QuantError, Result};
pub use format::{Format, QuantBlock};
