//! One work item: the stacked queries of a kv-head group against its visited kv tiles, with the
//! online softmax in base 2 (`scale * log2(e)` folded into Q when there is no score program).

use super::simd::{pad8, Isa};
use crate::attention::kv::{KvRow, KvSource};
use crate::attention::plan::{Plan, WorkItem};
use crate::attention::problem::Problem;
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
    pub p: &'a Problem<'a>,
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
    vrows: Vec<*const f32>,
    prog: program::Scratch<f32>,
    tile: Vec<f32>,
    keep: Vec<bool>,
}

pub(crate) fn run_item(c: &Ctx, it: &WorkItem, sc: &mut Scratch) {
    let p = c.p;
    let (s, kvh) = (it.seq, it.kv_head);
    let (bq, bk_max) = (c.plan.q_block, c.plan.kv_block);
    let (q_len, kv_len) = (p.lens.q_len(s), p.lens.kv_len(s));
    let i0 = it.q_block * bq;
    let nq = (q_len - i0).min(bq);
    let g = p.group_size();
    let (m, dk, dv) = (nq * g, p.head_dim, p.head_dim_v);
    let (m_pad, dv_pad) = (pad8(m), pad8(dv));
    let score = p.variant.score.as_ref();
    // Without a score program the scores come out in base-2 units directly.
    let qscale = if score.is_some() {
        p.scale
    } else {
        p.scale * LOG2_E
    };

    // Q, transposed into panels of 16 stacked rows (row r = head-in-group * nq + query).
    sc.qt.clear();
    sc.qt.resize(m_pad * dk, 0.0);
    sc.qrow.resize(dk, 0.0);
    for gh in 0..g {
        for i in 0..nq {
            let off = p.q.offset(s, i0 + i, kvh * g + gh);
            p.q.data.read_f32(off, &mut sc.qrow);
            let r = gh * nq + i;
            let p0 = r / 16 * 16;
            let w = (m_pad - p0).min(16);
            let base = p0 * dk + (r - p0);
            for (d, &x) in sc.qrow.iter().enumerate() {
                sc.qt[base + d * w] = x * qscale;
            }
        }
    }
    sc.o.clear();
    sc.o.resize(m * dv_pad, 0.0);
    for (v, x) in [
        (&mut sc.mx, f32::NEG_INFINITY),
        (&mut sc.l, 0.0),
        (&mut sc.alpha, 0.0),
    ] {
        v.clear();
        v.resize(m_pad, x);
    }
    sc.st.resize(bk_max * m_pad, 0.0);
    sc.kbuf.resize(bk_max * dk, 0.0);
    // Padding columns of converted V rows stay zero.
    sc.vbuf.clear();
    sc.vbuf.resize(bk_max * dv_pad, 0.0);

    for &kb in &c.plan.kv_blocks[it.blocks.0..it.blocks.1] {
        let k0 = kb as usize * bk_max;
        let bk = (kv_len - k0).min(bk_max);
        sc.krows.clear();
        for j in 0..bk {
            let row = c.kv.k_row(s, kvh, k0 + j);
            assert_eq!(row.len(), dk, "KvSource k_row length");
            sc.krows.push(match row {
                KvRow::F32(r) => r.as_ptr(),
                row => {
                    let dst = &mut sc.kbuf[j * dk..][..dk];
                    (c.isa.convert)(row, dst);
                    dst.as_ptr()
                }
            });
        }
        // SAFETY: every row pointer addresses `dk` f32 that live through this call.
        unsafe { (c.isa.qk)(&sc.qt, dk, m_pad, &sc.krows, &mut sc.st) };
        apply_variant(c, it, sc, nq, k0, bk, m_pad);
        (c.isa.softmax)(&mut sc.st, bk, m_pad, &mut sc.mx, &mut sc.l, &mut sc.alpha);
        sc.vrows.clear();
        for j in 0..bk {
            let row = c.kv.v_row(s, kvh, k0 + j);
            assert_eq!(row.len(), dv, "KvSource v_row length");
            sc.vrows.push(match row {
                KvRow::F32(r) if dv == dv_pad => r.as_ptr(),
                row => {
                    let dst = &mut sc.vbuf[j * dv_pad..][..dv];
                    (c.isa.convert)(row, dst);
                    dst.as_ptr()
                }
            });
        }
        // SAFETY: every row pointer addresses `dv_pad` f32 that live through this call.
        unsafe { (c.isa.pv)(&sc.st, m_pad, m, &sc.vrows, dv_pad, &mut sc.o, &sc.alpha) };
    }
    finish(c, it, sc, nq, i0, dv_pad);
}

/// Runs the score program on every tile and the mask on partial ones, per head of the group:
/// masked scores become -inf.
fn apply_variant(
    c: &Ctx,
    it: &WorkItem,
    sc: &mut Scratch,
    nq: usize,
    k0: usize,
    bk: usize,
    m_pad: usize,
) {
    let p = c.p;
    let bm = &c.plan.block_mask;
    let s = it.seq;
    let g = p.group_size();
    let kb = k0 / c.plan.kv_block;
    let score = p.variant.score.as_ref();
    for gh in 0..g {
        let h = it.kv_head * g + gh;
        let kind = bm.kind(s, h, it.q_block, kb);
        if kind == BlockKind::Full && score.is_none() {
            continue;
        }
        let col = gh * nq;
        if kind == BlockKind::Empty {
            // Another head of the group needs this tile; this one sees none of it.
            for k in 0..bk {
                sc.st[k * m_pad + col..][..nq].fill(f32::NEG_INFINITY);
            }
            continue;
        }
        let i0 = it.q_block * c.plan.q_block;
        let t = TileCtx {
            batch: s as i64,
            head: h as i64,
            q_len: p.lens.q_len(s) as i64,
            kv_len: p.lens.kv_len(s) as i64,
            q_pos0: p.lens.q_pos0(s) + i0 as i64,
            q_token0: (p.lens.q_start(s) + i0) as i64,
            rows: nq,
            kv_pos0: k0 as i64,
            cols: bk,
        };
        if let Some(sp) = score {
            // The program sees natural-log scores laid out [query][key].
            sc.tile.resize(nq * bk, 0.0);
            for k in 0..bk {
                for i in 0..nq {
                    sc.tile[i * bk + k] = sc.st[k * m_pad + col + i];
                }
            }
            sp.apply_score(&t, &mut sc.prog, &mut sc.tile);
            for k in 0..bk {
                for i in 0..nq {
                    sc.st[k * m_pad + col + i] = sc.tile[i * bk + k] * LOG2_E;
                }
            }
        }
        if kind == BlockKind::Partial {
            if let Some(mp) = p.variant.mask.as_ref() {
                sc.keep.resize(nq * bk, false);
                mp.eval_mask(&t, &mut sc.prog, &mut sc.keep);
                for k in 0..bk {
                    for i in 0..nq {
                        if !sc.keep[i * bk + k] {
                            sc.st[k * m_pad + col + i] = f32::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
}

/// Normalizes the accumulator and writes O and LSE (natural log), to the output or, for a
/// split item, to its partial state (sinks are added after the merge then).
fn finish(c: &Ctx, it: &WorkItem, sc: &Scratch, nq: usize, i0: usize, dv_pad: usize) {
    let p = c.p;
    let (hq, dv, g) = (p.num_q_heads, p.head_dim_v, p.group_size());
    let sinks = p.variant.sinks.as_deref();
    for gh in 0..g {
        let h = it.kv_head * g + gh;
        let sink2 = match (it.merge, sinks) {
            (None, Some(v)) => v[h] * LOG2_E,
            _ => f32::NEG_INFINITY,
        };
        for i in 0..nq {
            let r = gh * nq + i;
            let (m2, l) = (sc.mx[r], sc.l[r]);
            let mf = m2.max(sink2);
            let (f, lse) = if mf == f32::NEG_INFINITY {
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
                    let row = mg.slot + it.part * mg.rows + r;
                    (row * dv, row, &c.part_o, Some(&c.part_lse))
                }
            };
            // SAFETY: the plan gives this (row, head) to this item alone.
            let dst = unsafe { o_buf.slice(o_at, dv) };
            for (d, &a) in dst.iter_mut().zip(&sc.o[r * dv_pad..][..dv]) {
                *d = a * f;
            }
            if let Some(lb) = l_buf {
                unsafe { lb.slice(l_at, 1)[0] = lse };
            }
        }
    }
}
