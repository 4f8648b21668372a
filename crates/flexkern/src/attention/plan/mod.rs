//! The planner: picks each sequence's kernel family and tiling from the problem, builds the
//! BlockMask, and lays out one work list for the whole batch. Pure data, so the choice is
//! testable without running anything.
//!
//! A work item is one (sequence, kv head, q block, kv partition): it stacks the q rows of every
//! query head of the kv head's group into one tile, so each K/V row it loads serves the whole
//! group. Items of one (sequence, kv head, q block) with more than one partition (split-KV,
//! flash-decoding) write partial `(O, LSE)` states that a merge step combines.
//!
//! A mixed batch (prefill chunks beside decode tokens, as continuous batching makes them) is
//! scheduled per sequence, as SGLang-JAX's ragged kernel and FlashInfer's POD attention do:
//! sequences with at most `decode_max_q` queries get decode tiles (one q tile, kv heads fused,
//! KV split over the workers), the others prefill q tiles. The BlockMask holds each sequence's
//! tile; the plan uses two shapes (one per family), so a GPU needs two kernel instances, and the
//! items of both go into one list, largest first, run in one pass.

pub mod coverage;
#[cfg(test)]
mod tests;

use super::problem::Problem;
use crate::device::Caps;
use crate::error::{invalid, Result};
use crate::variant::BlockMask;
use std::borrow::Cow;

/// Kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Many queries per sequence: q tiles, KV split only when there are too few tiles.
    Prefill,
    /// A few queries per sequence: one q tile, the KV split over the workers.
    Decode,
}

/// One task: a (sequence, kv head, q block) visiting `kv_blocks[blocks.0..blocks.1]`, with the
/// tile of its sequence (`Plan::tiles`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkItem {
    /// The family its sequence takes.
    pub kernel: Kernel,
    pub seq: usize,
    /// First kv head, and how many consecutive kv heads the item runs together.
    pub kv_head: usize,
    pub kv_heads: usize,
    pub q_block: usize,
    /// Range into [`Plan::kv_blocks`].
    pub blocks: (usize, usize),
    /// Index into [`Plan::merges`] when the KV is split, else `None` (writes the output).
    pub merge: Option<usize>,
    /// This item's partition within its merge group.
    pub part: usize,
}

/// The split partitions of one (sequence, kv head, q block), merged after the items ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeGroup {
    pub seq: usize,
    pub kv_head: usize,
    pub kv_heads: usize,
    pub q_block: usize,
    pub parts: usize,
    /// Rows of the stacked tile (q rows of the block times the group size times `kv_heads`).
    pub rows: usize,
    /// First row of partition 0 in the partial-state buffer; partition `i` follows at `i * rows`.
    pub slot: usize,
}

/// A planned attention call.
#[derive(Clone, Debug)]
pub struct Plan<'m> {
    /// Block structure of the mask, with each sequence's tile (`BlockMask::tiles`).
    pub block_mask: Cow<'m, BlockMask>,
    /// Visited kv blocks (partial or full for at least one head of the group), ascending per item.
    pub kv_blocks: Vec<u32>,
    /// Work list of every sequence, largest first (run greedily for load balance).
    pub items: Vec<WorkItem>,
    pub merges: Vec<MergeGroup>,
    /// Rows of partial `(O, LSE)` state the split items need.
    pub partial_rows: usize,
}

impl Plan<'_> {
    /// Sequence `seq`'s tile, `(q_block, kv_block)`.
    pub fn tiles(&self, seq: usize) -> (usize, usize) {
        self.block_mask.tiles(seq)
    }

    /// The plan with its own copy of the BlockMask (to keep past the user mask's life).
    pub fn into_owned(self) -> Plan<'static> {
        Plan {
            block_mask: Cow::Owned(self.block_mask.into_owned()),
            kv_blocks: self.kv_blocks,
            items: self.items,
            merges: self.merges,
            partial_rows: self.partial_rows,
        }
    }
}

/// Reading one key's K and V rows costs about as much as this many stacked rows of arithmetic
/// on it (decode is bandwidth bound, prefill compute bound): the unit that lets the two
/// families' items be ordered by one cost.
const KEY_READ_ROWS: usize = 16;

/// Plans `p` for a device with `caps`; uses `user_mask` (and its tiles) when given.
pub fn plan<'m>(p: &Problem, caps: &Caps, user_mask: Option<&'m BlockMask>) -> Result<Plan<'m>> {
    let t = &caps.tiles;
    let g = p.group_size();
    let n = p.lens.num_seqs();
    let max_q = (0..n).map(|s| p.lens.q_len(s)).max().unwrap_or(0);
    let kernels: Vec<Kernel> = (0..n)
        .map(|s| {
            let q = if t.mixed { p.lens.q_len(s) } else { max_q };
            if q <= t.decode_max_q {
                Kernel::Decode
            } else {
                Kernel::Prefill
            }
        })
        .collect();
    // Decode over a token-major cache runs all kv heads in one item, so each token's rows are
    // read as one contiguous run (a head's rows alone sit a page apart: no hardware prefetch).
    let fuse = t.fuse_kv_heads
        && p.num_kv_heads >= 2
        && !p.variant.mask_per_head()
        && user_mask.is_none_or(|m| m.heads == 1)
        && p.kv.token_major();
    let block_mask = match user_mask {
        Some(m) if m.matches(&p.lens, p.num_q_heads) => Cow::Borrowed(m),
        Some(_) => {
            return Err(invalid(
                "block_mask",
                "built for other lengths, block sizes or head count",
            ))
        }
        None => Cow::Owned(build_mask(p, caps, &kernels, fuse)?),
    };

    // Base tasks and their visited blocks.
    struct Base {
        kernel: Kernel,
        seq: usize,
        kv_head: usize,
        kv_heads: usize,
        q_block: usize,
        rows: usize,
        blocks: (usize, usize),
    }
    let mut kv_blocks = Vec::new();
    let mut bases = Vec::new();
    let mut union = Vec::new();
    for (s, &kernel) in kernels.iter().enumerate() {
        let q_len = p.lens.q_len(s);
        let q_block = block_mask.tiles(s).0;
        let step = if fuse && kernel == Kernel::Decode {
            p.num_kv_heads
        } else {
            1
        };
        for qb in 0..block_mask.q_blocks(s) {
            let rows = (q_len - qb * q_block).min(q_block) * g;
            for kvh in (0..p.num_kv_heads).step_by(step) {
                // A broadcast mask gives every kv head the same list: compute it once.
                if kvh == 0 || block_mask.heads > 1 {
                    visited(&block_mask, s, qb, kvh * g..(kvh + step) * g, &mut union);
                }
                let start = kv_blocks.len();
                kv_blocks.extend_from_slice(&union);
                bases.push(Base {
                    kernel,
                    seq: s,
                    kv_head: kvh,
                    kv_heads: step,
                    q_block: qb,
                    rows: rows * step,
                    blocks: (start, kv_blocks.len()),
                });
            }
        }
    }

    // Split-KV: decode always spreads long KV over the workers; prefill only when the whole
    // list has fewer tasks than workers.
    let workers = caps.workers.max(1);
    let slots = workers * t.parts_per_worker.max(1);
    let decode_bases = bases.iter().filter(|b| b.kernel == Kernel::Decode).count();
    let want_decode = slots.max((4 * slots).div_ceil(decode_bases.max(1)));
    let want_prefill = if bases.len() < 2 * workers {
        (2 * workers).div_ceil(bases.len().max(1))
    } else {
        1
    };
    let mut items = Vec::with_capacity(bases.len());
    let mut merges = Vec::new();
    let mut partial_rows = 0usize;
    for b in &bases {
        let nb = b.blocks.1 - b.blocks.0;
        let want = match b.kernel {
            Kernel::Decode => want_decode,
            Kernel::Prefill => want_prefill,
        };
        let parts = want.min(nb / t.min_part_blocks.max(1)).max(1);
        let item = WorkItem {
            kernel: b.kernel,
            seq: b.seq,
            kv_head: b.kv_head,
            kv_heads: b.kv_heads,
            q_block: b.q_block,
            blocks: b.blocks,
            merge: None,
            part: 0,
        };
        if parts == 1 || b.rows == 0 {
            items.push(item);
            continue;
        }
        merges.push(MergeGroup {
            seq: b.seq,
            kv_head: b.kv_head,
            kv_heads: b.kv_heads,
            q_block: b.q_block,
            parts,
            rows: b.rows,
            slot: partial_rows,
        });
        partial_rows += parts * b.rows;
        for part in 0..parts {
            let lo = b.blocks.0 + nb * part / parts;
            let hi = b.blocks.0 + nb * (part + 1) / parts;
            items.push(WorkItem {
                blocks: (lo, hi),
                merge: Some(merges.len() - 1),
                part,
                ..item
            });
        }
    }
    // Largest first: greedy scheduling then balances the workers. The cost is keys visited
    // times (stacked rows + the rows' worth of reading each key), comparable across families.
    items.sort_by_key(|it| {
        let (q_block, kv_block) = block_mask.tiles(it.seq);
        let rows = p.lens.q_len(it.seq).saturating_sub(it.q_block * q_block);
        let keys = (it.blocks.1 - it.blocks.0) * kv_block;
        std::cmp::Reverse(keys * it.kv_heads * (rows.min(q_block) * g + KEY_READ_ROWS))
    });
    Ok(Plan {
        block_mask,
        kv_blocks,
        items,
        merges,
        partial_rows,
    })
}

/// The BlockMask with each family's tile: decode one q tile of the longest decode query run
/// (kv tiles shrunk when heads are fused, so every head's K and V tiles sit in L2 together),
/// prefill the policy's tile, shrunk while the mask over the prefill sequences stays sparse.
fn build_mask(p: &Problem, caps: &Caps, kernels: &[Kernel], fuse: bool) -> Result<BlockMask> {
    let t = &caps.tiles;
    let g = p.group_size();
    let decode_q = (0..kernels.len())
        .filter(|&s| kernels[s] == Kernel::Decode)
        .map(|s| p.lens.q_len(s))
        .max()
        .unwrap_or(0)
        .max(1);
    let decode_kv = if fuse {
        (t.decode_kv_block * 2 / p.num_kv_heads).clamp(16, t.decode_kv_block)
    } else {
        t.decode_kv_block
    };
    let mut prefill = (
        (t.prefill_rows / g).clamp(16, t.prefill_rows),
        t.prefill_kv_block,
    );
    let build = |pf: (usize, usize)| {
        let tile = |s: usize| match kernels[s] {
            Kernel::Decode => (decode_q, decode_kv),
            Kernel::Prefill => pf,
        };
        BlockMask::build_tiled(p.variant.mask.as_ref(), &p.lens, p.num_q_heads, &tile)
    };
    let mut bm = build(prefill)?;
    if !kernels.contains(&Kernel::Prefill) {
        return Ok(bm);
    }
    // A sparse mask (sliding windows, local bands) wastes the edges of large tiles: halve q
    // tiles, then kv tiles, while the mask stays sparse, trading K/V reuse and loop length for
    // fewer visited elements. Kernels skip the keys outside each row's kept range, so halving
    // stops early: per-row copies and per-tile costs grow faster.
    let is_prefill = |s: usize| kernels[s] == Kernel::Prefill;
    while bm.density_of(&is_prefill) < t.sparse_density {
        if prefill.0 >= 2 * t.min_sparse_q_block {
            prefill.0 /= 2;
        } else if prefill.1 >= 2 * t.min_sparse_kv_block {
            prefill.1 /= 2;
        } else {
            break;
        }
        bm = build(prefill)?;
    }
    Ok(bm)
}

/// The kv blocks of (seq, q block) that any head in `heads` visits, ascending, into `out`.
fn visited(bm: &BlockMask, s: usize, qb: usize, heads: std::ops::Range<usize>, out: &mut Vec<u32>) {
    out.clear();
    if bm.heads == 1 {
        let kinds = bm.kinds(s, 0, qb);
        out.extend((0..kinds.len() as u32).filter(|&k| kinds[k as usize] != 0));
        return;
    }
    for kb in 0..bm.kv_blocks(s) {
        if heads.clone().any(|h| bm.kinds(s, h, qb)[kb] != 0) {
            out.push(kb as u32);
        }
    }
}
