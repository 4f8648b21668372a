//! MLX affine GEMV against an int8 activation (4 and 8 bits), as the GGUF formats run: the
//! activation is quantized to Q8_0 blocks of 32 (ggml's x86 rounding, `BlockQ8_0`), each
//! 32-weight block multiplies in integers, and the group scale times the block's activation
//! scale applies in f32. The bias term uses the same quantized activation's block sums, so a row
//! gives the dot of its dequantized weights with the Q8_0-rounded activation (the error that
//! adds is the one documented in `crate::legacy`).
//!
//! Per row: `sum_b scale(b) * d_b * sum_j c_j q_j + sum_g (bias_g + off * scale_g) * gsum_g`
//! with `c = w` (4 bits) or `w - 128` (8 bits, so that `|c| <= 128` fits the signed-product
//! trick; `off = 128`), and `gsum_g = sum over the group's blocks of d_b * sum(q)`.

use super::MlxView;
use crate::format::QuantBlock;
use crate::legacy::{BlockQ8_0, QK};

/// One activation row, quantized and arranged for the kernels.
pub(crate) struct Q8Act {
    blocks: Vec<BlockQ8_0>,
    /// 4 bits: the codes in nibble order, per pair of blocks the even elements of both blocks,
    /// then the odd elements of both (a lone last block: its evens, then its odds), so a byte's
    /// low and high nibbles meet their elements in one `pmaddubsw` each.
    perm: Vec<i8>,
    d: Vec<f32>,
    gsum: Vec<f32>,
}

impl Q8Act {
    /// `x` holds `k` values, `k` a multiple of `group` (itself a multiple of 32).
    pub fn new(x: &[f32], group: usize, bits: u8) -> Self {
        let nb = x.len() / QK;
        let mut blocks = vec![<BlockQ8_0 as bytemuck::Zeroable>::zeroed(); nb];
        BlockQ8_0::quantize_activation(x, &mut blocks);
        let d: Vec<f32> = blocks.iter().map(|b| b.d.to_f32()).collect();
        let gsum = blocks
            .chunks(group / QK)
            .zip(d.chunks(group / QK))
            .map(|(bs, ds)| {
                bs.iter()
                    .zip(ds)
                    .map(|(b, &d)| d * b.qs.iter().map(|&q| q as i32).sum::<i32>() as f32)
                    .sum()
            })
            .collect();
        let mut perm = Vec::new();
        if bits == 4 {
            perm.reserve(nb * QK);
            for pair in blocks.chunks(2) {
                for parity in 0..2 {
                    for b in pair {
                        perm.extend(b.qs.iter().skip(parity).step_by(2));
                    }
                }
            }
        }
        Q8Act {
            blocks,
            perm,
            d,
            gsum,
        }
    }
}

impl MlxView<'_> {
    /// Row `r` against a quantized activation (`crate::format::mlx_int8_bits(self.bits)`); `sb` is scratch.
    pub(crate) fn row_dot_q8(&self, r: usize, a: &Q8Act, sb: &mut (Vec<f32>, Vec<f32>)) -> f32 {
        // The kernels read `k` values of both: an activation of another length or width must
        // not reach them.
        assert!(a.d.len() * QK == self.k && (self.bits != 4 || a.perm.len() == self.k));
        let w = self.row_w(r);
        let gpr = self.k / self.group;
        let span = 2 * r * gpr..2 * (r + 1) * gpr;
        let shift = (self.group / QK).trailing_zeros();
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_avx2() {
            let (s, b) = (&self.s[span.clone()], &self.b[span]);
            // SAFETY: features checked at run time; `w` holds k * bits / 8 bytes, `s` and `b`
            // one value per group, and the activation covers k values.
            return unsafe {
                avx2::row(self.bits, w, (s, b, self.scale_type), a, shift, &mut sb.0)
            };
        }
        self.row_scales(r, sb);
        let (scales, biases) = (&sb.0[..], &sb.1[..]);
        let off = if self.bits == 8 { 128.0 } else { 0.0 };
        let tail: f32 = (scales.iter().zip(biases).zip(&a.gsum))
            .map(|((&s, &b), &gs)| (b + off * s) * gs)
            .sum();
        let mut total = 0.0f32;
        for (b, y) in a.blocks.iter().enumerate() {
            let isum: i32 = (0..QK)
                .map(|j| {
                    let c = super::unpack_one(w, self.bits, b * QK + j) as i32;
                    let c = if self.bits == 8 { c - 128 } else { c };
                    c * y.qs[j] as i32
                })
                .sum();
            total += scales[b >> shift] * a.d[b] * isum as f32;
        }
        total + tail
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Q8Act, QK};
    use crate::format::MlxScale;
    use crate::simd::hsum_ps;
    use std::arch::x86_64::*;

    /// Eight f16 or bf16 values at `p` as f32.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn widen8(p: *const u8, t: MlxScale) -> __m256 {
        let h = _mm_loadu_si128(p as *const __m128i);
        match t {
            MlxScale::F16 => _mm256_cvtph_ps(h),
            MlxScale::BF16 => _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)),
        }
    }

    /// One row: its group scales widened into `scales` (scratch) while the bias term
    /// `sum_g (bias_g + off * scale_g) * gsum_g` accumulates, then the blocks. `shift` is
    /// log2(blocks per group).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn row(
        bits: u8,
        w: &[u8],
        (s, b, t): (&[u8], &[u8], MlxScale),
        a: &Q8Act,
        shift: u32,
        scales: &mut Vec<f32>,
    ) -> f32 {
        let gpr = s.len() / 2;
        scales.resize(gpr.next_multiple_of(8), 0.0);
        let off = _mm256_set1_ps(if bits == 8 { 128.0 } else { 0.0 });
        let mut tail = _mm256_setzero_ps();
        let mut g = 0;
        while g + 8 <= gpr {
            let sv = widen8(s.as_ptr().add(2 * g), t);
            let bv = widen8(b.as_ptr().add(2 * g), t);
            _mm256_storeu_ps(scales.as_mut_ptr().add(g), sv);
            let gs = _mm256_loadu_ps(a.gsum.as_ptr().add(g));
            tail = _mm256_fmadd_ps(_mm256_fmadd_ps(off, sv, bv), gs, tail);
            g += 8;
        }
        let mut total = hsum_ps(tail);
        let rest = scales.iter_mut().zip(&a.gsum).enumerate().take(gpr).skip(g);
        for (g, (sc, &gs)) in rest {
            let (sv, bv) = (
                super::super::load_scale(t, s, g),
                super::super::load_scale(t, b, g),
            );
            *sc = sv;
            total += (bv + _mm256_cvtss_f32(off) * sv) * gs;
        }
        total
            + match bits {
                4 => q4(w, a, scales, shift),
                _ => q8(w, a, scales, shift),
            }
    }

    /// 4-bit codes, two blocks (32 bytes) per step: low nibbles are the even elements, high
    /// nibbles the odd ones; each 128-bit lane is one block, widened to 4 i32 per block.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn q4(w: &[u8], a: &Q8Act, sc: &[f32], shift: u32) -> f32 {
        let nb = a.d.len();
        debug_assert!(w.len() >= nb * QK / 2 && a.perm.len() == nb * QK);
        let (wp, yp) = (w.as_ptr(), a.perm.as_ptr());
        let m4 = _mm256_set1_epi8(0x0f);
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_ps();
        let mut b = 0;
        while b + 2 <= nb {
            let c = _mm256_loadu_si256(wp.add(b * QK / 2) as *const __m256i);
            let ev = _mm256_loadu_si256(yp.add(b * QK) as *const __m256i);
            let od = _mm256_loadu_si256(yp.add(b * QK + QK) as *const __m256i);
            let lo = _mm256_and_si256(c, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), m4);
            let p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ev), _mm256_maddubs_epi16(hi, od));
            let i = _mm256_madd_epi16(p, ones);
            // Lanes 0-3 are block b, 4-7 block b + 1.
            let f = _mm256_set_m128(
                _mm_set1_ps(sc.get_unchecked((b + 1) >> shift) * a.d.get_unchecked(b + 1)),
                _mm_set1_ps(sc.get_unchecked(b >> shift) * a.d.get_unchecked(b)),
            );
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), f, acc);
            b += 2;
        }
        let mut total = hsum_ps(acc);
        if b < nb {
            let c = _mm_loadu_si128(wp.add(b * QK / 2) as *const __m128i);
            let ev = _mm_loadu_si128(yp.add(b * QK) as *const __m128i);
            let od = _mm_loadu_si128(yp.add(b * QK + QK / 2) as *const __m128i);
            let m = _mm_set1_epi8(0x0f);
            let lo = _mm_and_si128(c, m);
            let hi = _mm_and_si128(_mm_srli_epi16(c, 4), m);
            let p = _mm_add_epi16(_mm_maddubs_epi16(lo, ev), _mm_maddubs_epi16(hi, od));
            let i = _mm_madd_epi16(p, _mm_set1_epi16(1));
            let v = _mm_cvtepi32_ps(i);
            let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
            let s = _mm_add_ss(s, _mm_movehdup_ps(s));
            total += _mm_cvtss_f32(s) * sc[b >> shift] * a.d[b];
        }
        total
    }

    /// 8-bit codes as `w - 128` (a sign flip of the top bit) times the activation, with the
    /// sign moved onto the activation so `pmaddubsw` sees |w - 128| <= 128 (pair sums fit i16).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn q8(w: &[u8], a: &Q8Act, sc: &[f32], shift: u32) -> f32 {
        let nb = a.d.len();
        debug_assert!(w.len() >= nb * QK);
        let flip = _mm256_set1_epi8(-128);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); 2];
        for (b, y) in a.blocks.iter().enumerate() {
            let c = _mm256_xor_si256(
                _mm256_loadu_si256(w.as_ptr().add(b * QK) as *const __m256i),
                flip,
            );
            let yv = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
            let p = _mm256_maddubs_epi16(_mm256_sign_epi8(c, c), _mm256_sign_epi8(yv, c));
            let i = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
            let f = sc.get_unchecked(b >> shift) * a.d.get_unchecked(b);
            acc[b % 2] = _mm256_fmadd_ps(i, _mm256_set1_ps(f), acc[b % 2]);
        }
        hsum_ps(_mm256_add_ps(acc[0], acc[1]))
    }
}
