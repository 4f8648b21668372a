//! AVX2 dots for the table formats: the 16-entry table sits in both 128-bit lanes of a
//! register and `pshufb` turns 32 nibble codes into 32 signed bytes in one instruction; the
//! rest is Q8_0's integer dot (`maddubs` on |w| with the sign moved onto the activation).

use super::{e8m0_half, BlockIQ4NL, BlockIQ4XS, BlockMXFP4, KVALUES_IQ4NL, KVALUES_MXFP4};
use crate::k_quants::BlockQ8K;
use crate::legacy::BlockQ8_0;
use crate::simd::{dot_i8_i32, hsum_ps, nibbles_32, prefetch_span};
use std::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn table(t: &[i8; 16]) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr() as *const __m128i))
}

/// The 32 table values of one block of codes (element order: ggml's nibble layout).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lookup(t: __m256i, qs: &[u8; 16]) -> __m256i {
    _mm256_shuffle_epi8(t, nibbles_32(qs.as_ptr()))
}

/// The 16 i16 pair sums of `v * y` for looked-up table values `v`, given `ya = |y|` (shared by
/// the rows of a multi-row kernel): the sign of `y` moves onto the table values, so each row
/// pays one `psignb` (|y| <= 127 and |table| <= 127 keep every pair sum within i16).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn table_dot(v: __m256i, ya: __m256i, y: __m256i) -> __m256i {
    _mm256_maddubs_epi16(ya, _mm256_sign_epi8(v, y))
}

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load32(p: &[i8]) -> __m256i {
    debug_assert!(p.len() >= 32);
    _mm256_loadu_si256(p.as_ptr() as *const __m256i)
}

/// `sum_blocks scale(b, y) * dot(table[b], y)` with two accumulators (blocks in pairs).
macro_rules! one_row {
    ($w:expr, $a:expr, $t:expr, |$b:ident, $y:ident| $scale:expr) => {{
        let t = table($t);
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut pairs = $w.chunks_exact(2).zip($a.chunks_exact(2));
        for (wb, ab) in &mut pairs {
            for (k, ($b, $y)) in wb.iter().zip(ab).enumerate() {
                let s = _mm256_cvtepi32_ps(dot_i8_i32(lookup(t, &$b.qs), load32(&$y.qs)));
                let d = _mm256_set1_ps($scale);
                if k == 0 {
                    acc0 = _mm256_fmadd_ps(d, s, acc0);
                } else {
                    acc1 = _mm256_fmadd_ps(d, s, acc1);
                }
            }
        }
        let n = $w.len().min($a.len());
        if n % 2 == 1 {
            let ($b, $y) = (&$w[n - 1], &$a[n - 1]);
            let s = _mm256_cvtepi32_ps(dot_i8_i32(lookup(t, &$b.qs), load32(&$y.qs)));
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps($scale), s, acc0);
        }
        hsum_ps(_mm256_add_ps(acc0, acc1))
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn iq4_nl(w: &[BlockIQ4NL], a: &[BlockQ8_0]) -> f32 {
    one_row!(w, a, &KVALUES_IQ4NL, |b, y| b.d.to_f32() * y.d.to_f32())
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn mxfp4(w: &[BlockMXFP4], a: &[BlockQ8_0]) -> f32 {
    one_row!(w, a, &KVALUES_MXFP4, |b, y| e8m0_half(b.e) * y.d.to_f32())
}

/// IQ4_XS against Q8_K: per sub-block, the i16 pair sums of the table dot are multiplied by
/// the sub-block scale in the same `pmaddwd` that widens them (|pair| <= 2*127*127 and
/// |ls - 32| <= 32 keep every i32 exact), summed in i32 over the super-block, then scaled once.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn iq4_xs(w: &[BlockIQ4XS], a: &[BlockQ8K]) -> f32 {
    let t = table(&KVALUES_IQ4NL);
    let mut acc = _mm256_setzero_ps();
    for (b, y) in w.iter().zip(a) {
        let mut isum = _mm256_setzero_si256();
        for ib in 0..8 {
            let q: &[u8; 16] = b.qs[16 * ib..16 * ib + 16].try_into().unwrap();
            let v = lookup(t, q);
            let yv = load32(&y.qs[32 * ib..]);
            let p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yv, v));
            let ls = _mm256_set1_epi16(b.sub_scale(ib) as i16);
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, ls));
        }
        let d = _mm256_set1_ps(b.d.to_f32() * y.d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
    }
    hsum_ps(acc)
}

/// Row totals of four vectors of 8 i32: lane r = sum of the lanes of `pr`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn sum4(p0: __m256i, p1: __m256i, p2: __m256i, p3: __m256i) -> __m128i {
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
}

/// Four rows against `R` Q8_0 activation rows: per block, four table lookups (once for all
/// activation rows), then per activation row four dots, one 4-lane reduction, convert and FMA
/// with the four block scales. `$scales` gives the four weight scales as a `__m128` from the
/// four blocks.
macro_rules! rows4 {
    ($w:expr, $next:expr, $a:expr, $t:expr, |$b0:ident, $b1:ident, $b2:ident, $b3:ident| $scales:expr) => {{
        let (w, a) = ($w, $a);
        let nb = w.len() / 4;
        debug_assert!(a.iter().all(|a| a.len() == nb));
        let t = table($t);
        let wp = w.as_ptr();
        let sz = size_of_val(&w[0]);
        let ones = _mm256_set1_epi16(1);
        let mut acc = a.map(|_| _mm_setzero_ps());
        for i in 0..nb {
            prefetch_span(($next as *const i8).wrapping_add(4 * i * sz), 4 * sz);
            let ($b0, $b1, $b2, $b3) = (
                &*wp.add(i),
                &*wp.add(nb + i),
                &*wp.add(2 * nb + i),
                &*wp.add(3 * nb + i),
            );
            let v = [
                lookup(t, &$b0.qs),
                lookup(t, &$b1.qs),
                lookup(t, &$b2.qs),
                lookup(t, &$b3.qs),
            ];
            let sc = $scales;
            for (acc, a) in acc.iter_mut().zip(&a) {
                let y = &*a.as_ptr().add(i);
                let yv = load32(&y.qs);
                let ya = _mm256_sign_epi8(yv, yv);
                let s = sum4(
                    _mm256_madd_epi16(table_dot(v[0], ya, yv), ones),
                    _mm256_madd_epi16(table_dot(v[1], ya, yv), ones),
                    _mm256_madd_epi16(table_dot(v[2], ya, yv), ones),
                    _mm256_madd_epi16(table_dot(v[3], ya, yv), ones),
                );
                let dy = _mm_set1_ps(y.d.to_f32());
                *acc = _mm_fmadd_ps(_mm_mul_ps(sc, dy), _mm_cvtepi32_ps(s), *acc);
            }
        }
        acc.map(|acc| {
            let mut out = [0.0f32; 4];
            _mm_storeu_ps(out.as_mut_ptr(), acc);
            out
        })
    }};
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn iq4_nl_rows4<const R: usize>(
    w: &[BlockIQ4NL],
    next: *const BlockIQ4NL,
    a: [&[BlockQ8_0]; R],
) -> [[f32; 4]; R] {
    rows4!(w, next, a, &KVALUES_IQ4NL, |b0, b1, b2, b3| {
        let h = _mm_setr_epi16(
            b0.d.to_bits() as i16,
            b1.d.to_bits() as i16,
            b2.d.to_bits() as i16,
            b3.d.to_bits() as i16,
            0,
            0,
            0,
            0,
        );
        _mm_cvtph_ps(h)
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn mxfp4_rows4<const R: usize>(
    w: &[BlockMXFP4],
    next: *const BlockMXFP4,
    a: [&[BlockQ8_0]; R],
) -> [[f32; 4]; R] {
    rows4!(w, next, a, &KVALUES_MXFP4, |b0, b1, b2, b3| {
        _mm_setr_ps(
            e8m0_half(b0.e),
            e8m0_half(b1.e),
            e8m0_half(b2.e),
            e8m0_half(b3.e),
        )
    })
}

/// Four IQ4_XS rows against `R` Q8_K activation rows: per sub-block, the four rows' table
/// lookups are shared by the activation rows and each activation load by the four rows; the
/// sub-block scales go into the widening `pmaddwd` as in `iq4_xs`, and one 4-lane reduction per
/// super-block and activation row meets the four f32 scales.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn iq4_xs_rows4<const R: usize>(
    w: &[BlockIQ4XS],
    next: *const BlockIQ4XS,
    a: [&[BlockQ8K]; R],
) -> [[f32; 4]; R] {
    let nb = w.len() / 4;
    debug_assert!(a.iter().all(|a| a.len() == nb));
    let t = table(&KVALUES_IQ4NL);
    let wp = w.as_ptr();
    let sz = size_of::<BlockIQ4XS>();
    let mut acc = [_mm_setzero_ps(); R];
    for i in 0..nb {
        prefetch_span((next as *const i8).wrapping_add(4 * i * sz), 4 * sz);
        let rows = [
            &*wp.add(i),
            &*wp.add(nb + i),
            &*wp.add(2 * nb + i),
            &*wp.add(3 * nb + i),
        ];
        let y = a.map(|a| &*a.as_ptr().add(i));
        let mut isum = [[_mm256_setzero_si256(); 4]; R];
        for ib in 0..8 {
            let v = rows.map(|b| {
                let q: &[u8; 16] = b.qs[16 * ib..16 * ib + 16].try_into().unwrap();
                lookup(t, q)
            });
            let ls = rows.map(|b| _mm256_set1_epi16(b.sub_scale(ib) as i16));
            for (isum, y) in isum.iter_mut().zip(&y) {
                let yv = load32(&y.qs[32 * ib..]);
                let ya = _mm256_sign_epi8(yv, yv);
                for k in 0..4 {
                    let p16 = table_dot(v[k], ya, yv);
                    isum[k] = _mm256_add_epi32(isum[k], _mm256_madd_epi16(p16, ls[k]));
                }
            }
        }
        let h = _mm_setr_epi16(
            rows[0].d.to_bits() as i16,
            rows[1].d.to_bits() as i16,
            rows[2].d.to_bits() as i16,
            rows[3].d.to_bits() as i16,
            0,
            0,
            0,
            0,
        );
        let dw = _mm_cvtph_ps(h);
        for ((acc, isum), y) in acc.iter_mut().zip(&isum).zip(&y) {
            let d = _mm_mul_ps(dw, _mm_set1_ps(y.d));
            let s = sum4(isum[0], isum[1], isum[2], isum[3]);
            *acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(s), *acc);
        }
    }
    acc.map(|acc| {
        let mut out = [0.0f32; 4];
        _mm_storeu_ps(out.as_mut_ptr(), acc);
        out
    })
}
