//! Q5_K: 5-bit weights in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min, relative
//! to the super-block's f16 `d` and `dmin`: `x = d * sc[j] * q - dmin * m[j]`.

use super::search::Qkx2Search;
use super::{combine, quantize_levels_k4, unpack_scale_min_k4, BlockQ8K};
use super::{K_SCALE_SIZE, QK_K};
use bytemuck::{Pod, Zeroable};
use half::f16;

/// ggml's `block_q5_K`. Element `64 * i + l` (l < 32) keeps its low 4 bits in the low nibble of
/// `qs[32 * i + l]` and its 5th bit in `qh[l]` bit `2 * i`; element `64 * i + 32 + l` uses the
/// high nibble and bit `2 * i + 1`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(std::mem::size_of::<BlockQ5K>() == 176);

impl BlockQ5K {
    /// `quantize_row_q5_K_ref` for one block.
    fn quantize_block(x: &[f32]) -> Self {
        let search = Qkx2Search {
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: false,
        };
        let (scales, d, dmin, l) = quantize_levels_k4(x, 31, &search);
        let mut y = Self {
            d,
            dmin,
            scales,
            qh: [0; QK_K / 8],
            qs: [0; QK_K / 2],
        };
        for i in 0..4 {
            for j in 0..32 {
                let (mut l1, mut l2) = (l[64 * i + j], l[64 * i + j + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    y.qh[j] |= 1 << (2 * i);
                }
                if l2 > 15 {
                    l2 -= 16;
                    y.qh[j] |= 2 << (2 * i);
                }
                y.qs[32 * i + j] = l1 | (l2 << 4);
            }
        }
        y
    }

    fn dequantize_block(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let min = self.dmin.to_f32();
        let (sc, m) = unpack_scale_min_k4(&self.scales);
        for i in 0..4 {
            let (d1, m1) = (d * sc[2 * i] as f32, min * m[2 * i] as f32);
            let (d2, m2) = (d * sc[2 * i + 1] as f32, min * m[2 * i + 1] as f32);
            let (u1, u2) = (1u8 << (2 * i), 2u8 << (2 * i));
            let q = &self.qs[32 * i..32 * i + 32];
            let out = &mut y[64 * i..64 * i + 64];
            for l in 0..32 {
                let h1 = if self.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if self.qh[l] & u2 != 0 { 16 } else { 0 };
                out[l] = d1 * ((q[l] & 0xF) as i32 + h1) as f32 - m1;
                out[l + 32] = d2 * ((q[l] >> 4) as i32 + h2) as f32 - m2;
            }
        }
    }

    fn dot_block_scalar(&self, a: &BlockQ8K) -> f32 {
        let (sc, m) = unpack_scale_min_k4(&self.scales);
        let mut isum_min = 0i32;
        for j in 0..8 {
            isum_min += m[j] as i32 * (a.bsums[2 * j] as i32 + a.bsums[2 * j + 1] as i32);
        }
        let mut isum = 0i32;
        for i in 0..4 {
            let q = &self.qs[32 * i..32 * i + 32];
            let a_lo = &a.qs[64 * i..64 * i + 32];
            let a_hi = &a.qs[64 * i + 32..64 * i + 64];
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let h = self.qh[l] >> (2 * i);
                lo += ((q[l] & 0xF) | ((h & 1) << 4)) as i32 * a_lo[l] as i32;
                hi += ((q[l] >> 4) | ((h & 2) << 3)) as i32 * a_hi[l] as i32;
            }
            isum += sc[2 * i] as i32 * lo + sc[2 * i + 1] as i32 * hi;
        }
        combine(self.d.to_f32(), self.dmin.to_f32(), a.d, isum, isum_min)
    }
}

super::k_quant_block!(BlockQ5K, Q5K);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::simd::{
        dot_scaled, f16x2_to_f32, hsum_f32_minus, load32, prefetch_ahead, scale_k4, scales_mins_k4,
    };
    use super::{BlockQ5K, BlockQ8K};
    use std::arch::x86_64::*;

    /// The 1-row dot: `vec_dot_n` with one activation row.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
        vec_dot_n::<1>(w, [a])[0]
    }

    /// As Q4_K, with the 5th bit taken from the 32-byte `qh` vector, shifted right by 2 per
    /// 64-element chunk; the codes are built once for all `R` activation rows.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot_n<const R: usize>(
        w: &[BlockQ5K],
        a: [&[BlockQ8K]; R],
    ) -> [f32; R] {
        let m4 = _mm256_set1_epi8(0x0F);
        let b1 = _mm256_set1_epi8(0x01);
        let b2 = _mm256_set1_epi8(0x02);
        let mut accf = [_mm256_setzero_ps(); R];
        let mut accm = [_mm_setzero_ps(); R];
        for (i, x) in w.iter().enumerate() {
            prefetch_ahead(x);
            let y = a.map(|a| &a[i]);
            let mut scales = _mm256_setzero_si256();
            let mut pm = [_mm_setzero_si128(); R];
            for j in 0..R {
                (scales, pm[j]) = scales_mins_k4(&x.scales, &y[j].bsums);
            }
            let mut hb = load32(&x.qh);
            let mut acc = [_mm256_setzero_si256(); R];
            for i4 in 0..4 {
                let q5 = load32(&x.qs[32 * i4..]);
                let lo = _mm256_or_si256(
                    _mm256_and_si256(q5, m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(hb, b1)),
                );
                let hi = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q5), m4),
                    _mm256_slli_epi16::<3>(_mm256_and_si256(hb, b2)),
                );
                hb = _mm256_srli_epi16::<2>(hb);
                let (s_lo, s_hi) = (scale_k4(scales, 2 * i4), scale_k4(scales, 2 * i4 + 1));
                for j in 0..R {
                    let p_lo = dot_scaled(lo, load32(&y[j].qs[64 * i4..]), s_lo);
                    let p_hi = dot_scaled(hi, load32(&y[j].qs[64 * i4 + 32..]), s_hi);
                    acc[j] = _mm256_add_epi32(acc[j], _mm256_add_epi32(p_lo, p_hi));
                }
            }
            let (d, dmin) = f16x2_to_f32(x.d.to_bits() as u32 | (x.dmin.to_bits() as u32) << 16);
            for j in 0..R {
                let yd = y[j].d;
                accf[j] =
                    _mm256_fmadd_ps(_mm256_set1_ps(d * yd), _mm256_cvtepi32_ps(acc[j]), accf[j]);
                accm[j] = _mm_fmadd_ps(_mm_set1_ps(dmin * yd), _mm_cvtepi32_ps(pm[j]), accm[j]);
            }
        }
        let mut out = [0.0f32; R];
        for j in 0..R {
            out[j] = hsum_f32_minus(accf[j], accm[j]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::pack_scale_min_k4;
    use super::super::test_util::*;
    use super::*;
    use crate::format::QuantBlock;

    fn mins(b: &BlockQ5K) -> Vec<f32> {
        let (_, m) = unpack_scale_min_k4(&b.scales);
        (0..QK_K)
            .map(|i| b.dmin.to_f32() * m[i / 32] as f32)
            .collect()
    }

    #[test]
    fn size_and_layout() {
        assert_eq!(std::mem::size_of::<BlockQ5K>(), 176);
        assert_eq!(std::mem::offset_of!(BlockQ5K, scales), 4);
        assert_eq!(std::mem::offset_of!(BlockQ5K, qh), 16);
        assert_eq!(std::mem::offset_of!(BlockQ5K, qs), 48);
    }

    #[test]
    fn dequantize_known_answer() {
        let mut b = BlockQ5K::zeroed();
        b.d = f16::from_f32(0.25);
        b.dmin = f16::from_f32(2.0);
        let sc = [3u8, 5, 7, 11, 13, 17, 19, 23];
        let m = [1u8, 0, 2, 0, 3, 0, 4, 63];
        b.scales = pack_scale_min_k4(&sc, &m);
        b.qs[0] = 0x7A; // element 0 low 0xA, element 32 low 0x7
        b.qh[0] = 0b0000_0010; // element 32's 5th bit (chunk 0, high half)
        b.qs[96 + 31] = 0xF1; // element 192 + 31 low 0x1, element 224 + 31 low 0xF
        b.qh[31] = 0b1100_0000; // elements 223 and 255 get their 5th bit (chunk 3)
        let y = deq(&[b]);
        assert_eq!(y[0], 0.25 * 3.0 * 10.0 - 2.0);
        assert_eq!(y[32], 0.25 * 5.0 * (7 + 16) as f32);
        assert_eq!(y[223], 0.25 * 19.0 * (1 + 16) as f32 - 2.0 * 4.0);
        assert_eq!(y[255], 0.25 * 23.0 * 31.0 - 2.0 * 63.0);
        assert_eq!(y[1], -2.0);
    }

    #[test]
    fn round_trip_error() {
        check_round_trip::<BlockQ5K>(0.002, [0.042, 0.034]);
    }

    #[test]
    fn vec_dot_matches_oracle() {
        let mut w = vec![BlockQ5K::zeroed(); 12];
        let x = random_data(Dist::Normal, 12 * QK_K, 0.3, 5);
        BlockQ5K::quantize_ref(&x, &mut w);
        check_vec_dot(&w, mins, BlockQ5K::vec_dot_with);
        let r = random_blocks::<BlockQ5K>(17, &[0, 2], 6);
        check_vec_dot(&r, mins, BlockQ5K::vec_dot_with);
        check_ggml_dot_error::<BlockQ5K>(0.02);
    }

    #[test]
    fn kquants_export() {
        let x = crosscheck_inputs();
        let mut q = vec![BlockQ5K::zeroed(); x.len() / QK_K];
        BlockQ5K::quantize_ref(&x, &mut q);
        export("q5_k_quant", &q, Some(&x));
        export(
            "q5_k_random",
            &random_blocks::<BlockQ5K>(64, &[0, 2], 11),
            None,
        );
    }
}
