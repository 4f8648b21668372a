//! Planner tests: tiles, splits, the mixed schedule, and coverage of every output row.

use super::coverage::check;
use super::*;
use crate::attention::AttentionArgs;
use crate::device::TilePolicy;
use crate::tensor::TensorView;
use crate::variant::{builtins, Variant};

fn caps(workers: usize) -> Caps {
    Caps::cpu(workers, 8)
}

/// The problem of a ragged batch, `(q_len, kv_len)` per sequence, head size 4, K/V values from
/// `fill`.
fn problem(seqs: &[(usize, usize)], hq: usize, hkv: usize, v: &Variant, fill: f32) -> Problem {
    let (tq, tk): (usize, usize) = (
        seqs.iter().map(|s| s.0).sum(),
        seqs.iter().map(|s| s.1).sum(),
    );
    let qd: Vec<f32> = (0..tq * hq * 4).map(|i| (i as f32 * fill).sin()).collect();
    let kd: Vec<f32> = (0..tk * hkv * 4).map(|i| (i as f32 * fill).cos()).collect();
    let cu = |f: fn(&(usize, usize)) -> usize| {
        let mut c = vec![0u64];
        for s in seqs {
            c.push(c.last().unwrap() + f(s) as u64);
        }
        c
    };
    let (cu_q, cu_kv) = (cu(|s| s.0), cu(|s| s.1));
    AttentionArgs::new(
        TensorView::contiguous(&qd[..], &[tq, hq, 4]),
        TensorView::contiguous(&kd[..], &[tk, hkv, 4]),
        TensorView::contiguous(&kd[..], &[tk, hkv, 4]),
    )
    .ragged(&cu_q, &cu_kv)
    .variant(v.clone())
    .prepare()
    .unwrap()
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
    let p = problem(&[(q, kv)], hq, hkv, &v, 0.1);
    let pl = plan(&p, &caps(workers), mask)?.into_owned();
    check(&pl, &p).unwrap();
    Ok(pl)
}

/// The family of sequence `s`'s items (all of them take the same).
fn kernel_of(pl: &Plan, s: usize) -> Option<Kernel> {
    let mut ks = pl.items.iter().filter(|it| it.seq == s).map(|it| it.kernel);
    let k = ks.next()?;
    assert!(ks.all(|x| x == k), "sequence {s} mixes families");
    Some(k)
}

#[test]
fn decode_splits_long_kv_over_workers() {
    let pl = plan_for(1, 32768, 32, 8, Variant::full(), 4, None).unwrap();
    assert_eq!(kernel_of(&pl, 0), Some(Kernel::Decode));
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
        assert_eq!(seen, (0..32768 / pl.tiles(0).1 as u32).collect::<Vec<_>>());
    }
    // One kv head: still split over every worker.
    let pl = plan_for(1, 8192, 1, 1, Variant::full(), 2, None).unwrap();
    assert!(pl.merges[0].parts >= 2);
    // A short prefill chunk over a long KV is split too, so every worker has work.
    let pl = plan_for(100, 8192, 1, 1, Variant::full(), 2, None).unwrap();
    assert_eq!(kernel_of(&pl, 0), Some(Kernel::Prefill));
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
    let p = problem(&[(1, 8192)], 32, 8, &Variant::full(), 0.1);
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
    check(&pl, &p).unwrap();
    assert_eq!(pl.tiles(0).1, 64);
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
    assert_eq!(kernel_of(&pl, 0), Some(Kernel::Prefill));
    let (qb, kb) = pl.tiles(0);
    assert_eq!(qb * 4, TilePolicy::cpu().prefill_rows);
    let qbs = 1000usize.div_ceil(qb);
    assert_eq!(pl.items.len(), qbs * 2);
    assert!(pl.merges.is_empty());
    // Causal: q block i visits kv blocks up to its last query.
    for it in &pl.items {
        let last_q = ((it.q_block + 1) * qb).min(1000) - 1;
        assert_eq!(it.blocks.1 - it.blocks.0, last_q / kb + 1);
    }
    // Sliding window: the visited count does not grow with the length.
    let sw = Variant::full()
        .mask(builtins::causal())
        .mask(builtins::sliding_window(256));
    let pl = plan_for(4096, 4096, 1, 1, sw, 2, None).unwrap();
    let (qb, kb) = pl.tiles(0);
    let max = pl.items.iter().map(|it| it.blocks.1 - it.blocks.0).max();
    assert!(max.unwrap() <= (qb + 256) / kb + 2);
    let dense = plan_for(4096, 4096, 1, 1, Variant::full(), 2, None).unwrap();
    assert!(qb < dense.tiles(0).0, "a sparse mask shortens the q tile");
}

#[test]
fn user_mask_dictates_tiles() {
    let lens = crate::attention::problem::SeqLens::single(300, 300);
    let bm = BlockMask::build(None, &lens, 2, 48, 40).unwrap();
    let pl = plan_for(300, 300, 2, 1, Variant::full(), 2, Some(&bm)).unwrap();
    assert_eq!(pl.tiles(0), (48, 40));
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

/// The batch of issue 17: a 2k-token prefill chunk and 32 decode sequences at 8k, GQA 32/8.
fn chunk_and_decodes() -> Vec<(usize, usize)> {
    let mut seqs = vec![(2048, 2048)];
    seqs.extend((0..32).map(|i| (1, 8192 - 64 * i)));
    seqs
}

#[test]
fn a_mixed_batch_schedules_each_sequence_by_its_shape() {
    let causal = Variant::full().mask(builtins::causal());
    let seqs = chunk_and_decodes();
    let p = problem(&seqs, 32, 8, &causal, 0.1);
    for workers in [2, 16] {
        let pl = plan(&p, &caps(workers), None).unwrap();
        check(&pl, &p).unwrap();
        // The chunk: prefill q tiles of the policy's stacked rows, one item per kv head.
        let t = TilePolicy::cpu();
        assert_eq!(kernel_of(&pl, 0), Some(Kernel::Prefill));
        assert_eq!(pl.tiles(0), (t.prefill_rows / 4, t.prefill_kv_block));
        let chunk: Vec<_> = pl.items.iter().filter(|it| it.seq == 0).collect();
        assert!(chunk
            .iter()
            .all(|it| it.kv_heads == 1 && it.merge.is_none()));
        assert_eq!(chunk.len(), 2048 / pl.tiles(0).0 * 8);
        // Each decode sequence: one item per partition with every kv head fused, split over
        // the workers.
        for s in 1..seqs.len() {
            assert_eq!(kernel_of(&pl, s), Some(Kernel::Decode), "sequence {s}");
            assert_eq!(pl.tiles(s).0, 1);
            let its: Vec<_> = pl.items.iter().filter(|it| it.seq == s).collect();
            assert!(its.iter().all(|it| it.kv_heads == 8 && it.merge.is_some()));
            assert!(
                its.len() >= workers.min(pl.tiles(s).1),
                "sequence {s}: {}",
                its.len()
            );
        }
        // Largest first, and both families in the one list: not grouped by family.
        let first_decode = pl.items.iter().position(|it| it.kernel == Kernel::Decode);
        let last_prefill = pl.items.iter().rposition(|it| it.kernel == Kernel::Prefill);
        assert!(first_decode.unwrap() < last_prefill.unwrap(), "interleaved");
    }
    // The single path (`mixed = false`): everything prefill, decode rows in 64-query tiles and
    // never split.
    let mut single = caps(2);
    single.tiles.mixed = false;
    let pl = plan(&p, &single, None).unwrap();
    check(&pl, &p).unwrap();
    assert!(pl.items.iter().all(|it| it.kernel == Kernel::Prefill));
    assert!(pl.merges.is_empty());
    assert!(pl.items.iter().all(|it| it.kv_heads == 1));
}

#[test]
fn plans_depend_only_on_lengths_and_caps() {
    let sw = Variant::full()
        .mask(builtins::causal())
        .mask(builtins::sliding_window(300));
    let seqs = vec![(700, 900), (1, 5000), (0, 30), (3, 0), (16, 2000), (17, 17)];
    let a = problem(&seqs, 8, 2, &sw, 0.1);
    let b = problem(&seqs, 8, 2, &sw, 0.7);
    for w in [1, 2, 7] {
        let (pa, pb) = (
            plan(&a, &caps(w), None).unwrap(),
            plan(&b, &caps(w), None).unwrap(),
        );
        check(&pa, &a).unwrap();
        assert_eq!(pa.items, pb.items);
        assert_eq!(pa.merges, pb.merges);
        assert_eq!(pa.kv_blocks, pb.kv_blocks);
        assert_eq!(pa.partial_rows, pb.partial_rows);
        // Decode-class sequences (at most 16 queries) take decode tiles, the others prefill.
        for (s, &(q, _)) in seqs.iter().enumerate() {
            let want = if q <= 16 {
                Kernel::Decode
            } else {
                Kernel::Prefill
            };
            assert!(kernel_of(&pa, s).is_none_or(|k| k == want), "sequence {s}");
        }
    }
}

/// Random batches, variants and policies: every plan covers every output row exactly once and
/// visits exactly the kept blocks.
#[test]
fn every_row_is_covered_exactly_once() {
    let mut rng = crate::verify::Rng::new(17);
    let variants = [
        Variant::full(),
        Variant::full().mask(builtins::causal()),
        Variant::full()
            .mask(builtins::causal())
            .mask(builtins::sliding_window(100)),
        Variant::full().mask(builtins::block_sparse(32, 2, 4, true)),
    ];
    for round in 0..60 {
        let n = 1 + rng.below(9) as usize;
        let seqs: Vec<(usize, usize)> = (0..n)
            .map(|_| {
                let kv = rng.below(3000) as usize;
                let q = match rng.below(4) {
                    0 => 0,
                    1 => 1 + rng.below(16) as usize,
                    2 => 17 + rng.below(400) as usize,
                    _ => 1,
                };
                (q, kv)
            })
            .collect();
        let (hkv, g) = ([1, 2, 4][round % 3], [1, 4, 3][round % 3]);
        let v = &variants[round % variants.len()];
        let p = problem(&seqs, hkv * g, hkv, v, 0.3);
        let mut c = caps(1 + rng.below(12) as usize);
        c.tiles.mixed = round % 5 != 0;
        c.tiles.fuse_kv_heads = round % 7 != 0;
        c.tiles.parts_per_worker = 1 + round % 3;
        let pl = plan(&p, &c, None).unwrap();
        check(&pl, &p).unwrap_or_else(|e| panic!("round {round} {seqs:?}: {e}"));
    }
}

/// The checker itself fails plans that drop, repeat or misroute work.
#[test]
fn the_coverage_checker_catches_broken_plans() {
    let causal = Variant::full().mask(builtins::causal());
    let p = problem(&[(300, 600), (1, 4000), (2, 900)], 8, 2, &causal, 0.1);
    let good = plan(&p, &caps(2), None).unwrap();
    check(&good, &p).unwrap();
    let broken: [&dyn Fn(&mut Plan); 5] = [
        &|pl| {
            pl.items.pop();
        },
        &|pl| {
            let it = pl.items[0];
            pl.items.push(it);
        },
        &|pl| {
            let i = pl
                .items
                .iter()
                .position(|it| it.blocks.1 > it.blocks.0)
                .unwrap();
            pl.items[i].blocks.1 -= 1;
        },
        &|pl| {
            let i = pl.items.iter().position(|it| it.merge.is_some()).unwrap();
            pl.items[i].part = 99;
        },
        &|pl| {
            let i = pl.items.iter().position(|it| it.kv_heads == 1).unwrap();
            pl.items[i].kv_head ^= 1;
        },
    ];
    for (i, f) in broken.iter().enumerate() {
        let mut pl = good.clone();
        f(&mut pl);
        assert!(check(&pl, &p).is_err(), "breakage {i} passed");
    }
}
