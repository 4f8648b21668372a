//! `quantize` / `dequantize` of whole `[N, K]` tensors for every format.
//!
//! Non-finite input: `quantize` rejects NaN and ±Inf with `QuantError::NonFinite` naming the
//! first offending element, for every format (F32 included), so a stored tensor never carries
//! them. Finite values beyond what a format stores (`Format::max_abs_weight`: f16's 65504 for
//! the formats with f16 scales) are refused with `QuantError::OutOfRange`, where ggml and
//! gguf-py write inf, NaN or zero blocks.

use crate::dispatch::with_block;
use crate::error::{invalid, QuantError, Result};
use crate::format::{Format, QuantBlock};
use crate::mlx;
use crate::storage::{blocks, Storage};

fn check_src(src: &[f32], n: usize, k: usize, format: Format) -> Result<()> {
    format.blocks_per_row(k)?;
    let want = n
        .checked_mul(k)
        .ok_or_else(|| invalid("n", format!("[{n}, {k}] overflows")))?;
    if src.len() != want {
        return Err(invalid(
            "src",
            format!("expected {want} elements for [{n}, {k}], got {}", src.len()),
        ));
    }
    if let Some(index) = src.iter().position(|v| !v.is_finite()) {
        return Err(QuantError::NonFinite {
            arg: "src",
            index,
            value: src[index],
        });
    }
    Ok(())
}

/// Quantize row-major `src` (`[n, k]`) into the bytes a GGUF tensor of `format` holds (for MLX:
/// weights, scales, biases concatenated; see `crate::mlx`).
pub fn quantize(format: Format, src: &[f32], n: usize, k: usize) -> Result<Vec<u8>> {
    check_src(src, n, k, format)?;
    if let Some(limit) = format.max_abs_weight() {
        if let Some(index) = src.iter().position(|v| v.abs() > limit) {
            return Err(QuantError::OutOfRange {
                arg: "src",
                index,
                value: src[index],
                limit,
                format,
            });
        }
    }
    fn run<B: QuantBlock>(src: &[f32]) -> Result<Vec<u8>> {
        let mut out = vec![<B as bytemuck::Zeroable>::zeroed(); src.len() / B::ELEMS];
        B::quantize_ref(src, &mut out);
        Ok(bytemuck::cast_slice(&out).to_vec())
    }
    with_block!(format, |B| run::<B>(src), mlx => {
        let Format::MlxAffine { bits, group_size, scales } = format else { unreachable!() };
        Ok(mlx::quantize(src, n, k, bits, group_size as usize, scales))
    })
}

/// Quantize activation rows as the GEMV does before an integer dot (`format` is the weight
/// format's `dot_format()`): ggml's x86 SIMD rounding for Q8_0 / Q8_1, the reference otherwise.
pub fn quantize_activation(format: Format, src: &[f32], n: usize, k: usize) -> Result<Vec<u8>> {
    check_src(src, n, k, format)?;
    fn run<B: QuantBlock>(src: &[f32]) -> Result<Vec<u8>> {
        let mut out = vec![<B as bytemuck::Zeroable>::zeroed(); src.len() / B::ELEMS];
        B::quantize_activation(src, &mut out);
        Ok(bytemuck::cast_slice(&out).to_vec())
    }
    with_block!(format, |B| run::<B>(src), mlx => {
        Err(invalid("format", "MLX formats dot against f32 activations"))
    })
}

/// Dequantize `bytes` (exactly `format.tensor_bytes(n, k)` long) into `[n, k]` f32.
pub fn dequantize(format: Format, bytes: &[u8], n: usize, k: usize) -> Result<Vec<f32>> {
    let want = format.tensor_bytes(n, k)?;
    if bytes.len() != want {
        return Err(invalid(
            "bytes",
            format!(
                "expected {want} bytes for {format} [{n}, {k}], got {}",
                bytes.len()
            ),
        ));
    }
    if let Format::MlxAffine { .. } = format {
        return crate::matrix::QuantMatrix::new(format, n, k, bytes)?.dequantize();
    }
    let storage = Storage::new(bytes);
    let mut out = vec![0.0f32; n * k];
    fn run<B: QuantBlock>(bytes: &[u8], out: &mut [f32]) -> Result<()> {
        B::dequantize(blocks::<B>(bytes), out);
        Ok(())
    }
    with_block!(format, |B| run::<B>(storage.bytes(), &mut out)?, mlx => unreachable!());
    Ok(out)
}
