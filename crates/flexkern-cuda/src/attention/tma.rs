//! TMA descriptors of strided K and V for the Hopper prefill kernel (`attention_wgmma.cu`,
//! `FK_WTMA`): whole tiles of keys arrive by one bulk copy per 64-column block, issued by one
//! thread, instead of the producer warpgroup's 16-byte cp.async per row (the prompt GEMM went
//! from 300 to 400 TFLOP/s on an H100 with the same change). Tiles that cross the sequence's
//! or the window's edge keep the cp.async copies, which zero-fill the keys outside.

use super::{KvInput, KvOperand};
use crate::error::Result;
use cudarc::driver::sys::CUtensorMap;

/// `FLEXKERN_CUDA_TMA=0` keeps every K/V tile on cp.async (A/B runs).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("FLEXKERN_CUDA_TMA").as_deref() != Ok("0"))
}

/// Whether TMA can address `o` (2-byte elements, `hkv` heads of `d`): a 16-byte aligned base,
/// token and head strides of whole 16 bytes, every sequence starting on a token boundary.
fn addressable(o: &KvOperand, hkv: usize, d: usize) -> bool {
    o.dtype.size() == 2
        && o.buf.ptr().is_multiple_of(16)
        && (o.tok_stride * 2).is_multiple_of(16)
        && (o.head_stride * 2).is_multiple_of(16)
        && o.tok_stride > 0
        && o.seq_base.iter().all(|b| b.is_multiple_of(o.tok_stride))
        && extent(o, hkv, d).is_some()
}

/// Tokens the buffer holds whole for every head: the map's outer extent.
fn extent(o: &KvOperand, hkv: usize, d: usize) -> Option<usize> {
    tokens_within(o.buf.bytes() / 2, hkv, d, o.head_stride, o.tok_stride)
}

/// The most tokens t such that element (t - 1, hkv - 1, d - 1) lies inside `elems` (None: not
/// one, or more than TMA's i32 coordinates reach).
fn tokens_within(
    elems: usize,
    hkv: usize,
    d: usize,
    head_stride: usize,
    tok_stride: usize,
) -> Option<usize> {
    let last = hkv
        .checked_sub(1)?
        .checked_mul(head_stride)?
        .checked_add(d)?;
    let t = elems.checked_sub(last)?.checked_div(tok_stride)? + 1;
    (t <= i32::MAX as usize).then_some(t)
}

/// Whether the Hopper kernel may copy `kv`'s tiles with TMA: strided 2-byte K and V that TMA
/// can address (and not switched off).
pub(super) fn applies(kv: &KvInput, hkv: usize, (dk, dv): (usize, usize)) -> bool {
    match kv {
        KvInput::Strided { k, v } => {
            enabled()
                && hkv <= i32::MAX as usize
                && addressable(k, hkv, dk)
                && addressable(v, hkv, dv)
        }
        KvInput::Paged(_) => false,
    }
}

/// The K and V maps for tiles of `tile` keys (`applies` holds).
pub(super) fn maps(
    kv: &KvInput,
    hkv: usize,
    (dk, dv): (usize, usize),
    tile: usize,
) -> Result<[CUtensorMap; 2]> {
    match kv {
        KvInput::Strided { k, v } if applies(kv, hkv, (dk, dv)) => {
            Ok([map(k, hkv, dk, tile)?, map(v, hkv, dv, tile)?])
        }
        _ => Err(crate::error::invalid(
            "kv",
            "TMA cannot address these K/V buffers",
        )),
    }
}

/// `[tokens, hkv, d]` (strides as `o` has them), boxes of 64 elements x 1 head x `tile` tokens:
/// the stage layout of `attention_wgmma_copy.cu`.
fn map(o: &KvOperand, hkv: usize, d: usize, tile: usize) -> Result<CUtensorMap> {
    crate::runtime::tma::tiled_map(
        o.buf.ptr(),
        o.dtype == flexkern::DType::BF16,
        &[d as u64, hkv as u64, extent(o, hkv, d).unwrap_or(0) as u64],
        &[(o.head_stride * 2) as u64, (o.tok_stride * 2) as u64],
        &[64, 1, tile as u32],
    )
}

#[cfg(test)]
mod tests {
    use super::tokens_within;

    /// Token-major and head-major layouts, a buffer one element short of another token, and
    /// buffers too small for even one.
    #[test]
    fn the_extent_never_reaches_past_the_buffer() {
        // [t][h][d]: 8 heads of 128, 10 tokens.
        assert_eq!(tokens_within(10 * 8 * 128, 8, 128, 128, 1024), Some(10));
        assert_eq!(tokens_within(10 * 8 * 128 - 1, 8, 128, 128, 1024), Some(9));
        // [h][t][d]: 8 heads of 10 tokens.
        assert_eq!(tokens_within(8 * 10 * 128, 8, 128, 10 * 128, 128), Some(10));
        assert_eq!(tokens_within(100, 8, 128, 128, 1024), None);
        assert_eq!(tokens_within(1 << 20, 0, 128, 128, 1024), None);
        assert_eq!(tokens_within(1 << 20, 1, 128, 128, 0), None);
    }
}
