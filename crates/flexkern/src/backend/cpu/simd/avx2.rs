//! AVX2 + FMA + F16C primitives: register-blocked micro-kernels (up to 6 rows by 16 columns of
//! accumulators, 12 of the 16 ymm registers), a polynomial exp2, and F16C widening.

use super::{DecodeTile, Isa, RowFmt};
use crate::attention::kv::KvRow;
use std::arch::x86_64::*;

pub(super) const ISA: Isa = Isa {
    name: "avx2",
    qk,
    qk_rows,
    pv,
    qk_rows_raw,
    pv_raw,
    softmax,
    decode_tile: Some(decode_tile),
    convert,
    exp2,
    softcap,
};

/// Rows of the micro-kernels' accumulator block.
const MR: usize = 6;

/// Dispatches a const-generic micro-kernel on (rows 1..=6, vectors 1..=2).
macro_rules! dispatch {
    ($f:ident, $r:expr, $v:expr, ($($a:expr),*)) => {
        dispatch!($f, $r, $v, [], ($($a),*))
    };
    ($f:ident, $r:expr, $v:expr, [$($g:tt)*], ($($a:expr),*)) => {
        match ($r, $v) {
            (6, 2) => $f::<6, 2 $($g)*>($($a),*),
            (5, 2) => $f::<5, 2 $($g)*>($($a),*),
            (4, 2) => $f::<4, 2 $($g)*>($($a),*),
            (3, 2) => $f::<3, 2 $($g)*>($($a),*),
            (2, 2) => $f::<2, 2 $($g)*>($($a),*),
            (1, 2) => $f::<1, 2 $($g)*>($($a),*),
            (6, _) => $f::<6, 1 $($g)*>($($a),*),
            (5, _) => $f::<5, 1 $($g)*>($($a),*),
            (4, _) => $f::<4, 1 $($g)*>($($a),*),
            (3, _) => $f::<3, 1 $($g)*>($($a),*),
            (2, _) => $f::<2, 1 $($g)*>($($a),*),
            _ => $f::<1, 1 $($g)*>($($a),*),
        }
    };
}

/// Row formats as const-generic codes for the micro-kernels.
const F32: u8 = 0;
const F16: u8 = 1;
const BF16: u8 = 2;
const E4M3: u8 = 3;
const E5M2: u8 = 4;
const I8: u8 = 5;
const E4M3F32: u8 = 6;
const E5M2F32: u8 = 7;

/// Calls `$f::<code>` for a `RowFmt`.
macro_rules! by_fmt {
    ($fmt:expr, $f:ident, ($($a:expr),*)) => {
        match $fmt {
            RowFmt::F32 => $f::<F32>($($a),*),
            RowFmt::F16 => $f::<F16>($($a),*),
            RowFmt::BF16 => $f::<BF16>($($a),*),
            RowFmt::E4M3 => $f::<E4M3>($($a),*),
            RowFmt::E4M3F32 => $f::<E4M3F32>($($a),*),
            RowFmt::E5M2 => $f::<E5M2>($($a),*),
            RowFmt::E5M2F32 => $f::<E5M2F32>($($a),*),
            RowFmt::I8 => $f::<I8>($($a),*),
        }
    };
}

/// Elements `i..i + 8` of a stored row of format `F`, widened (unscaled, as `RowFmt` reads).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load8<const F: u8>(p: *const u8, i: usize) -> __m256 {
    match F {
        F32 => _mm256_loadu_ps(p.cast::<f32>().add(i)),
        F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast::<u16>().add(i).cast())),
        // bf16 is the top half of an f32.
        BF16 => {
            let h = _mm_loadu_si128(p.cast::<u16>().add(i).cast());
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
        }
        // e4m3 bits `s eeee mmm` as f16 `s 0eeee mmm0000000` (value / 2^8): sign-extended to 16
        // bits and shifted left by 7, e and m land in place, the sign in bits 15 and 14; the
        // mask clears bit 14 (one shift fewer than zero-extending).
        E4M3 => {
            let w = _mm_cvtepi8_epi16(_mm_loadl_epi64(p.add(i).cast()));
            let h = _mm_slli_epi16::<7>(w);
            _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16(!0x4000)))
        }
        // The same bits as f32 `s 0000eeee mmm0...` (value / 2^120): sign-extended to 32 bits and
        // shifted left by 20, the mask keeps the sign and clears the 4 copies of it above e.
        E4M3F32 => {
            let w = _mm256_cvtepi8_epi32(_mm_loadl_epi64(p.add(i).cast()));
            let h = _mm256_slli_epi32::<20>(w);
            _mm256_castsi256_ps(_mm256_and_si256(
                h,
                _mm256_set1_epi32(0x87F0_0000u32 as i32),
            ))
        }
        // e5m2 bits `s eeeee mm` as f32 `s 000eeeee mm0...` (value / 2^112), as `E4M3F32`: shifted
        // left by 21, the mask keeps the sign and clears the 3 copies of it above e.
        E5M2F32 => {
            let w = _mm256_cvtepi8_epi32(_mm_loadl_epi64(p.add(i).cast()));
            let h = _mm256_slli_epi32::<21>(w);
            _mm256_castsi256_ps(_mm256_and_si256(
                h,
                _mm256_set1_epi32(0x8FE0_0000u32 as i32),
            ))
        }
        // e5m2 is the top byte of an f16.
        E5M2 => {
            let w = _mm_cvtepu8_epi16(_mm_loadl_epi64(p.add(i).cast()));
            _mm256_cvtph_ps(_mm_slli_epi16::<8>(w))
        }
        _ => _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.add(i).cast()))),
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn qk(
    qt: &[f32],
    dk: usize,
    m_pad: usize,
    krows: &[*const f32],
    st: &mut [f32],
    ranges: &[(u32, u32)],
) {
    let nk = krows.len();
    assert!(m_pad.is_multiple_of(8) && qt.len() >= m_pad * dk && st.len() >= nk * m_pad);
    assert!(ranges.is_empty() || ranges.len() >= m_pad);
    let mut k0 = 0;
    while k0 < nk {
        // A group of keys stays in L1 while the query panels stream past it.
        let kr = (nk - k0).min(MR);
        let rows = &krows[k0..k0 + kr];
        let mut p0 = 0;
        while p0 < m_pad {
            let w = (m_pad - p0).min(16);
            // Keys outside every range of this panel's rows are masked anyway.
            let (lo, hi) = super::key_span(ranges, p0..p0 + w, nk);
            if lo < k0 + kr && k0 < hi {
                let panel = qt.as_ptr().add(p0 * dk);
                let out = st.as_mut_ptr().add(k0 * m_pad + p0);
                dispatch!(qk_micro, kr, w / 8, (panel, dk, rows, out, m_pad));
            }
            p0 += w;
        }
        k0 += kr;
    }
}

/// `R` keys by `8V` queries: broadcast one key element, FMA it into `V` query vectors.
// Index loops over the const-sized register arrays unroll completely.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn qk_micro<const R: usize, const V: usize>(
    panel: *const f32,
    dk: usize,
    rows: &[*const f32],
    out: *mut f32,
    ld: usize,
) {
    let w = V * 8;
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    let mut kp = [std::ptr::null::<f32>(); R];
    kp.copy_from_slice(&rows[..R]);
    for d in 0..dk {
        let mut qv = [_mm256_setzero_ps(); V];
        for (j, x) in qv.iter_mut().enumerate() {
            *x = _mm256_loadu_ps(panel.add(d * w + 8 * j));
        }
        for r in 0..R {
            let b = _mm256_broadcast_ss(&*kp[r].add(d));
            for j in 0..V {
                acc[r][j] = _mm256_fmadd_ps(b, qv[j], acc[r][j]);
            }
        }
    }
    for (r, a) in acc.iter().enumerate() {
        for (j, x) in a.iter().enumerate() {
            _mm256_storeu_ps(out.add(r * ld + 8 * j), *x);
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn qk_rows(
    qr: &[f32],
    m: usize,
    dk: usize,
    m_pad: usize,
    krows: &[*const f32],
    st: &mut [f32],
) {
    // SAFETY: the same pointers, untyped.
    let rows = std::slice::from_raw_parts(krows.as_ptr().cast::<*const u8>(), krows.len());
    qk_rows_fmt::<F32>(qr, m, dk, m_pad, rows, st)
}

unsafe fn qk_rows_raw(
    qr: &[f32],
    m: usize,
    dk: usize,
    m_pad: usize,
    krows: &[*const u8],
    fmt: RowFmt,
    st: &mut [f32],
) {
    assert!(fmt == RowFmt::F32 || dk.is_multiple_of(8));
    by_fmt!(fmt, qk_rows_fmt, (qr, m, dk, m_pad, krows, st))
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn qk_rows_fmt<const F: u8>(
    qr: &[f32],
    m: usize,
    dk: usize,
    m_pad: usize,
    krows: &[*const u8],
    st: &mut [f32],
) {
    let nk = krows.len();
    assert!((1..=8).contains(&m) && m <= m_pad && qr.len() >= m * dk);
    assert!(st.len() >= nk * m_pad);
    // Up to 4 rows: 3 keys at a time (12 accumulators); more rows: one key at a time.
    let kr_max = if m <= 4 { 3 } else { 1 };
    let mut k0 = 0;
    while k0 < nk {
        let kr = (nk - k0).min(kr_max);
        let rows = &krows[k0..k0 + kr];
        let out = st.as_mut_ptr().add(k0 * m_pad);
        let q = qr.as_ptr();
        match (kr, m) {
            (3, 4) => qk_rows_micro::<3, 4, F>(q, dk, rows, out, m_pad),
            (3, 3) => qk_rows_micro::<3, 3, F>(q, dk, rows, out, m_pad),
            (3, 2) => qk_rows_micro::<3, 2, F>(q, dk, rows, out, m_pad),
            (3, _) => qk_rows_micro::<3, 1, F>(q, dk, rows, out, m_pad),
            (2, 4) => qk_rows_micro::<2, 4, F>(q, dk, rows, out, m_pad),
            (2, 3) => qk_rows_micro::<2, 3, F>(q, dk, rows, out, m_pad),
            (2, 2) => qk_rows_micro::<2, 2, F>(q, dk, rows, out, m_pad),
            (2, _) => qk_rows_micro::<2, 1, F>(q, dk, rows, out, m_pad),
            (_, 8) => qk_rows_micro::<1, 8, F>(q, dk, rows, out, m_pad),
            (_, 7) => qk_rows_micro::<1, 7, F>(q, dk, rows, out, m_pad),
            (_, 6) => qk_rows_micro::<1, 6, F>(q, dk, rows, out, m_pad),
            (_, 5) => qk_rows_micro::<1, 5, F>(q, dk, rows, out, m_pad),
            (_, 4) => qk_rows_micro::<1, 4, F>(q, dk, rows, out, m_pad),
            (_, 3) => qk_rows_micro::<1, 3, F>(q, dk, rows, out, m_pad),
            (_, 2) => qk_rows_micro::<1, 2, F>(q, dk, rows, out, m_pad),
            _ => qk_rows_micro::<1, 1, F>(q, dk, rows, out, m_pad),
        }
        k0 += kr;
    }
}

/// `K` keys by `R` rows of 8-lane partial dot products, reduced horizontally at the end.
// Index loops over the const-sized register arrays unroll completely.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn qk_rows_micro<const K: usize, const R: usize, const F: u8>(
    q: *const f32,
    dk: usize,
    rows: &[*const u8],
    out: *mut f32,
    ld: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); R]; K];
    let mut kp = [std::ptr::null::<u8>(); K];
    kp.copy_from_slice(&rows[..K]);
    let d8 = dk / 8 * 8;
    let mut d = 0;
    while d < d8 {
        let mut kv = [_mm256_setzero_ps(); K];
        for (x, p) in kv.iter_mut().zip(&kp) {
            *x = load8::<F>(*p, d);
        }
        for r in 0..R {
            let qv = _mm256_loadu_ps(q.add(r * dk + d));
            for k in 0..K {
                acc[k][r] = _mm256_fmadd_ps(kv[k], qv, acc[k][r]);
            }
        }
        d += 8;
    }
    // Four rows at once: fold each to 128 bits, then a 4x4 transpose-add gives their 4 sums in
    // one register (one store, not 4 scalar reduction chains). The row bounds stay compile-time
    // constants so the accumulators stay in registers.
    let four = R.is_multiple_of(4) && d8 == dk;
    for k in 0..K {
        if four {
            for g in 0..R / 4 {
                let a = &acc[k][4 * g..4 * g + 4];
                let f = |v: __m256| {
                    _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v))
                };
                let (v0, v1, v2, v3) = (f(a[0]), f(a[1]), f(a[2]), f(a[3]));
                // [v0_0+v0_2, v1_0+v1_2, v0_1+v0_3, v1_1+v1_3], likewise rows 2 and 3.
                let u01 = _mm_add_ps(_mm_unpacklo_ps(v0, v1), _mm_unpackhi_ps(v0, v1));
                let u23 = _mm_add_ps(_mm_unpacklo_ps(v2, v3), _mm_unpackhi_ps(v2, v3));
                let sum = _mm_add_ps(_mm_movelh_ps(u01, u23), _mm_movehl_ps(u23, u01));
                _mm_storeu_ps(out.add(k * ld + 4 * g), sum);
            }
            continue;
        }
        for r in 0..R {
            let v = acc[k][r];
            let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            let h = _mm_add_ss(h, _mm_movehdup_ps(h));
            let mut x = _mm_cvtss_f32(h);
            // Only f32 rows have a tail (checked by the callers).
            for t in d8..dk {
                x += *kp[k].cast::<f32>().add(t) * *q.add(r * dk + t);
            }
            *out.add(k * ld + r) = x;
        }
    }
}

/// Three passes over the tile (all scores, the softmax, all of P·V), each one call looping over
/// steps and heads inside: a token's rows for every head are adjacent, so each step still reads
/// memory nearly in address order.
unsafe fn decode_tile(mut t: DecodeTile<'_>) {
    let (nh, m, bk, stride) = (t.nh, t.m, t.bk, t.stride);
    assert!(nh >= 1 && (1..=4).contains(&m) && bk <= stride && t.dv_pad.is_multiple_of(8));
    assert!(t.kfmt == RowFmt::F32 || t.dk.is_multiple_of(8));
    assert!(t.qn >= m * t.dk && t.qs.len() >= (nh - 1) * t.qn + m * t.dk);
    assert!(t.krows.len() >= (nh - 1) * stride + bk && t.vrows.len() >= (nh - 1) * stride + bk);
    assert!(t.st.len() >= nh * stride * 8 && t.o.len() >= nh * m * t.dv_pad);
    assert!(t.vscale.len() >= nh && [&t.mx, &t.l, &t.alpha].iter().all(|v| v.len() >= nh * 8));
    by_fmt!(t.kfmt, tile_scores, (&mut t));
    for hh in 0..nh {
        let st = &mut t.st[hh * stride * 8..][..bk * 8];
        let state = hh * 8..hh * 8 + 8;
        softmax4(
            st,
            bk,
            &mut t.mx[state.clone()],
            &mut t.l[state.clone()],
            &mut t.alpha[state],
        );
        let vs = t.vscale[hh];
        if vs != 1.0 {
            for x in st.iter_mut() {
                *x *= vs;
            }
        }
    }
    by_fmt!(t.vfmt, tile_pv, (&mut t));
}

/// The scores of a `DecodeTile`, 3 keys of one head per micro-kernel call.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_scores<const F: u8>(t: &mut DecodeTile<'_>) {
    match t.m {
        4 => tile_scores_m::<F, 4>(t),
        3 => tile_scores_m::<F, 3>(t),
        2 => tile_scores_m::<F, 2>(t),
        _ => tile_scores_m::<F, 1>(t),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn tile_scores_m<const F: u8, const M: usize>(t: &mut DecodeTile<'_>) {
    let st = t.st.as_mut_ptr();
    let mut j = 0;
    while j < t.bk {
        let n = (t.bk - j).min(3);
        for hh in 0..t.nh {
            let rows = &t.krows[hh * t.stride + j..][..n];
            let (q, out) = (
                t.qs.as_ptr().add(hh * t.qn),
                st.add((hh * t.stride + j) * 8),
            );
            match n {
                3 => qk_rows_micro::<3, M, F>(q, t.dk, rows, out, 8),
                2 => qk_rows_micro::<2, M, F>(q, t.dk, rows, out, 8),
                _ => qk_rows_micro::<1, M, F>(q, t.dk, rows, out, 8),
            }
        }
        j += n;
    }
}

/// Keys per P·V step of a `DecodeTile`: more keys per pass over the accumulators, but their
/// rows sit a page apart and share L1 sets (16 measured slower while streaming).
const PV_STEP: usize = 8;

/// P·V of a `DecodeTile` (the running state rescaled at the first step).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_pv<const F: u8>(t: &mut DecodeTile<'_>) {
    match t.m {
        4 => tile_pv_m::<F, 4>(t),
        3 => tile_pv_m::<F, 3>(t),
        2 => tile_pv_m::<F, 2>(t),
        _ => tile_pv_m::<F, 1>(t),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn tile_pv_m<const F: u8, const M: usize>(t: &mut DecodeTile<'_>) {
    let (st, o) = (t.st.as_ptr(), t.o.as_mut_ptr());
    let dv_pad = t.dv_pad;
    let mut j = 0;
    while j < t.bk {
        let n = (t.bk - j).min(PV_STEP);
        for hh in 0..t.nh {
            let rows = &t.vrows[hh * t.stride + j..][..n];
            let p = st.add((hh * t.stride + j) * 8);
            let oh = o.add(hh * M * dv_pad);
            let a = if j == 0 {
                t.alpha.as_ptr().add(hh * 8)
            } else {
                std::ptr::null()
            };
            let mut c0 = 0;
            while c0 + 16 <= dv_pad {
                pv_micro::<M, 2, F>(p, 8, rows, c0, oh.add(c0), dv_pad, a);
                c0 += 16;
            }
            if c0 < dv_pad {
                pv_micro::<M, 1, F>(p, 8, rows, c0, oh.add(c0), dv_pad, a);
            }
        }
        j += n;
    }
}

#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn pv(
    pt: &[f32],
    m_pad: usize,
    m: usize,
    vt: &[f32],
    nk: usize,
    dv_pad: usize,
    o: &mut [f32],
    alpha: &[f32],
    ranges: &[(u32, u32)],
) {
    assert!(dv_pad.is_multiple_of(8) && m <= m_pad && o.len() >= m * dv_pad);
    assert!(alpha.is_empty() || alpha.len() >= m);
    assert!(pt.len() >= nk * m_pad && vt.len() >= nk * dv_pad);
    assert!(ranges.is_empty() || ranges.len() >= m);
    let mut r0 = 0;
    while r0 < m {
        let mr = (m - r0).min(MR);
        // Only the keys some row of this block keeps (an empty span still rescales).
        let (lo, hi) = super::key_span(ranges, r0..r0 + mr, nk);
        let lo = lo.min(hi);
        let a = if alpha.is_empty() {
            std::ptr::null()
        } else {
            alpha.as_ptr().add(r0)
        };
        let mut c0 = 0;
        while c0 < dv_pad {
            let w = (dv_pad - c0).min(16);
            let (p, v, out) = (
                pt.as_ptr().add(lo * m_pad + r0),
                vt.as_ptr().add(c0 * nk + lo * w),
                o.as_mut_ptr().add(r0 * dv_pad + c0),
            );
            dispatch!(
                pv_panel_micro,
                mr,
                w / 8,
                (p, m_pad, v, hi - lo, out, dv_pad, a)
            );
            c0 += w;
        }
        r0 += mr;
    }
}

/// The `R x 8V` output block of a P·V micro-kernel at `o` (rows `ld` apart), each row times
/// `alpha[r]` unless `alpha` is null.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load_out<const R: usize, const V: usize>(
    o: *const f32,
    ld: usize,
    alpha: *const f32,
) -> [[__m256; V]; R] {
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    for (r, a) in acc.iter_mut().enumerate() {
        for (j, x) in a.iter_mut().enumerate() {
            *x = _mm256_loadu_ps(o.add(r * ld + 8 * j));
            if !alpha.is_null() {
                *x = _mm256_mul_ps(*x, _mm256_set1_ps(*alpha.add(r)));
            }
        }
    }
    acc
}

/// One key of P·V: row `r`'s probability `pk[r]` broadcast and FMA'd into the value vectors.
// Index loops over the const-sized register arrays unroll completely.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn fma_rows<const R: usize, const V: usize>(
    pk: *const f32,
    vv: &[__m256; V],
    acc: &mut [[__m256; V]; R],
) {
    for r in 0..R {
        let b = _mm256_broadcast_ss(&*pk.add(r));
        for j in 0..V {
            acc[r][j] = _mm256_fmadd_ps(b, vv[j], acc[r][j]);
        }
    }
}

#[target_feature(enable = "avx2")]
#[inline]
unsafe fn store_out<const R: usize, const V: usize>(
    acc: &[[__m256; V]; R],
    o: *mut f32,
    ld: usize,
) {
    for (r, a) in acc.iter().enumerate() {
        for (j, x) in a.iter().enumerate() {
            _mm256_storeu_ps(o.add(r * ld + 8 * j), *x);
        }
    }
}

/// `pv_micro` over `nk` keys of one value panel (`8V` columns, rows `8V` apart).
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn pv_panel_micro<const R: usize, const V: usize>(
    p: *const f32,
    m_pad: usize,
    v: *const f32,
    nk: usize,
    o: *mut f32,
    ld: usize,
    alpha: *const f32,
) {
    let mut acc = load_out::<R, V>(o, ld, alpha);
    for k in 0..nk {
        let mut vv = [_mm256_setzero_ps(); V];
        for (j, x) in vv.iter_mut().enumerate() {
            *x = _mm256_loadu_ps(v.add(k * 8 * V + 8 * j));
        }
        fma_rows::<R, V>(p.add(k * m_pad), &vv, &mut acc);
    }
    store_out::<R, V>(&acc, o, ld);
}

#[allow(clippy::too_many_arguments)]
unsafe fn pv_raw(
    pt: &[f32],
    m_pad: usize,
    m: usize,
    vrows: &[*const u8],
    fmt: RowFmt,
    dv_pad: usize,
    o: &mut [f32],
    alpha: &[f32],
) {
    by_fmt!(fmt, pv_fmt, (pt, m_pad, m, vrows, dv_pad, o, alpha, &[]))
}

#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pv_fmt<const F: u8>(
    pt: &[f32],
    m_pad: usize,
    m: usize,
    vrows: &[*const u8],
    dv_pad: usize,
    o: &mut [f32],
    alpha: &[f32],
    ranges: &[(u32, u32)],
) {
    assert!(dv_pad.is_multiple_of(8) && m <= m_pad && o.len() >= m * dv_pad);
    assert!(alpha.is_empty() || alpha.len() >= m);
    assert!(pt.len() >= vrows.len() * m_pad);
    assert!(ranges.is_empty() || ranges.len() >= m);
    let scaled = !alpha.is_empty();
    let mut r0 = 0;
    while r0 < m {
        let mr = (m - r0).min(MR);
        // Only the keys some row of this block keeps (an empty span still rescales).
        let (lo, hi) = super::key_span(ranges, r0..r0 + mr, vrows.len());
        let vrows = &vrows[lo.min(hi)..hi];
        let mut c0 = 0;
        while c0 < dv_pad {
            let nv = ((dv_pad - c0) / 8).min(2);
            let (p, out, a) = (
                pt.as_ptr().add(lo.min(hi) * m_pad + r0),
                o.as_mut_ptr().add(r0 * dv_pad + c0),
                if scaled {
                    alpha.as_ptr().add(r0)
                } else {
                    std::ptr::null()
                },
            );
            dispatch!(pv_micro, mr, nv, [, F], (p, m_pad, vrows, c0, out, dv_pad, a));
            c0 += nv * 8;
        }
        r0 += mr;
    }
}

/// `R` query rows by `8V` output columns: rescale by alpha, then broadcast each probability
/// and FMA it into `V` vectors of the value row.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn pv_micro<const R: usize, const V: usize, const F: u8>(
    p: *const f32,
    m_pad: usize,
    vrows: &[*const u8],
    c0: usize,
    o: *mut f32,
    ld: usize,
    alpha: *const f32,
) {
    let mut acc = load_out::<R, V>(o, ld, alpha);
    for (k, &vp) in vrows.iter().enumerate() {
        let mut vv = [_mm256_setzero_ps(); V];
        for (j, x) in vv.iter_mut().enumerate() {
            *x = load8::<F>(vp, c0 + 8 * j);
        }
        fma_rows::<R, V>(p.add(k * m_pad), &vv, &mut acc);
    }
    store_out::<R, V>(&acc, o, ld);
}

/// 2^x: round to the nearest integer n, a degree-6 polynomial on the remainder in [-0.5, 0.5]
/// (Cephes exp2f, relative error ~1.5e-7), times 2^n built in the exponent bits. Inputs below
/// -127 (and -inf) give 0; NaN stays NaN.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) unsafe fn exp2v(x: __m256) -> __m256 {
    // max/min return their second operand when one is NaN: keep x second so NaN propagates.
    let x = _mm256_max_ps(_mm256_set1_ps(-127.0), x);
    let x = _mm256_min_ps(_mm256_set1_ps(128.0), x);
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
    let f = _mm256_sub_ps(x, n);
    let mut p = _mm256_set1_ps(1.535_336_2e-4);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339_887_4e-3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618_437e-3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550_332_5e-2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402_264_8e-1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931_472e-1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0));
    // n = -127 gives a zero exponent field (0.0), n = 128 gives infinity.
    let e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e)))
}

fn softmax(
    st: &mut [f32],
    (bk, m_pad, m): (usize, usize, usize),
    mx: &mut [f32],
    l: &mut [f32],
    alpha: &mut [f32],
    ranges: &[(u32, u32)],
) {
    assert!(m_pad.is_multiple_of(8) && st.len() >= bk * m_pad);
    assert!(mx.len() >= m_pad && l.len() >= m_pad && alpha.len() >= m_pad);
    assert!(ranges.is_empty() || ranges.len() >= m_pad);
    // SAFETY: the ISA is only handed out after AVX2/FMA detection; lengths checked above.
    unsafe {
        if ranges.is_empty() && m <= 4 && m_pad == 8 {
            softmax4(st, bk, mx, l, alpha)
        } else {
            softmax_avx2(st, bk, m_pad, mx, l, alpha, ranges)
        }
    }
}

/// 2^x on 4 lanes (`exp2v` in 128-bit operations: half the micro-ops on this core).
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn exp2v4(x: __m128) -> __m128 {
    let x = _mm_max_ps(_mm_set1_ps(-127.0), x);
    let x = _mm_min_ps(_mm_set1_ps(128.0), x);
    let n = _mm_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
    let f = _mm_sub_ps(x, n);
    let mut p = _mm_set1_ps(1.535_336_2e-4);
    p = _mm_fmadd_ps(p, f, _mm_set1_ps(1.339_887_4e-3));
    p = _mm_fmadd_ps(p, f, _mm_set1_ps(9.618_437e-3));
    p = _mm_fmadd_ps(p, f, _mm_set1_ps(5.550_332_5e-2));
    p = _mm_fmadd_ps(p, f, _mm_set1_ps(2.402_264_8e-1));
    p = _mm_fmadd_ps(p, f, _mm_set1_ps(6.931_472e-1));
    p = _mm_fmadd_ps(p, f, _mm_set1_ps(1.0));
    let e = _mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127));
    _mm_mul_ps(p, _mm_castsi128_ps(_mm_slli_epi32::<23>(e)))
}

/// `softmax_avx2` for up to 4 rows (decode): the first 4 columns of `st` (row stride 8).
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax4(st: &mut [f32], bk: usize, mx: &mut [f32], l: &mut [f32], alpha: &mut [f32]) {
    let s = st.as_mut_ptr();
    let ninf = _mm_set1_ps(f32::NEG_INFINITY);
    let mut tmax = ninf;
    for k in 0..bk {
        tmax = _mm_max_ps(tmax, _mm_loadu_ps(s.add(k * 8)));
    }
    let m_old = _mm_loadu_ps(mx.as_ptr());
    let m_new = _mm_max_ps(m_old, tmax);
    // Rows with nothing visible keep max -inf: subtract 0 so 2^(-inf) = 0, not NaN.
    let base = _mm_andnot_ps(_mm_cmp_ps::<_CMP_EQ_OQ>(m_new, ninf), m_new);
    let a = exp2v4(_mm_sub_ps(m_old, base));
    let (mut s0, mut s1) = (_mm_setzero_ps(), _mm_setzero_ps());
    let mut k = 0;
    while k + 2 <= bk {
        let p0 = exp2v4(_mm_sub_ps(_mm_loadu_ps(s.add(k * 8)), base));
        let p1 = exp2v4(_mm_sub_ps(_mm_loadu_ps(s.add(k * 8 + 8)), base));
        _mm_storeu_ps(s.add(k * 8), p0);
        _mm_storeu_ps(s.add(k * 8 + 8), p1);
        s0 = _mm_add_ps(s0, p0);
        s1 = _mm_add_ps(s1, p1);
        k += 2;
    }
    if k < bk {
        let p0 = exp2v4(_mm_sub_ps(_mm_loadu_ps(s.add(k * 8)), base));
        _mm_storeu_ps(s.add(k * 8), p0);
        s0 = _mm_add_ps(s0, p0);
    }
    let lp = l.as_mut_ptr();
    _mm_storeu_ps(lp, _mm_fmadd_ps(_mm_loadu_ps(lp), a, _mm_add_ps(s0, s1)));
    _mm_storeu_ps(mx.as_mut_ptr(), m_new);
    _mm_storeu_ps(alpha.as_mut_ptr(), a);
}

#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_avx2(
    st: &mut [f32],
    bk: usize,
    m_pad: usize,
    mx: &mut [f32],
    l: &mut [f32],
    alpha: &mut [f32],
    ranges: &[(u32, u32)],
) {
    let s = st.as_mut_ptr();
    let ninf = _mm256_set1_ps(f32::NEG_INFINITY);
    for c in (0..m_pad).step_by(8) {
        // Keys outside these rows' ranges are masked: probability 0, nothing to evaluate.
        let (lo, hi) = super::key_span(ranges, c..c + 8, bk);
        let (lo, hi) = (lo.min(hi), hi);
        for k in (0..lo).chain(hi..bk) {
            _mm256_storeu_ps(s.add(k * m_pad + c), _mm256_setzero_ps());
        }
        let mut tmax = ninf;
        for k in lo..hi {
            tmax = _mm256_max_ps(tmax, _mm256_loadu_ps(s.add(k * m_pad + c)));
        }
        let m_old = _mm256_loadu_ps(mx.as_ptr().add(c));
        let m_new = _mm256_max_ps(m_old, tmax);
        // Rows with nothing visible keep max -inf: subtract 0 so 2^(-inf) = 0, not NaN.
        let base = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(m_new, ninf), m_new);
        let a = exp2v(_mm256_sub_ps(m_old, base));
        let (mut s0, mut s1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut k = lo;
        while k + 2 <= hi {
            let p0 = exp2v(_mm256_sub_ps(_mm256_loadu_ps(s.add(k * m_pad + c)), base));
            let p1 = exp2v(_mm256_sub_ps(
                _mm256_loadu_ps(s.add((k + 1) * m_pad + c)),
                base,
            ));
            _mm256_storeu_ps(s.add(k * m_pad + c), p0);
            _mm256_storeu_ps(s.add((k + 1) * m_pad + c), p1);
            s0 = _mm256_add_ps(s0, p0);
            s1 = _mm256_add_ps(s1, p1);
            k += 2;
        }
        if k < hi {
            let p0 = exp2v(_mm256_sub_ps(_mm256_loadu_ps(s.add(k * m_pad + c)), base));
            _mm256_storeu_ps(s.add(k * m_pad + c), p0);
            s0 = _mm256_add_ps(s0, p0);
        }
        let lp = l.as_mut_ptr().add(c);
        _mm256_storeu_ps(
            lp,
            _mm256_fmadd_ps(_mm256_loadu_ps(lp), a, _mm256_add_ps(s0, s1)),
        );
        _mm256_storeu_ps(mx.as_mut_ptr().add(c), m_new);
        _mm256_storeu_ps(alpha.as_mut_ptr().add(c), a);
    }
}

fn convert(row: KvRow<'_>, dst: &mut [f32]) {
    assert!(dst.len() >= row.len());
    // SAFETY: detected features; `dst` holds the row.
    unsafe { convert_avx2(row, dst) }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn convert_avx2(row: KvRow<'_>, dst: &mut [f32]) {
    let n = row.len();
    let d = dst.as_mut_ptr();
    let mut i = 0;
    match row {
        KvRow::F16(s) => {
            while i + 8 <= n {
                let h = _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i);
                _mm256_storeu_ps(d.add(i), _mm256_cvtph_ps(h));
                i += 8;
            }
            for j in i..n {
                dst[j] = s[j].to_f32();
            }
        }
        KvRow::BF16(s) => {
            // bf16 is the top half of an f32: widen and shift.
            while i + 8 <= n {
                let h = _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i);
                let w = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h));
                _mm256_storeu_ps(d.add(i), _mm256_castsi256_ps(w));
                i += 8;
            }
            for j in i..n {
                dst[j] = s[j].to_f32();
            }
        }
        other => crate::kv_cache::widen::widen_row(other, &mut dst[..n]),
    }
}

fn exp2(x: &mut [f32]) {
    // SAFETY: detected features.
    unsafe { exp2_avx2(x) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn exp2_avx2(x: &mut [f32]) {
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        _mm256_storeu_ps(c.as_mut_ptr(), exp2v(_mm256_loadu_ps(c.as_ptr())));
    }
    for v in chunks.into_remainder() {
        *v = v.exp2();
    }
}

fn softcap(x: &mut [f32], cap: f32) {
    // SAFETY: detected features.
    unsafe { softcap_avx2(x, cap) }
}

/// `cap * tanh(x / cap)`. tanh(a) = (1 - e) / (1 + e) with e = 2^(-2a log2 e) for |a| >= 0.25
/// (no overflow, e in (0, 1]); an odd Taylor polynomial below, where that form cancels.
#[target_feature(enable = "avx2,fma")]
unsafe fn softcap_avx2(x: &mut [f32], cap: f32) {
    let (vcap, inv) = (_mm256_set1_ps(cap), _mm256_set1_ps(1.0 / cap));
    let sign = _mm256_set1_ps(-0.0);
    let one = _mm256_set1_ps(1.0);
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        let y = _mm256_mul_ps(_mm256_loadu_ps(c.as_ptr()), inv);
        let a = _mm256_andnot_ps(sign, y);
        let e = exp2v(_mm256_mul_ps(
            a,
            _mm256_set1_ps(-2.0 * std::f32::consts::LOG2_E),
        ));
        let big = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
        let a2 = _mm256_mul_ps(a, a);
        let mut p = _mm256_set1_ps(62.0 / 2835.0);
        p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(-17.0 / 315.0));
        p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(2.0 / 15.0));
        p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(-1.0 / 3.0));
        p = _mm256_fmadd_ps(p, a2, one);
        let small = _mm256_mul_ps(p, a);
        let t = _mm256_blendv_ps(
            big,
            small,
            _mm256_cmp_ps::<_CMP_LT_OQ>(a, _mm256_set1_ps(0.25)),
        );
        let t = _mm256_or_ps(t, _mm256_and_ps(sign, y));
        _mm256_storeu_ps(c.as_mut_ptr(), _mm256_mul_ps(t, vcap));
    }
    for v in chunks.into_remainder() {
        *v = cap * (*v / cap).tanh();
    }
}
