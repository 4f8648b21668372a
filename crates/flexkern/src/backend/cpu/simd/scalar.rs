//! Portable primitives: plain loops the compiler may vectorize for the baseline target.

use super::{Isa, RowFmt};
use crate::attention::kv::KvRow;

pub(super) const ISA: Isa = Isa {
    name: "scalar",
    qk,
    qk_rows,
    pv,
    qk_rows_raw,
    pv_raw,
    softmax,
    decode_tile: None,
    convert,
    exp2,
    softcap,
};

unsafe fn qk(
    qt: &[f32],
    dk: usize,
    m_pad: usize,
    krows: &[*const f32],
    st: &mut [f32],
    ranges: &[(u32, u32)],
) {
    let nk = krows.len();
    for (k, &kp) in krows.iter().enumerate() {
        // SAFETY: the caller guarantees `dk` readable elements per row.
        let krow = unsafe { std::slice::from_raw_parts(kp, dk) };
        let out = &mut st[k * m_pad..][..m_pad];
        let mut p0 = 0;
        while p0 < m_pad {
            let w = (m_pad - p0).min(16);
            let (lo, hi) = super::key_span(ranges, p0..p0 + w, nk);
            if !(lo..hi).contains(&k) {
                p0 += w;
                continue;
            }
            let panel = &qt[p0 * dk..][..w * dk];
            let acc = &mut out[p0..p0 + w];
            acc.fill(0.0);
            for (d, &kd) in krow.iter().enumerate() {
                for (a, &q) in acc.iter_mut().zip(&panel[d * w..][..w]) {
                    *a += kd * q;
                }
            }
            p0 += w;
        }
    }
}

unsafe fn qk_rows(
    qr: &[f32],
    m: usize,
    dk: usize,
    m_pad: usize,
    krows: &[*const f32],
    st: &mut [f32],
) {
    for (k, &kp) in krows.iter().enumerate() {
        // SAFETY: the caller guarantees `dk` readable elements per row.
        let krow = unsafe { std::slice::from_raw_parts(kp, dk) };
        for r in 0..m {
            st[k * m_pad + r] = krow
                .iter()
                .zip(&qr[r * dk..][..dk])
                .map(|(a, b)| a * b)
                .sum();
        }
    }
}

/// Widens every row into one buffer and returns pointers to the copies.
unsafe fn widen_all(
    rows: &[*const u8],
    fmt: RowFmt,
    n: usize,
    buf: &mut Vec<f32>,
) -> Vec<*const f32> {
    buf.resize(rows.len() * n, 0.0);
    for (&p, dst) in rows.iter().zip(buf.chunks_mut(n)) {
        // SAFETY: the caller guarantees `n` readable elements per row.
        unsafe { fmt.widen(p, n, dst) };
    }
    buf.chunks(n).map(|r| r.as_ptr()).collect()
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
    let mut buf = Vec::new();
    let rows = unsafe { widen_all(krows, fmt, dk, &mut buf) };
    unsafe { qk_rows(qr, m, dk, m_pad, &rows, st) }
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
    let mut buf = Vec::new();
    let rows = unsafe { widen_all(vrows, fmt, dv_pad, &mut buf) };
    unsafe { pv_rows(pt, m_pad, m, &rows, dv_pad, o, alpha, &[]) }
}

/// `PvFn`: the panels unpacked into rows for `pv_rows`.
#[allow(clippy::too_many_arguments)]
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
    let mut buf = vec![0f32; nk * dv_pad];
    for (k, row) in buf.chunks_mut(dv_pad).enumerate() {
        for (d, x) in row.iter_mut().enumerate() {
            *x = vt[super::vt_index(k, d, nk, dv_pad)];
        }
    }
    let rows: Vec<*const f32> = (0..nk).map(|k| buf[k * dv_pad..].as_ptr()).collect();
    unsafe { pv_rows(pt, m_pad, m, &rows, dv_pad, o, alpha, ranges) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn pv_rows(
    pt: &[f32],
    m_pad: usize,
    m: usize,
    vrows: &[*const f32],
    dv_pad: usize,
    o: &mut [f32],
    alpha: &[f32],
    ranges: &[(u32, u32)],
) {
    for (q, orow) in o.chunks_mut(dv_pad).take(m).enumerate() {
        if let Some(&a) = alpha.get(q) {
            for x in orow.iter_mut() {
                *x *= a;
            }
        }
        let (lo, hi) = super::key_span(ranges, q..q + 1, vrows.len());
        for (k, &vp) in vrows.iter().enumerate().take(hi).skip(lo) {
            let p = pt[k * m_pad + q];
            if p == 0.0 {
                continue;
            }
            // SAFETY: the caller guarantees `dv_pad` readable elements per row.
            let vrow = unsafe { std::slice::from_raw_parts(vp, dv_pad) };
            for (x, &v) in orow.iter_mut().zip(vrow) {
                *x += p * v;
            }
        }
    }
}

fn softmax(
    st: &mut [f32],
    (bk, m_pad, _): (usize, usize, usize),
    mx: &mut [f32],
    l: &mut [f32],
    alpha: &mut [f32],
    ranges: &[(u32, u32)],
) {
    for q in 0..m_pad {
        // Keys outside the row's range are masked: probability 0.
        let (lo, hi) = super::key_span(ranges, q..q + 1, bk);
        let tile_max = (lo..hi)
            .map(|k| st[k * m_pad + q])
            .fold(f32::NEG_INFINITY, f32::max);
        let m_new = mx[q].max(tile_max);
        // A row with nothing visible yet keeps max -inf; subtract 0 so 2^(-inf) = 0, not NaN.
        let base = if m_new == f32::NEG_INFINITY {
            0.0
        } else {
            m_new
        };
        alpha[q] = (mx[q] - base).exp2();
        let mut sum = 0.0;
        for k in 0..bk {
            let p = if (lo..hi).contains(&k) {
                (st[k * m_pad + q] - base).exp2()
            } else {
                0.0
            };
            st[k * m_pad + q] = p;
            sum += p;
        }
        l[q] = l[q] * alpha[q] + sum;
        mx[q] = m_new;
    }
}

fn convert(row: KvRow<'_>, dst: &mut [f32]) {
    row.to_f32(dst)
}

fn exp2(x: &mut [f32]) {
    for v in x {
        *v = v.exp2();
    }
}

fn softcap(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    for v in x {
        *v = cap * (*v * inv).tanh();
    }
}
