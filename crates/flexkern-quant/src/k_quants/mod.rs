//! ggml's K-quant super-block formats (QK_K = 256): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the Q8_K
//! activation format, byte-identical to ggml's `block_qX_K`.
//!
//! * `quantize_ref` follows ggml's `quantize_row_qX_K_ref` operation by operation (same scale
//!   search, same f32 operation order, no fused multiply-add), so the bytes match llama.cpp's
//!   reference quantizer built without FP contraction (as its x86 `ggml-base` is: no `-march`).
//!   A build that contracts `a * b + c` into FMA (e.g. `-march=native` GCC, or aarch64) picks
//!   other scales in some blocks; flexkern never contracts.
//! * `dequantize` follows `dequantize_row_qX_K` operation by operation (bit-exact f32).
//! * `vec_dot` runs against a Q8_K activation (ggml's `vec_dot_type`; its `bsums` must be the
//!   16-element sums of its `qs`, as `BlockQ8K::quantize_ref` writes them). Both paths (portable
//!   scalar and AVX2) compute the integer sums exactly; they differ only in how the f32 products
//!   are summed (Q8_K: same order, same bits; Q2_K..Q6_K: the AVX2 path keeps eight f32 lane
//!   accumulators, as ggml does). Each is within
//!   `(nblocks + 8) * f32::EPSILON * sum_i |a_i| (|d_i q_i| + |m_i|)` of the f64 dot of the
//!   dequantized operands (`dot_error_bound`, checked in every format's tests).
//!
//! Verification: unit tests here (layouts, hand-built blocks, ggml's error thresholds, dot
//! bounds) and `tests/kquants_crosscheck.sh`, which compares bytes and f32 bits with gguf-py and
//! with ggml's own C `quantize_row_*_ref` / `dequantize_row_*`.

// The ports keep ggml's index arithmetic (`for j in 0..16 { .. x[16 * j + i] .. }`) so they
// read line by line against the C they must match bit for bit.
#![allow(clippy::needless_range_loop)]

mod q2_k;
mod q3_k;
mod q4_k;
mod q5_k;
mod q6_k;
mod q8_k;
mod rows8;
mod search;
#[cfg(target_arch = "x86_64")]
mod simd;

/// The `QuantBlock` impl and the path-selecting dot shared by the K-quant weight formats: each
/// type supplies `quantize_block`, `dequantize_block`, `dot_block_scalar` and an `avx2::vec_dot`.
macro_rules! k_quant_block {
    ($t:ident, $fmt:ident) => {
        impl $t {
            /// The dot on the given path (AVX2 falls back to scalar when the CPU lacks it).
            pub(crate) fn vec_dot_with(
                path: $crate::k_quants::DotPath,
                w: &[Self],
                a: &[$crate::k_quants::BlockQ8K],
            ) -> f32 {
                #[cfg(target_arch = "x86_64")]
                if path == $crate::k_quants::DotPath::Avx2 && $crate::k_quants::avx2_available() {
                    // SAFETY: AVX2, FMA and F16C are present.
                    return unsafe { avx2::vec_dot(w, a) };
                }
                let _ = path;
                w.iter()
                    .zip(a)
                    .map(|(x, y)| x.dot_block_scalar(y))
                    .fold(0.0, |s, v| s + v)
            }
        }

        impl $crate::format::QuantBlock for $t {
            const FORMAT: $crate::format::Format = $crate::format::Format::$fmt;
            const ELEMS: usize = $crate::k_quants::QK_K;
            type Dot = $crate::k_quants::BlockQ8K;

            fn quantize_ref(src: &[f32], dst: &mut [Self]) {
                for (y, x) in dst.iter_mut().zip(src.chunks_exact($crate::k_quants::QK_K)) {
                    *y = Self::quantize_block(x);
                }
            }

            fn dequantize(src: &[Self], dst: &mut [f32]) {
                for (b, y) in src.iter().zip(dst.chunks_exact_mut($crate::k_quants::QK_K)) {
                    b.dequantize_block(y);
                }
            }

            fn vec_dot(w: &[Self], a: &[$crate::k_quants::BlockQ8K]) -> f32 {
                Self::vec_dot_with($crate::k_quants::dot_path(), w, a)
            }

            /// Each weight row against the activation rows four at a time (the kernel decodes
            /// each block once for all of them), the rest in one smaller call.
            fn vec_dot_rows_batch(
                w: &[Self],
                a: &[&[$crate::k_quants::BlockQ8K]],
                out: &mut [f32],
            ) {
                let m = a.len();
                if m == 0 || out.is_empty() {
                    return;
                }
                let nb = w.len() / (out.len() / m);
                #[cfg(target_arch = "x86_64")]
                let simd = $crate::k_quants::dot_path() == $crate::k_quants::DotPath::Avx2
                    && $crate::k_quants::avx2_available();
                for (row, o) in w.chunks_exact(nb).zip(out.chunks_mut(m)) {
                    #[cfg(target_arch = "x86_64")]
                    if simd {
                        assert!(a.iter().all(|a| a.len() == nb));
                        let mut j0 = 0;
                        while j0 < m {
                            let (r, a) = ((m - j0).min(4), &a[j0..]);
                            let o = &mut o[j0..j0 + r];
                            // SAFETY: AVX2, FMA and F16C are present.
                            unsafe {
                                match r {
                                    1 => o.copy_from_slice(&avx2::vec_dot_n(row, [a[0]])),
                                    2 => o.copy_from_slice(&avx2::vec_dot_n(row, [a[0], a[1]])),
                                    3 => {
                                        o.copy_from_slice(&avx2::vec_dot_n(row, [a[0], a[1], a[2]]))
                                    }
                                    _ => o.copy_from_slice(&avx2::vec_dot_n(
                                        row,
                                        [a[0], a[1], a[2], a[3]],
                                    )),
                                }
                            }
                            j0 += r;
                        }
                        continue;
                    }
                    for (o, a) in o.iter_mut().zip(a) {
                        *o = Self::vec_dot(row, a);
                    }
                }
            }
        }
    };
}
use k_quant_block;

pub use q2_k::BlockQ2K;
pub(crate) use q3_k::unpack_q3_scales;
pub use q3_k::BlockQ3K;
pub use q4_k::BlockQ4K;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;
pub use q8_k::BlockQ8K;
pub use rows8::{BlockQ4Kx8, BlockQ6Kx8};
pub(crate) use search::nearest_int;
#[cfg(target_arch = "x86_64")]
pub(crate) use simd::load32;

/// Weights per K-quant super-block.
pub const QK_K: usize = 256;
/// Bytes of packed 6-bit scales and mins in Q4_K / Q5_K (ggml's `K_SCALE_SIZE`).
pub const K_SCALE_SIZE: usize = 12;

/// Which `vec_dot` implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DotPath {
    Scalar,
    Avx2,
}

/// The path `vec_dot` takes now: AVX2+FMA when the CPU has it and scalar is not forced.
pub(crate) fn dot_path() -> DotPath {
    if !crate::cpu::forced_scalar() && avx2_available() {
        DotPath::Avx2
    } else {
        DotPath::Scalar
    }
}

/// Whether this CPU runs the AVX2 kernels (AVX2 + FMA, and F16C for the f16 scales).
pub(crate) fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// ggml's `get_scale_min_k4` for all eight sub-blocks at once: the 6-bit (scale, min) pairs of
/// Q4_K / Q5_K. Scales 0..3 and mins 0..3 sit in the low 6 bits of bytes 0..3 / 4..7; scales
/// and mins 4..7 put their low nibbles in bytes 8..11 and their top 2 bits in the top bits of
/// bytes 0..3 / 4..7.
#[inline(always)]
pub(crate) fn unpack_scale_min_k4(q: &[u8; K_SCALE_SIZE]) -> ([u8; 8], [u8; 8]) {
    let a0 = u32::from_le_bytes([q[0], q[1], q[2], q[3]]);
    let a1 = u32::from_le_bytes([q[4], q[5], q[6], q[7]]);
    let a2 = u32::from_le_bytes([q[8], q[9], q[10], q[11]]);
    let sc_lo = a0 & 0x3f3f_3f3f;
    let m_lo = a1 & 0x3f3f_3f3f;
    let sc_hi = (a2 & 0x0f0f_0f0f) | (((a0 >> 6) & 0x0303_0303) << 4);
    let m_hi = ((a2 >> 4) & 0x0f0f_0f0f) | (((a1 >> 6) & 0x0303_0303) << 4);
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    sc[..4].copy_from_slice(&sc_lo.to_le_bytes());
    sc[4..].copy_from_slice(&sc_hi.to_le_bytes());
    m[..4].copy_from_slice(&m_lo.to_le_bytes());
    m[4..].copy_from_slice(&m_hi.to_le_bytes());
    (sc, m)
}

/// Packs eight 6-bit (scale, min) pairs as ggml's Q4_K / Q5_K quantizers do (inverse of
/// `unpack_scale_min_k4` for values < 64).
#[inline]
pub(crate) fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; K_SCALE_SIZE] {
    let mut s = [0u8; K_SCALE_SIZE];
    for j in 0..8 {
        if j < 4 {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4);
            s[j - 4] |= (ls[j] >> 4) << 6;
            s[j] |= (lm[j] >> 4) << 6;
        }
    }
    s
}

/// The shared block-wise quantizer step of Q4_K / Q5_K: 6-bit sub-block scales and mins relative
/// to the largest ones, as `quantize_row_q4_K_ref` computes them. Returns (packed scales, d, dmin).
pub(crate) fn quantize_scale_min_k4(
    scales: &[f32; 8],
    mins: &[f32; 8],
) -> ([u8; K_SCALE_SIZE], half::f16, half::f16) {
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..8 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut ls = [0u8; 8];
    let mut lm = [0u8; 8];
    for j in 0..8 {
        // ggml stores the int into a uint8_t before clamping: keep that truncation.
        ls[j] = (search::nearest_int(inv_scale * scales[j]) as u8).min(63);
        lm[j] = (search::nearest_int(inv_min * mins[j]) as u8).min(63);
    }
    let packed = pack_scale_min_k4(&ls, &lm);
    (
        packed,
        half::f16::from_f32(max_scale / 63.0),
        half::f16::from_f32(max_min / 63.0),
    )
}

/// Q4_K's and Q5_K's reference quantization up to the packing of the levels
/// (`quantize_row_q{4,5}_K_ref`): for each 32-weight sub-block `make_qkx2_quants`, weighted by
/// `sqrt(mean x^2) + |x|`, picks a scale and a min at `nmax` levels; both pack to 6 bits
/// (`quantize_scale_min_k4`), and each weight's level is recomputed against the packed values.
/// Returns (packed scales, d, dmin, the block's levels).
pub(crate) fn quantize_levels_k4(
    x: &[f32],
    nmax: i32,
    search: &search::Qkx2Search,
) -> ([u8; K_SCALE_SIZE], half::f16, half::f16, [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0.0f32; 32];
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        (scales[j], mins[j]) =
            search::make_qkx2_quants(nmax, xs, &weights, &mut l[32 * j..32 * j + 32], search);
    }
    let (packed, d, dmin) = quantize_scale_min_k4(&scales, &mins);
    let (sc, m) = unpack_scale_min_k4(&packed);
    for j in 0..8 {
        let dj = d.to_f32() * sc[j] as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m[j] as f32;
        for i in 32 * j..32 * j + 32 {
            l[i] = search::nearest_int((x[i] + dm) / dj).clamp(0, nmax) as u8;
        }
    }
    (packed, d, dmin, l)
}

/// One super-block's contribution to a K-quant dot product, from its exact integer sums:
/// `d_w * d_a * isum - dmin_w * d_a * isum_min`, as the scalar paths (and Q8_K's AVX2 path)
/// sum it.
#[inline(always)]
pub(crate) fn combine(d: f32, dmin: f32, da: f32, isum: i32, isum_min: i32) -> f32 {
    (d * da) * isum as f32 - (dmin * da) * isum_min as f32
}

/// Bound on `|vec_dot - dot_f64(dequantize(w), dequantize(a))|`, given
/// `mag = sum_i |a_i| * (|d_sub_i * q_i| + |m_sub_i|)` in f64 (the dot without cancellation,
/// with `d_sub`/`m_sub` the sub-block scale and min of element i) over `nblocks` super-blocks.
///
/// The integer sums are exact; what remains is f32 rounding of the per-block products and of the
/// running sum (at most `nblocks` additions), and the rounding already inside the dequantized
/// f32 values the oracle uses (at most 3 roundings each): `(nblocks + 8) * eps * mag`.
#[cfg(test)]
pub(crate) fn dot_error_bound(nblocks: usize, mag: f64) -> f64 {
    (nblocks as f64 + 8.0) * f32::EPSILON as f64 * mag
}

#[cfg(test)]
pub(crate) mod test_util;

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;
    use crate::format::QuantBlock;

    #[test]
    fn force_scalar_switch() {
        crate::cpu::set_force_scalar(true);
        assert_eq!(dot_path(), DotPath::Scalar);
        crate::cpu::set_force_scalar(false);
        assert_eq!(dot_path() == DotPath::Avx2, avx2_available());
    }

    /// The trait's length contract is checked by the callers (`crate::codec`, the GEMV driver);
    /// given mismatched slices the block functions still neither panic nor read out of bounds:
    /// they process the whole blocks both sides have.
    #[test]
    fn mismatched_lengths_stay_in_bounds() {
        fn check<B: QuantBlock<Dot = BlockQ8K>>() {
            let x = random_data(Dist::Normal, 3 * QK_K + 7, 1.0, 1);
            let mut w = vec![B::zeroed(); 2];
            B::quantize_ref(&x, &mut w); // src longer than dst
            let mut w3 = vec![B::zeroed(); 5];
            B::quantize_ref(&x[..QK_K + 3], &mut w3); // src shorter than dst
            let mut y = vec![f32::NAN; QK_K + 5];
            B::dequantize(&w, &mut y); // dst shorter than src
            assert!(y[..QK_K].iter().all(|v| v.is_finite()));
            assert!(y[QK_K..].iter().all(|v| v.is_nan()));
            let a = q8k(&x[..3 * QK_K]);
            let full = B::vec_dot(&w, &a[..2]);
            assert_eq!(B::vec_dot(&w, &a).to_bits(), full.to_bits());
            assert_eq!(
                B::vec_dot(&w[..1], &a).to_bits(),
                B::vec_dot(&w[..1], &a[..1]).to_bits()
            );
            assert_eq!(B::vec_dot(&[], &a), 0.0);
        }
        check::<BlockQ2K>();
        check::<BlockQ3K>();
        check::<BlockQ4K>();
        check::<BlockQ5K>();
        check::<BlockQ6K>();
        check::<BlockQ8K>();
    }
}
