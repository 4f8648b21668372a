//! Widening 8-bit KV rows to f32 fast: fp8 through the F16C converter (e5m2 is the top byte of an
//! f16; e4m3 re-biased into an f16), int8 through AVX2, 16 (fp8) or 8 (int8) elements a step. Results are
//! bit-identical to `KvRow::to_f32` (the lookup tables), which stays the portable path; the CPU
//! kernels' row conversion can call `widen_row` for every row type.

use crate::attention::kv::KvRow;

/// Widens `row` into `dst` (same length), with AVX2 + F16C where the CPU has them.
#[inline]
pub fn widen_row(row: KvRow<'_>, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(row, KvRow::Fp8E4M3(..) | KvRow::Fp8E5M2(..) | KvRow::I8(..)) && simd_ok() {
            // SAFETY: the CPU supports AVX2 and F16C (checked above).
            unsafe { x86::widen(row, dst) };
            return;
        }
    }
    row.to_f32(dst)
}

/// The portable path alone (for tests of both paths on one machine).
pub fn widen_row_scalar(row: KvRow<'_>, dst: &mut [f32]) {
    row.to_f32(dst)
}

#[cfg(target_arch = "x86_64")]
fn simd_ok() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("f16c")
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::attention::kv::KvRow;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn widen(row: KvRow<'_>, dst: &mut [f32]) {
        let (n, done) = match row {
            KvRow::Fp8E4M3(s, scale) => (s.len(), e4m3(s, scale, dst)),
            KvRow::Fp8E5M2(s, scale) => (s.len(), e5m2(s, scale, dst)),
            KvRow::I8(s, scale) => (s.len(), int8(s, scale, dst)),
            _ => (0, 0),
        };
        // The tail (and a scale the fast path cannot fold) goes through the tables.
        let tail = match row {
            KvRow::Fp8E4M3(s, c) => KvRow::Fp8E4M3(&s[done..], c),
            KvRow::Fp8E5M2(s, c) => KvRow::Fp8E5M2(&s[done..], c),
            KvRow::I8(s, c) => KvRow::I8(&s[done..], c),
            other => other,
        };
        tail.to_f32(&mut dst[done..n]);
    }

    /// e4m3fn bits `s eeee mmm` placed as f16 `s 0eeee mmm0000000` equal value / 2^8 (normals
    /// and subnormals alike), so one multiply by `scale * 2^8` finishes; 0x7f / 0xff are NaN.
    /// Sixteen codes a step in 16-bit lanes: `(b << 8) >> 1` (arithmetic) puts e and m in place
    /// and copies the sign into bit 14, which the mask clears.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn e4m3(s: &[u8], scale: f32, dst: &mut [f32]) -> usize {
        let k = scale * 256.0;
        if !k.is_finite() {
            return 0;
        }
        let (kv, nan) = (_mm256_set1_ps(k), _mm256_set1_ps(f32::NAN));
        let (keep, m7f) = (_mm256_set1_epi16(!0x4000), _mm256_set1_epi16(0x7f));
        let n = s.len().min(dst.len()) / 16 * 16;
        for i in (0..n).step_by(16) {
            let w = _mm256_cvtepu8_epi16(_mm_loadu_si128(s.as_ptr().add(i) as *const __m128i));
            let h = _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(w, 8), 1), keep);
            let is_nan = _mm256_cmpeq_epi16(_mm256_and_si256(w, m7f), m7f);
            // NaN codes are rare (the encoder saturates): blend only when one is present.
            let any_nan = _mm256_movemask_epi8(is_nan) != 0;
            for half in 0..2 {
                let (hh, nn) = if half == 0 {
                    (_mm256_castsi256_si128(h), _mm256_castsi256_si128(is_nan))
                } else {
                    (
                        _mm256_extracti128_si256(h, 1),
                        _mm256_extracti128_si256(is_nan, 1),
                    )
                };
                let mut f = _mm256_mul_ps(_mm256_cvtph_ps(hh), kv);
                if any_nan {
                    let m = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nn));
                    f = _mm256_blendv_ps(f, nan, m);
                }
                _mm256_storeu_ps(dst.as_mut_ptr().add(i + 8 * half), f);
            }
        }
        n
    }

    #[target_feature(enable = "avx2,f16c")]
    unsafe fn e5m2(s: &[u8], scale: f32, dst: &mut [f32]) -> usize {
        let kv = _mm256_set1_ps(scale);
        let n = s.len().min(dst.len()) / 16 * 16;
        for i in (0..n).step_by(16) {
            let w = _mm256_cvtepu8_epi16(_mm_loadu_si128(s.as_ptr().add(i) as *const __m128i));
            let h = _mm256_slli_epi16(w, 8);
            let lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
            let hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_mul_ps(lo, kv));
            _mm256_storeu_ps(dst.as_mut_ptr().add(i + 8), _mm256_mul_ps(hi, kv));
        }
        n
    }

    #[target_feature(enable = "avx2,f16c")]
    unsafe fn int8(s: &[i8], scale: f32, dst: &mut [f32]) -> usize {
        let kv = _mm256_set1_ps(scale);
        let n = s.len().min(dst.len()) / 8 * 8;
        for i in (0..n).step_by(8) {
            let b = _mm_loadl_epi64(s.as_ptr().add(i) as *const __m128i);
            let f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_mul_ps(f, kv));
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code, odd lengths (SIMD body plus tail), several scales: bit-identical to the tables.
    #[test]
    fn simd_widening_is_bit_identical_to_the_tables() {
        let codes: Vec<u8> = (0..=255u8).chain(0..=6).collect();
        let ints: Vec<i8> = codes.iter().map(|&c| c as i8).collect();
        for scale in [1.0f32, 0.0123, 3.5e-3, 7.0, 1e37] {
            for len in [263, 24, 16, 8, 7, 0] {
                let rows = [
                    KvRow::Fp8E4M3(&codes[..len], scale),
                    KvRow::Fp8E5M2(&codes[..len], scale),
                    KvRow::I8(&ints[..len], scale),
                ];
                for row in rows {
                    let (mut a, mut b) = (vec![1f32; len], vec![2f32; len]);
                    widen_row(row, &mut a);
                    widen_row_scalar(row, &mut b);
                    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                        assert!(
                            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                            "{row:?} scale {scale} element {i}: {x} vs {y}"
                        );
                    }
                }
            }
        }
    }
}
