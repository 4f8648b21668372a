//! AVX2 building blocks shared by the K-quant dot kernels. Every function here requires the
//! caller to have checked AVX2 (`super::avx2_available`); they are inlined into the per-format
//! `#[target_feature(enable = "avx2,fma")]` kernels.

use std::arch::x86_64::*;

/// Unaligned 32-byte load from the start of `b` (which holds at least 32 bytes).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn load32<T: Copy>(b: &[T]) -> __m256i {
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

/// All sixteen i16 lanes set to scale `j` of `scales_mins_k4`'s scale vector.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scale_k4(scales: __m256i, j: usize) -> __m256i {
    _mm256_shuffle_epi8(scales, load32(&K4_SHUF[j]))
}

/// Two adjacent f16 values (little-endian `lo`, `hi` in `bits`) to f32 with F16C (exact).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn f16x2_to_f32(bits: u32) -> (f32, f32) {
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// One f16 to f32 with F16C (exact).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn f16_to_f32(v: half::f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(v.to_bits() as i32)))
}

/// Q4_K / Q5_K scale decoding in registers: returns the eight 6-bit scales as i16 in both
/// 128-bit halves (for `scale_k4`) and the four i32 partial sums of
/// `sum_j m[j] * (bsums[2j] + bsums[2j+1])`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scales_mins_k4(q: &[u8; 12], bsums: &[i16; 16]) -> (__m256i, __m128i) {
    let a0 = u32::from_le_bytes([q[0], q[1], q[2], q[3]]);
    let a1 = u32::from_le_bytes([q[4], q[5], q[6], q[7]]);
    let a2 = u32::from_le_bytes([q[8], q[9], q[10], q[11]]);
    let sc_lo = a0 & 0x3f3f_3f3f;
    let m_lo = a1 & 0x3f3f_3f3f;
    let sc_hi = (a2 & 0x0f0f_0f0f) | (((a0 >> 6) & 0x0303_0303) << 4);
    let m_hi = ((a2 >> 4) & 0x0f0f_0f0f) | (((a1 >> 6) & 0x0303_0303) << 4);
    let sm = _mm256_cvtepu8_epi16(_mm_set_epi32(
        m_hi as i32,
        m_lo as i32,
        sc_hi as i32,
        sc_lo as i32,
    ));
    let mins = _mm256_extracti128_si256::<1>(sm);
    let bs = load32(bsums);
    let pairs = _mm_hadd_epi16(
        _mm256_castsi256_si128(bs),
        _mm256_extracti128_si256::<1>(bs),
    );
    (
        _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm)),
        _mm_madd_epi16(mins, pairs),
    )
}

/// `sum(acc) - sum(accm)` of eight and four f32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn hsum_f32_minus(acc: __m256, accm: __m128) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps::<1>(acc));
    let s = _mm_sub_ps(s, accm);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// Bytes ahead of the current weight block that the dot kernels prefetch.
const PREFETCH_AHEAD: usize = 768;

/// Prefetches one block's worth of cache lines `PREFETCH_AHEAD` bytes past the start of
/// `block`: a stream ahead of the hardware prefetcher, which alone leaves the single-thread dot
/// short of DRAM bandwidth on Zen. A hint only: it never faults, even past the end.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn prefetch_ahead<T>(block: &T) {
    let p = (block as *const T as *const i8).wrapping_add(PREFETCH_AHEAD);
    let mut off = 0;
    while off < std::mem::size_of::<T>() {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off));
        off += 64;
    }
}
