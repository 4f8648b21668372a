//! One work item: the stacked queries of a kv-head group against its visited kv tiles, with the
//! online softmax in base 2 (`scale * log2(e)` folded into Q when there is no score program).

use super::simd::{pad8, prefetch_rows, DecodeTile, Isa, RowFmt};
use super::tile_mask::MaskCache;
use crate::attention::kv::{KvRow, KvSource};
use crate::attention::plan::{Plan, WorkItem};
use crate::attention::problem::Problem;
use crate::tensor::HostData;
use crate::variant::block_mask::BlockKind;
use crate::variant::program::{self, TileCtx};
use std::f32::consts::{LN_2, LOG2_E};

/// An output buffer shared by the workers; the plan gives each (row, head) to one writer.
#[derive(Clone, Copy)]
pub(crate) struct Shared {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: workers write disjoint ranges (one work item or merge group per output row).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    pub(crate) fn new(s: &mut [f32]) -> Shared {
        Shared {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    /// # Safety
    /// No other thread may access `at..at + n` while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, at: usize, n: usize) -> &mut [f32] {
        assert!(at <= self.len && n <= self.len - at);
        std::slice::from_raw_parts_mut(self.ptr.add(at), n)
    }
}

/// Everything the items of one call share.
pub(crate) struct Ctx<'a> {
    pub p: &'a Problem,
    pub q: HostData<'a>,
    pub kv: &'a dyn KvSource,
    pub plan: &'a Plan<'a>,
    pub isa: Isa,
    pub out: Shared,
    pub lse: Option<Shared>,
    pub part_o: Shared,
    pub part_lse: Shared,
}

/// Per-worker buffers, reused across items.
#[derive(Default)]
pub(crate) struct Scratch {
    qt: Vec<f32>,
    qrow: Vec<f32>,
    st: Vec<f32>,
    o: Vec<f32>,
    mx: Vec<f32>,
    l: Vec<f32>,
    alpha: Vec<f32>,
    kbuf: Vec<f32>,
    vbuf: Vec<f32>,
    krows: Vec<*const f32>,
    /// One value row widened to f32, before it is spread over the panels.
    vrow: Vec<f32>,
    kraw: Vec<*const u8>,
    vraw: Vec<*const u8>,
    kscale: Vec<f32>,
    vscale: Vec<f32>,
    /// Q with each head's K factor folded in, and the factor applied (streaming decode).
    qs: Vec<f32>,
    qs_scale: Vec<f32>,
    var: VarScratch,
}

/// Buffers for running the variant's programs on a tile.
#[derive(Default)]
struct VarScratch {
    prog: program::Scratch<f32>,
    tile: Vec<f32>,
    masks: MaskCache,
    /// Kept key range of every stacked row, per fused kv head (`m_pad` each)...
    ranges: Vec<(u32, u32)>,
    /// ...and whether that head's tile has any (else every key is computed).
    ranged: Vec<bool>,
}

/// Rows fetched ahead of use (enough in flight to cover DRAM latency).
const PREFETCH: usize = 12;

/// Runs one work item: `it.kv_heads` kv heads (one, or all of them when decode reads a
/// token-major cache, so every token's rows are read as one contiguous run), each with its
/// group's q rows stacked into one tile of `m = g * nq` rows.
pub(crate) fn run_item(c: &Ctx, it: &WorkItem, sc: &mut Scratch) {
    let p = c.p;
    let s = it.seq;
    // Each sequence has its own tile (decode and prefill sequences share one mixed plan).
    let (bq, bk_max) = c.plan.tiles(s);
    let (q_len, kv_len) = (p.lens.q_len(s), p.lens.kv_len(s));
    let i0 = it.q_block * bq;
    let nq = (q_len - i0).min(bq);
    let (g, nh) = (p.group_size(), it.kv_heads);
    let (m, dk, dv) = (nq * g, p.head_dim, p.head_dim_v);
    let (m_pad, dv_pad) = (pad8(m), pad8(dv));
    // Without a score program the scores come out in base-2 units directly.
    let qscale = if p.variant.score.is_some() {
        p.scale
    } else {
        p.scale * LOG2_E
    };

    // Q of each head, transposed into panels of 16 stacked rows (row = head-in-group * nq + i).
    sc.qt.clear();
    sc.qt.resize(nh * m_pad * dk, 0.0);
    sc.qrow.resize(dk, 0.0);
    // A few rows (decode) take row-major Q and the dot-product kernel instead.
    let rows_kernel = m <= 8 && dk >= 8;
    // With at most 6 rows both kernels read each K and V element once: f32 rows are used in
    // place instead of copied.
    let stream = rows_kernel && m <= 6;
    for hh in 0..nh {
        let qt = &mut sc.qt[hh * m_pad * dk..][..m_pad * dk];
        for gh in 0..g {
            for i in 0..nq {
                let off = p.q.offset(s, i0 + i, (it.kv_head + hh) * g + gh);
                c.q.read_f32(off, &mut sc.qrow);
                let r = gh * nq + i;
                if rows_kernel {
                    for (d, &x) in qt[r * dk..][..dk].iter_mut().zip(&sc.qrow) {
                        *d = x * qscale;
                    }
                    continue;
                }
                let p0 = r / 16 * 16;
                let w = (m_pad - p0).min(16);
                let base = p0 * dk + (r - p0);
                for (d, &x) in sc.qrow.iter().enumerate() {
                    qt[base + d * w] = x * qscale;
                }
            }
        }
    }
    sc.o.clear();
    sc.o.resize(nh * m * dv_pad, 0.0);
    for (v, x) in [
        (&mut sc.mx, f32::NEG_INFINITY),
        (&mut sc.l, 0.0),
        (&mut sc.alpha, 0.0),
    ] {
        v.clear();
        v.resize(nh * m_pad, x);
    }
    sc.st.resize(nh * bk_max * m_pad, 0.0);

    let blocks = &c.plan.kv_blocks[it.blocks.0..it.blocks.1];
    if stream {
        stream_tiles(c, it, sc, nq, blocks);
        finish(c, it, sc, nq, i0, dv_pad);
        return;
    }
    sc.kbuf.resize(nh * bk_max * dk, 0.0);
    // Padding columns of the V panels are never written: what they hold only reaches padding
    // columns of O, which are never read. The panels start on cache lines: the P·V kernel reads
    // 16 columns (one line) of a row per key.
    sc.vbuf.resize(nh * bk_max * dv_pad + 15, 0.0);
    let vbuf_at = sc.vbuf.as_ptr().align_offset(64);
    sc.krows.resize(nh * bk_max, std::ptr::null());
    for (bi, &kb) in blocks.iter().enumerate() {
        let k0 = kb as usize * bk_max;
        let bk = (kv_len - k0).min(bk_max);
        // The K rows of the next tile follow only when it is the adjacent block.
        let next_k0 = match blocks.get(bi + 1) {
            Some(&nb) if nb == kb + 1 => Some(k0 + bk),
            _ => None,
        };
        for j in 0..bk {
            // Prefetch PREFETCH rows ahead (every fused head's at once): the rest of K, then
            // this tile's V.
            let ahead = j + PREFETCH;
            if ahead < bk {
                prefetch_rows(c.kv.k_row(s, it.kv_head, k0 + ahead), nh);
            } else if ahead - bk < bk {
                prefetch_rows(c.kv.v_row(s, it.kv_head, k0 + ahead - bk), nh);
            }
            for hh in 0..nh {
                let h = it.kv_head + hh;
                let row = c.kv.k_row(s, h, k0 + j);
                assert_eq!(row.len(), dk, "KvSource k_row length");
                sc.krows[hh * bk_max + j] = match row {
                    // The score kernel reuses only 6 rows at a time: they share an L1 set
                    // without evicting each other even a power of two apart (a [tokens, heads,
                    // dim] cache), so f32 rows are read in place.
                    KvRow::F32(r) => r.as_ptr(),
                    row => {
                        let dst = &mut sc.kbuf[(hh * bk_max + j) * dk..][..dk];
                        (c.isa.convert)(row, dst);
                        dst.as_ptr()
                    }
                };
            }
        }
        sc.var.ranges.resize(nh * m_pad, (0, 0));
        sc.var.ranged.resize(nh, false);
        for hh in 0..nh {
            mask_tile(c, it, it.kv_head + hh, hh, &mut sc.var, nq, k0, bk, m_pad);
            let st = &mut sc.st[hh * bk_max * m_pad..][..bk_max * m_pad];
            let qt = &sc.qt[hh * m_pad * dk..][..m_pad * dk];
            let krows = &sc.krows[hh * bk_max..][..bk];
            let ranges = ranges_of(&sc.var, hh, m_pad);
            // SAFETY: every row pointer addresses `dk` f32 that live through this call.
            unsafe {
                if rows_kernel {
                    (c.isa.qk_rows)(qt, m, dk, m_pad, krows, st)
                } else {
                    (c.isa.qk)(qt, dk, m_pad, krows, st, ranges)
                }
            };
            apply_variant(c, it, it.kv_head + hh, st, &mut sc.var, nq, k0, bk, m_pad);
            let state = hh * m_pad..(hh + 1) * m_pad;
            (c.isa.softmax)(
                st,
                (bk, m_pad, m),
                &mut sc.mx[state.clone()],
                &mut sc.l[state.clone()],
                &mut sc.alpha[state],
                ranges_of(&sc.var, hh, m_pad),
            );
        }
        for j in 0..bk {
            let ahead = j + PREFETCH;
            if ahead < bk {
                prefetch_rows(c.kv.v_row(s, it.kv_head, k0 + ahead), nh);
            } else if let Some(n0) = next_k0 {
                if n0 + ahead - bk < kv_len {
                    prefetch_rows(c.kv.k_row(s, it.kv_head, n0 + ahead - bk), nh);
                }
            }
            for hh in 0..nh {
                let h = it.kv_head + hh;
                let row = c.kv.v_row(s, h, k0 + j);
                assert_eq!(row.len(), dv, "KvSource v_row length");
                // Copied into panels (`PvFn`): P·V then reads each in address order. In place,
                // rows a power of two apart thrash one L1 set (+15 % causal time measured).
                let vt = &mut sc.vbuf[vbuf_at + hh * bk_max * dv_pad..][..bk * dv_pad];
                match row {
                    KvRow::F32(r) => to_panels(r, j, bk, dv_pad, vt),
                    row => {
                        sc.vrow.resize(dv, 0.0);
                        (c.isa.convert)(row, &mut sc.vrow);
                        to_panels(&sc.vrow, j, bk, dv_pad, vt);
                    }
                }
            }
        }
        for hh in 0..nh {
            // SAFETY: slices checked by the kernel.
            unsafe {
                (c.isa.pv)(
                    &sc.st[hh * bk_max * m_pad..][..bk * m_pad],
                    m_pad,
                    m,
                    &sc.vbuf[vbuf_at + hh * bk_max * dv_pad..][..bk * dv_pad],
                    bk,
                    dv_pad,
                    &mut sc.o[hh * m * dv_pad..][..m * dv_pad],
                    &sc.alpha[hh * m_pad..][..m_pad],
                    ranges_of(&sc.var, hh, m_pad),
                )
            };
        }
    }
    finish(c, it, sc, nq, i0, dv_pad);
}

/// Copies value row `j` (its `dv <= dv_pad` columns; padding ones are left as they are) into
/// the panels of a tile of `nk` keys (`PvFn`).
fn to_panels(row: &[f32], j: usize, nk: usize, dv_pad: usize, vt: &mut [f32]) {
    for c0 in (0..row.len()).step_by(16) {
        let w = (dv_pad - c0).min(16);
        let n = (row.len() - c0).min(w);
        vt[c0 * nk + j * w..][..n].copy_from_slice(&row[c0..c0 + n]);
    }
}

/// Keys per step of the streaming decode (the score micro-kernel's key count).
const STEP: usize = 3;
/// Keys per P·V step: more keys per pass over the accumulators, as many pages in flight.
const PV_STEP: usize = 8;

/// Decode over a few stacked rows (each K and V element read once, in place when the kernels can
/// widen the stored format in registers; copied to f32 otherwise).
/// Each tile is walked `STEP` tokens at a time across every fused head, so memory is read nearly
/// in address order (a token's heads are adjacent) and the hardware prefetcher streams it; head
/// by head, the rows sit a page apart and every line is a cold miss. Software prefetching on top
/// measured slower: on this CPU every hint fills L1, where rows a power of two apart collide.
fn stream_tiles(c: &Ctx, it: &WorkItem, sc: &mut Scratch, nq: usize, blocks: &[u32]) {
    let p = c.p;
    let s = it.seq;
    let bk_max = c.plan.tiles(s).1;
    let kv_len = p.lens.kv_len(s);
    let (g, nh) = (p.group_size(), it.kv_heads);
    let (m, dk, dv) = (nq * g, p.head_dim, p.head_dim_v);
    let (m_pad, dv_pad) = (pad8(m), pad8(dv));
    // Q of a head in the panel layout (`m_pad` rows), and compact once its K factor is folded in
    // (heads a power of two apart would share L1 sets).
    let (qt_n, qn) = (m_pad * dk, m * dk);
    for v in [&mut sc.kraw, &mut sc.vraw] {
        v.resize(nh * bk_max, std::ptr::null());
    }
    for v in [&mut sc.kscale, &mut sc.vscale] {
        v.resize(nh, 1.0);
    }
    sc.qs.resize(nh * qn, 0.0);
    sc.qs_scale.clear();
    sc.qs_scale.resize(nh, f32::NAN);
    // Bounds the K factor folded into Q (`RowFmt::E4M3F32`).
    let qmax = sc.qt[..nh * qt_n].iter().fold(0f32, |a, &x| a.max(x.abs()));
    for &kb in blocks {
        let k0 = kb as usize * bk_max;
        let bk = (kv_len - k0).min(bk_max);
        let (h0, stride) = (it.kv_head, bk_max);
        let k_get = |h: usize, pos: usize| c.kv.k_row(s, h0 + h, pos);
        let v_get = |h: usize, pos: usize| c.kv.v_row(s, h0 + h, pos);
        let (kraw, kscale) = (&mut sc.kraw[..], &mut sc.kscale[..]);
        let kfmt = place_raw(
            c,
            s,
            Some(qmax),
            (h0, nh),
            (k0, bk, stride),
            dk,
            true,
            kraw,
            kscale,
        )
        .unwrap_or_else(|| {
            // The copies are allocated on first use only: a fresh buffer of this size costs
            // page faults on every call, and most caches are read in place.
            if sc.kbuf.len() < nh * bk_max * dk {
                sc.kbuf.resize(nh * bk_max * dk, 0.0);
            }
            let buf = &mut sc.kbuf[..];
            widen_rows(c, k_get, nh, k0, bk, stride, dk, dk, kraw, kscale, buf)
        });
        let (vraw, vscale) = (&mut sc.vraw[..], &mut sc.vscale[..]);
        let vfmt = place_raw(
            c,
            s,
            None,
            (h0, nh),
            (k0, bk, stride),
            dv,
            false,
            vraw,
            vscale,
        )
        .unwrap_or_else(|| {
            // Padding columns are never written: they stay zero.
            if sc.vbuf.len() < nh * bk_max * dv_pad {
                sc.vbuf.resize(nh * bk_max * dv_pad, 0.0);
            }
            let buf = &mut sc.vbuf[..];
            widen_rows(c, v_get, nh, k0, bk, stride, dv, dv_pad, vraw, vscale, buf)
        });
        for hh in 0..nh {
            // Each head's K factor is folded into its Q (rarely changes: once per item).
            let ks = sc.kscale[hh];
            if ks.to_bits() != sc.qs_scale[hh].to_bits() {
                let (src, dst) = (&sc.qt[hh * qt_n..][..qn], &mut sc.qs[hh * qn..][..qn]);
                for (d, &x) in dst.iter_mut().zip(src) {
                    *d = x * ks;
                }
                sc.qs_scale[hh] = ks;
            }
        }
        // Tiles every head sees whole go to the fused kernel where the ISA has one.
        let fused = c
            .isa
            .decode_tile
            .filter(|_| m <= 4 && p.variant.score.is_none() && tile_full(c, it, kb as usize));
        if let Some(f) = fused {
            // SAFETY: every row pointer addresses `dk` (K) or `dv_pad` (V) elements of its
            // format that live through this call.
            unsafe {
                f(DecodeTile {
                    nh,
                    m,
                    dk,
                    dv_pad,
                    bk,
                    stride,
                    qs: &sc.qs,
                    qn,
                    krows: &sc.kraw,
                    kfmt,
                    vrows: &sc.vraw,
                    vfmt,
                    vscale: &sc.vscale,
                    st: &mut sc.st,
                    mx: &mut sc.mx,
                    l: &mut sc.l,
                    alpha: &mut sc.alpha,
                    o: &mut sc.o,
                })
            };
            continue;
        }
        for j in (0..bk).step_by(STEP) {
            let n = (bk - j).min(STEP);
            for hh in 0..nh {
                let st = &mut sc.st[(hh * bk_max + j) * m_pad..][..n * m_pad];
                let qs = &sc.qs[hh * qn..][..qn];
                let krows = &sc.kraw[hh * bk_max + j..][..n];
                // SAFETY: every row pointer addresses `dk` elements of `kfmt` that live through
                // this call.
                unsafe { (c.isa.qk_rows_raw)(qs, m, dk, m_pad, krows, kfmt, st) };
            }
        }
        for hh in 0..nh {
            let st = &mut sc.st[hh * bk_max * m_pad..][..bk_max * m_pad];
            mask_tile(c, it, it.kv_head + hh, 0, &mut sc.var, nq, k0, bk, m_pad);
            apply_variant(c, it, it.kv_head + hh, st, &mut sc.var, nq, k0, bk, m_pad);
            let state = hh * m_pad..(hh + 1) * m_pad;
            (c.isa.softmax)(
                st,
                (bk, m_pad, m),
                &mut sc.mx[state.clone()],
                &mut sc.l[state.clone()],
                &mut sc.alpha[state],
                &[],
            );
            // The V factor goes into the probabilities (after the softmax summed them).
            let vs = sc.vscale[hh];
            if vs != 1.0 {
                for x in st[..bk * m_pad].iter_mut() {
                    *x *= vs;
                }
            }
        }
        for j in (0..bk).step_by(PV_STEP) {
            let n = (bk - j).min(PV_STEP);
            for hh in 0..nh {
                // The running state is rescaled once per tile, at its first step (empty: no
                // rescale).
                let alpha = if j == 0 {
                    &sc.alpha[hh * m_pad..][..m_pad]
                } else {
                    &[][..]
                };
                // SAFETY: every row pointer addresses `dv_pad` elements of `vfmt` that live
                // through this call.
                unsafe {
                    (c.isa.pv_raw)(
                        &sc.st[(hh * bk_max + j) * m_pad..][..n * m_pad],
                        m_pad,
                        m,
                        &sc.vraw[hh * bk_max + j..][..n],
                        vfmt,
                        dv_pad,
                        &mut sc.o[hh * m * dv_pad..][..m * dv_pad],
                        alpha,
                    )
                };
            }
        }
    }
}

/// Points `ptrs[hh * stride + j]` at the stored rows of a tile for the kernels to widen in
/// registers, and sets `scales[hh]` to head `hh`'s factor (`RowFmt::of`). Rows are looked up
/// once per run the source offers (`KvSource::k_run`), else one by one. `None` when they cannot
/// be read in place: formats or scales mixed within a head, fp8 e4m3 NaN codes (the re-bias
/// would read them as numbers), a scale so extreme that folding it into Q or P could overflow,
/// or a length the kernels cannot read whole (`tail_ok`: f32 may have one). fp8 is read as f32
/// bits (`RowFmt::E4M3F32`, `RowFmt::E5M2F32`: no f16 conversion) where the factor fits: keys
/// with `qmax` (the largest |Q| it is folded into), values with P (at most 1); e5m2 only
/// without inf or NaN codes.
#[allow(clippy::too_many_arguments)]
fn place_raw(
    c: &Ctx,
    seq: usize,
    qmax: Option<f32>,
    (h0, nh): (usize, usize),
    (k0, bk, stride): (usize, usize, usize),
    dim: usize,
    tail_ok: bool,
    ptrs: &mut [*const u8],
    scales: &mut [f32],
) -> Option<RowFmt> {
    let kv = c.kv;
    let is_k = qmax.is_some();
    let get = |h: usize, pos: usize| {
        if is_k {
            kv.k_row(seq, h0 + h, pos)
        } else {
            kv.v_row(seq, h0 + h, pos)
        }
    };
    let sane = |x: f32| (2f32.powi(-60)..=2f32.powi(60)).contains(&x.abs());
    // Codes the f32-bit reads would take for numbers: e4m3 NaN, e5m2 inf and NaN. e4m3 NaN is
    // refused altogether (the f16 re-bias reads it as a number too).
    let mut plain = true;
    let mut no_nan = |row: &KvRow| {
        let (special, fatal) = match row {
            KvRow::Fp8E4M3(b, _) => (b.iter().fold(false, |a, &c| a | (c & 0x7f == 0x7f)), true),
            KvRow::Fp8E5M2(b, _) => (b.iter().fold(false, |a, &c| a | (c & 0x7c == 0x7c)), false),
            _ => (false, false),
        };
        plain &= !special;
        !(special && fatal)
    };
    let mut fmt = None;
    let mut j = 0;
    while j < bk {
        // The first position of a run: every head's row, format and scale.
        for hh in 0..nh {
            let row = get(hh, k0 + j);
            assert_eq!(row.len(), dim, "KvSource row length");
            let (f, x) = RowFmt::of(&row);
            if j == 0 {
                let whole = dim.is_multiple_of(8) || (tail_ok && f == RowFmt::F32);
                if !whole || !sane(x) || *fmt.get_or_insert(f) != f {
                    return None;
                }
                scales[hh] = x;
            } else if Some(f) != fmt || x.to_bits() != scales[hh].to_bits() {
                return None;
            }
            if !no_nan(&row) {
                return None;
            }
            ptrs[hh * stride + j] = row.bytes().0;
        }
        let run = if is_k {
            kv.k_run(seq, k0 + j, bk - j)
        } else {
            kv.v_run(seq, k0 + j, bk - j)
        };
        let Some(r) = run.filter(|r| r.len > 1) else {
            j += 1;
            continue;
        };
        // The rest of the run by strides, checked against the rows just read.
        let (base, bytes) = r.first.bytes();
        let size = bytes / r.first.len().max(1);
        let at = |i: usize, hh: usize| (i * r.pos_stride + (h0 + hh) * r.head_stride) * size;
        let last = at(r.len - 1, nh - 1) + dim * size;
        let fits = Some(RowFmt::of(&r.first).0) == fmt
            && last <= bytes
            && (0..nh).all(|hh| ptrs[hh * stride + j] == base.wrapping_add(at(0, hh)));
        // (The NaN scan covers the whole run: anything between rows only costs the fast path.)
        if !fits || !no_nan(&r.first) {
            return None;
        }
        for i in 1..r.len {
            for hh in 0..nh {
                // SAFETY: inside the run's slice (`last <= bytes`).
                ptrs[hh * stride + j + i] = unsafe { base.add(at(i, hh)) };
            }
        }
        j += r.len;
    }
    // The factor 2^112 larger, and Q (or P) times it, stay finite with margin (products are the
    // true scores or values).
    let q = qmax.map_or(1.0, |q| (q as f64).max(1.0));
    let fits = |x: f32| x as f64 * 2f64.powi(112) * q <= 2f64.powi(126);
    let wide = match fmt {
        Some(RowFmt::E4M3) => RowFmt::E4M3F32,
        Some(RowFmt::E5M2) if plain => RowFmt::E5M2F32,
        _ => return fmt,
    };
    if scales[..nh].iter().all(|&x| fits(x)) {
        for x in &mut scales[..nh] {
            *x *= 2f32.powi(112);
        }
        return Some(wide);
    }
    fmt
}

/// The fallback of `place_raw`: f32 rows in place (where `dim == dim_pad`), others widened into
/// `buf` (padding columns stay zero); every factor 1.
#[allow(clippy::too_many_arguments)]
fn widen_rows<'a>(
    c: &Ctx,
    get: impl Fn(usize, usize) -> KvRow<'a>,
    nh: usize,
    k0: usize,
    bk: usize,
    stride: usize,
    dim: usize,
    dim_pad: usize,
    ptrs: &mut [*const u8],
    scales: &mut [f32],
    buf: &mut [f32],
) -> RowFmt {
    for j in 0..bk {
        for hh in 0..nh {
            let at = hh * stride + j;
            ptrs[at] = match get(hh, k0 + j) {
                KvRow::F32(r) if dim == dim_pad => r.as_ptr().cast(),
                row => {
                    let dst = &mut buf[at * dim_pad..][..dim];
                    (c.isa.convert)(row, dst);
                    dst.as_ptr().cast()
                }
            };
        }
    }
    scales[..nh].fill(1.0);
    RowFmt::F32
}

/// Whether every q head of the item's kv heads sees the whole kv block `kb` (nothing to mask).
fn tile_full(c: &Ctx, it: &WorkItem, kb: usize) -> bool {
    let bm = &c.plan.block_mask;
    let g = c.p.group_size();
    let heads = if bm.heads == 1 {
        0..1
    } else {
        it.kv_head * g..(it.kv_head + it.kv_heads) * g
    };
    heads
        .into_iter()
        .all(|h| bm.kind(it.seq, h, it.q_block, kb) == BlockKind::Full)
}

/// The context of head `h`'s rows of the tile at key `k0`.
fn tile_ctx(c: &Ctx, it: &WorkItem, h: usize, nq: usize, k0: usize, bk: usize) -> TileCtx {
    let p = c.p;
    let s = it.seq;
    let i0 = it.q_block * c.plan.tiles(s).0;
    TileCtx {
        batch: s as i64,
        head: h as i64,
        q_len: p.lens.q_len(s) as i64,
        kv_len: p.lens.kv_len(s) as i64,
        q_pos0: p.lens.q_pos0(s) + i0 as i64,
        q_token0: (p.lens.q_start(s) + i0) as i64,
        rows: nq,
        kv_pos0: k0 as i64,
        cols: bk,
    }
}

/// Classifies the mask of a partial tile for each q head of kv head `kvh` (`sc.masks`), and
/// stores every stacked row's kept key range under slot `hh` when any is narrower than the tile.
#[allow(clippy::too_many_arguments)]
fn mask_tile(
    c: &Ctx,
    it: &WorkItem,
    kvh: usize,
    hh: usize,
    sc: &mut VarScratch,
    nq: usize,
    k0: usize,
    bk: usize,
    m_pad: usize,
) {
    let p = c.p;
    let bm = &c.plan.block_mask;
    let g = p.group_size();
    let kb = k0 / c.plan.tiles(it.seq).1;
    sc.ranged.resize(hh + 1, false);
    sc.ranged[hh] = false;
    let Some(mp) = p.variant.mask.as_ref() else {
        return;
    };
    let kinds = (0..g).map(|gh| bm.kind(it.seq, kvh * g + gh, it.q_block, kb));
    if kinds.clone().all(|k| k == BlockKind::Full) {
        return;
    }
    sc.ranges.resize((hh + 1) * m_pad, (0, 0));
    let ranges = &mut sc.ranges[hh * m_pad..][..m_pad];
    ranges.fill((0, 0));
    for (gh, kind) in kinds.enumerate() {
        let rows = &mut ranges[gh * nq..][..nq];
        match kind {
            BlockKind::Full => rows.fill((0, bk as u32)),
            BlockKind::Empty => {}
            BlockKind::Partial => {
                let h = kvh * g + gh;
                let key = (it.seq, it.q_block, if bm.heads == 1 { 0 } else { h }, kb);
                let t = tile_ctx(c, it, h, nq, k0, bk);
                rows.copy_from_slice(sc.masks.get(key, mp, &t).ranges());
            }
        }
    }
    sc.ranged[hh] = true;
}

/// Row ranges of slot `hh` for the kernels (empty: every key).
fn ranges_of(sc: &VarScratch, hh: usize, m_pad: usize) -> &[(u32, u32)] {
    if sc.ranged.get(hh) == Some(&true) {
        &sc.ranges[hh * m_pad..][..m_pad]
    } else {
        &[]
    }
}

/// Runs the score program on every tile and the mask (classified by `mask_tile`) on partial
/// ones, for each q head of kv head `kvh`: masked scores become -inf.
#[allow(clippy::too_many_arguments)]
fn apply_variant(
    c: &Ctx,
    it: &WorkItem,
    kvh: usize,
    st: &mut [f32],
    sc: &mut VarScratch,
    nq: usize,
    k0: usize,
    bk: usize,
    m_pad: usize,
) {
    let p = c.p;
    let bm = &c.plan.block_mask;
    let s = it.seq;
    let g = p.group_size();
    let kb = k0 / c.plan.tiles(it.seq).1;
    let score = p.variant.score.as_ref();
    for gh in 0..g {
        let h = kvh * g + gh;
        let kind = bm.kind(s, h, it.q_block, kb);
        if kind == BlockKind::Full && score.is_none() {
            continue;
        }
        let col = gh * nq;
        if kind == BlockKind::Empty {
            // Another head of the group needs this tile; this one sees none of it.
            for k in 0..bk {
                st[k * m_pad + col..][..nq].fill(f32::NEG_INFINITY);
            }
            continue;
        }
        if let Some(sp) = score {
            let t = tile_ctx(c, it, h, nq, k0, bk);
            // The program sees natural-log scores laid out [query][key].
            sc.tile.resize(nq * bk, 0.0);
            for k in 0..bk {
                for i in 0..nq {
                    sc.tile[i * bk + k] = st[k * m_pad + col + i];
                }
            }
            sp.apply_score(&t, &mut sc.prog, &mut sc.tile);
            for k in 0..bk {
                for i in 0..nq {
                    st[k * m_pad + col + i] = sc.tile[i * bk + k] * LOG2_E;
                }
            }
        }
        if let (BlockKind::Partial, Some(mp)) = (kind, p.variant.mask.as_ref()) {
            let key = (s, it.q_block, if bm.heads == 1 { 0 } else { h }, kb);
            let t = tile_ctx(c, it, h, nq, k0, bk);
            sc.masks.get(key, mp, &t).apply(st, m_pad, col);
        }
    }
}

/// Normalizes the accumulators and writes O and LSE (natural log), to the output or, for a
/// split item, to its partial state (sinks are added after the merge then).
fn finish(c: &Ctx, it: &WorkItem, sc: &Scratch, nq: usize, i0: usize, dv_pad: usize) {
    let p = c.p;
    let (hq, dv, g) = (p.num_q_heads, p.head_dim_v, p.group_size());
    let (m, m_pad) = (nq * g, pad8(nq * g));
    let sinks = p.variant.sinks.as_deref();
    for hh in 0..it.kv_heads {
        for gh in 0..g {
            let h = (it.kv_head + hh) * g + gh;
            let sink2 = match (it.merge, sinks) {
                (None, Some(v)) => v[h] * LOG2_E,
                _ => f32::NEG_INFINITY,
            };
            for i in 0..nq {
                let r = gh * nq + i;
                let (m2, l) = (sc.mx[hh * m_pad + r], sc.l[hh * m_pad + r]);
                let mf = m2.max(sink2);
                // A kept NaN score left the sum NaN (the max may have skipped it): the row is
                // NaN, not masked.
                let (f, lse) = if l.is_nan() || m2.is_nan() {
                    (f32::NAN, f32::NAN)
                } else if mf == f32::NEG_INFINITY {
                    (0.0, f32::NEG_INFINITY)
                } else {
                    let w = (m2 - mf).exp2();
                    let lt = l * w + (sink2 - mf).exp2();
                    (w / lt, (mf + lt.log2()) * LN_2)
                };
                let (o_at, l_at, o_buf, l_buf) = match it.merge {
                    None => {
                        let t = p.lens.q_start(it.seq) + i0 + i;
                        ((t * hq + h) * dv, t * hq + h, &c.out, c.lse.as_ref())
                    }
                    Some(mi) => {
                        let mg = &c.plan.merges[mi];
                        let row = mg.slot + it.part * mg.rows + hh * m + r;
                        (row * dv, row, &c.part_o, Some(&c.part_lse))
                    }
                };
                // SAFETY: the plan gives this (row, head) to this item alone.
                let dst = unsafe { o_buf.slice(o_at, dv) };
                let acc = &sc.o[(hh * m + r) * dv_pad..][..dv];
                for (d, &a) in dst.iter_mut().zip(acc) {
                    *d = a * f;
                }
                if let Some(lb) = l_buf {
                    unsafe { lb.slice(l_at, 1)[0] = lse };
                }
            }
        }
    }
}
