//! The 4-bit table formats: ggml's IQ4_NL (32 weights, f16 scale), IQ4_XS (256 weights, f16
//! super-scale and eight 6-bit sub-block scales) and MXFP4 (32 e2m1 weights, e8m0 shared
//! scale). Each 4-bit code indexes a 16-entry table of int8 values (IQ4's non-linear grid, or
//! e2m1 doubled), so the dot against an int8 activation is a table lookup (`pshufb`) followed
//! by the same integer dot as Q4_0. Blocks are byte-identical to ggml's `block_iq4_nl`,
//! `block_iq4_xs` and `block_mxfp4`.
//!
//! * `dequantize` is bit-exact with gguf-py (`d * table[q]` in f32; IQ4_XS: `(d * (ls - 32)) *
//!   table[q]`; MXFP4: `table[q] * 2^(e - 128)`).
//! * `quantize_ref` follows ggml's `quantize_row_iq4_nl_ref` / `quantize_row_iq4_xs_ref` (the
//!   x^2-weighted scale search over 15 candidate scales, no importance matrix) and
//!   `quantize_row_mxfp4_ref` (scale from the block's largest magnitude, nearest table value),
//!   in f32 without fused multiply-add, so the bytes match ggml's reference built without FP
//!   contraction (checked by `tests/kquants_crosscheck.sh`) and gguf-py's MXFP4 quantizer
//!   (`tests/gguf_crosscheck.py`).
//! * `vec_dot` runs against ggml's `vec_dot_type`: Q8_0 (IQ4_NL, MXFP4) or Q8_K (IQ4_XS); the
//!   integer sums are exact on both paths (portable and AVX2).

// The quantizer keeps ggml's index arithmetic so it reads against the published algorithm.
#![allow(clippy::needless_range_loop)]

mod iq4_nl;
mod iq4_xs;
mod mxfp4;
mod search;

#[cfg(target_arch = "x86_64")]
mod avx2;

pub use iq4_nl::BlockIQ4NL;
pub use iq4_xs::BlockIQ4XS;
pub use mxfp4::BlockMXFP4;

/// IQ4_NL / IQ4_XS: ggml's `kvalues_iq4nl`, a non-linear grid fitted to Gaussian-like weights.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// MXFP4: the e2m1 values (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) doubled to integers;
/// the block scale is halved to match (`e8m0_half`).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the e8m0 scale `2^(e - 127)`, i.e. `2^(e - 128)`, as an f32 built from its bits (ggml's
/// `GGML_E8M0_TO_FP32_HALF`): subnormal for `e < 2`.
const fn e8m0_half_bits(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (e as u32 - 1) << 23
    };
    f32::from_bits(bits)
}

/// `e8m0_half` for every byte: the kernels look scales up (1 KiB, stays in L1).
static E8M0_HALF: [f32; 256] = {
    let mut t = [0.0f32; 256];
    let mut e = 0;
    while e < 256 {
        t[e] = e8m0_half_bits(e as u8);
        e += 1;
    }
    t
};

/// Half the e8m0 scale: `2^(e - 128)` (ggml's `GGML_E8M0_TO_FP32_HALF`).
#[inline(always)]
pub fn e8m0_half(e: u8) -> f32 {
    E8M0_HALF[e as usize]
}

/// Sum of `table[code] * a` over one 32-element block: codes 0..16 are the low nibbles of `qs`,
/// 16..32 the high nibbles (ggml's layout).
#[inline]
pub(crate) fn dot_block_scalar(table: &[i8; 16], qs: &[u8; 16], a: &[i8]) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        s += table[(qs[j] & 0xf) as usize] as i32 * a[j] as i32;
        s += table[(qs[j] >> 4) as usize] as i32 * a[j + 16] as i32;
    }
    s
}

/// Decodes one 32-element block of codes through `table`, scaled by `d`.
#[inline]
pub(crate) fn dequantize_block(table: &[i8; 16], qs: &[u8; 16], d: f32, y: &mut [f32]) {
    for j in 0..16 {
        y[j] = d * table[(qs[j] & 0xf) as usize] as f32;
        y[j + 16] = d * table[(qs[j] >> 4) as usize] as f32;
    }
}

/// Packs 32 codes (each < 16) as ggml does: byte j holds code j low, code j + 16 high.
#[inline]
pub(crate) fn pack_codes(l: &[u8], qs: &mut [u8; 16]) {
    for j in 0..16 {
        qs[j] = l[j] | (l[j + 16] << 4);
    }
}

#[cfg(test)]
mod tests;
