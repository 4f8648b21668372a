//! Q6_K: 6-bit weights in 16 sub-blocks of 16, each with a signed 8-bit scale relative to the
//! super-block's f16 `d`: `x = d * sc[j] * (q - 32)`.

use super::search::{make_qx_quants_rmse1, nearest_int, GROUP_MAX_EPS};
use super::{combine, BlockQ8K, QK_K};
use bytemuck::{Pod, Zeroable};
use half::f16;

/// ggml's `block_q6_K`. In each 128-element half `h`, element `32 * k + l` (k < 4, l < 32) keeps
/// its low 4 bits in `ql[64 * h + 32 * (k % 2) + l]` (low nibble for k < 2, high for k >= 2)
/// and its top 2 bits in `qh[32 * h + l]` at bit `2 * k`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: f16,
}

const _: () = assert!(std::mem::size_of::<BlockQ6K>() == 210);

impl BlockQ6K {
    /// `quantize_row_q6_K_ref` for one block.
    fn quantize_block(x: &[f32]) -> Self {
        let mut l = [0i8; QK_K];
        let mut scales = [0.0f32; 16];
        let mut max_scale = 0.0f32;
        let mut max_abs_scale = 0.0f32;
        for ib in 0..16 {
            let s =
                make_qx_quants_rmse1(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            scales[ib] = s;
            if s.abs() > max_abs_scale {
                max_abs_scale = s.abs();
                max_scale = s;
            }
        }
        let mut y = Self::zeroed();
        if max_abs_scale < GROUP_MAX_EPS {
            return y;
        }
        let iscale = -128.0f32 / max_scale;
        y.d = f16::from_f32(1.0 / iscale);
        for (s, &v) in y.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * v).min(127) as i8;
        }
        for j in 0..16 {
            let d = y.d.to_f32() * y.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for i in 16 * j..16 * j + 16 {
                l[i] = (nearest_int(x[i] / d).clamp(-32, 31) + 32) as i8;
            }
        }
        for h in 0..2 {
            let (lh, ql, qh) = (&l[128 * h..], &mut y.ql[64 * h..], &mut y.qh[32 * h..]);
            for i in 0..32 {
                let (q1, q2, q3, q4) = (
                    lh[i] as u8,
                    lh[i + 32] as u8,
                    lh[i + 64] as u8,
                    lh[i + 96] as u8,
                );
                ql[i] = (q1 & 0xF) | ((q3 & 0xF) << 4);
                ql[i + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4);
                qh[i] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
            }
        }
        y
    }

    /// The unsigned 6-bit value (q + 32) of every element, in element order.
    fn unpack_q6(&self) -> [u8; QK_K] {
        let mut q = [0u8; QK_K];
        for h in 0..2 {
            let (ql, qh) = (&self.ql[64 * h..], &self.qh[32 * h..]);
            let out = &mut q[128 * h..];
            for i in 0..32 {
                out[i] = (ql[i] & 0xF) | ((qh[i] & 3) << 4);
                out[i + 32] = (ql[i + 32] & 0xF) | (((qh[i] >> 2) & 3) << 4);
                out[i + 64] = (ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4);
                out[i + 96] = (ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4);
            }
        }
        q
    }

    fn dequantize_block(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let q = self.unpack_q6();
        for (e, o) in y.iter_mut().enumerate().take(QK_K) {
            *o = d * self.scales[e / 16] as f32 * (q[e] as i8 - 32) as f32;
        }
    }

    fn dot_block_scalar(&self, a: &BlockQ8K) -> f32 {
        let q = self.unpack_q6();
        let mut isum = 0i32;
        let mut bias = 0i32;
        for j in 0..16 {
            let mut s = 0i32;
            for i in 16 * j..16 * j + 16 {
                s += q[i] as i32 * a.qs[i] as i32;
            }
            isum += self.scales[j] as i32 * s;
            bias += self.scales[j] as i32 * a.bsums[j] as i32;
        }
        combine(self.d.to_f32(), 0.0, a.d, isum - 32 * bias, 0)
    }
}

super::k_quant_block!(BlockQ6K, Q6K);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::simd::{
        dot_scaled, f16_to_f32, hsum_f32_minus, load16, load32, prefetch_ahead, scale_pair,
    };
    use super::{BlockQ6K, BlockQ8K};
    use std::arch::x86_64::*;

    /// The 1-row dot: `vec_dot_n` with one activation row.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
        vec_dot_n::<1>(w, [a])[0]
    }

    /// Per super-block: the unsigned 6-bit values (q + 32) rebuilt from two nibble loads and one
    /// high-bit load per half (once for all `R` activation rows), `maddubs` against the
    /// activations, `madd` with the sub-block scales; the `- 32` enters once through `bsums`.
    /// Exact i32 lane sums, scaled and accumulated in f32 lanes, reduced once at the end.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot_n<const R: usize>(
        w: &[BlockQ6K],
        a: [&[BlockQ8K]; R],
    ) -> [f32; R] {
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(0x03);
        let m2b = _mm256_set1_epi8(0x0C);
        let m2c = _mm256_set1_epi8(0x30);
        let m2d = _mm256_set1_epi8(0xC0u8 as i8);
        let mut accf = [_mm256_setzero_ps(); R];
        for (i, x) in w.iter().enumerate() {
            prefetch_ahead(x);
            let y = a.map(|a| &a[i]);
            let sc = load16(&x.scales);
            let sc16 = _mm256_cvtepi8_epi16(sc);
            // Start from -32 * sum_j sc[j] * bsums[j] (the offset of q - 32), spread over lanes.
            let mut acc = [_mm256_setzero_si256(); R];
            for j in 0..R {
                let bias = _mm256_madd_epi16(load32(&y[j].bsums), sc16);
                acc[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<5>(bias));
            }
            for h in 0..2 {
                let q4a = load32(&x.ql[64 * h..]);
                let q4b = load32(&x.ql[64 * h + 32..]);
                let qh = load32(&x.qh[32 * h..]);
                let q = [
                    _mm256_or_si256(
                        _mm256_and_si256(q4a, m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m2)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(q4b, m4),
                        _mm256_slli_epi16::<2>(_mm256_and_si256(qh, m2b)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(q4a), m4),
                        _mm256_and_si256(qh, m2c),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(q4b), m4),
                        _mm256_srli_epi16::<2>(_mm256_and_si256(qh, m2d)),
                    ),
                ];
                for (k, &qk) in q.iter().enumerate() {
                    let s = scale_pair(sc, 4 * h + k);
                    for j in 0..R {
                        let av = load32(&y[j].qs[128 * h + 32 * k..]);
                        acc[j] = _mm256_add_epi32(acc[j], dot_scaled(qk, av, s));
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
        assert_eq!(std::mem::size_of::<BlockQ6K>(), 210);
        assert_eq!(std::mem::offset_of!(BlockQ6K, qh), 128);
        assert_eq!(std::mem::offset_of!(BlockQ6K, scales), 192);
        assert_eq!(std::mem::offset_of!(BlockQ6K, d), 208);
    }

    #[test]
    fn dequantize_known_answer() {
        let mut b = BlockQ6K::zeroed();
        b.d = f16::from_f32(0.125);
        for (j, s) in b.scales.iter_mut().enumerate() {
            *s = (j as i32 * 9 - 64) as i8;
        }
        // Element 0 (half 0, k 0, l 0): low nibble of ql[0], qh[0] bits 0..1.
        b.ql[0] = 0x5A; // element 0 low 4 bits 0xA, element 64 low 4 bits 0x5
        b.qh[0] = 0b10_01_11_10; // element 0 hi 2, element 32 hi 3, element 64 hi 1, element 96 hi 2
        b.ql[32] = 0x3C; // element 32 low 0xC, element 96 low 0x3
                         // Element 128 + 32 * 3 + 31 = 255: high nibble of ql[64 + 32 + 31], qh[32 + 31] bits 6..7.
        b.ql[127] = 0xF0;
        b.qh[63] = 0b11 << 6;
        let y = deq(&[b]);
        let val = |e: usize, q: i32| 0.125 * b.scales[e / 16] as f32 * (q - 32) as f32;
        assert_eq!(y[0], val(0, 0xA | (2 << 4)));
        assert_eq!(y[32], val(32, 0xC | (3 << 4)));
        assert_eq!(y[64], val(64, 0x5 | (1 << 4)));
        assert_eq!(y[96], val(96, 0x3 | (2 << 4)));
        assert_eq!(y[255], val(255, 0xF | (3 << 4)));
        assert_eq!(y[1], val(1, 0)); // all-zero bits: q = -32
        assert_eq!(y[255], 0.125 * (15 * 9 - 64) as f32 * 31.0);
    }

    #[test]
    fn round_trip_error() {
        check_round_trip::<BlockQ6K>(0.002, [0.024, 0.027]);
    }

    #[test]
    fn vec_dot_matches_oracle() {
        let mut w = vec![BlockQ6K::zeroed(); 12];
        let x = random_data(Dist::Normal, 12 * QK_K, 0.3, 5);
        BlockQ6K::quantize_ref(&x, &mut w);
        check_vec_dot(&w, |_| vec![0.0; QK_K], BlockQ6K::vec_dot_with);
        let r = random_blocks::<BlockQ6K>(17, &[208], 6);
        check_vec_dot(&r, |_| vec![0.0; QK_K], BlockQ6K::vec_dot_with);
        check_ggml_dot_error::<BlockQ6K>(0.02);
    }

    #[test]
    fn kquants_export() {
        let x = crosscheck_inputs();
        let mut q = vec![BlockQ6K::zeroed(); x.len() / QK_K];
        BlockQ6K::quantize_ref(&x, &mut q);
        export("q6_k_quant", &q, Some(&x));
        export(
            "q6_k_random",
            &random_blocks::<BlockQ6K>(64, &[208], 11),
            None,
        );
    }
}
