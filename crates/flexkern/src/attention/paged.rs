//! Ragged paged attention: one call over a batch mixing prefill chunks and decode tokens whose
//! K/V live in pages. It builds the same `Problem` as contiguous attention and runs the same
//! planner and kernels; only the `KvSource` differs, so every variant works unchanged and mods
//! see logical positions.

use super::problem::{check_captures, check_geometry, operand, Problem, SeqLens};
use super::{check_outputs, plan};
use crate::backend::Backend;
use crate::error::{invalid, mismatch, Result};
use crate::kv_cache::PagedKv;
use crate::tensor::TensorView;
use crate::variant::classify::{Classifier, TileClass};
use crate::variant::program::{Program, TileCtx};
use crate::variant::{BlockMask, Variant};

/// Validates `q` `[tokens, Hq, D]` with `cu_q_lens` (n+1 offsets) against the paged KV and
/// returns the problem (use it with `reference::attention(&p, kv)` to check a kernel).
/// `scale` defaults to 1/sqrt(D).
pub fn prepare<'a>(
    q: &TensorView<'a>,
    cu_q_lens: &[u64],
    kv: &PagedKv,
    scale: Option<f32>,
    variant: &Variant,
) -> Result<Problem<'a>> {
    q.validate("q")?;
    if q.rank() != 3 {
        return Err(invalid("q", "paged attention takes q as [tokens, Hq, D]"));
    }
    if cu_q_lens.len() != kv.num_seqs() + 1 {
        return Err(mismatch(
            "cu_q_lens",
            "kv",
            format!(
                "{} offsets for {} sequences",
                cu_q_lens.len(),
                kv.num_seqs()
            ),
        ));
    }
    use super::kv::KvSource;
    let kv_lens: Vec<u64> = (0..kv.num_seqs()).map(|s| kv.kv_len(s) as u64).collect();
    let lens = SeqLens::new(cu_q_lens, &kv_lens)?;
    let (hq, dq) = (q.shape[1], q.shape[2]);
    let (hkv, dk, dv) = (kv.num_kv_heads(), kv.head_dim(), kv.head_dim_v());
    let scale = scale.unwrap_or(1.0 / (dk as f32).sqrt());
    check_geometry(hq, hkv, dk, dv, dq, scale)?;
    let variant = variant.compile()?;
    check_captures(&variant, &lens, hq)?;
    let n = lens.num_seqs();
    let q = operand("q", q, n, &|s| lens.q_start(s), &|s| lens.q_len(s))?;
    let p = Problem {
        lens,
        q,
        num_q_heads: hq,
        num_kv_heads: hkv,
        head_dim: dk,
        head_dim_v: dv,
        scale,
        variant,
    };
    check_evicted(&p, kv)?;
    Ok(p)
}

/// Runs attention of `q` over paged K/V: validates, plans (building the BlockMask on logical
/// positions unless one is given) and runs the backend. `out` is `[tokens, Hq, Dv]` f32, `lse`
/// `[tokens, Hq]` (natural log).
#[allow(clippy::too_many_arguments)]
pub fn paged_attention(
    backend: &dyn Backend,
    q: &TensorView,
    cu_q_lens: &[u64],
    kv: &PagedKv,
    scale: Option<f32>,
    variant: &Variant,
    block_mask: Option<&BlockMask>,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    let p = prepare(q, cu_q_lens, kv, scale, variant)?;
    check_outputs(&p, out, lse.as_deref())?;
    let plan = plan::plan(&p, kv, &backend.caps(), block_mask)?;
    backend.attention(&p, kv, &plan, out, lse)
}

/// Tile sizes for the eviction check: interval analysis per tile, exact evaluation only for
/// tiles it cannot decide.
const CHECK_ROWS: usize = 64;
const CHECK_COLS: usize = 1024;

/// A window-evicted sequence must never see its evicted positions: proves the mask false on
/// every (query, evicted position) pair, or names the sequence.
fn check_evicted(p: &Problem, kv: &PagedKv) -> Result<()> {
    for s in 0..p.lens.num_seqs() {
        let first = kv.first_retained(s).min(p.lens.kv_len(s));
        if first == 0 || p.lens.q_len(s) == 0 {
            continue;
        }
        let err = || {
            invalid(
                "variant",
                format!(
                    "sequence {s}: positions before {first} were evicted by the window, \
                     but the mask lets queries see them (use a sliding-window mask)"
                ),
            )
        };
        let m = p.variant.mask.as_ref().ok_or_else(err)?;
        if !mask_is_false(m, p, s, first) {
            return Err(err());
        }
    }
    Ok(())
}

/// Whether `m` is false for every head and query of `s` and every kv position below `first`
/// (the shared tile classifier over tiles of `CHECK_ROWS` x `CHECK_COLS`).
fn mask_is_false(m: &Program, p: &Problem, s: usize, first: usize) -> bool {
    let (ql, kl) = (p.lens.q_len(s), p.lens.kv_len(s) as i64);
    let heads = if p.variant.mask_per_head() {
        p.num_q_heads
    } else {
        1
    };
    let (p0, t0) = (p.lens.q_pos0(s), p.lens.q_start(s) as i64);
    let mut classifier = Classifier::default();
    for h in 0..heads {
        for r0 in (0..ql).step_by(CHECK_ROWS) {
            for c0 in (0..first).step_by(CHECK_COLS) {
                let t = TileCtx {
                    batch: s as i64,
                    head: h as i64,
                    q_len: ql as i64,
                    kv_len: kl,
                    q_pos0: p0 + r0 as i64,
                    q_token0: t0 + r0 as i64,
                    rows: CHECK_ROWS.min(ql - r0),
                    kv_pos0: c0 as i64,
                    cols: CHECK_COLS.min(first - c0),
                };
                if classifier.classify(m, &t) != TileClass::Empty {
                    return false;
                }
            }
        }
    }
    true
}
