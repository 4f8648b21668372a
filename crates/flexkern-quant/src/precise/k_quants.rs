//! Precise mode (f32 activations) for the K-quants: each super-block's codes are decoded into
//! eight registers of 32 i8 codes (element order) with a scale and an offset per 16 elements,
//! then widened to f32 and multiplied by `crate::precise::avx2::fma32`, row after row with the
//! weights prefetched ahead. Without AVX2 the portable stack-buffer path runs.

use super::{precise_dots, PreciseDot};
use crate::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};

impl PreciseDot for BlockQ2K {
    precise_dots!(avx2::q2_k);
}
impl PreciseDot for BlockQ3K {
    precise_dots!(avx2::q3_k);
}
impl PreciseDot for BlockQ4K {
    precise_dots!(avx2::q4_k);
}
impl PreciseDot for BlockQ5K {
    precise_dots!(avx2::q5_k);
}
impl PreciseDot for BlockQ6K {
    precise_dots!(avx2::q6_k);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use crate::k_quants::{load32, unpack_q3_scales, unpack_scale_min_k4, QK_K};
    use crate::precise::avx2::{fma32, hsum4, row_loop};
    use std::arch::x86_64::*;

    /// A super-block decoded: `codes[c]` holds elements `32c .. 32c + 32`; element `e` weighs
    /// `code * scale[e / 16] + offset[e / 16]`.
    struct Decoded {
        codes: [__m256i; 8],
        scale: [f32; 16],
        offset: [f32; 16],
    }

    /// One row kernel per format: `decode` turns a block into `Decoded`.
    macro_rules! kernel256 {
        ($name:ident, $B:ty, $decode:ident) => {
            #[target_feature(enable = "avx2,fma,f16c")]
            pub(crate) unsafe fn $name(w: &[$B], x: &[f32], out: &mut [f32]) {
                row_loop!(w, x, out, QK_K, |b, xb, acc| {
                    let d = $decode(b);
                    for c in 0..8 {
                        let s = [
                            _mm256_set1_ps(d.scale[2 * c]),
                            _mm256_set1_ps(d.scale[2 * c + 1]),
                        ];
                        let o = [
                            _mm256_set1_ps(d.offset[2 * c]),
                            _mm256_set1_ps(d.offset[2 * c + 1]),
                        ];
                        fma32(d.codes[c], s, o, xb.add(32 * c), &mut acc);
                    }
                })
            }
        };
    }

    /// Bit `shift` of each byte of `v` (`shift < 8`: a 16-bit shift moves no bit of the high
    /// byte into the low byte's bit 0).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn bit(v: __m256i, shift: i32) -> __m256i {
        _mm256_and_si256(
            _mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
            _mm256_set1_epi8(1),
        )
    }

    /// Bits `shift .. shift + 2` of each byte of `v` (`shift <= 6`).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn two_bits(v: __m256i, shift: i32) -> __m256i {
        _mm256_and_si256(
            _mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
            _mm256_set1_epi8(3),
        )
    }

    /// Q4_K and Q5_K's eight (scale, min) pairs, each for 32 elements.
    #[inline]
    unsafe fn scales_k4(scales: &[u8; 12], d: f32, dmin: f32) -> ([f32; 16], [f32; 16]) {
        let (sc, m) = unpack_scale_min_k4(scales);
        (
            std::array::from_fn(|j| d * sc[j / 2] as f32),
            std::array::from_fn(|j| -(dmin * m[j / 2] as f32)),
        )
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn decode_q4_k(b: &BlockQ4K) -> Decoded {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut codes = [_mm256_setzero_si256(); 8];
        for i in 0..4 {
            let q = load32(&b.qs[32 * i..]);
            codes[2 * i] = _mm256_and_si256(q, m4);
            codes[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
        }
        let (scale, offset) = scales_k4(&b.scales, b.d.to_f32(), b.dmin.to_f32());
        Decoded {
            codes,
            scale,
            offset,
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn decode_q5_k(b: &BlockQ5K) -> Decoded {
        let m4 = _mm256_set1_epi8(0x0F);
        let qh = load32(&b.qh);
        let mut codes = [_mm256_setzero_si256(); 8];
        for i in 0..4 {
            let q = load32(&b.qs[32 * i..]);
            let h_lo = _mm256_slli_epi16::<4>(bit(qh, 2 * i as i32));
            let h_hi = _mm256_slli_epi16::<4>(bit(qh, 2 * i as i32 + 1));
            codes[2 * i] = _mm256_or_si256(_mm256_and_si256(q, m4), h_lo);
            codes[2 * i + 1] =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q), m4), h_hi);
        }
        let (scale, offset) = scales_k4(&b.scales, b.d.to_f32(), b.dmin.to_f32());
        Decoded {
            codes,
            scale,
            offset,
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn decode_q6_k(b: &BlockQ6K) -> Decoded {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut codes = [_mm256_setzero_si256(); 8];
        for h in 0..2 {
            let q4a = load32(&b.ql[64 * h..]);
            let q4b = load32(&b.ql[64 * h + 32..]);
            let qh = load32(&b.qh[32 * h..]);
            let lows = [
                _mm256_and_si256(q4a, m4),
                _mm256_and_si256(q4b, m4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(q4a), m4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(q4b), m4),
            ];
            for (k, lo) in lows.into_iter().enumerate() {
                let hi = _mm256_slli_epi16::<4>(two_bits(qh, 2 * k as i32));
                // q - 32 fits i8: -32 ..= 31.
                codes[4 * h + k] = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
            }
        }
        let d = b.d.to_f32();
        Decoded {
            codes,
            scale: std::array::from_fn(|j| d * b.scales[j] as f32),
            offset: [0.0; 16],
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn decode_q2_k(b: &BlockQ2K) -> Decoded {
        let mut codes = [_mm256_setzero_si256(); 8];
        for h in 0..2 {
            let v = load32(&b.qs[32 * h..]);
            for k in 0..4 {
                codes[4 * h + k] = two_bits(v, 2 * k as i32);
            }
        }
        let (d, dmin) = (b.d.to_f32(), b.dmin.to_f32());
        Decoded {
            codes,
            scale: std::array::from_fn(|j| d * (b.scales[j] & 0xF) as f32),
            offset: std::array::from_fn(|j| -(dmin * (b.scales[j] >> 4) as f32)),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn decode_q3_k(b: &BlockQ3K) -> Decoded {
        let mut codes = [_mm256_setzero_si256(); 8];
        let hm = load32(&b.hmask);
        for h in 0..2 {
            let v = load32(&b.qs[32 * h..]);
            for k in 0..4 {
                // low | 4 * high - 4: the element's value minus 4 unless its hmask bit is set.
                let high = _mm256_slli_epi16::<2>(bit(hm, (4 * h + k) as i32));
                let q = _mm256_or_si256(two_bits(v, 2 * k as i32), high);
                codes[4 * h + k] = _mm256_sub_epi8(q, _mm256_set1_epi8(4));
            }
        }
        let (d, sc) = (b.d.to_f32(), unpack_q3_scales(&b.scales));
        Decoded {
            codes,
            scale: std::array::from_fn(|j| d * sc[j] as f32),
            offset: [0.0; 16],
        }
    }

    kernel256!(q2_k, BlockQ2K, decode_q2_k);
    kernel256!(q3_k, BlockQ3K, decode_q3_k);
    kernel256!(q4_k, BlockQ4K, decode_q4_k);
    kernel256!(q5_k, BlockQ5K, decode_q5_k);
    kernel256!(q6_k, BlockQ6K, decode_q6_k);
}
