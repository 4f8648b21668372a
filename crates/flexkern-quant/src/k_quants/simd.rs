//! AVX2 building blocks shared by the K-quant dot kernels. Every function here requires the
//! caller to have checked AVX2 (`super::avx2_available`); they are inlined into the per-format
//! `#[target_feature(enable = "avx2,fma")]` kernels.

use std::arch::x86_64::*;

/// Unaligned 32-byte load from the start of `b` (which holds at least 32 bytes).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn load32<T: Copy>(b: &[T]) -> __m256i {
    debug_assert!(std::mem::size_of_val(b) >= 32);
    _mm256_loadu_si256(b.as_ptr() as *const __m256i)
}

/// Unaligned 16-byte load from the start of `b` (which holds at least 16 bytes).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn load16<T: Copy>(b: &[T]) -> __m128i {
    debug_assert!(std::mem::size_of_val(b) >= 16);
    _mm_loadu_si128(b.as_ptr() as *const __m128i)
}

/// Sum of the eight i32 lanes (wrapping, as the exact sums never overflow).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

/// Byte shuffles that spread scale pair `p` of 16 i8 scales: the low 8 bytes repeat scale
/// `2p`, the high 8 bytes repeat scale `2p + 1`.
static PAIR_SHUF: [[u8; 16]; 8] = {
    let mut t = [[0u8; 16]; 8];
    let mut p = 0;
    while p < 8 {
        let mut k = 0;
        while k < 16 {
            t[p][k] = (2 * p + k / 8) as u8;
            k += 1;
        }
        p += 1;
    }
    t
};

/// Sixteen i16 lanes: eight copies of signed scale `2p` (for elements 0..16 of a 32-element
/// product vector, i.e. its low 128 bits) then eight of scale `2p + 1`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scale_pair(scales_i8: __m128i, p: usize) -> __m256i {
    let shuf = load16(&PAIR_SHUF[p]);
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales_i8, shuf))
}

/// Products of unsigned 8-bit quants `q` (each < 128) and signed activations `a`, summed in
/// pairs to i16 (exact: no pair exceeds 2 * 127 * 128), then weighted by the i16 `scale` lanes
/// and summed in pairs to i32.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot_scaled(q: __m256i, a: __m256i, scale: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scale)
}
