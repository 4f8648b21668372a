//! The tile primitives the attention kernel is built from, in an AVX2/FMA and a portable
//! version, chosen once at run time. Every primitive works on whole tiles, so the indirect call
//! is paid once per tile.
//!
//! Layouts (all f32, `m_pad` a multiple of 8):
//! - `qt`: the stacked queries, transposed in panels of 16 columns (the last may be 8):
//!   panel `p` holds `qt[p * 16 * dk + d * w + j]` = query row `16p + j`, element `d`.
//! - `st`: scores transposed, `st[k * m_pad + q]`: one key per row, so the online softmax runs
//!   down columns with full-width vectors.
//! - `o`: the output accumulator, `o[q * dv_pad + d]`.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod scalar;

use crate::attention::kv::KvRow;

/// `st[k][q] = sum_d K_k[d] * qt(q, d)` for every key `k` of `krows` and every `q < m_pad`.
/// Each `krows[k]` points at `dk` readable f32. With `ranges` (one `[lo, hi)` per row, else
/// empty), a block of keys outside every range of its rows may be left unwritten: the caller
/// masks those scores.
pub(crate) type QkFn = unsafe fn(
    qt: &[f32],
    dk: usize,
    m_pad: usize,
    krows: &[*const f32],
    st: &mut [f32],
    ranges: &[(u32, u32)],
);

/// The same scores for a few rows (`m <= 8`) from row-major queries `qr[q * dk + d]`: dot
/// products along `d`, so no vector lane is spent on padding rows (decode).
pub(crate) type QkRowsFn =
    unsafe fn(qr: &[f32], m: usize, dk: usize, m_pad: usize, krows: &[*const f32], st: &mut [f32]);

/// `o[q] = o[q] * alpha[q] + sum_k st[k][q] * V_k` for `q < m` (`alpha` empty: factor 1), the
/// `nk` value rows packed in panels of 16 columns (the last may be 8) as `qt` packs queries:
/// panel `c` holds `vt[c * 16 * nk + k * w + j]` = element `16c + j` of `V_k` (`dv_pad`, a
/// multiple of 8, columns). Each panel is then read in address order. With `ranges` (as for
/// `QkFn`), a row may skip keys outside its range (their probabilities are zero).
pub(crate) type PvFn = unsafe fn(
    pt: &[f32],
    m_pad: usize,
    m: usize,
    vt: &[f32],
    nk: usize,
    dv_pad: usize,
    o: &mut [f32],
    alpha: &[f32],
    ranges: &[(u32, u32)],
);

/// Where element `d` of value row `k` of `nk` sits in the panels `PvFn` reads.
#[inline]
pub(crate) fn vt_index(k: usize, d: usize, nk: usize, dv_pad: usize) -> usize {
    let c0 = d / 16 * 16;
    c0 * nk + k * (dv_pad - c0).min(16) + (d - c0)
}

/// The union `[lo, hi)` of the non-empty ranges of some rows, clamped to `n` keys; all of them
/// when `ranges` is empty, `lo >= hi` when every range is empty.
#[inline]
pub(crate) fn key_span(
    ranges: &[(u32, u32)],
    rows: std::ops::Range<usize>,
    n: usize,
) -> (usize, usize) {
    if ranges.is_empty() {
        return (0, n);
    }
    let (mut lo, mut hi) = (n, 0);
    for &(a, b) in &ranges[rows] {
        if a < b {
            lo = lo.min(a as usize);
            hi = hi.max(b as usize);
        }
    }
    (lo, hi.min(n))
}

/// How the streaming decode kernels read stored KV rows, widening in registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowFmt {
    F32,
    F16,
    BF16,
    /// fp8 e4m3fn codes read as the f16 they re-bias into: value / 2^8 (NaN codes excluded).
    E4M3,
    /// fp8 e4m3fn codes read as f32 bits (exponent field `0000eeee`): value / 2^120, NaN codes
    /// excluded. No f16 conversion, but the factor only fits keys of a moderate Q.
    E4M3F32,
    /// fp8 e5m2 codes (the top byte of an f16).
    E5M2,
    /// fp8 e5m2 codes read as f32 bits (exponent field `000eeeee`): value / 2^112, inf and NaN
    /// codes excluded. As `E4M3F32`: no f16 conversion, where the factor fits.
    E5M2F32,
    I8,
}

impl RowFmt {
    /// The format of a stored row and the factor that turns what the kernels read into its
    /// values (the row's scale, times 2^8 for e4m3).
    pub(crate) fn of(row: &KvRow<'_>) -> (RowFmt, f32) {
        match *row {
            KvRow::F32(_) => (RowFmt::F32, 1.0),
            KvRow::F16(_) => (RowFmt::F16, 1.0),
            KvRow::BF16(_) => (RowFmt::BF16, 1.0),
            KvRow::Fp8E4M3(_, s) => (RowFmt::E4M3, s * 256.0),
            KvRow::Fp8E5M2(_, s) => (RowFmt::E5M2, s),
            KvRow::I8(_, s) => (RowFmt::I8, s),
        }
    }

    /// Widens `n` elements at `p` as the kernels read them (unscaled).
    ///
    /// # Safety
    /// `p` addresses `n` readable elements of this format.
    pub(crate) unsafe fn widen(self, p: *const u8, n: usize, dst: &mut [f32]) {
        use std::slice::from_raw_parts as raw;
        let row = match self {
            RowFmt::F32 => KvRow::F32(raw(p.cast(), n)),
            RowFmt::F16 => KvRow::F16(raw(p.cast(), n)),
            RowFmt::BF16 => KvRow::BF16(raw(p.cast(), n)),
            RowFmt::E4M3 => KvRow::Fp8E4M3(raw(p, n), 1.0 / 256.0),
            RowFmt::E4M3F32 => KvRow::Fp8E4M3(raw(p, n), E4M3F32_UNIT),
            RowFmt::E5M2 => KvRow::Fp8E5M2(raw(p, n), 1.0),
            RowFmt::E5M2F32 => KvRow::Fp8E5M2(raw(p, n), E5M2F32_UNIT),
            RowFmt::I8 => KvRow::I8(raw(p.cast(), n), 1.0),
        };
        row.to_f32(&mut dst[..n]);
    }
}

/// What one e4m3 unit reads as in `RowFmt::E4M3F32` (2^-120).
pub(crate) const E4M3F32_UNIT: f32 = 1.0 / (1u128 << 120) as f32;
/// What one e5m2 unit reads as in `RowFmt::E5M2F32` (2^-112).
pub(crate) const E5M2F32_UNIT: f32 = 1.0 / (1u128 << 112) as f32;

/// `qk_rows` over stored rows of format `fmt` (`dk` a multiple of 8), unscaled.
pub(crate) type QkRowsRawFn = unsafe fn(
    qr: &[f32],
    m: usize,
    dk: usize,
    m_pad: usize,
    krows: &[*const u8],
    fmt: RowFmt,
    st: &mut [f32],
);

/// `pv` over stored rows of format `fmt` (`dv_pad` elements each), unscaled.
pub(crate) type PvRawFn = unsafe fn(
    pt: &[f32],
    m_pad: usize,
    m: usize,
    vrows: &[*const u8],
    fmt: RowFmt,
    dv_pad: usize,
    o: &mut [f32],
    alpha: &[f32],
);

/// Online-softmax update of the `bk` key rows of `st` (base-2 scores): updates the running max
/// `mx` and sum `l`, writes the rescale factor `alpha`, and replaces scores by probabilities.
/// `dims` = (bk, m_pad, m): only columns `..m` must be updated (padding ones may stay stale).
/// With `ranges` (as for `QkFn`), scores outside a group of rows' ranges are masked: their
/// probabilities are written as 0 without evaluating them.
pub(crate) type SoftmaxFn = fn(
    st: &mut [f32],
    dims: (usize, usize, usize),
    mx: &mut [f32],
    l: &mut [f32],
    alpha: &mut [f32],
    ranges: &[(u32, u32)],
);

/// One kv tile of the streaming decode for every fused head, without mask or score program:
/// `nh` heads of `m <= 4` stacked rows (`m_pad` 8). Head `hh`'s row pointers and scores start
/// at key `hh * stride` of `krows` / `vrows` / `st`, its queries at `qs[hh * qn..]`, its state
/// at `hh * 8` of `mx` / `l` / `alpha` and its accumulator rows at `o[hh * m * dv_pad..]`.
pub(crate) struct DecodeTile<'a> {
    pub nh: usize,
    pub m: usize,
    pub dk: usize,
    pub dv_pad: usize,
    pub bk: usize,
    pub stride: usize,
    pub qs: &'a [f32],
    pub qn: usize,
    pub krows: &'a [*const u8],
    pub kfmt: RowFmt,
    pub vrows: &'a [*const u8],
    pub vfmt: RowFmt,
    /// Each head's V factor, multiplied into its probabilities after the softmax summed them.
    pub vscale: &'a [f32],
    pub st: &'a mut [f32],
    pub mx: &'a mut [f32],
    pub l: &'a mut [f32],
    pub alpha: &'a mut [f32],
    pub o: &'a mut [f32],
}

/// `qk_rows_raw`, `softmax`, the V factor and `pv_raw` over a `DecodeTile`, in one call (the
/// kernels inlined, no indirect call per step and head).
///
/// # Safety
/// Every row pointer addresses `dk` (K) or `dv_pad` (V) elements of its format.
pub(crate) type DecodeTileFn = unsafe fn(t: DecodeTile<'_>);

/// Widens a KV row into `dst` (`row.len()` elements).
pub(crate) type ConvertFn = fn(row: KvRow<'_>, dst: &mut [f32]);

/// In-place `x = 2^x` over a slice.
pub(crate) type Exp2Fn = fn(x: &mut [f32]);

/// One instruction set's primitives.
#[derive(Clone, Copy)]
pub(crate) struct Isa {
    pub name: &'static str,
    pub qk: QkFn,
    pub qk_rows: QkRowsFn,
    pub pv: PvFn,
    pub qk_rows_raw: QkRowsRawFn,
    pub pv_raw: PvRawFn,
    pub softmax: SoftmaxFn,
    /// A fused `DecodeTile` where the set has one (else the primitives run one by one).
    pub decode_tile: Option<DecodeTileFn>,
    pub convert: ConvertFn,
    pub exp2: Exp2Fn,
    /// `x = cap * tanh(x / cap)`.
    pub softcap: fn(x: &mut [f32], cap: f32),
}

impl Isa {
    /// The best set this CPU supports (AVX2 + FMA + F16C), unless `force_scalar`.
    pub(crate) fn detect(force_scalar: bool) -> Isa {
        #[cfg(target_arch = "x86_64")]
        if !force_scalar
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
        {
            return avx2::ISA;
        }
        let _ = force_scalar;
        scalar::ISA
    }
}

/// Asks the cache for every line of `row` and the `count - 1` rows that follow it in memory
/// (fused heads of a token-major cache): KV rows of one head sit in different pages, where the
/// hardware prefetcher does not follow them. Prefetching never faults, so a guess is harmless.
#[inline]
pub(crate) fn prefetch_rows(row: KvRow<'_>, count: usize) {
    let (ptr, bytes) = row.bytes();
    #[cfg(target_arch = "x86_64")]
    for off in (0..bytes * count).step_by(64) {
        // SAFETY: prefetching never faults; `wrapping_add` keeps the address computation defined.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                ptr.wrapping_add(off) as *const i8,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, bytes);
}

/// Rounds `n` up to a multiple of 8.
pub(crate) fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Offset of query row `q`, element `d` in the panel layout of `qt`.
#[cfg(test)]
#[inline]
pub(crate) fn qt_index(q: usize, d: usize, dk: usize, m_pad: usize) -> usize {
    let p0 = q / 16 * 16;
    let w = (m_pad - p0).min(16);
    p0 * dk + d * w + (q - p0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nk` value rows of `dv` (a multiple of 8) columns, packed as `PvFn` reads them.
    fn panels(v: &[f32], nk: usize, dv: usize) -> Vec<f32> {
        let mut vt = vec![0f32; nk * dv];
        for k in 0..nk {
            for d in 0..dv {
                vt[vt_index(k, d, nk, dv)] = v[k * dv + d];
            }
        }
        vt
    }

    /// Both instruction sets agree with a plain computation on odd sizes.
    #[test]
    fn primitives_match_naive() {
        let isas = [Isa::detect(false), Isa::detect(true)];
        let (dk, m, bk, dv) = (13, 21, 11, 24);
        let m_pad = pad8(m);
        let f = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let q: Vec<f32> = (0..m * dk).map(f).collect();
        let k: Vec<f32> = (0..bk * dk).map(|i| f(i + 3)).collect();
        let v: Vec<f32> = (0..bk * dv).map(|i| f(i + 5)).collect();
        let mut qt = vec![0f32; m_pad * dk];
        for r in 0..m {
            for d in 0..dk {
                qt[qt_index(r, d, dk, m_pad)] = q[r * dk + d];
            }
        }
        let krows: Vec<*const f32> = (0..bk).map(|j| k[j * dk..].as_ptr()).collect();
        for isa in isas {
            let mut st = vec![0f32; bk * m_pad];
            unsafe { (isa.qk)(&qt, dk, m_pad, &krows, &mut st, &[]) };
            for j in 0..bk {
                for r in 0..m {
                    let want: f32 = (0..dk).map(|d| q[r * dk + d] * k[j * dk + d]).sum();
                    assert!((st[j * m_pad + r] - want).abs() < 1e-4, "{}", isa.name);
                }
            }
            for rows in 1..=8 {
                let mut st2 = vec![0f32; bk * 8];
                unsafe { (isa.qk_rows)(&q, rows, dk, 8, &krows, &mut st2) };
                for j in 0..bk {
                    for r in 0..rows {
                        let d = st2[j * 8 + r] - st[j * m_pad + r];
                        assert!(d.abs() < 1e-4, "{} rows {rows}", isa.name);
                    }
                }
            }
            let alpha: Vec<f32> = (0..m_pad).map(|i| 0.5 + i as f32 * 0.01).collect();
            let mut o: Vec<f32> = (0..m * dv).map(|i| f(i + 9)).collect();
            let o0 = o.clone();
            unsafe {
                (isa.pv)(
                    &st,
                    m_pad,
                    m,
                    &panels(&v, bk, dv),
                    bk,
                    dv,
                    &mut o,
                    &alpha,
                    &[],
                )
            };
            for r in 0..m {
                for d in 0..dv {
                    let want = o0[r * dv + d] * alpha[r]
                        + (0..bk)
                            .map(|j| st[j * m_pad + r] * v[j * dv + d])
                            .sum::<f32>();
                    assert!((o[r * dv + d] - want).abs() < 1e-4, "{}", isa.name);
                }
            }
            let mut x: Vec<f32> = (0..37).map(|i| i as f32 * 0.7 - 13.0).collect();
            x.push(f32::NEG_INFINITY);
            x.push(-200.0);
            let want: Vec<f64> = x.iter().map(|&t| (t as f64).exp2()).collect();
            (isa.exp2)(&mut x);
            for (a, b) in x.iter().zip(&want) {
                assert!(
                    ((*a as f64) - b).abs() <= 4e-7 * b + 1e-37,
                    "{} {a} {b}",
                    isa.name
                );
            }
        }
    }

    /// With per-row key ranges, scores inside every range are exact, and P·V over probabilities
    /// that are zero outside the ranges equals the full product.
    #[test]
    fn ranged_kernels_match_full() {
        let (dk, m, bk, dv) = (24, 37, 29, 16);
        let m_pad = pad8(m);
        let f = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let qt: Vec<f32> = (0..m_pad * dk).map(f).collect();
        let k: Vec<f32> = (0..bk * dk).map(|i| f(i + 3)).collect();
        let v: Vec<f32> = (0..bk * dv).map(|i| f(i + 5)).collect();
        let krows: Vec<*const f32> = (0..bk).map(|j| k[j * dk..].as_ptr()).collect();
        // A band, some empty rows, a full row; padding rows empty.
        let ranges: Vec<(u32, u32)> = (0..m_pad)
            .map(|r| match r {
                _ if r >= m || r % 9 == 4 => (0, 0),
                7 => (0, bk as u32),
                _ => ((r / 2) as u32, ((r / 2 + 6).min(bk)) as u32),
            })
            .collect();
        let alpha: Vec<f32> = (0..m_pad).map(|i| 0.5 + i as f32 * 0.01).collect();
        for isa in [Isa::detect(false), Isa::detect(true)] {
            let mut full = vec![0f32; bk * m_pad];
            unsafe { (isa.qk)(&qt, dk, m_pad, &krows, &mut full, &[]) };
            let full = full;
            let mut st = vec![f32::NAN; bk * m_pad];
            unsafe { (isa.qk)(&qt, dk, m_pad, &krows, &mut st, &ranges) };
            let mut pt = vec![0f32; bk * m_pad];
            for r in 0..m {
                for j in ranges[r].0 as usize..ranges[r].1 as usize {
                    assert_eq!(st[j * m_pad + r], full[j * m_pad + r], "{}", isa.name);
                    pt[j * m_pad + r] = f(j * 31 + r).abs();
                }
            }
            // Softmax: masked scores are -inf; those outside the span of an 8-row group's ranges
            // are never read (NaN here).
            let inside = |j: usize, r: usize| (ranges[r].0..ranges[r].1).contains(&(j as u32));
            let (mut s1, mut s2) = (full.clone(), full.clone());
            for j in 0..bk {
                for r in 0..m_pad {
                    if !inside(j, r) {
                        let (lo, hi) = key_span(&ranges, r / 8 * 8..r / 8 * 8 + 8, bk);
                        let unread = !(lo..hi).contains(&j);
                        s1[j * m_pad + r] = if unread { f32::NAN } else { f32::NEG_INFINITY };
                        s2[j * m_pad + r] = f32::NEG_INFINITY;
                    }
                }
            }
            let mx0: Vec<f32> = (0..m_pad)
                .map(|r| if r % 3 == 0 { f32::NEG_INFINITY } else { 0.3 })
                .collect();
            let mut st1 = (mx0.clone(), vec![1f32; m_pad], vec![0f32; m_pad]);
            let mut st2 = st1.clone();
            (isa.softmax)(
                &mut s1,
                (bk, m_pad, m),
                &mut st1.0,
                &mut st1.1,
                &mut st1.2,
                &ranges,
            );
            (isa.softmax)(
                &mut s2,
                (bk, m_pad, m),
                &mut st2.0,
                &mut st2.1,
                &mut st2.2,
                &[],
            );
            for r in 0..m {
                for (x, y) in [
                    (st1.0[r], st2.0[r]),
                    (st1.1[r], st2.1[r]),
                    (st1.2[r], st2.2[r]),
                ]
                .into_iter()
                .chain((0..bk).map(|j| (s1[j * m_pad + r], s2[j * m_pad + r])))
                {
                    assert!(
                        x == y || (x - y).abs() <= 1e-6 * y.abs(),
                        "{} {x} {y}",
                        isa.name
                    );
                }
            }
            let o0: Vec<f32> = (0..m * dv).map(|i| f(i + 9)).collect();
            let (mut a, mut b) = (o0.clone(), o0);
            let vt = panels(&v, bk, dv);
            unsafe { (isa.pv)(&pt, m_pad, m, &vt, bk, dv, &mut a, &alpha, &ranges) };
            unsafe { (isa.pv)(&pt, m_pad, m, &vt, bk, dv, &mut b, &alpha, &[]) };
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{}", isa.name);
            }
        }
    }

    /// The 4-row softmax (decode) updates the first `m` columns as the portable one does, rows
    /// with nothing visible included.
    #[test]
    fn softmax_of_few_rows_matches_portable() {
        let isas = [Isa::detect(false), Isa::detect(true)];
        let f = |i: usize| ((i * 7919 % 1000) as f32 / 50.0) - 10.0;
        for (m, bk) in [(1, 1), (3, 5), (4, 32), (4, 7), (6, 9)] {
            let mut st0: Vec<f32> = (0..bk * 8).map(f).collect();
            // Column 0 sees nothing in this tile; column 1 sees nothing at all.
            for k in 0..bk {
                st0[k * 8] = f32::NEG_INFINITY;
                st0[k * 8 + 1.min(m - 1)] = f32::NEG_INFINITY;
            }
            let mx0: Vec<f32> = (0..8)
                .map(|c| if c == 1 { f32::NEG_INFINITY } else { c as f32 })
                .collect();
            let mut got = Vec::new();
            for isa in isas {
                let (mut st, mut mx, mut l) = (st0.clone(), mx0.clone(), vec![0.5f32; 8]);
                let mut alpha = vec![0f32; 8];
                (isa.softmax)(&mut st, (bk, 8, m), &mut mx, &mut l, &mut alpha, &[]);
                got.push((st, mx, l, alpha));
            }
            let ((s1, m1, l1, a1), (s2, m2, l2, a2)) = (&got[0], &got[1]);
            for c in 0..m {
                let close = |x: f32, y: f32| x == y || (x - y).abs() <= 1e-6 * y.abs().max(1e-30);
                assert!(close(m1[c], m2[c]) && close(l1[c], l2[c]), "m {m} col {c}");
                assert!(close(a1[c], a2[c]), "m {m} col {c} alpha");
                for k in 0..bk {
                    assert!(close(s1[k * 8 + c], s2[k * 8 + c]), "m {m} col {c} key {k}");
                }
            }
        }
    }

    /// The format-reading kernels equal the f32 kernels on the widened rows, for every format.
    #[test]
    fn raw_formats_match_widened() {
        use half::{bf16, f16};
        // dv 40: 16-column blocks and an 8-column one.
        let (dk, bk, dv, m_pad) = (24, 7, 40, 8);
        let f = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let q: Vec<f32> = (0..m_pad * dk).map(f).collect();
        let pt: Vec<f32> = (0..bk * m_pad).map(|i| f(i + 11).abs()).collect();
        let alpha: Vec<f32> = (0..m_pad).map(|i| 0.5 + i as f32 * 0.01).collect();
        let n = bk * dk.max(dv);
        let vals: Vec<f32> = (0..n).map(|i| f(i + 3) * 4.0).collect();
        // Stored bytes of every format (e4m3 codes avoid the NaN ones).
        let stores: Vec<(RowFmt, Vec<u8>)> = vec![
            (
                RowFmt::F32,
                vals.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            (
                RowFmt::F16,
                vals.iter()
                    .flat_map(|&x| f16::from_f32(x).to_le_bytes())
                    .collect(),
            ),
            (
                RowFmt::BF16,
                vals.iter()
                    .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
                    .collect(),
            ),
            (
                RowFmt::E4M3,
                (0..n).map(|i| (i * 37 % 256) as u8 & !0x01).collect(),
            ),
            (
                RowFmt::E4M3F32,
                (0..n).map(|i| (i * 41 % 256) as u8 & !0x01).collect(),
            ),
            (
                RowFmt::E5M2,
                (0..n).map(|i| (i * 37 % 256) as u8 & !0x40).collect(),
            ),
            (
                RowFmt::E5M2F32,
                (0..n).map(|i| (i * 43 % 256) as u8 & !0x40).collect(),
            ),
            (RowFmt::I8, (0..n).map(|i| (i * 37 % 256) as u8).collect()),
        ];
        // Row counts 3, 4 and 8: the scalar and the 4-row score reductions.
        for (isa, m) in [Isa::detect(false), Isa::detect(true)]
            .into_iter()
            .flat_map(|isa| [3, 4, 8].map(|m| (isa, m)))
        {
            for (fmt, bytes) in &stores {
                let size = bytes.len() / n;
                // Q and P carry the factor the reads leave out (as decode folds it in).
                let unit = match fmt {
                    RowFmt::E4M3F32 => 1.0 / E4M3F32_UNIT,
                    RowFmt::E5M2F32 => 1.0 / E5M2F32_UNIT,
                    _ => 1.0,
                };
                let q: Vec<f32> = q.iter().map(|x| x * unit).collect();
                let pt: Vec<f32> = pt.iter().map(|x| x * unit).collect();
                for (dim, is_k) in [(dk, true), (dv, false)] {
                    let raw: Vec<*const u8> =
                        (0..bk).map(|j| bytes[j * dim * size..].as_ptr()).collect();
                    let mut wide = vec![0f32; bk * dim];
                    for (j, dst) in wide.chunks_mut(dim).enumerate() {
                        unsafe { fmt.widen(raw[j], dim, dst) };
                    }
                    let rows: Vec<*const f32> = wide.chunks(dim).map(|r| r.as_ptr()).collect();
                    let (mut a, mut b) = (vec![0.5f32; m * dim], vec![0.5f32; m * dim]);
                    let (mut sa, mut sb) = (vec![0f32; bk * m_pad], vec![0f32; bk * m_pad]);
                    unsafe {
                        if is_k {
                            (isa.qk_rows_raw)(&q, m, dk, m_pad, &raw, *fmt, &mut sa);
                            (isa.qk_rows)(&q, m, dk, m_pad, &rows, &mut sb);
                        } else {
                            (isa.pv_raw)(&pt, m_pad, m, &raw, *fmt, dv, &mut a, &alpha);
                            (isa.pv)(
                                &pt,
                                m_pad,
                                m,
                                &panels(&wide, bk, dv),
                                bk,
                                dv,
                                &mut b,
                                &alpha,
                                &[],
                            );
                        }
                    }
                    for (x, y) in a.iter().chain(&sa).zip(b.iter().chain(&sb)) {
                        assert!(x.is_finite(), "{} {fmt:?}", isa.name);
                        assert!(
                            (x - y).abs() <= 1e-4 * y.abs().max(1.0),
                            "{} {fmt:?}",
                            isa.name
                        );
                    }
                }
            }
        }
    }

    /// The fused decode tile equals the portable primitives run one by one (scores, softmax,
    /// V factor, P·V), for every row count and a few formats, tile lengths and a K row tail.
    #[test]
    fn decode_tile_matches_primitives() {
        use half::bf16;
        let (fast, portable) = (Isa::detect(false), Isa::detect(true));
        let Some(fused) = fast.decode_tile else {
            return;
        };
        let (nh, stride, dv) = (3, 35, 40);
        let f = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        // Room for the last row at its offset.
        let n = nh * stride * 40 + 8;
        let vals: Vec<f32> = (0..n).map(|i| f(i + 3) * 2.0).collect();
        let f32s: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        let bf16s: Vec<u8> = vals
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect();
        let e5m2: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8 & !0x40).collect();
        let cases = [
            (RowFmt::F32, &f32s, 13, RowFmt::F32, &f32s),
            (RowFmt::BF16, &bf16s, 24, RowFmt::E5M2, &e5m2),
            (RowFmt::E5M2, &e5m2, 16, RowFmt::BF16, &bf16s),
            (RowFmt::E5M2F32, &e5m2, 16, RowFmt::E5M2F32, &e5m2),
        ];
        for ((kfmt, kb, dk, vfmt, vb), m, bk) in cases
            .iter()
            .flat_map(|c| (1..=4).flat_map(move |m| [32, 7, 1].map(|bk| (c, m, bk))))
        {
            let (dk, dv_pad, qn) = (*dk, dv, 8 * dk);
            let (ks, vs) = (kb.len() / n, vb.len() / n);
            // Head hh's row j at an odd offset of the store.
            let rows = |b: &[u8], size: usize, dim: usize| -> Vec<*const u8> {
                (0..nh * stride)
                    .map(|i| b[(i * dim + i % 5) * size..].as_ptr())
                    .collect()
            };
            let (krows, vrows) = (rows(kb, ks, dk), rows(vb, vs, dv));
            let qs: Vec<f32> = (0..nh * qn).map(|i| f(i + 7) * 0.5).collect();
            let vscale = [1.0, 0.5, 2.0];
            let mx0: Vec<f32> = (0..nh * 8)
                .map(|i| if i % 3 == 0 { f32::NEG_INFINITY } else { f(i) })
                .collect();
            let l0: Vec<f32> = (0..nh * 8).map(|i| f(i + 1).abs()).collect();
            let o0: Vec<f32> = (0..nh * m * dv_pad).map(|i| f(i + 9)).collect();
            // Fused, with the scores and the rescale factors poisoned.
            let mut st = vec![f32::NAN; nh * stride * 8];
            let (mut mx, mut l, mut alpha, mut o) =
                (mx0.clone(), l0.clone(), vec![f32::NAN; nh * 8], o0.clone());
            unsafe {
                fused(DecodeTile {
                    nh,
                    m,
                    dk,
                    dv_pad,
                    bk,
                    stride,
                    qs: &qs,
                    qn,
                    krows: &krows,
                    kfmt: *kfmt,
                    vrows: &vrows,
                    vfmt: *vfmt,
                    vscale: &vscale,
                    st: &mut st,
                    mx: &mut mx,
                    l: &mut l,
                    alpha: &mut alpha,
                    o: &mut o,
                })
            };
            let (mut rmx, mut rl, mut ralpha, mut ro) =
                (mx0.clone(), l0.clone(), vec![0f32; nh * 8], o0.clone());
            let mut rst = vec![0f32; nh * stride * 8];
            for hh in 0..nh {
                let s = &mut rst[hh * stride * 8..][..bk * 8];
                let (kr, vr) = (&krows[hh * stride..][..bk], &vrows[hh * stride..][..bk]);
                let state = hh * 8..hh * 8 + 8;
                unsafe {
                    (portable.qk_rows_raw)(&qs[hh * qn..][..qn], m, dk, 8, kr, *kfmt, s);
                    (portable.softmax)(
                        s,
                        (bk, 8, m),
                        &mut rmx[state.clone()],
                        &mut rl[state.clone()],
                        &mut ralpha[state.clone()],
                        &[],
                    );
                    for x in s.iter_mut() {
                        *x *= vscale[hh];
                    }
                    let oh = &mut ro[hh * m * dv_pad..][..m * dv_pad];
                    (portable.pv_raw)(s, 8, m, vr, *vfmt, dv_pad, oh, &ralpha[state]);
                }
            }
            let what = format!("{kfmt:?}/{vfmt:?} m {m} bk {bk}");
            let close = |x: f32, y: f32| x == y || (x - y).abs() <= 1e-4 * y.abs().max(1.0);
            for hh in 0..nh {
                for r in 0..m {
                    let i = hh * 8 + r;
                    assert!(close(mx[i], rmx[i]) && close(l[i], rl[i]), "{what}");
                    assert!(close(alpha[i], ralpha[i]), "{what} alpha");
                    for k in 0..bk {
                        let i = (hh * stride + k) * 8 + r;
                        assert!(close(st[i], rst[i]), "{what} p {k}");
                    }
                }
            }
            for (x, y) in o.iter().zip(&ro) {
                assert!(x.is_finite() && close(*x, *y), "{what} o {x} {y}");
            }
        }
    }
}
