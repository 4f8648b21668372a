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

/// Byte shuffles that broadcast i16 lane `j` (0..8) of a 128-bit half to all eight lanes.
static K4_SHUF: [[u8; 32]; 8] = {
    let mut t = [[0u8; 32]; 8];
    let mut j = 0;
    while j < 8 {
        let mut k = 0;
        while k < 32 {
            t[j][k] = (2 * j + k % 2) as u8;
            k += 1;
        }
        j += 1;
    }
    t
};

/// Eight u8 scales widened to i16 and copied into both 128-bit halves, for `scale_k4`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scales_k4(sc: &[u8; 8]) -> __m256i {
    let v = _mm_cvtepu8_epi16(_mm_loadl_epi64(sc.as_ptr() as *const __m128i));
    _mm256_broadcastsi128_si256(v)
}

/// All sixteen i16 lanes set to scale `j` of `scales_k4`'s vector.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scale_k4(scales: __m256i, j: usize) -> __m256i {
    _mm256_shuffle_epi8(scales, load32(&K4_SHUF[j]))
}

/// `sum_j m[j] * (bsums[2j] + bsums[2j+1])`: the offset term of Q4_K / Q5_K (32-element
/// sub-blocks, 16-element bsums).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mins_dot_bsums_k4(m: &[u8; 8], bsums: &[i16; 16]) -> i32 {
    let mx = _mm_loadl_epi64(m.as_ptr() as *const __m128i);
    let m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mx, mx));
    hsum_i32(_mm256_madd_epi16(load32(bsums), m16))
}
