//! Cascade (shared-prefix) attention. Groups of sequences whose first tokens sit in the same
//! physical pages (`PageTable::fork`, copy-on-write) run as two levels:
//! - level 1: each group's queries, stacked as one sequence, over the group's shared prefix
//!   pages: the prefix K/V is read once per kv head for the whole group;
//! - level 2: each sequence's queries over its own pages past the prefix, at their logical
//!   positions (the prefix pages are presented as evicted and masked off);
//!
//! then the two `(O, LSE)` states of every row are merged (`merge_states`); sinks enter once,
//! in level 2. Level 1 runs without the mask, so a variant is accepted only when the tile
//! classifier proves its mask keeps the whole shared prefix for every query, and its score mod
//! reads nothing that stacking changes (`b`, `q_pos`, `q_len`, `kv_len`).

use super::merge::merge_states;
use super::paged::{paged_bufs, prepare_buffers};
use super::plan::{plan, Plan};
use super::problem::{PagedLayout, Problem};
use super::{check_outputs, upload_data};
use crate::backend::{to_device, Backend, Buffer};
use crate::device::Caps;
use crate::dtype::DType;
use crate::error::{invalid, mismatch, Result};
use crate::kv_cache::{PageStore, PageTables, PagedBinding};
use crate::tensor::{HostData, TensorView};
use crate::variant::classify::TileClass;
use crate::variant::expr::{b, kv_pos, Var};
use crate::variant::{Tensor, Variant};
use std::borrow::Cow;

/// The arguments of a cascade call besides Q and the cache.
#[derive(Clone, Debug)]
pub struct CascadeArgs<'a> {
    /// n+1 query offsets of the batch's sequences (Q is `[tokens, Hq, D]`).
    pub cu_q_lens: &'a [u64],
    /// G+1 sequence offsets: group `g` is sequences `cu_groups[g]..cu_groups[g + 1]`.
    pub cu_groups: &'a [u64],
    /// The shared prefix length of each group (every sequence of the group holds these tokens
    /// in the same physical pages).
    pub prefix_lens: &'a [u64],
    /// Defaults to 1/sqrt(D).
    pub scale: Option<f32>,
    pub variant: &'a Variant,
}

/// A planned cascade call: host data only, built once and run many times.
#[derive(Clone, Debug)]
pub struct CascadePlan {
    /// Per group, the positions `0..shared[g]` run in level 1. It is the prefix length, or
    /// that rounded down to a page when the prefix's partial last page was copied on write.
    pub shared: Vec<usize>,
    pub prefix: Problem,
    pub prefix_plan: Plan<'static>,
    pub prefix_tables: PageTables,
    pub suffix: Problem,
    pub suffix_plan: Plan<'static>,
    pub suffix_tables: PageTables,
}

/// Backend buffers a cascade call needs besides its operands, allocated once per plan.
pub struct CascadeScratch<Buf> {
    o1: Buf,
    lse1: Buf,
    lse2: Buf,
    host: [Vec<f32>; 6],
}

/// Plans a cascade over the sequences of `tables` (pages of `layout`) for Q `[tokens,
/// q_heads, D]` of `q_dtype`, checking every argument: the groups, that each group's
/// sequences share its prefix pages, and that the variant may run in two levels.
pub fn plan_cascade(
    a: &CascadeArgs,
    q_dtype: DType,
    q_heads: usize,
    layout: &PagedLayout,
    tables: &PageTables,
    caps: &Caps,
) -> Result<CascadePlan> {
    // The whole problem: validates Q, lengths, tables, the variant and window eviction.
    let whole = prepare_buffers(
        q_dtype,
        q_heads,
        a.cu_q_lens,
        layout,
        tables,
        a.scale,
        a.variant,
    )?;
    let n = whole.lens.num_seqs();
    let groups = check_groups(a.cu_groups, a.prefix_lens, n)?;
    if let Some(s) = &a.variant.score {
        for v in [Var::Batch, Var::QPos, Var::QLen, Var::KvLen] {
            if s.uses(v) {
                return Err(invalid(
                    "variant",
                    format!(
                        "the score mod reads `{}`, which differs when a group's queries are \
                         stacked over its prefix",
                        v.name()
                    ),
                ));
            }
        }
    }
    let ps = layout.page_size;
    let pages = |s: usize| {
        &tables.page_indices[tables.cu_pages[s] as usize..tables.cu_pages[s + 1] as usize]
    };
    let mut shared = Vec::with_capacity(groups.len());
    let mut t1 = PageTables {
        cu_pages: vec![0],
        ..Default::default()
    };
    let mut cu_q1 = vec![0u64];
    let mut split_of_seq = vec![0i64; n];
    for (g, seqs) in groups.iter().enumerate() {
        let split = shared_len(g, seqs.clone(), a.prefix_lens[g] as usize, tables, ps)?;
        for s in seqs.clone() {
            if split > 0 && !prefix_visible(&whole, s, split) {
                return Err(invalid(
                    "variant",
                    format!(
                        "sequence {s}: the mask hides part of the shared prefix 0..{split} from \
                         some query; cascade runs the prefix unmasked"
                    ),
                ));
            }
            split_of_seq[s] = split as i64;
        }
        if split > 0 {
            t1.page_indices
                .extend_from_slice(&pages(seqs.start)[..split.div_ceil(ps)]);
        }
        t1.cu_pages.push(t1.page_indices.len() as u32);
        t1.first_page.push(0);
        t1.kv_lens.push(split as u64);
        // Groups are consecutive from sequence 0: group g's queries end where its last ends.
        cu_q1.push(a.cu_q_lens[seqs.end]);
        shared.push(split);
    }
    // Level 2: pages before the split are presented as evicted, and masked off.
    let mut t2 = PageTables {
        cu_pages: vec![0],
        ..Default::default()
    };
    for (s, &split) in split_of_seq.iter().enumerate() {
        let first = (tables.first_page[s] as usize).max(split as usize / ps);
        let skip = first - tables.first_page[s] as usize;
        t2.page_indices
            .extend_from_slice(&pages(s)[skip.min(pages(s).len())..]);
        t2.cu_pages.push(t2.page_indices.len() as u32);
        t2.first_page.push(first as u32);
        t2.kv_lens.push(tables.kv_lens[s]);
    }
    let scale = Some(whole.scale);
    let prefix_variant = Variant {
        mask: None,
        score: a.variant.score.clone(),
        sinks: None,
    };
    let mut suffix_variant = a.variant.clone();
    if split_of_seq.iter().any(|&x| x > 0) {
        let splits = Tensor::int("cascade_prefix", split_of_seq);
        suffix_variant = suffix_variant.mask(kv_pos().ge(splits.at(b())));
    }
    let prefix = prepare_buffers(
        q_dtype,
        q_heads,
        &cu_q1,
        layout,
        &t1,
        scale,
        &prefix_variant,
    )?;
    let suffix = prepare_buffers(
        q_dtype,
        q_heads,
        a.cu_q_lens,
        layout,
        &t2,
        scale,
        &suffix_variant,
    )?;
    let owned = |p: Plan<'_>| Plan {
        block_mask: Cow::Owned(p.block_mask.into_owned()),
        ..p
    };
    Ok(CascadePlan {
        shared,
        prefix_plan: owned(plan(&prefix, caps, None)?),
        suffix_plan: owned(plan(&suffix, caps, None)?),
        prefix,
        prefix_tables: t1,
        suffix,
        suffix_tables: t2,
    })
}

/// Checks `cu_groups` against `n` sequences and `prefix_lens`; returns each group's range.
fn check_groups(
    cu_groups: &[u64],
    prefix_lens: &[u64],
    n: usize,
) -> Result<Vec<std::ops::Range<usize>>> {
    if cu_groups.first() != Some(&0) || cu_groups.windows(2).any(|w| w[1] < w[0]) {
        return Err(invalid("cu_groups", "must start at 0 and never decrease"));
    }
    if *cu_groups.last().unwrap() != n as u64 {
        return Err(mismatch(
            "cu_groups",
            "cu_q_lens",
            format!(
                "the groups end at sequence {} but the batch has {n}",
                cu_groups.last().unwrap()
            ),
        ));
    }
    if prefix_lens.len() + 1 != cu_groups.len() {
        return Err(mismatch(
            "prefix_lens",
            "cu_groups",
            format!(
                "{} prefix lengths for {} groups",
                prefix_lens.len(),
                cu_groups.len() - 1
            ),
        ));
    }
    Ok(cu_groups
        .windows(2)
        .map(|w| w[0] as usize..w[1] as usize)
        .collect())
}

/// The positions group `g` (sequences `seqs`) runs in level 1 for a prefix of `len` tokens:
/// every sequence must hold it, retained, in the first sequence's physical pages. A partial last
/// page counts only while all of them still share it (after a copy-on-write the copies may
/// differ past the fork); otherwise its tokens go to level 2.
fn shared_len(
    g: usize,
    seqs: std::ops::Range<usize>,
    len: usize,
    t: &PageTables,
    ps: usize,
) -> Result<usize> {
    if len == 0 {
        return Ok(0);
    }
    if seqs.is_empty() {
        return Err(invalid(
            "prefix_lens",
            format!("group {g} has no sequence to hold its prefix of {len}"),
        ));
    }
    let pages = |s: usize| &t.page_indices[t.cu_pages[s] as usize..t.cu_pages[s + 1] as usize];
    let s0 = seqs.start;
    let (whole, partial) = (len / ps, !len.is_multiple_of(ps));
    let mut tail_shared = partial;
    for s in seqs {
        if (t.kv_lens[s] as usize) < len {
            return Err(invalid(
                "prefix_lens",
                format!(
                    "group {g}: sequence {s} holds {} tokens, fewer than the prefix ({len})",
                    t.kv_lens[s]
                ),
            ));
        }
        if t.first_page[s] != 0 {
            return Err(invalid(
                "page_indices",
                format!("group {g}: sequence {s} evicted pages of the shared prefix"),
            ));
        }
        let (a, b) = (pages(s0), pages(s));
        if let Some(j) = (0..whole).find(|&j| a[j] != b[j]) {
            return Err(invalid(
                "page_indices",
                format!(
                    "group {g}: sequence {s} does not share prefix page {j} (physical {}, \
                     sequence {s0} has {})",
                    b[j], a[j]
                ),
            ));
        }
        // `len > whole * ps` tokens sit in pages 0..=whole of both tables (checked above).
        tail_shared = tail_shared && a[whole] == b[whole];
    }
    Ok(if tail_shared { len } else { whole * ps })
}

/// Whether the whole problem's mask keeps positions `0..split` for every query and head of
/// sequence `s` (the shared tile classifier; no mask keeps everything).
fn prefix_visible(p: &Problem, s: usize, split: usize) -> bool {
    match &p.variant.mask {
        None => true,
        Some(m) => super::paged::mask_is(m, p, s, split, TileClass::Full),
    }
}

impl CascadePlan {
    /// Both levels' page tables, packed for one upload (`run` reads them from one buffer).
    pub fn packed_tables(&self) -> Vec<u32> {
        let mut v = self.prefix_tables.packed();
        v.extend(self.suffix_tables.packed());
        v
    }

    /// The scratch buffers of `run`: level 1's O and LSE, level 2's LSE.
    pub fn scratch<B: Backend + ?Sized>(&self, backend: &B) -> Result<CascadeScratch<B::Buffer>> {
        let rows = self.suffix.total_q() * self.suffix.num_q_heads;
        let dv = self.suffix.head_dim_v;
        Ok(CascadeScratch {
            o1: backend.alloc(DType::F32, rows * dv)?,
            lse1: backend.alloc(DType::F32, rows)?,
            lse2: backend.alloc(DType::F32, rows)?,
            host: Default::default(),
        })
    }

    /// Runs both levels on `backend` and merges them into `out` `[tokens, Hq, Dv]` (and `lse`
    /// `[tokens, Hq]`). `q` holds Q contiguous, `tables` the `packed_tables()` of this plan, and
    /// `store` the pages the plan was made for. The merge downloads both states, merges them
    /// with `merge_states` and uploads the result (a device would run it as a kernel).
    #[allow(clippy::too_many_arguments)]
    pub fn run<B: Backend + ?Sized>(
        &self,
        backend: &B,
        q: &B::Buffer,
        store: &PageStore<B::Buffer>,
        tables: &B::Buffer,
        scratch: &mut CascadeScratch<B::Buffer>,
        out: &mut B::Buffer,
        lse: Option<&mut B::Buffer>,
    ) -> Result<()> {
        if store.layout != *self.layout() {
            return Err(mismatch(
                "store",
                "plan",
                "the plan was made for other pages",
            ));
        }
        let at2 = self.prefix_tables.offsets().len;
        let need = at2 + self.suffix_tables.offsets().len;
        if tables.dtype() != DType::U32 || tables.len() != need {
            return Err(invalid(
                "tables",
                format!("needs the plan's {need} packed u32 entries"),
            ));
        }
        let rows = self.suffix.total_q() * self.suffix.num_q_heads;
        let dv = self.suffix.head_dim_v;
        check_outputs(&self.suffix, out.len(), lse.as_ref().map(|l| l.len()))?;
        if scratch.o1.len() != rows * dv || scratch.lse1.len() != rows || scratch.lse2.len() != rows
        {
            return Err(invalid("scratch", "made for another plan"));
        }
        let (k, v) = (&store.k, &store.v);
        let io = crate::backend::AttnIo {
            q,
            kv: paged_bufs(&self.suffix_tables, k, v, tables, at2),
            out: &mut *out,
            lse: Some(&mut scratch.lse2),
        };
        backend.attention(&self.suffix, &self.suffix_plan, io)?;
        if rows == 0 {
            return Ok(());
        }
        let io = crate::backend::AttnIo {
            q,
            kv: paged_bufs(&self.prefix_tables, k, v, tables, 0),
            out: &mut scratch.o1,
            lse: Some(&mut scratch.lse1),
        };
        backend.attention(&self.prefix, &self.prefix_plan, io)?;
        let [o1, l1, o2, l2, o, l] = &mut scratch.host;
        for (h, n) in [
            (&mut *o1, rows * dv),
            (&mut *o2, rows * dv),
            (&mut *o, rows * dv),
        ] {
            h.resize(n, 0.0);
        }
        for h in [&mut *l1, &mut *l2, &mut *l] {
            h.resize(rows, 0.0);
        }
        let down =
            |b: &B::Buffer, h: &mut Vec<f32>| backend.download(b, 0, bytemuck::cast_slice_mut(h));
        down(&scratch.o1, o1)?;
        down(&scratch.lse1, l1)?;
        down(out, o2)?;
        down(&scratch.lse2, l2)?;
        merge_rows(o1, l1, o2, l2, rows, dv, o, l)?;
        backend.upload(out, 0, bytemuck::cast_slice(o))?;
        if let Some(lb) = lse {
            backend.upload(lb, 0, bytemuck::cast_slice(l))?;
        }
        Ok(())
    }

    fn layout(&self) -> &PagedLayout {
        match &self.suffix.kv {
            super::problem::KvLayout::Paged(l) => l,
            _ => unreachable!("a cascade plan is paged"),
        }
    }
}

/// Merges the two levels' states with `merge_states`. A row with a NaN (or +inf) LSE in either
/// level is NaN in both outputs, as the single-level kernels make it (merge_states refuses
/// such states, so they are set aside first).
#[allow(clippy::too_many_arguments)]
fn merge_rows(
    o1: &mut [f32],
    l1: &mut [f32],
    o2: &mut [f32],
    l2: &mut [f32],
    rows: usize,
    dv: usize,
    o: &mut [f32],
    l: &mut [f32],
) -> Result<()> {
    let bad = |x: f32| x.is_nan() || x == f32::INFINITY;
    let poisoned: Vec<usize> = (0..rows).filter(|&r| bad(l1[r]) || bad(l2[r])).collect();
    for &r in &poisoned {
        (l1[r], l2[r]) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    }
    merge_states(&[(o1, l1), (o2, l2)], rows, dv, o, l)?;
    for &r in &poisoned {
        o[r * dv..][..dv].fill(f32::NAN);
        l[r] = f32::NAN;
    }
    Ok(())
}

/// Cascade attention of host `q` `[tokens, Hq, D]` over the sequences of `kv` on any backend:
/// plans, uploads Q (as f32) and both levels' tables (one copy), runs, and downloads O (and
/// LSE). For repeated calls build the plan once and call `CascadePlan::run` on buffers.
pub fn cascade_attention<B: Backend + ?Sized>(
    backend: &B,
    q: &TensorView,
    kv: &PagedBinding<'_, B::Buffer>,
    args: &CascadeArgs,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    q.validate("q")?;
    if q.rank() != 3 {
        return Err(invalid("q", "cascade attention takes q as [tokens, Hq, D]"));
    }
    let (t, h, d) = (q.shape[0], q.shape[1], q.shape[2]);
    if d != kv.store.layout.head_dim {
        return Err(mismatch(
            "q",
            "k",
            format!("head size {d} vs {}", kv.store.layout.head_dim),
        ));
    }
    if args.cu_q_lens.last().is_some_and(|&e| e > t as u64) {
        return Err(invalid(
            "q",
            format!(
                "cu_q_lens needs {} tokens, q holds {t}",
                args.cu_q_lens.last().unwrap()
            ),
        ));
    }
    let plan = plan_cascade(
        args,
        DType::F32,
        h,
        &kv.store.layout,
        &kv.tables,
        &backend.caps(),
    )?;
    check_outputs(&plan.suffix, out.len(), lse.as_ref().map(|l| l.len()))?;
    let mut qc = vec![0f32; plan.suffix.total_q() * h * d];
    for (i, row) in qc.chunks_exact_mut(d).enumerate() {
        q.data
            .read_f32((i / h) * q.strides[0] + (i % h) * q.strides[1], row);
    }
    let qb = upload_data(backend, &HostData::F32(&qc))?;
    let tables = to_device(backend, &plan.packed_tables())?;
    let mut scratch = plan.scratch(backend)?;
    let mut ob = backend.alloc(DType::F32, out.len())?;
    backend.upload(&mut ob, 0, bytemuck::cast_slice(out))?;
    let mut lb = match &lse {
        Some(l) => {
            let mut b = backend.alloc(DType::F32, l.len())?;
            backend.upload(&mut b, 0, bytemuck::cast_slice(l))?;
            Some(b)
        }
        None => None,
    };
    plan.run(
        backend,
        &qb,
        kv.store,
        &tables,
        &mut scratch,
        &mut ob,
        lb.as_mut(),
    )?;
    backend.download(&ob, 0, bytemuck::cast_slice_mut(out))?;
    if let (Some(dst), Some(src)) = (lse, &lb) {
        backend.download(src, 0, bytemuck::cast_slice_mut(dst))?;
    }
    Ok(())
}
