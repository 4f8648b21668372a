//! AVX2 dots for the legacy formats.
use super::*;
use crate::simd::{
    bits_to_bytes, dot_i8_i32, dot_u8_i8_i32, h2f, h2f_x8, hsum_ps, nibbles_32, prefetch_span,
};
use std::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load(p: &[i8; QK]) -> __m256i {
    _mm256_loadu_si256(p.as_ptr() as *const __m256i)
}

/// Accumulate `scale * float(sum)` for each block; two named accumulators (blocks taken in
/// pairs) hide the FMA latency and stay in registers.
macro_rules! block_loop {
    ($w:expr, $a:expr, |$b:ident, $y:ident| $isum:expr, $extra:expr) => {{
        let (w, a) = ($w, $a);
        let n = w.len().min(a.len());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut extra = 0.0f32;
        let mut i = 0;
        while i + 2 <= n {
            {
                let ($b, $y) = (w.get_unchecked(i), a.get_unchecked(i));
                let isum: __m256i = $isum;
                let scale = _mm256_mul_ps(h2f_x8($b.d), h2f_x8($y.d));
                acc0 = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc0);
                extra += $extra;
            }
            {
                let ($b, $y) = (w.get_unchecked(i + 1), a.get_unchecked(i + 1));
                let isum: __m256i = $isum;
                let scale = _mm256_mul_ps(h2f_x8($b.d), h2f_x8($y.d));
                acc1 = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc1);
                extra += $extra;
            }
            i += 2;
        }
        if i < n {
            let ($b, $y) = (w.get_unchecked(i), a.get_unchecked(i));
            let isum: __m256i = $isum;
            let scale = _mm256_mul_ps(h2f_x8($b.d), h2f_x8($y.d));
            acc0 = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc0);
            extra += $extra;
        }
        hsum_ps(_mm256_add_ps(acc0, acc1)) + extra
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    let eight = _mm256_set1_epi8(8);
    block_loop!(
        w,
        a,
        |b, y| dot_i8_i32(
            _mm256_sub_epi8(nibbles_32(b.qs.as_ptr()), eight),
            load(&y.qs)
        ),
        0.0
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_1(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    block_loop!(
        w,
        a,
        |b, y| dot_u8_i8_i32(nibbles_32(b.qs.as_ptr()), load(&y.qs)),
        h2f(b.m) * h2f(y.s)
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q5_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    // q - 16 as i8: the nibble when the 5th bit is set, else the nibble with 0xF0 or-ed in.
    let f0 = _mm256_set1_epi8(0xf0u8 as i8);
    block_loop!(
        w,
        a,
        |b, y| {
            let hi = bits_to_bytes(u32::from_le_bytes(b.qh));
            let q = _mm256_or_si256(nibbles_32(b.qs.as_ptr()), _mm256_andnot_si256(hi, f0));
            dot_i8_i32(q, load(&y.qs))
        },
        0.0
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q5_1(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    let x10 = _mm256_set1_epi8(0x10);
    block_loop!(
        w,
        a,
        |b, y| {
            let hi = _mm256_and_si256(bits_to_bytes(u32::from_le_bytes(b.qh)), x10);
            let q = _mm256_or_si256(nibbles_32(b.qs.as_ptr()), hi);
            dot_u8_i8_i32(q, load(&y.qs))
        },
        h2f(b.m) * h2f(y.s)
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    block_loop!(w, a, |b, y| dot_i8_i32(load(&b.qs), load(&y.qs)), 0.0)
}

/// Four weight rows against `R` activation rows (Zen-class cores have one vector integer
/// multiply pipe, so the kernel spends it only on the 32 products per block-row): each weight
/// block is decoded once (`$decode`) and met by every activation row (`$part`: 4 i32 partial
/// sums per block-row); per activation row the four rows are transposed and added into one
/// vector of row totals, and a single 4-lane convert + FMA applies the four block scales. The
/// ops per activation row do not depend on `R`, so every `R` gives the same bits. `w` holds the
/// 4 rows back to back (`4 * nb` blocks), `a` is `[&[Dot]; R]`. `$min` names the weight minimum
/// field for formats with one.
macro_rules! rows4 {
    ($w:expr, $next:expr, $a:expr, |$y:ident| $shared:expr, |$b:ident| $decode:expr, |$x:ident, $sh:ident| $part:expr $(, min: $min:ident)?) => {
        rows4!($w, $next, $a, |$y| $shared, |$b| $decode, |$x, $sh| $part, sum4 $(, min: $min)?)
    };
    ($w:expr, $next:expr, $a:expr, |$y:ident| $shared:expr, |$b:ident| $decode:expr, |$x:ident, $sh:ident| $part:expr, $reduce:ident $(, min: $min:ident)?) => {{
        macro_rules! reduce { ($x0:expr, $x1:expr, $x2:expr, $x3:expr) => { $reduce($x0, $x1, $x2, $x3) } }
        let (w, a) = ($w, $a);
        let nb = w.len() / 4;
        debug_assert!(a.iter().all(|a| a.len() == nb));
        let wp = w.as_ptr();
        let next = $next;
        let mut acc = a.map(|_| _mm_setzero_ps());
        for i in 0..nb {
            prefetch_group(next, i);
            let (b0, b1, b2, b3) = (
                &*wp.add(i),
                &*wp.add(nb + i),
                &*wp.add(2 * nb + i),
                &*wp.add(3 * nb + i),
            );
            let x0 = { let $b = b0; $decode };
            let x1 = { let $b = b1; $decode };
            let x2 = { let $b = b2; $decode };
            let x3 = { let $b = b3; $decode };
            let d4 = f16_x4(b0.d, b1.d, b2.d, b3.d);
            // The four rows' minimums, for formats with one.
            $( let $min = f16_x4(b0.$min, b1.$min, b2.$min, b3.$min); )?
            for (acc, a) in acc.iter_mut().zip(&a) {
                let $y = &*a.as_ptr().add(i);
                let $sh = $shared;
                let p0 = { let $x = &x0; $part };
                let p1 = { let $x = &x1; $part };
                let p2 = { let $x = &x2; $part };
                let p3 = { let $x = &x3; $part };
                let dy = _mm_cvtph_ps(_mm_set1_epi16($y.d.to_bits() as i16));
                let d = _mm_mul_ps(d4, dy);
                *acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(reduce!(p0, p1, p2, p3)), *acc);
                $(
                    let s = _mm_cvtph_ps(_mm_set1_epi16($y.s.to_bits() as i16));
                    *acc = _mm_fmadd_ps($min, s, *acc);
                )?
            }
        }
        acc.map(|acc| {
            let mut out = [0.0f32; 4];
            _mm_storeu_ps(out.as_mut_ptr(), acc);
            out
        })
    }};
}

/// While block `i` of a group is processed, fetch a later group's bytes (4 rows, contiguous)
/// at the same relative position, so that group is in cache when it starts: the hardware
/// prefetcher alone does not keep four short row streams fed. `next` is that group's first
/// block, or this group's when there is none (then the hints hit cached lines).
#[inline(always)]
unsafe fn prefetch_group<B>(next: *const B, i: usize) {
    let sz = size_of::<B>();
    prefetch_span((next as *const i8).wrapping_add(4 * i * sz), 4 * sz);
}

/// Row totals of four vectors of 4 i32 partial sums: lane r = sum of the lanes of `pr`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sum4(p0: __m128i, p1: __m128i, p2: __m128i, p3: __m128i) -> __m128i {
    let s01 = _mm_add_epi32(_mm_unpacklo_epi32(p0, p1), _mm_unpackhi_epi32(p0, p1));
    let s23 = _mm_add_epi32(_mm_unpacklo_epi32(p2, p3), _mm_unpackhi_epi32(p2, p3));
    _mm_add_epi32(_mm_unpacklo_epi64(s01, s23), _mm_unpackhi_epi64(s01, s23))
}

/// Row totals of four vectors of 8 i16 partial sums whose totals fit i16 pairwise: lane r of
/// the result is the (i32) sum of the lanes of `pr`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sum4_i16(p0: __m128i, p1: __m128i, p2: __m128i, p3: __m128i) -> __m128i {
    let h = _mm_hadd_epi16(_mm_hadd_epi16(p0, p1), _mm_hadd_epi16(p2, p3));
    _mm_madd_epi16(h, _mm_set1_epi16(1))
}

/// As `sum4_i16` for lanes whose pairwise sums fit i16 but whose 4-sums do not.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sum4_i16_wide(p0: __m128i, p1: __m128i, p2: __m128i, p3: __m128i) -> __m128i {
    let ones = _mm_set1_epi16(1);
    let h01 = _mm_madd_epi16(_mm_hadd_epi16(p0, p1), ones);
    let h23 = _mm_madd_epi16(_mm_hadd_epi16(p2, p3), ones);
    _mm_hadd_epi32(h01, h23)
}

/// Four f16 values as 4 f32 lanes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn f16_x4(a: f16, b: f16, c: f16, d: f16) -> __m128 {
    let v = _mm_setr_epi16(
        a.to_bits() as i16,
        b.to_bits() as i16,
        c.to_bits() as i16,
        d.to_bits() as i16,
        0,
        0,
        0,
        0,
    );
    _mm_cvtph_ps(v)
}

/// The activation block as its two 16-byte halves (elements 0..16 and 16..32).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn halves(qs: &[i8; QK]) -> (__m128i, __m128i) {
    let p = qs.as_ptr() as *const __m128i;
    (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)))
}

/// A block's 16 bytes of nibbles split: low nibbles (elements 0..16), high (16..32).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn nibbles16(qs: &[u8; QK / 2]) -> (__m128i, __m128i) {
    let m4 = _mm_set1_epi8(0x0f);
    let b = _mm_loadu_si128(qs.as_ptr() as *const __m128i);
    (
        _mm_and_si128(b, m4),
        _mm_and_si128(_mm_srli_epi16(b, 4), m4),
    )
}

/// Products of split codes (each < 32) against the activation's halves as 8 i16 pair sums:
/// low codes against elements 0..16, high against 16..32 (ggml's layout). Values <= 2 * (2 *
/// 31 * 127) fit i16.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn codes_dot16(x: &(__m128i, __m128i), y: (__m128i, __m128i)) -> __m128i {
    _mm_add_epi16(_mm_maddubs_epi16(x.0, y.0), _mm_maddubs_epi16(x.1, y.1))
}

/// `c * (pair sums of y)` as 8 i16, aligned with `codes_dot16` (the offset of the unsigned
/// codes: `sum((q - c) y) = sum(q y) - c sum(y)`).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn offset16(y: (__m128i, __m128i), c: i8) -> __m128i {
    let c = _mm_set1_epi8(c);
    _mm_add_epi16(_mm_maddubs_epi16(c, y.0), _mm_maddubs_epi16(c, y.1))
}

/// The 5th bits of a Q5 block, as 0x10 in the bytes of each half whose bit is set.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fifth_bits(qh: [u8; 4]) -> (__m128i, __m128i) {
    let v = bits_to_bytes(u32::from_le_bytes(qh));
    let v = _mm256_and_si256(v, _mm256_set1_epi8(0x10));
    (_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1))
}

/// The unsigned 5-bit codes of a Q5 block, split as `nibbles16`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn q5_codes16(qs: &[u8; QK / 2], qh: [u8; 4]) -> (__m128i, __m128i) {
    let h = fifth_bits(qh);
    let (lo, hi) = nibbles16(qs);
    (_mm_or_si128(lo, h.0), _mm_or_si128(hi, h.1))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_0_rows4<const R: usize>(
    w: &[BlockQ4_0],
    next: *const BlockQ4_0,
    a: [&[BlockQ8_0]; R],
) -> [[f32; 4]; R] {
    rows4!(
        w,
        next,
        a,
        |y| {
            let yh = halves(&y.qs);
            (yh, offset16(yh, 8))
        },
        |b| nibbles16(&b.qs),
        |x, sh| _mm_sub_epi16(codes_dot16(x, sh.0), sh.1),
        sum4_i16
    )
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q4_1_rows4<const R: usize>(
    w: &[BlockQ4_1],
    next: *const BlockQ4_1,
    a: [&[BlockQ8_1]; R],
) -> [[f32; 4]; R] {
    rows4!(
        w,
        next,
        a,
        |y| halves(&y.qs),
        |b| nibbles16(&b.qs),
        |x, yh| codes_dot16(x, yh),
        sum4_i16,
        min: m
    )
}

/// Q5_0 with the offset taken in i16: `(q - 16) y` pair sums stay within +-4064 per lane.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q5_0_rows4<const R: usize>(
    w: &[BlockQ5_0],
    next: *const BlockQ5_0,
    a: [&[BlockQ8_0]; R],
) -> [[f32; 4]; R] {
    rows4!(
        w,
        next,
        a,
        |y| {
            let yh = halves(&y.qs);
            (yh, offset16(yh, 16))
        },
        |b| q5_codes16(&b.qs, b.qh),
        |x, sh| _mm_sub_epi16(codes_dot16(x, sh.0), sh.1),
        sum4_i16
    )
}

/// Q5_1 lanes reach 2 * (2*31*127): one pairwise add still fits i16, the second needs i32.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q5_1_rows4<const R: usize>(
    w: &[BlockQ5_1],
    next: *const BlockQ5_1,
    a: [&[BlockQ8_1]; R],
) -> [[f32; 4]; R] {
    rows4!(
        w,
        next,
        a,
        |y| halves(&y.qs),
        |b| q5_codes16(&b.qs, b.qh),
        |x, yh| codes_dot16(x, yh),
        sum4_i16_wide,
        min: m
    )
}

/// Q8_0: signed products fill i16 pairs, so each row widens to 8 i32 and folds its halves. The
/// weights' magnitudes are taken once; each activation row gets their signs.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn q8_0_rows4<const R: usize>(
    w: &[BlockQ8_0],
    next: *const BlockQ8_0,
    a: [&[BlockQ8_0]; R],
) -> [[f32; 4]; R] {
    rows4!(
        w,
        next,
        a,
        |y| load(&y.qs),
        |b| {
            let q = load(&b.qs);
            (q, _mm256_sign_epi8(q, q))
        },
        |x, yq| {
            let p16 = _mm256_maddubs_epi16(x.1, _mm256_sign_epi8(yq, x.0));
            let s = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
            _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1))
        }
    )
}

/// See `super::quantize_q8_activation`: 32 floats in four vectors, exact same operations.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_q8_activation(x: &[f32], qs: &mut [i8; QK]) -> (f32, i32) {
    debug_assert!(x.len() >= QK);
    let p = x.as_ptr();
    let v = [
        _mm256_loadu_ps(p),
        _mm256_loadu_ps(p.add(8)),
        _mm256_loadu_ps(p.add(16)),
        _mm256_loadu_ps(p.add(24)),
    ];
    let sign = _mm256_set1_ps(-0.0);
    let mut m = _mm256_andnot_ps(sign, v[0]);
    for vi in &v[1..] {
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, *vi));
    }
    let m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    let amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    let d = amax / 127.0;
    let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
    let q = v.map(|vi| {
        _mm256_cvtps_epi32(_mm256_round_ps(
            _mm256_mul_ps(vi, id),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
        ))
    });
    let s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    let s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    let s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    let sum = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1)));
    // packs work per 128-bit lane; the permute restores element order.
    let b = _mm256_packs_epi16(
        _mm256_packs_epi32(q[0], q[1]),
        _mm256_packs_epi32(q[2], q[3]),
    );
    let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(qs.as_mut_ptr() as *mut __m256i, b);
    (d, sum)
}
