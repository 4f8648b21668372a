//! Q2_K: 2-bit weights in 16 sub-blocks of 16, each with a 4-bit scale and a 4-bit min relative
//! to the super-block's f16 `d` and `dmin`: `x = d * (sc[j] & 15) * q - dmin * (sc[j] >> 4)`.

use super::search::{make_qkx2_quants, nearest_int, Qkx2Search};
use super::{combine, BlockQ8K, QK_K};
use bytemuck::{Pod, Zeroable};
use half::f16;

/// ggml's `block_q2_K`. In each 128-element half `h`, element `32 * k + l` (k < 4, l < 32) is
/// bits `2k..2k+2` of `qs[32 * h + l]`; sub-block `j` covers elements `16 j .. 16 j + 16`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: f16,
    pub dmin: f16,
}

const _: () = assert!(std::mem::size_of::<BlockQ2K>() == 84);

/// The 2-bit value of every element, in element order (shared with Q3_K's low bits).
#[inline]
pub(crate) fn unpack_q2(qs: &[u8; QK_K / 4]) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for (e, v) in q.iter_mut().enumerate() {
        let (h, k, l) = (e / 128, (e / 32) % 4, e % 32);
        *v = (qs[32 * h + l] >> (2 * k)) & 3;
    }
    q
}

/// Packs 2-bit values in element order (inverse of `unpack_q2`).
#[inline]
pub(crate) fn pack_q2(l: &[u8; QK_K]) -> [u8; QK_K / 4] {
    let mut qs = [0u8; QK_K / 4];
    for h in 0..2 {
        for i in 0..32 {
            let b = 128 * h + i;
            qs[32 * h + i] = l[b] | (l[b + 32] << 2) | (l[b + 64] << 4) | (l[b + 96] << 6);
        }
    }
    qs
}

impl BlockQ2K {
    /// `quantize_row_q2_K_ref` for one block.
    fn quantize_block(x: &[f32]) -> Self {
        const Q4SCALE: f32 = 15.0;
        let search = Qkx2Search {
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        let mut l = [0u8; QK_K];
        let mut scales = [0.0f32; 16];
        let mut mins = [0.0f32; 16];
        let mut max_scale = 0.0f32;
        let mut max_min = 0.0f32;
        for j in 0..16 {
            let xs = &x[16 * j..16 * j + 16];
            let mut weights = [0.0f32; 16];
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            (scales[j], mins[j]) =
                make_qkx2_quants(3, xs, &weights, &mut l[16 * j..16 * j + 16], &search);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        let mut y = Self::zeroed();
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &v) in y.scales.iter_mut().zip(&scales) {
                // ggml stores the int into a uint8_t: keep that truncation.
                *s = nearest_int(iscale * v) as u8;
            }
            y.d = f16::from_f32(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &v) in y.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * v) << 4) as u8;
            }
            y.dmin = f16::from_f32(max_min / Q4SCALE);
        }
        for j in 0..16 {
            let d = y.d.to_f32() * (y.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = y.dmin.to_f32() * (y.scales[j] >> 4) as f32;
            for i in 16 * j..16 * j + 16 {
                l[i] = nearest_int((x[i] + dm) / d).clamp(0, 3) as u8;
            }
        }
        y.qs = pack_q2(&l);
        y
    }

    fn dequantize_block(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let min = self.dmin.to_f32();
        let q = unpack_q2(&self.qs);
        for j in 0..16 {
            let sc = self.scales[j];
            let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
            for e in 16 * j..16 * j + 16 {
                y[e] = dl * q[e] as f32 - ml;
            }
        }
    }

    fn dot_block_scalar(&self, a: &BlockQ8K) -> f32 {
        let q = unpack_q2(&self.qs);
        let (mut isum, mut isum_min) = (0i32, 0i32);
        for j in 0..16 {
            let mut s = 0i32;
            for e in 16 * j..16 * j + 16 {
                s += q[e] as i32 * a.qs[e] as i32;
            }
            isum += (self.scales[j] & 0xF) as i32 * s;
            isum_min += (self.scales[j] >> 4) as i32 * a.bsums[j] as i32;
        }
        combine(self.d.to_f32(), self.dmin.to_f32(), a.d, isum, isum_min)
    }
}

super::k_quant_block!(BlockQ2K, Q2K);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::simd::{
        dot_scaled, f16x2_to_f32, hsum_f32_minus, load16, load32, prefetch_ahead, scale_pair,
    };
    use super::{BlockQ2K, BlockQ8K};
    use std::arch::x86_64::*;

    /// The 1-row dot: `vec_dot_n` with one activation row.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
        vec_dot_n::<1>(w, [a])[0]
    }

    /// Per super-block: 2-bit fields shifted and masked out of one 32-byte load per half (once
    /// for all `R` activation rows), `maddubs` against the activations, `madd` with the 4-bit
    /// scales; the mins go through `bsums`. Exact i32 lane sums accumulated in f32 lanes.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot_n<const R: usize>(
        w: &[BlockQ2K],
        a: [&[BlockQ8K]; R],
    ) -> [f32; R] {
        let m2 = _mm256_set1_epi8(0x03);
        let m4 = _mm_set1_epi8(0x0F);
        let mut accf = [_mm256_setzero_ps(); R];
        let mut accm = [_mm256_setzero_ps(); R];
        for (i, x) in w.iter().enumerate() {
            prefetch_ahead(x);
            let y = a.map(|a| &a[i]);
            let sc_all = load16(&x.scales);
            let sc = _mm_and_si128(sc_all, m4);
            let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(sc_all), m4));
            let mut acc = [_mm256_setzero_si256(); R];
            for h in 0..2 {
                let mut qv = load32(&x.qs[32 * h..]);
                for k in 0..4 {
                    let q = _mm256_and_si256(qv, m2);
                    qv = _mm256_srli_epi16::<2>(qv);
                    let s = scale_pair(sc, 4 * h + k);
                    for j in 0..R {
                        let av = load32(&y[j].qs[128 * h + 32 * k..]);
                        acc[j] = _mm256_add_epi32(acc[j], dot_scaled(q, av, s));
                    }
                }
            }
            let (d, dmin) = f16x2_to_f32(x.d.to_bits() as u32 | (x.dmin.to_bits() as u32) << 16);
            for j in 0..R {
                let pm = _mm256_madd_epi16(load32(&y[j].bsums), mins);
                let yd = y[j].d;
                accf[j] =
                    _mm256_fmadd_ps(_mm256_set1_ps(d * yd), _mm256_cvtepi32_ps(acc[j]), accf[j]);
                accm[j] =
                    _mm256_fmadd_ps(_mm256_set1_ps(dmin * yd), _mm256_cvtepi32_ps(pm), accm[j]);
            }
        }
        let mut out = [0.0f32; R];
        for j in 0..R {
            let accm = _mm_add_ps(
                _mm256_castps256_ps128(accm[j]),
                _mm256_extractf128_ps::<1>(accm[j]),
            );
            out[j] = hsum_f32_minus(accf[j], accm);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;
    use crate::format::QuantBlock;

    fn mins(b: &BlockQ2K) -> Vec<f32> {
        (0..QK_K)
            .map(|i| b.dmin.to_f32() * (b.scales[i / 16] >> 4) as f32)
            .collect()
    }

    #[test]
    fn size_and_layout() {
        assert_eq!(std::mem::size_of::<BlockQ2K>(), 84);
        assert_eq!(std::mem::offset_of!(BlockQ2K, qs), 16);
        assert_eq!(std::mem::offset_of!(BlockQ2K, d), 80);
        assert_eq!(std::mem::offset_of!(BlockQ2K, dmin), 82);
    }

    #[test]
    fn dequantize_known_answer() {
        let mut b = BlockQ2K::zeroed();
        b.d = f16::from_f32(0.5);
        b.dmin = f16::from_f32(0.125);
        for (j, s) in b.scales.iter_mut().enumerate() {
            *s = (j as u8) | (((15 - j) as u8) << 4);
        }
        b.qs[0] = 0b11_10_01_00; // elements 0, 32, 64, 96 = 0, 1, 2, 3
        b.qs[63] = 0b01_00_11_10; // elements 128+31, +63, +95, +127 = 2, 3, 0, 1
        let y = deq(&[b]);
        let val = |e: usize, q: f32| 0.5 * (e / 16) as f32 * q - 0.125 * (15 - e / 16) as f32;
        assert_eq!(y[0], val(0, 0.0));
        assert_eq!(y[32], val(32, 1.0));
        assert_eq!(y[64], val(64, 2.0));
        assert_eq!(y[96], val(96, 3.0));
        assert_eq!(y[159], val(159, 2.0));
        assert_eq!(y[191], val(191, 3.0));
        assert_eq!(y[223], val(223, 0.0));
        assert_eq!(y[255], 0.5 * 15.0 * 1.0);
        let mut l = [0u8; QK_K];
        for (i, v) in l.iter_mut().enumerate() {
            *v = (i * 7 % 4) as u8;
        }
        assert_eq!(unpack_q2(&pack_q2(&l)), l);
    }

    #[test]
    fn round_trip_error() {
        check_round_trip::<BlockQ2K>(0.0075, [0.33, 0.27]);
    }

    #[test]
    fn vec_dot_matches_oracle() {
        let mut w = vec![BlockQ2K::zeroed(); 12];
        let x = random_data(Dist::Normal, 12 * QK_K, 0.3, 5);
        BlockQ2K::quantize_ref(&x, &mut w);
        check_vec_dot(&w, mins, BlockQ2K::vec_dot_with);
        let r = random_blocks::<BlockQ2K>(17, &[80, 82], 6);
        check_vec_dot(&r, mins, BlockQ2K::vec_dot_with);
        check_ggml_dot_error::<BlockQ2K>(0.04);
    }

    #[test]
    fn kquants_export() {
        let x = crosscheck_inputs();
        let mut q = vec![BlockQ2K::zeroed(); x.len() / QK_K];
        BlockQ2K::quantize_ref(&x, &mut q);
        export("q2_k_quant", &q, Some(&x));
        export(
            "q2_k_random",
            &random_blocks::<BlockQ2K>(64, &[80, 82], 11),
            None,
        );
    }
}
