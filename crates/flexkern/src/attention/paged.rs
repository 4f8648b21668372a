//! Ragged paged attention: one call over a batch mixing prefill chunks and decode tokens whose
//! K/V live in pages. It builds the same `Problem` as contiguous attention and runs the same
//! planner and kernels; only the `KvSource` differs, so every variant works unchanged and mods
//! see logical positions.

use super::problem::{Layout, PagedLayout, Problem, SeqLens};
use super::{check_outputs, plan, run_and_download, upload_data};
use crate::backend::{to_device, Backend, KvBufs, Slice};
use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::kv_cache::{PageTables, PagedBinding};
use crate::tensor::TensorView;
use crate::variant::classify::{Classifier, TileClass};
use crate::variant::program::{Program, TileCtx};
use crate::variant::{BlockMask, Variant};

/// Validates `q` `[tokens, Hq, D]` with `cu_q_lens` (n+1 offsets) against paged K/V of
/// `layout` read through `tables`, and returns the problem (use it with
/// `reference::attention` to check a kernel). `scale` defaults to 1/sqrt(D).
pub fn prepare(
    q: &TensorView<'_>,
    cu_q_lens: &[u64],
    layout: &PagedLayout,
    tables: &PageTables,
    scale: Option<f32>,
    variant: &Variant,
) -> Result<Problem> {
    q.validate("q")?;
    if q.rank() != 3 {
        return Err(invalid("q", "paged attention takes q as [tokens, Hq, D]"));
    }
    let lens = lens_of(cu_q_lens, layout, tables)?;
    let n = lens.num_seqs();
    let ql = super::problem::layout("q", q, n, &|s| lens.q_start(s), &|s| lens.q_len(s))?;
    finish(lens, ql, layout, tables, scale, variant)
}

/// As `prepare`, for Q already in a contiguous `[tokens, q_heads, head_dim]` buffer of `dtype`.
#[allow(clippy::too_many_arguments)]
pub fn prepare_buffers(
    q_dtype: DType,
    q_heads: usize,
    cu_q_lens: &[u64],
    layout: &PagedLayout,
    tables: &PageTables,
    scale: Option<f32>,
    variant: &Variant,
) -> Result<Problem> {
    let lens = lens_of(cu_q_lens, layout, tables)?;
    let d = layout.head_dim;
    let ql = Layout {
        dtype: q_dtype,
        seq_base: (0..lens.num_seqs())
            .map(|s| lens.q_start(s) * q_heads * d)
            .collect(),
        tok_stride: q_heads * d,
        head_stride: d,
        heads: q_heads,
        dim: d,
        extent: lens.total_q() * q_heads * d,
    };
    finish(lens, ql, layout, tables, scale, variant)
}

fn lens_of(cu_q_lens: &[u64], layout: &PagedLayout, tables: &PageTables) -> Result<SeqLens> {
    if cu_q_lens.len() != tables.num_seqs() + 1 {
        return Err(invalid(
            "cu_q_lens",
            format!(
                "{} offsets for {} sequences in the page tables",
                cu_q_lens.len(),
                tables.num_seqs()
            ),
        ));
    }
    tables.validate(layout.num_pages, layout.page_size)?;
    SeqLens::new(cu_q_lens, &tables.kv_lens)
}

fn finish(
    lens: SeqLens,
    q: Layout,
    layout: &PagedLayout,
    tables: &PageTables,
    scale: Option<f32>,
    variant: &Variant,
) -> Result<Problem> {
    let p = Problem::build(
        lens,
        q,
        super::problem::KvLayout::Paged(layout.clone()),
        scale,
        variant,
    )?;
    check_evicted(&p, tables, layout.page_size)?;
    Ok(p)
}

/// Runs attention of host `q` over the paged K/V of `kv` on any backend: validates, plans
/// (building the BlockMask on logical positions unless one is given), uploads Q and the page
/// tables (one copy), runs, and downloads. `out` is `[tokens, Hq, Dv]` f32, `lse`
/// `[tokens, Hq]` (natural log).
#[allow(clippy::too_many_arguments)]
pub fn paged_attention<B: Backend + ?Sized>(
    backend: &B,
    q: &TensorView,
    cu_q_lens: &[u64],
    kv: &PagedBinding<'_, B::Buffer>,
    scale: Option<f32>,
    variant: &Variant,
    block_mask: Option<&BlockMask>,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    let p = prepare(q, cu_q_lens, &kv.store.layout, &kv.tables, scale, variant)?;
    check_outputs(&p, out.len(), lse.as_ref().map(|l| l.len()))?;
    let plan = plan::plan(&p, &backend.caps(), block_mask)?;
    let qb = upload_data(backend, &q.data)?;
    let tables = to_device(backend, &kv.tables.packed())?;
    let bufs = paged_bufs(&kv.tables, &kv.store.k, &kv.store.v, &tables, 0);
    run_and_download(backend, &p, &plan, &qb, bufs, out, lse)
}

/// The paged bindings of `tables` packed (`PageTables::packed`) at element `at` of `packed`.
pub fn paged_bufs<'a, Buf>(
    tables: &PageTables,
    k: &'a Buf,
    v: &'a Buf,
    packed: &'a Buf,
    at: usize,
) -> KvBufs<'a, Buf> {
    let o = tables.offsets();
    let n = tables.num_seqs();
    KvBufs::Paged {
        k,
        v,
        cu_pages: Slice {
            buf: packed,
            start: at + o.cu_pages,
            len: n + 1,
        },
        first_page: Slice {
            buf: packed,
            start: at + o.first_page,
            len: n,
        },
        page_indices: Slice {
            buf: packed,
            start: at + o.page_indices,
            len: tables.page_indices.len(),
        },
    }
}

/// Tile sizes for the eviction check: interval analysis per tile, exact evaluation only for
/// tiles it cannot decide.
const CHECK_ROWS: usize = 64;
const CHECK_COLS: usize = 1024;

/// A window-evicted sequence must never see its evicted positions: proves the mask false on
/// every (query, evicted position) pair, or names the sequence.
fn check_evicted(p: &Problem, tables: &PageTables, page_size: usize) -> Result<()> {
    for s in 0..p.lens.num_seqs() {
        let first = tables.first_retained(s, page_size).min(p.lens.kv_len(s));
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
        if !mask_is(m, p, s, first, TileClass::Empty) {
            return Err(err());
        }
    }
    Ok(())
}

/// Whether `m` classifies as `want` (Empty: hidden, Full: kept) for every head and query of
/// sequence `s` and every kv position below `end` (the shared tile classifier over tiles of
/// `CHECK_ROWS` x `CHECK_COLS`): the eviction proof here and the cascade's prefix proof.
pub(crate) fn mask_is(m: &Program, p: &Problem, s: usize, end: usize, want: TileClass) -> bool {
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
            for c0 in (0..end).step_by(CHECK_COLS) {
                let t = TileCtx {
                    batch: s as i64,
                    head: h as i64,
                    q_len: ql as i64,
                    kv_len: kl,
                    q_pos0: p0 + r0 as i64,
                    q_token0: t0 + r0 as i64,
                    rows: CHECK_ROWS.min(ql - r0),
                    kv_pos0: c0 as i64,
                    cols: CHECK_COLS.min(end - c0),
                };
                if classifier.classify(m, &t) != want {
                    return false;
                }
            }
        }
    }
    true
}
