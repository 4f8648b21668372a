//! Q3_K: 3-bit weights in 16 sub-blocks of 16, each with a signed 6-bit scale relative to the
//! super-block's f16 `d`: `x = d * (sc[j] - 32) * q`, `q` in `[-4, 3]`.

use super::q2_k::{pack_q2, unpack_q2};
use super::search::{make_q3_quants_rmse, nearest_int};
use super::{combine, BlockQ8K, QK_K};
use bytemuck::{Pod, Zeroable};
use half::f16;

/// ggml's `block_q3_K`. The low 2 bits of each element are laid out as in Q2_K; element `e`'s
/// high bit is bit `e / 32` of `hmask[e % 32]`, and a *clear* bit subtracts 4. The sixteen 6-bit
/// scales keep their low nibbles in bytes 0..8 (scales 0..7 low nibble, 8..15 high nibble) and
/// their top 2 bits in bytes 8..12 (scale j at byte `8 + j % 4`, bits `2 * (j / 4)`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: f16,
}

const _: () = assert!(std::mem::size_of::<BlockQ3K>() == 110);

/// The sixteen scales of a Q3_K block, minus 32 (so in `[-32, 31]`).
#[inline(always)]
pub(crate) fn unpack_q3_scales(s: &[u8; 12]) -> [i8; 16] {
    const LO: u32 = 0x0f0f_0f0f;
    const HI: u32 = 0x0303_0303;
    let a0 = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let a1 = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    let a2 = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    let words = [
        (a0 & LO) | ((a2 & HI) << 4),
        (a1 & LO) | (((a2 >> 2) & HI) << 4),
        ((a0 >> 4) & LO) | (((a2 >> 4) & HI) << 4),
        ((a1 >> 4) & LO) | (((a2 >> 6) & HI) << 4),
    ];
    let mut out = [0i8; 16];
    for (k, w) in words.iter().enumerate() {
        for (i, b) in w.to_le_bytes().iter().enumerate() {
            out[4 * k + i] = *b as i8 - 32;
        }
    }
    out
}

impl BlockQ3K {
    /// `quantize_row_q3_K_ref` for one block.
    fn quantize_block(x: &[f32]) -> Self {
        let mut l = [0i8; QK_K];
        let mut scales = [0.0f32; 16];
        let mut max_scale = 0.0f32;
        let mut amax = 0.0f32;
        for j in 0..16 {
            scales[j] =
                make_q3_quants_rmse(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut y = Self::zeroed();
        if max_scale != 0.0 {
            let iscale = -32.0f32 / max_scale;
            for (j, &s) in scales.iter().enumerate() {
                // ggml keeps the rounded value in an int8_t before clamping.
                let q = (nearest_int(iscale * s) as i8 as i32).clamp(-32, 31) + 32;
                if j < 8 {
                    y.scales[j] = (q & 0xF) as u8;
                } else {
                    y.scales[j - 8] |= ((q & 0xF) << 4) as u8;
                }
                y.scales[j % 4 + 8] |= ((q >> 4) << (2 * (j / 4))) as u8;
            }
            y.d = f16::from_f32(1.0 / iscale);
        }
        let sc = unpack_q3_scales(&y.scales);
        for j in 0..16 {
            let d = y.d.to_f32() * sc[j] as f32;
            if d == 0.0 {
                continue;
            }
            for i in 16 * j..16 * j + 16 {
                l[i] = (nearest_int(x[i] / d).clamp(-4, 3) + 4) as i8;
            }
        }
        let mut low = [0u8; QK_K];
        for (e, (lo, &v)) in low.iter_mut().zip(&l).enumerate() {
            let mut v = v as u8;
            if v > 3 {
                y.hmask[e % 32] |= 1 << (e / 32);
                v -= 4;
            }
            *lo = v;
        }
        y.qs = pack_q2(&low);
        y
    }

    /// Every element's signed 3-bit value, in element order.
    fn unpack_q3(&self) -> [i8; QK_K] {
        let low = unpack_q2(&self.qs);
        let mut q = [0i8; QK_K];
        for (e, v) in q.iter_mut().enumerate() {
            let high = self.hmask[e % 32] & (1 << (e / 32)) != 0;
            *v = low[e] as i8 - if high { 0 } else { 4 };
        }
        q
    }

    fn dequantize_block(&self, y: &mut [f32]) {
        let d_all = self.d.to_f32();
        let sc = unpack_q3_scales(&self.scales);
        let q = self.unpack_q3();
        for j in 0..16 {
            let dl = d_all * sc[j] as f32;
            for e in 16 * j..16 * j + 16 {
                y[e] = dl * q[e] as f32;
            }
        }
    }

    fn dot_block_scalar(&self, a: &BlockQ8K) -> f32 {
        let sc = unpack_q3_scales(&self.scales);
        let q = self.unpack_q3();
        let mut isum = 0i32;
        for j in 0..16 {
            let mut s = 0i32;
            for e in 16 * j..16 * j + 16 {
                s += q[e] as i32 * a.qs[e] as i32;
            }
            isum += sc[j] as i32 * s;
        }
        combine(self.d.to_f32(), 0.0, a.d, isum, 0)
    }
}

super::k_quant_block!(BlockQ3K, Q3K);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::simd::{
        f16_to_f32, hsum_f32_minus, load16, load32, prefetch_ahead, scale_pair,
    };
    use super::{unpack_q3_scales, BlockQ3K, BlockQ8K};
    use std::arch::x86_64::*;

    /// The 1-row dot: `vec_dot_n` with one activation row.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
        vec_dot_n::<1>(w, [a])[0]
    }

    /// Per super-block: `maddubs(low 2 bits, a) - maddubs(4 * (1 - high bit), a)` per 32
    /// elements (the bit fields taken once for all `R` activation rows), `madd` with the signed
    /// scales; exact i32 lane sums accumulated in f32 lanes.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot_n<const R: usize>(
        w: &[BlockQ3K],
        a: [&[BlockQ8K]; R],
    ) -> [f32; R] {
        let m2 = _mm256_set1_epi8(0x03);
        let m1 = _mm256_set1_epi8(0x01);
        let ones = _mm256_set1_epi8(-1);
        let mut accf = [_mm256_setzero_ps(); R];
        for (i, x) in w.iter().enumerate() {
            prefetch_ahead(x);
            let y = a.map(|a| &a[i]);
            let sc_bytes = unpack_q3_scales(&x.scales);
            let sc = load16(&sc_bytes);
            // Clear high bits (which subtract 4) as set bits.
            let mut nh = _mm256_xor_si256(load32(&x.hmask), ones);
            let mut acc = [_mm256_setzero_si256(); R];
            for h in 0..2 {
                let mut qv = load32(&x.qs[32 * h..]);
                for k in 0..4 {
                    let q = _mm256_and_si256(qv, m2);
                    qv = _mm256_srli_epi16::<2>(qv);
                    let sub = _mm256_slli_epi16::<2>(_mm256_and_si256(nh, m1));
                    nh = _mm256_srli_epi16::<1>(nh);
                    let s = scale_pair(sc, 4 * h + k);
                    for j in 0..R {
                        let av = load32(&y[j].qs[128 * h + 32 * k..]);
                        let p = _mm256_sub_epi16(
                            _mm256_maddubs_epi16(q, av),
                            _mm256_maddubs_epi16(sub, av),
                        );
                        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(p, s));
                    }
                }
            }
            let dw = f16_to_f32(x.d);
            for j in 0..R {
                let dd = _mm256_set1_ps(dw * y[j].d);
                accf[j] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(acc[j]), accf[j]);
            }
        }
        let mut out = [0.0f32; R];
        for j in 0..R {
            out[j] = hsum_f32_minus(accf[j], _mm_setzero_ps());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;
    use crate::format::QuantBlock;

    #[test]
    fn size_and_layout() {
        assert_eq!(std::mem::size_of::<BlockQ3K>(), 110);
        assert_eq!(std::mem::offset_of!(BlockQ3K, qs), 32);
        assert_eq!(std::mem::offset_of!(BlockQ3K, scales), 96);
        assert_eq!(std::mem::offset_of!(BlockQ3K, d), 108);
    }

    #[test]
    fn scale_unpacking_known_answer() {
        // Scale j = 6-bit value v_j: low nibble in byte j (j < 8) or high nibble of byte j - 8,
        // top 2 bits in byte 8 + j % 4 at bits 2 * (j / 4).
        let v: [u8; 16] = [0, 63, 32, 31, 1, 47, 16, 33, 62, 5, 40, 20, 10, 50, 60, 7];
        let mut s = [0u8; 12];
        for j in 0..16 {
            if j < 8 {
                s[j] |= v[j] & 0xF;
            } else {
                s[j - 8] |= (v[j] & 0xF) << 4;
            }
            s[8 + j % 4] |= (v[j] >> 4) << (2 * (j / 4));
        }
        let got = unpack_q3_scales(&s);
        for j in 0..16 {
            assert_eq!(got[j] as i32, v[j] as i32 - 32, "scale {j}");
        }
    }

    #[test]
    fn dequantize_known_answer() {
        let mut b = BlockQ3K::zeroed();
        b.d = f16::from_f32(0.25);
        // All scales 6-bit 40 (-> 8): low nibble 8 everywhere, top bits 0b10 everywhere.
        b.scales = [
            0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0xAA, 0xAA, 0xAA, 0xAA,
        ];
        b.qs[0] = 0b11_10_01_00; // elements 0, 32, 64, 96 low bits 0, 1, 2, 3
        b.hmask[0] = 0b0000_0101; // elements 0 and 64 have the high bit (no -4)
        b.qs[63] = 0b11_00_00_00; // element 255 low bits 3
        b.hmask[31] = 0b1000_0000; // element 255 high bit set
        let y = deq(&[b]);
        assert_eq!(y[0], 0.25 * 8.0 * 0.0);
        assert_eq!(y[32], 0.25 * 8.0 * -3.0);
        assert_eq!(y[64], 0.25 * 8.0 * 2.0);
        assert_eq!(y[96], -(0.25 * 8.0));
        assert_eq!(y[255], 0.25 * 8.0 * 3.0);
        assert_eq!(y[1], 0.25 * 8.0 * -4.0);
    }

    #[test]
    fn round_trip_error() {
        check_round_trip::<BlockQ3K>(0.004, [0.17, 0.14]);
    }

    #[test]
    fn vec_dot_matches_oracle() {
        let mut w = vec![BlockQ3K::zeroed(); 12];
        let x = random_data(Dist::Normal, 12 * QK_K, 0.3, 5);
        BlockQ3K::quantize_ref(&x, &mut w);
        check_vec_dot(&w, |_| vec![0.0; QK_K], BlockQ3K::vec_dot_with);
        let r = random_blocks::<BlockQ3K>(17, &[108], 6);
        check_vec_dot(&r, |_| vec![0.0; QK_K], BlockQ3K::vec_dot_with);
        check_ggml_dot_error::<BlockQ3K>(0.02);
    }

    #[test]
    fn kquants_export() {
        let x = crosscheck_inputs();
        let mut q = vec![BlockQ3K::zeroed(); x.len() / QK_K];
        BlockQ3K::quantize_ref(&x, &mut q);
        export("q3_k_quant", &q, Some(&x));
        export(
            "q3_k_random",
            &random_blocks::<BlockQ3K>(64, &[108], 11),
            None,
        );
    }
}
