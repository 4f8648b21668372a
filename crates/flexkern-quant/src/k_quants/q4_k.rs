//! Q4_K: 4-bit weights in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min, relative
//! to the super-block's f16 `d` and `dmin`: `x = d * sc[j] * q - dmin * m[j]`.

use super::search::Qkx2Search;
use super::{combine, quantize_levels_k4, unpack_scale_min_k4, BlockQ8K};
use super::{K_SCALE_SIZE, QK_K};
use bytemuck::{Pod, Zeroable};
use half::f16;

/// ggml's `block_q4_K`. `qs[32 * i + l]` holds element `64 * i + l` in its low nibble and
/// element `64 * i + 32 + l` in its high nibble.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(std::mem::size_of::<BlockQ4K>() == 144);

impl BlockQ4K {
    /// `quantize_row_q4_K_ref` for one block.
    fn quantize_block(x: &[f32]) -> Self {
        let search = Qkx2Search {
            rmin: -1.0,
            rdelta: 0.1,
            nstep: 20,
            use_mad: false,
        };
        let (scales, d, dmin, l) = quantize_levels_k4(x, 15, &search);
        let mut y = Self {
            d,
            dmin,
            scales,
            qs: [0; QK_K / 2],
        };
        for (i, q) in y.qs.iter_mut().enumerate() {
            let base = 64 * (i / 32) + i % 32;
            *q = l[base] | (l[base + 32] << 4);
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
            let q = &self.qs[32 * i..32 * i + 32];
            let out = &mut y[64 * i..64 * i + 64];
            for l in 0..32 {
                out[l] = d1 * (q[l] & 0xF) as f32 - m1;
                out[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
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
                lo += (q[l] & 0xF) as i32 * a_lo[l] as i32;
                hi += (q[l] >> 4) as i32 * a_hi[l] as i32;
            }
            isum += sc[2 * i] as i32 * lo + sc[2 * i + 1] as i32 * hi;
        }
        combine(self.d.to_f32(), self.dmin.to_f32(), a.d, isum, isum_min)
    }
}

super::k_quant_block!(BlockQ4K, Q4K);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::simd::{
        dot_scaled, f16x2_to_f32, hsum_f32_minus, load32, prefetch_ahead, scale_k4, scales_mins_k4,
    };
    use super::{BlockQ4K, BlockQ8K};
    use std::arch::x86_64::*;

    /// The 1-row dot: `vec_dot_n` with one activation row.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
        vec_dot_n::<1>(w, [a])[0]
    }

    /// Per super-block: nibbles masked out of 32-byte loads (once for all `R` activation rows),
    /// `maddubs` against the int8 activations, `madd` with the broadcast 6-bit scale; the exact
    /// i32 lane sums are scaled and accumulated in f32 lanes (ggml's order of work), reduced
    /// once at the end. Each activation row's operations do not depend on `R`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot_n<const R: usize>(
        w: &[BlockQ4K],
        a: [&[BlockQ8K]; R],
    ) -> [f32; R] {
        let m4 = _mm256_set1_epi8(0x0F);
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
            let mut acc = [_mm256_setzero_si256(); R];
            for i4 in 0..4 {
                let q4 = load32(&x.qs[32 * i4..]);
                let lo = _mm256_and_si256(q4, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q4), m4);
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

    /// Each element's subtracted offset `dmin * m[j]`.
    fn mins(b: &BlockQ4K) -> Vec<f32> {
        let (_, m) = unpack_scale_min_k4(&b.scales);
        (0..QK_K)
            .map(|i| b.dmin.to_f32() * m[i / 32] as f32)
            .collect()
    }

    #[test]
    fn size_and_layout() {
        assert_eq!(std::mem::size_of::<BlockQ4K>(), 144);
        assert_eq!(std::mem::offset_of!(BlockQ4K, scales), 4);
        assert_eq!(std::mem::offset_of!(BlockQ4K, qs), 16);
    }

    #[test]
    fn scale_packing_round_trips() {
        let ls = [1u8, 63, 17, 32, 5, 60, 33, 47];
        let lm = [62u8, 0, 31, 16, 48, 3, 63, 20];
        let packed = pack_scale_min_k4(&ls, &lm);
        assert_eq!(unpack_scale_min_k4(&packed), (ls, lm));
        // ggml's layout, byte by byte: sub-block 4's scale 5 = 0b000101 -> low nibble of byte 8,
        // top bits 00 into byte 0 bits 6..7; sub-block 5's scale 60 = 0b111100 -> byte 9 low
        // nibble 0b1100, top bits 0b11 into byte 1.
        assert_eq!(packed[0], 1);
        assert_eq!(packed[1], 63 | (0b11 << 6));
        assert_eq!(packed[8], 5); // 48 & 0xF = 0 in the high nibble
        assert_eq!(packed[9], 0b1100 | ((3 & 0xF) << 4));
        assert_eq!(packed[4], 62 | ((48 >> 4) << 6));
    }

    #[test]
    fn dequantize_known_answer() {
        let mut b = BlockQ4K::zeroed();
        b.d = f16::from_f32(0.5);
        b.dmin = f16::from_f32(0.25);
        let sc = [1u8, 2, 3, 4, 5, 6, 7, 63];
        let m = [0u8, 1, 2, 3, 4, 5, 6, 40];
        b.scales = pack_scale_min_k4(&sc, &m);
        for (i, q) in b.qs.iter_mut().enumerate() {
            *q = (i % 16) as u8 | (((i + 3) % 16) as u8) << 4;
        }
        let y = deq(&[b]);
        for e in 0..QK_K {
            // Element e: chunk c = e / 64, low nibble for e % 64 < 32, sub-block j = e / 32.
            let (c, r) = (e / 64, e % 64);
            let byte = b.qs[32 * c + r % 32];
            let q = if r < 32 { byte & 0xF } else { byte >> 4 };
            let j = e / 32;
            let want = 0.5 * sc[j] as f32 * q as f32 - 0.25 * m[j] as f32;
            assert_eq!(y[e], want, "element {e}");
        }
        assert_eq!(y[0], 0.0);
        assert_eq!(y[33], 0.5 * 2.0 * 4.0 - 0.25); // byte 1 high nibble (1 + 3) = 4, sub-block 1
        assert_eq!(y[255], 0.5 * 63.0 * 2.0 - 0.25 * 40.0); // byte 127 high nibble (127+3)%16 = 2
    }

    #[test]
    fn round_trip_error() {
        check_round_trip::<BlockQ4K>(0.002, [0.08, 0.065]);
    }

    #[test]
    fn vec_dot_matches_oracle() {
        let mut w = vec![BlockQ4K::zeroed(); 12];
        let x = random_data(Dist::Normal, 12 * QK_K, 0.3, 5);
        BlockQ4K::quantize_ref(&x, &mut w);
        check_vec_dot(&w, mins, BlockQ4K::vec_dot_with);
        let r = random_blocks::<BlockQ4K>(17, &[0, 2], 6);
        check_vec_dot(&r, mins, BlockQ4K::vec_dot_with);
        check_ggml_dot_error::<BlockQ4K>(0.02);
    }

    #[test]
    fn kquants_export() {
        let x = crosscheck_inputs();
        let mut q = vec![BlockQ4K::zeroed(); x.len() / QK_K];
        BlockQ4K::quantize_ref(&x, &mut q);
        export("q4_k_quant", &q, Some(&x));
        export(
            "q4_k_random",
            &random_blocks::<BlockQ4K>(64, &[0, 2], 11),
            None,
        );
    }
}
