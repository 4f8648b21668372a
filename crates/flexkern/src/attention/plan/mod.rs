//! The planner: picks the kernel and its tiling from the problem, builds the BlockMask, and
//! lays out the work list. Pure data, so the choice is testable without running anything.
//!
//! A work item is one (sequence, kv head, q block, kv partition): it stacks the q rows of every
//! query head of the kv head's group into one tile, so each K/V row it loads serves the whole
//! group. Items of one (sequence, kv head, q block) with more than one partition (split-KV,
//! flash-decoding) write partial `(O, LSE)` states that a merge step combines.

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

/// One task: a (sequence, kv head, q block) visiting `kv_blocks[blocks.0..blocks.1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkItem {
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
    pub kernel: Kernel,
    pub q_block: usize,
    pub kv_block: usize,
    pub block_mask: Cow<'m, BlockMask>,
    /// Visited kv blocks (partial or full for at least one head of the group), ascending per item.
    pub kv_blocks: Vec<u32>,
    /// Work list, largest first (run greedily for load balance).
    pub items: Vec<WorkItem>,
    pub merges: Vec<MergeGroup>,
    /// Rows of partial `(O, LSE)` state the split items need.
    pub partial_rows: usize,
}

/// Plans `p` for a device with `caps`; uses `user_mask` (and its block sizes) when given.
pub fn plan<'m>(p: &Problem, caps: &Caps, user_mask: Option<&'m BlockMask>) -> Result<Plan<'m>> {
    let t = &caps.tiles;
    let g = p.group_size();
    let n = p.lens.num_seqs();
    let max_q = (0..n).map(|s| p.lens.q_len(s)).max().unwrap_or(0);
    let kernel = if max_q <= t.decode_max_q {
        Kernel::Decode
    } else {
        Kernel::Prefill
    };
    // Decode over a token-major cache runs all kv heads in one item, so each token's rows are
    // read as one contiguous run (a head's rows alone sit a page apart: no hardware prefetch).
    let fuse_heads = t.fuse_kv_heads
        && kernel == Kernel::Decode
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
        None => {
            let (qb, kb) = match kernel {
                // Fused heads: keep every head's K and V tiles within L2 together.
                Kernel::Decode if fuse_heads => (
                    max_q.max(1),
                    (t.decode_kv_block * 2 / p.num_kv_heads).clamp(16, t.decode_kv_block),
                ),
                Kernel::Decode => (max_q.max(1), t.decode_kv_block),
                Kernel::Prefill => (
                    (t.prefill_rows / g).clamp(16, t.prefill_rows),
                    t.prefill_kv_block,
                ),
            };
            let build =
                |qb, kb| BlockMask::build(p.variant.mask.as_ref(), &p.lens, p.num_q_heads, qb, kb);
            let mut bm = build(qb, kb)?;
            // A sparse mask (sliding windows, local bands) wastes the edges of large tiles:
            // halve q tiles, then kv tiles, while the mask stays sparse, trading K/V reuse and
            // loop length for fewer visited elements. Kernels skip the keys outside each row's
            // kept range, so halving stops early: per-row copies and per-tile costs grow faster.
            while kernel == Kernel::Prefill && bm.density() < t.sparse_density {
                if bm.q_block >= 2 * t.min_sparse_q_block {
                    bm = build(bm.q_block / 2, bm.kv_block)?;
                } else if bm.kv_block >= 2 * t.min_sparse_kv_block {
                    bm = build(bm.q_block, bm.kv_block / 2)?;
                } else {
                    break;
                }
            }
            Cow::Owned(bm)
        }
    };
    let (q_block, kv_block) = (block_mask.q_block, block_mask.kv_block);
    let fuse = fuse_heads;

    // Base tasks and their visited blocks.
    struct Base {
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
    for s in 0..n {
        let q_len = p.lens.q_len(s);
        for qb in 0..block_mask.q_blocks(s) {
            let rows = (q_len - qb * q_block).min(q_block) * g;
            let step = if fuse { p.num_kv_heads } else { 1 };
            for kvh in (0..p.num_kv_heads).step_by(step) {
                // A broadcast mask gives every kv head the same list: compute it once.
                if kvh == 0 || block_mask.heads > 1 {
                    visited(&block_mask, s, qb, kvh * g..(kvh + step) * g, &mut union);
                }
                let start = kv_blocks.len();
                kv_blocks.extend_from_slice(&union);
                bases.push(Base {
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

    // Split-KV: decode always spreads long KV over the workers; prefill only when there are
    // fewer tasks than workers.
    let workers = caps.workers.max(1);
    let slots = workers * t.parts_per_worker.max(1);
    let want = match kernel {
        Kernel::Decode => slots.max((4 * slots).div_ceil(bases.len().max(1))),
        Kernel::Prefill if bases.len() < 2 * workers => (2 * workers).div_ceil(bases.len().max(1)),
        Kernel::Prefill => 1,
    };
    let mut items = Vec::with_capacity(bases.len());
    let mut merges = Vec::new();
    let mut partial_rows = 0usize;
    for b in &bases {
        let nb = b.blocks.1 - b.blocks.0;
        let parts = want.min(nb / t.min_part_blocks.max(1)).max(1);
        if parts == 1 || b.rows == 0 {
            items.push(WorkItem {
                seq: b.seq,
                kv_head: b.kv_head,
                kv_heads: b.kv_heads,
                q_block: b.q_block,
                blocks: b.blocks,
                merge: None,
                part: 0,
            });
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
                seq: b.seq,
                kv_head: b.kv_head,
                kv_heads: b.kv_heads,
                q_block: b.q_block,
                blocks: (lo, hi),
                merge: Some(merges.len() - 1),
                part,
            });
        }
    }
    // Largest first: greedy scheduling then balances the workers.
    items.sort_by_key(|it| {
        let rows = p.lens.q_len(it.seq).saturating_sub(it.q_block * q_block);
        std::cmp::Reverse((it.blocks.1 - it.blocks.0) * rows.min(q_block))
    });
    Ok(Plan {
        kernel,
        q_block,
        kv_block,
        block_mask,
        kv_blocks,
        items,
        merges,
        partial_rows,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionArgs;
    use crate::device::TilePolicy;
    use crate::tensor::TensorView;
    use crate::variant::{builtins, Variant};

    fn caps(workers: usize) -> Caps {
        Caps::cpu(workers, 8)
    }

    /// Plans one sequence of `q` queries over `kv` keys.
    fn plan_for(
        q: usize,
        kv: usize,
        hq: usize,
        hkv: usize,
        v: Variant,
        workers: usize,
        mask: Option<&BlockMask>,
    ) -> Result<Plan<'static>> {
        let qd = vec![0f32; q * hq * 4];
        let kd = vec![0f32; kv * hkv * 4];
        let args = AttentionArgs::new(
            TensorView::contiguous(&qd[..], &[q, hq, 4]),
            TensorView::contiguous(&kd[..], &[kv, hkv, 4]),
            TensorView::contiguous(&kd[..], &[kv, hkv, 4]),
        )
        .variant(v);
        let p = args.prepare()?;
        plan(&p, &caps(workers), mask).map(|pl| Plan {
            block_mask: Cow::Owned(pl.block_mask.into_owned()),
            ..pl
        })
    }

    #[test]
    fn decode_splits_long_kv_over_workers() {
        let pl = plan_for(1, 32768, 32, 8, Variant::full(), 4, None).unwrap();
        assert_eq!(pl.kernel, Kernel::Decode);
        // A token-major cache: one item runs all 8 kv heads (32 stacked rows).
        assert_eq!(pl.merges.len(), 1);
        assert!(pl.merges[0].parts >= 4 && pl.merges[0].rows == 32);
        assert_eq!(pl.merges[0].kv_heads, 8);
        // Every kv block is visited exactly once per kv head.
        for kvh in 0..8 {
            let mut seen: Vec<u32> = pl
                .items
                .iter()
                .filter(|it| (it.kv_head..it.kv_head + it.kv_heads).contains(&kvh))
                .flat_map(|it| pl.kv_blocks[it.blocks.0..it.blocks.1].iter().copied())
                .collect();
            seen.sort();
            assert_eq!(seen, (0..32768 / pl.kv_block as u32).collect::<Vec<_>>());
        }
        // One kv head: still split over every worker.
        let pl = plan_for(1, 8192, 1, 1, Variant::full(), 2, None).unwrap();
        assert!(pl.merges[0].parts >= 2);
        // A short prefill chunk over a long KV is split too, so every worker has work.
        let pl = plan_for(100, 8192, 1, 1, Variant::full(), 2, None).unwrap();
        assert_eq!(pl.kernel, Kernel::Prefill);
        assert_eq!(pl.merges.len(), 1);
        assert!(pl.merges[0].parts >= 2 && pl.items.len() == pl.merges[0].parts);
        // Short KV is not split.
        let pl = plan_for(1, 100, 4, 1, Variant::full(), 8, None).unwrap();
        assert!(pl.merges.is_empty() && pl.items.len() == 1);
    }

    /// The plan follows the device's policy, not the host: a GPU-like policy runs kv heads as
    /// separate items and wants several partitions per worker.
    #[test]
    fn the_tile_policy_comes_from_the_caps() {
        let qd = vec![0f32; 32 * 4];
        let kd = vec![0f32; 8192 * 8 * 4];
        let args = AttentionArgs::new(
            TensorView::contiguous(&qd[..], &[1, 32, 4]),
            TensorView::contiguous(&kd[..], &[8192, 8, 4]),
            TensorView::contiguous(&kd[..], &[8192, 8, 4]),
        );
        let p = args.prepare().unwrap();
        let mut gpu = Caps::cpu(132, 1);
        gpu.kind = crate::device::DeviceKind::Gpu {
            sms: 132,
            compute_capability: (9, 0),
            smem_per_block: 227 << 10,
            smem_per_sm: 228 << 10,
            l2_bytes: 50 << 20,
        };
        gpu.tiles.fuse_kv_heads = false;
        gpu.tiles.parts_per_worker = 2;
        gpu.tiles.decode_kv_block = 64;
        let pl = plan(&p, &gpu, None).unwrap();
        assert_eq!(pl.kv_block, 64);
        assert!(pl.items.iter().all(|it| it.kv_heads == 1));
        assert_eq!(pl.merges.len(), 8, "one merge group per kv head");
        // 128 blocks per head, at least 4 per partition: 32 partitions each.
        assert!(pl.merges.iter().all(|m| m.parts == 32));
        let cpu = plan(&p, &caps(2), None).unwrap();
        assert!(
            cpu.items.iter().all(|it| it.kv_heads == 8),
            "fused on the CPU"
        );
    }

    #[test]
    fn prefill_tiles_queries_and_skips_masked_blocks() {
        let causal = Variant::full().mask(builtins::causal());
        let pl = plan_for(1000, 1000, 8, 2, causal, 2, None).unwrap();
        assert_eq!(pl.kernel, Kernel::Prefill);
        assert_eq!(pl.q_block * 4, TilePolicy::cpu().prefill_rows);
        let qbs = 1000usize.div_ceil(pl.q_block);
        assert_eq!(pl.items.len(), qbs * 2);
        assert!(pl.merges.is_empty());
        // Causal: q block i visits kv blocks up to its last query.
        for it in &pl.items {
            let last_q = ((it.q_block + 1) * pl.q_block).min(1000) - 1;
            assert_eq!(it.blocks.1 - it.blocks.0, last_q / pl.kv_block + 1);
        }
        // Sliding window: the visited count does not grow with the length.
        let sw = Variant::full()
            .mask(builtins::causal())
            .mask(builtins::sliding_window(256));
        let pl = plan_for(4096, 4096, 1, 1, sw, 2, None).unwrap();
        let max = pl.items.iter().map(|it| it.blocks.1 - it.blocks.0).max();
        assert!(max.unwrap() <= (pl.q_block + 256) / pl.kv_block + 2);
        let dense = plan_for(4096, 4096, 1, 1, Variant::full(), 2, None).unwrap();
        assert!(
            pl.q_block < dense.q_block,
            "a sparse mask shortens the q tile"
        );
    }

    #[test]
    fn user_mask_dictates_tiles() {
        let lens = crate::attention::problem::SeqLens::single(300, 300);
        let bm = BlockMask::build(None, &lens, 2, 48, 40).unwrap();
        let pl = plan_for(300, 300, 2, 1, Variant::full(), 2, Some(&bm)).unwrap();
        assert_eq!((pl.q_block, pl.kv_block), (48, 40));
        let wrong = BlockMask::build(None, &lens, 2, 48, 40).unwrap();
        assert!(plan_for(200, 300, 2, 1, Variant::full(), 2, Some(&wrong)).is_err());
    }

    #[test]
    fn empty_sequences_and_per_head_masks() {
        // kv_len 0: one item with nothing to visit (it writes O = 0).
        let pl = plan_for(3, 0, 2, 1, Variant::full(), 2, None).unwrap();
        assert_eq!(pl.items.len(), 1);
        assert_eq!(pl.items[0].blocks.0, pl.items[0].blocks.1);
        // q_len 0: no work.
        let pl = plan_for(0, 10, 2, 1, Variant::full(), 2, None).unwrap();
        assert!(pl.items.is_empty());
        // A head-dependent mask visits the union over the group's heads.
        let bs = Variant::full().mask(builtins::block_sparse(64, 1, 4, true));
        let pl = plan_for(512, 512, 4, 1, bs, 1, None).unwrap();
        assert_eq!(pl.block_mask.heads, 4);
        for it in &pl.items {
            let list = &pl.kv_blocks[it.blocks.0..it.blocks.1];
            for kb in 0..pl.block_mask.kv_blocks(0) {
                let any = (0..4).any(|h| pl.block_mask.kinds(0, h, it.q_block)[kb] != 0);
                assert_eq!(any, list.contains(&(kb as u32)));
            }
        }
    }
}
