//! Small AVX2 helpers shared by the format kernels.
#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

/// Horizontal sum of 8 f32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn hsum_ps(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Signed i8 x signed i8 dot of 32 lanes, as 8 i32 partial sums (ggml's `mul_sum_i8_pairs`):
/// `maddubs` needs an unsigned left operand, so move the sign of `x` onto `y`.
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn dot_i8_i32(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    let p16 = _mm256_maddubs_epi16(ax, sy);
    _mm256_madd_epi16(p16, _mm256_set1_epi16(1))
}

/// Unsigned u8 (<= 31) x signed i8 dot of 32 lanes, as 8 i32 partial sums.
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn dot_u8_i8_i32(x: __m256i, y: __m256i) -> __m256i {
    let p16 = _mm256_maddubs_epi16(x, y);
    _mm256_madd_epi16(p16, _mm256_set1_epi16(1))
}

/// 16 packed bytes of nibbles -> 32 bytes: low nibbles in the low lane, high in the high lane
/// (ggml's legacy layout: element j is the low nibble of byte j, element j+16 the high nibble).
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn nibbles_32(p: *const u8) -> __m256i {
    let b = _mm_loadu_si128(p as *const __m128i);
    let hi = _mm_srli_epi16(b, 4);
    let both = _mm256_set_m128i(hi, b);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0f))
}

/// 32 bits -> 32 bytes, byte j = 0xFF where bit j is set, else 0.
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn bits_to_bytes(bits: u32) -> __m256i {
    let v = _mm256_set1_epi32(bits as i32);
    let shuf = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0x0000_0000_0000_0000,
    );
    let spread = _mm256_shuffle_epi8(v, shuf);
    let mask = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask)
}

/// f16 -> f32 with F16C. Built from a broadcast (`vmovd` + `vpbroadcastw`), not an insert into
/// a register whose old contents the CPU would then wait for (a false dependency that otherwise
/// chains every block's scale to the previous block's accumulator).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn h2f(h: half::f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(h.to_bits() as i16)))
}

/// f16 -> f32 broadcast to 8 lanes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn h2f_x8(h: half::f16) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(h.to_bits() as i16))
}

/// How far ahead of the 4-row group being computed the multi-row kernels prefetch: enough to
/// cover DRAM latency even when rows are short (K = 576).
pub const PREFETCH_BYTES: usize = 4096;

/// The group `PREFETCH_BYTES` ahead of group `g` (of `full` groups of `group_len` elements in
/// `w`), or group `g` itself when that is past the rows given: hints to addresses outside the
/// matrix could land on unmapped pages, which costs page walks.
#[inline]
pub fn prefetch_target<T>(w: &[T], g: usize, full: usize, group_len: usize) -> *const T {
    let ahead = PREFETCH_BYTES
        .div_ceil((group_len * size_of::<T>()).max(1))
        .max(1);
    let g = if g + ahead < full { g + ahead } else { g };
    w[g * group_len..].as_ptr()
}

/// Hints the `bytes` bytes from `p` into L1. Prefetches never fault; `wrapping_add` keeps the
/// address arithmetic defined.
#[inline(always)]
pub unsafe fn prefetch_span(p: *const i8, bytes: usize) {
    let mut off = 0;
    while off < bytes {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off));
        off += 64;
    }
}
