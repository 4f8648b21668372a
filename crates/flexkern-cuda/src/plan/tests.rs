use super::work::{wave_chunk, SplitCosts, MERGE_COST_KEYS};
use super::*;
use flexkern::attention::problem::SeqLens;
use flexkern::variant::interval::{classify, Tri};

fn covers(p: &WorkPlan, lens: &SeqLens, group: usize) {
    for s in 0..lens.num_seqs() {
        let tiles: Vec<_> = p.tiles.iter().filter(|t| t[0] == s as u32).collect();
        assert_eq!(tiles.len(), (lens.q_len(s) * group).div_ceil(p.rows));
        for t in tiles {
            let parts = &p.items[t[2] as usize..(t[2] + t[3]) as usize];
            let mut next = 0u32;
            for it in parts {
                assert_eq!((it[0], it[1] & ROW_TILE_BITS, it[2]), (t[0], t[1], next));
                assert_eq!(it[1] & SOLE != 0, t[3] == 1);
                next = it[3];
            }
            assert_eq!(next as usize, lens.kv_len(s));
        }
    }
}

#[test]
fn partitions_fill_whole_waves_and_cover_every_key_once() {
    let wave = 3 * 132;
    for (b, l) in [
        (64, 8192),
        (8, 32768),
        (1, 131072),
        (3, 0),
        (5, 100),
        (64, 2000),
    ] {
        let lens = SeqLens::uniform(b, 1, l);
        let p = plan_work(&lens, 4, 8, 4, wave, false);
        covers(&p, &lens, 4);
        assert_eq!(p.chunk % CHUNK_STEP, 0);
        assert!(p.chunk >= MIN_CHUNK);
        if b * l * 8 >= 4 * wave * MIN_CHUNK {
            // Time is set by the waves of the longest blocks: at least 90 % of it is work.
            let blocks = p.items.len() * 8;
            let makespan = blocks.div_ceil(wave) * p.chunk;
            let ideal = (b * l * 8) as f64 / wave as f64;
            assert!(
                ideal / makespan as f64 >= 0.9,
                "{b}x{l}: {blocks} blocks of {}",
                p.chunk
            );
        }
    }
    // Little work: the shortest partitions, for the most blocks.
    assert_eq!(
        plan_work(&SeqLens::uniform(1, 1, 4096), 4, 8, 4, wave, false).chunk,
        128
    );
    // A short lone sequence stays whole (no merge); a few hundred keys split.
    let parts = |l| {
        plan_work(&SeqLens::uniform(1, 1, l), 4, 8, 4, wave, false)
            .items
            .len()
    };
    assert_eq!(parts(160), 1);
    assert!(parts(600) >= 4, "{}", parts(600));
}

#[test]
fn the_smallest_chunk_step_ends_the_search() {
    // A minimum of one step: every p past the length gives the same chunk, so the search
    // must end there (an earlier loop spun forever on a 30-key sequence).
    let row_tiles = |_: usize| 1;
    let costs = |min_chunk, merge_cost, max_chunk| SplitCosts {
        min_chunk,
        merge_cost,
        max_chunk,
    };
    for l in [0, 1, 30, 64, 160, 600, 5000] {
        let lens = SeqLens::uniform(1, 1, l);
        for c in [
            costs(CHUNK_STEP, 0, usize::MAX),
            costs(CHUNK_STEP, 96, usize::MAX),
            costs(MIN_CHUNK, MERGE_COST_KEYS, usize::MAX),
            costs(MIN_CHUNK, MERGE_COST_KEYS, 256),
        ] {
            let chunk = wave_chunk(&lens, &row_tiles, 8, 396, c);
            assert!(
                chunk >= c.min_chunk && chunk.is_multiple_of(CHUNK_STEP),
                "{l} keys, {c:?}: {chunk}"
            );
            assert!(
                chunk <= c.max_chunk.max(c.min_chunk),
                "{l} keys, {c:?}: {chunk}"
            );
        }
    }
    // Free splits of a lone 160-key sequence over 8 heads: three 64-key parts.
    let lens = SeqLens::uniform(1, 1, 160);
    assert_eq!(
        wave_chunk(&lens, &row_tiles, 8, 396, costs(CHUNK_STEP, 0, usize::MAX)),
        64
    );
    // A largest chunk splits a 128k sequence into more waves than the cost model would.
    let lens = SeqLens::uniform(1, 1, 131072);
    let free = wave_chunk(&lens, &row_tiles, 8, 396, costs(MIN_CHUNK, 192, usize::MAX));
    let capped = wave_chunk(&lens, &row_tiles, 8, 396, costs(MIN_CHUNK, 192, 1024));
    assert!(free > 1024 && capped <= 1024, "{free} {capped}");
}

#[test]
fn very_long_sequences_stay_within_the_merge_limit() {
    let lens = SeqLens::uniform(1, 1, 10_000_000);
    for det in [false, true] {
        let p = plan_work(&lens, 4, 8, 4, 396, det);
        covers(&p, &lens, 4);
        assert!(p.tiles.iter().all(|t| t[3] as usize <= MAX_PARTS));
    }
}

#[test]
fn deterministic_partitions_ignore_the_rest_of_the_batch() {
    let alone = plan_work(&SeqLens::uniform(1, 1, 5000), 4, 8, 4, 132, true);
    let lens = SeqLens::new(&[0, 1, 2, 3], &[5000, 70000, 3]).unwrap();
    let batch = plan_work(&lens, 4, 8, 4, 132, true);
    covers(&batch, &lens, 4);
    let first: Vec<_> = batch
        .items
        .iter()
        .filter(|i| i[0] == 0)
        .map(|i| [i[2], i[3]])
        .collect();
    let solo: Vec<_> = alone.items.iter().map(|i| [i[2], i[3]]).collect();
    assert_eq!(first, solo);
}

#[test]
fn interval_analysis_marks_visible_and_skips_hidden_items() {
    use flexkern::builtins::{causal, sliding_window};
    let lens = SeqLens::uniform(1, 1, 10000);
    let mut p = plan_work(&lens, 4, 8, 4, 132, true);
    let m = causal().and(sliding_window(3000));
    classify_items(&mut p, &lens, 4, 32, Some(&m), 0);
    // Decode at position 9999 sees keys 7000..=9999: partitions wholly before are empty,
    // the one holding 7000 is unknown, the later ones are all visible.
    for it in &p.items {
        let (k0, k1) = (it[2], it[3]);
        if k1 <= 7000 && k0 != k1 {
            panic!("hidden item {it:?} kept");
        }
        if k0 >= 7000 {
            assert!(it[1] & MASK_TRUE != 0, "{it:?}");
        }
    }
    assert!(p.items.iter().any(|it| it[2] == it[3]));
    let mut q = plan_work(&lens, 4, 8, 4, 132, true);
    classify_items(&mut q, &lens, 4, 32, None, 0);
    assert!(q.items.iter().all(|it| it[1] & MASK_TRUE != 0));
}

#[test]
fn items_marked_true_or_emptied_agree_with_the_mask_at_every_point() {
    use flexkern::builtins::{causal, sliding_window};
    // Decode rows, a chunked prefill on a prefix and a short prompt in one batch, so some
    // sequences are wholly visible (one evaluation for all their items) and some are not.
    let lens = SeqLens::new(&[0, 1, 2, 42, 43, 51], &[300, 40, 200, 700, 8]).unwrap();
    let (group, hq) = (2usize, 2usize);
    for m in [causal(), causal().and(sliding_window(100))] {
        let mut p = plan_work(&lens, group, 1, 4, 8, false);
        let before = p.items.clone();
        classify_items(&mut p, &lens, group, hq, Some(&m), 0);
        let point = |s: usize, qi: i64, k: i64| classify(&m, &lens.domain(s, hq, (qi, qi), (k, k)));
        let mut wholly = 0;
        for (it, was) in p.items.iter().zip(&before) {
            let (s, rt) = (it[0] as usize, (it[1] & ROW_TILE_BITS) as usize);
            let rows = (rt * p.rows..(rt + 1) * p.rows)
                .map(|r| (r / group) as i64)
                .filter(|&qi| qi < lens.q_len(s) as i64);
            let want = if it[1] & MASK_TRUE != 0 {
                wholly += 1;
                assert_eq!([it[2], it[3]], [was[2], was[3]], "{it:?}");
                Tri::True
            } else if it[2] == it[3] && was[2] < was[3] {
                Tri::False
            } else {
                continue;
            };
            for qi in rows {
                for k in was[2]..was[3] {
                    assert_eq!(point(s, qi, k as i64), want, "{it:?} row {qi} key {k}");
                }
            }
        }
        assert!(wholly > 0);
    }
}

#[test]
fn tuned_tiles_steer_the_planner_and_refuse_bad_knobs() {
    let t = TunedTiles {
        wg: Some((64, 3)),
        prefill: None,
        decode: Some((128, 3)),
    };
    assert_eq!(TunedTiles::from_params(&t.to_params()), Ok(t));
    let tuned = |q_rows: usize, dk: usize| {
        let q = MmaQuery {
            tuned: t,
            ..h100_query(2, 2, dk, q_rows)
        };
        mma_shape(&q).map(|(_, m)| (m.wg, m.tile, m.stages))
    };
    assert_eq!(tuned(4096, 128), Some((true, 64, 3)));
    assert_eq!(tuned(4, 128), Some((false, 128, 3)));
    // Untuned paths keep their defaults.
    assert_eq!(
        tuned(4096, 256),
        mma_shape(&h100_query(2, 2, 256, 4096)).map(|(_, m)| (m.wg, m.tile, m.stages))
    );
    let bad = |k: &str, v: u64| {
        let mut p = t.to_params();
        p.insert(k.into(), v);
        TunedTiles::from_params(&p)
    };
    assert!(bad("wg_tile", 96).unwrap_err().contains("wg_tile"));
    assert!(bad("decode_stages", 0)
        .unwrap_err()
        .contains("decode_stages"));
    assert!(bad("warp_count", 4).unwrap_err().contains("unknown"));
    // Tiles set directly (Device::set_tuned) that no kernel can run fall back to the
    // defaults instead of reaching a kernel.
    let nonsense = TunedTiles {
        wg: Some((96, 2)),
        prefill: Some((17, 99)),
        decode: Some((0, 1)),
    };
    for (q_rows, dk) in [(4096, 128), (4096, 256), (4, 128)] {
        let q = h100_query(2, 2, dk, q_rows);
        let with = MmaQuery {
            tuned: nonsense,
            ..h100_query(2, 2, dk, q_rows)
        };
        assert_eq!(mma_shape(&with), mma_shape(&q), "q_rows {q_rows} dk {dk}");
    }
    let mut lone = std::collections::BTreeMap::new();
    lone.insert("prefill_tile".to_string(), 64);
    assert!(TunedTiles::from_params(&lone)
        .unwrap_err()
        .contains("together"));
}

#[test]
fn tensor_cores_take_decode_and_prefill_of_two_byte_inputs() {
    // Decode: Hq 32 / Hkv 8 is 4 rows, one m-tile whose keys the 4 warps split.
    let (rows, m) = mma_shape(&h100_query(2, 2, 128, 4)).unwrap();
    assert_eq!((rows, m.m_tiles, m.tile % 64), (4, 1, 0));
    // Prefill: an m-tile per warp; on Hopper warpgroups of 64 rows: three at D 64 where the
    // rows fill them (Q from shared memory: their 160 registers), else two.
    let (rows, m) = mma_shape(&h100_query(1, 1, 64, 4096)).unwrap();
    assert_eq!(
        (rows, m.m_tiles, m.wg, m.tile, m.stages, m.wg_s),
        (192, 12, true, 128, 4, 1)
    );
    assert_eq!(m.threads(m.m_tiles), 512);
    assert_eq!(m.wg_launch_regs(), 128);
    let (rows, m) = mma_shape(&h100_query(1, 1, 64, 128)).unwrap();
    assert_eq!((rows, m.m_tiles, m.wg_s), (128, 8, 2));
    let d64x128 = MmaQuery {
        dv: 128,
        ..h100_query(1, 1, 64, 4096)
    };
    assert_eq!(mma_shape(&d64x128).unwrap().0, 128);
    let (rows, m) = mma_shape(&h100_query(2, 2, 128, 4096)).unwrap();
    assert_eq!((rows, m.wg, m.stages), (128, true, 3));
    assert_eq!(m.wg_launch_regs(), 168);
    // Three warpgroups' Q rows fit beside four stages of 128 keys at D 64.
    let q = h100_query(2, 2, 64, 4096);
    let m = mma_shape(&q).unwrap().1;
    assert_eq!(
        mma_smem(&m, 64, 64, 2, 2, 12),
        4 * 128 * 256 + 192 * 128 + 1024 + 64
    );
    let ampere = MmaQuery {
        compute_capability: (8, 0),
        ..h100_query(1, 1, 64, 4096)
    };
    let (rows, m) = mma_shape(&ampere).unwrap();
    assert_eq!((rows, m.m_tiles, m.wg), (64, 4, false));
    assert!(!mma_shape(&h100_query(2, 2, 256, 4096)).unwrap().1.wg);
    assert!(!mma_shape(&h100_query(2, 3, 128, 4096)).unwrap().1.wg);
    assert_eq!(mma_shape(&h100_query(2, 2, 128, 20)).unwrap().0, 32);
    // fp8 / int8 KV under bf16 queries.
    assert!(mma_shape(&h100_query(2, 3, 128, 4)).is_some());
    assert!(mma_shape(&h100_query(2, 5, 128, 4)).is_some());
    // Not for f32, mixed 2-byte types, odd head sizes, unaligned rows, sm_75.
    assert!(mma_shape(&h100_query(0, 0, 128, 4)).is_none());
    assert!(mma_shape(&h100_query(2, 1, 128, 4)).is_none());
    assert!(mma_shape(&h100_query(2, 2, 72, 4)).is_none());
    assert!(mma_shape(&h100_query(2, 2, 512, 4)).is_none());
    assert!(mma_shape(&MmaQuery {
        rows_aligned: false,
        ..h100_query(2, 2, 128, 4)
    })
    .is_none());
    let turing = MmaQuery {
        compute_capability: (7, 5),
        ..h100_query(2, 2, 128, 4)
    };
    assert!(mma_shape(&turing).is_none());
    // The L2 prefetch covers a row, or more where the next key's row follows; decode's stops
    // at 128 bytes.
    let l2 = |q: MmaQuery| mma_shape(&q).unwrap().1.l2_prefetch;
    assert_eq!(l2(h100_query(2, 2, 64, 4)), 128);
    assert_eq!(l2(h100_query(2, 3, 128, 4)), 128);
    assert_eq!(l2(h100_query(2, 2, 128, 4)), 128);
    assert_eq!(l2(h100_query(2, 2, 128, 1024)), 256);
    assert_eq!(l2(h100_query(2, 3, 64, 4)), 64);
    for q_rows in [4, 1024] {
        assert_eq!(
            l2(MmaQuery {
                rows_adjacent: true,
                ..h100_query(2, 2, 64, q_rows)
            }),
            if q_rows == 4 { 128 } else { 256 }
        );
    }
    // Wide heads keep to the shared memory there is.
    for q_rows in [4, 64] {
        let q = h100_query(2, 2, 256, q_rows);
        let (_, m) = mma_shape(&q).unwrap();
        assert!(mma_smem(&m, 256, 256, 2, 2, 4) <= q.smem_optin);
        let small = MmaQuery {
            smem_optin: 48 * 1024,
            ..h100_query(2, 2, 256, q_rows)
        };
        assert!(mma_shape(&small).is_none());
    }
}

#[test]
fn trimming_drops_the_tiles_a_causal_mask_hides() {
    use flexkern::builtins::{causal, sliding_window};
    // Prefill of 1000 tokens, 64-row tiles, one partition per row tile.
    let lens = SeqLens::uniform(1, 1000, 1000);
    let mut p = plan_work(&lens, 1, 1, 64, 1, false);
    classify_items(&mut p, &lens, 1, 1, Some(&causal()), 64);
    for it in &p.items {
        let last_q = ((it[1] & ROW_TILE_BITS) + 1) * 64 - 1;
        let last_q = last_q.min(999);
        // Keys run from 0 to the tile holding the last query's diagonal, tile-aligned.
        assert_eq!(it[2], 0, "{it:?}");
        assert!(it[3] > last_q && it[3] <= last_q + 64, "{it:?}");
    }
    // Every tile but the diagonal one is full; nothing past the diagonal is.
    for (it, f) in p.items.iter().zip(&p.full) {
        let first_q = (it[1] & ROW_TILE_BITS) * 64;
        assert_eq!(f[0], 0, "{it:?} {f:?}");
        assert!(f[1] <= first_q + 1 && f[1] + 64 > first_q, "{it:?} {f:?}");
    }
    // A window trims the front too, and what is left still covers every visible key.
    let mut w = plan_work(&lens, 1, 1, 64, 1, false);
    classify_items(
        &mut w,
        &lens,
        1,
        1,
        Some(&causal().and(sliding_window(100))),
        64,
    );
    for it in &w.items {
        let rt = (it[1] & ROW_TILE_BITS) as i64;
        let (q0, q1) = (rt * 64, (rt * 64 + 63).min(999));
        assert!(
            it[2] as i64 <= (q0 - 99).max(0) && (it[3] as i64) > q1,
            "{it:?}"
        );
        assert!((it[3] - it[2]) as i64 <= 100 + 63 + 2 * 64, "{it:?}");
    }
}

#[test]
fn a_window_keeps_its_whole_tiles_mask_free_whatever_the_row_tile() {
    use flexkern::builtins::{causal, sliding_window};
    // Three warpgroups' 192-row tiles (and 128) under a 1024-key window over 128-key tiles:
    // the run of tiles every query sees starts at the third tile of a 192-row tile, and the
    // kernel skips the mask over all of it.
    for rows in [128usize, 192] {
        let lens = SeqLens::uniform(1, 4096, 4096);
        let mut p = plan_work(&lens, 1, 1, rows, 1, false);
        let m = causal().and(sliding_window(1024));
        classify_items(&mut p, &lens, 1, 1, Some(&m), 128);
        for (it, f) in p.items.iter().zip(&p.full) {
            let rt = (it[1] & ROW_TILE_BITS) as i64;
            let (q0, q1) = (
                rt * rows as i64,
                (rt * rows as i64 + rows as i64 - 1).min(4095),
            );
            // Tile t (from the item's first key) is seen whole by every query iff its keys lie
            // in [q1 - 1023, q0].
            let whole: Vec<i64> = (it[2] as i64..it[3] as i64)
                .step_by(128)
                .filter(|&t| t >= q1 - 1023 && t + 127 <= q0 && t + 128 <= it[3] as i64)
                .collect();
            match (whole.first(), whole.last()) {
                (Some(&a), Some(&b)) if it[1] & MASK_TRUE == 0 => {
                    assert_eq!(
                        [f[0] as i64, f[1] as i64],
                        [a, b + 128],
                        "rows {rows} {it:?}"
                    )
                }
                _ => {}
            }
        }
        if rows == 192 {
            assert!(p.full.iter().filter(|f| f[1] > f[0]).count() >= 18);
        }
    }
}

#[test]
fn longest_row_tiles_go_first_with_their_items() {
    use flexkern::builtins::causal;
    let lens = SeqLens::uniform(2, 1000, 1000);
    let mut p = plan_work(&lens, 1, 1, 64, 4, false);
    classify_items(&mut p, &lens, 1, 1, Some(&causal()), 64);
    let before = p.clone();
    longest_first(&mut p);
    assert_eq!(p.items.len(), before.items.len());
    let keys = |t: &[u32; 4], p: &WorkPlan| {
        let its = &p.items[t[2] as usize..(t[2] + t[3]) as usize];
        its.iter().map(|i| i[3] - i[2]).max().unwrap()
    };
    for w in p.tiles.windows(2) {
        assert!(keys(&w[0], &p) >= keys(&w[1], &p));
    }
    // Every tile keeps exactly its items.
    for t in &p.tiles {
        let old = before
            .tiles
            .iter()
            .find(|o| (o[0], o[1]) == (t[0], t[1]))
            .unwrap();
        assert_eq!(
            &p.items[t[2] as usize..(t[2] + t[3]) as usize],
            &before.items[old[2] as usize..(old[2] + old[3]) as usize]
        );
    }
    assert_eq!(keys(&p.tiles[0], &p), 1000);
}

#[test]
fn rows_pack_the_gqa_group() {
    assert_eq!(rows_per_block(4, 1, 128), 4);
    assert_eq!(rows_per_block(3, 1, 64), 4);
    assert_eq!(rows_per_block(4, 200, 128), 8);
    assert_eq!(rows_per_block(8, 1, 576), 2);
    assert_eq!(rows_per_block(1, 1, 1), 1);
}

#[test]
fn three_warpgroups_where_the_mask_cuts_few_more_tiles() {
    use flexkern::builtins::*;
    // Issue 15's D 64 shape (B4 H16 S4096) on 132 SMs: no mask and causal take 192-row
    // tiles; a 1024-key window and 1024-token documents, whose edges 192 rows cut where 128
    // do not, keep 128.
    let lens = SeqLens::uniform(4, 4096, 4096);
    let c = || flexkern::Variant::full().mask(causal());
    let doc = (0..4096).map(|i| i * 4 / 4096).collect();
    for (v, three) in [
        (flexkern::Variant::full(), true),
        (c(), true),
        (c().score(softcap(30.0)), true),
        (c().mask(sliding_window(1024)), false),
        (c().mask(document(doc)), false),
    ] {
        let v = v.compile().unwrap();
        let m = v.mask.as_ref().map(|m| m.expr());
        assert_eq!(
            three_groups_pay(&lens, 1, 16, 16, m, 128, 132, false),
            three,
            "{:?}",
            v.mask.as_ref().map(|m| m.expr())
        );
    }
    // The shape a call gets: causal with hooks keeps three warpgroups without the overlap; a
    // window takes two (128 rows, its own Q mode).
    let m = mma_shape(&h100_query(2, 2, 64, 4096)).unwrap().1;
    fn call<'a>(lens: &'a SeqLens, mask: Option<&'a flexkern::expr::Expr>) -> GroupsCall<'a> {
        GroupsCall {
            lens,
            group: 1,
            num_kv_heads: 16,
            num_q_heads: 16,
            mask,
            hooks: mask.is_some(),
            wave: 132,
            deterministic: false,
        }
    }
    let causal_v = c().compile().unwrap();
    let cm = choose_groups(
        m,
        64,
        &call(&lens, causal_v.mask.as_ref().map(|m| m.expr())),
    );
    assert_eq!((cm.m_tiles, cm.wg_overlap), (12, false));
    assert_eq!(choose_groups(m, 64, &call(&lens, None)), m);
    let window = c().mask(sliding_window(1024)).compile().unwrap();
    let wm = choose_groups(m, 64, &call(&lens, window.mask.as_ref().map(|m| m.expr())));
    assert_eq!((wm.m_tiles, wm.wg_s), (8, 2));
    // Whole tiles cost their constant, cut ones more (items are per KV head alike).
    let mut p = plan_work(&lens, 1, 16, 128, 132, false);
    classify_items(&mut p, &lens, 1, 16, None, 128);
    assert_eq!(work_cost(&p, 128, 2), (4 * 32 * 32) as f64);
    let mut q = plan_work(&lens, 1, 16, 128, 132, false);
    classify_items(&mut q, &lens, 1, 16, Some(&causal()), 128);
    let (n, cut) = (4 * (32 * 33 / 2), 4 * 32);
    assert!((work_cost(&q, 128, 2) - ((n - cut) as f64 + 2.5 * cut as f64)).abs() < 1e-6);
}

#[test]
fn long_decode_partitions_read_their_pages_from_a_window() {
    // The planner's partitions (H100: 3 blocks an SM), 8B heads: issue 13's long shapes take
    // the window, a model step's short context and a lone sequence's 128-key splits do not.
    let chunk =
        |b: usize, l: usize| plan_work(&SeqLens::uniform(b, 1, l), 4, 8, 4, 3 * 132, false).chunk;
    for (b, l) in [(1, 131072), (8, 32768), (64, 8192)] {
        assert!(page_window(chunk(b, l)), "B{b} x {l}: {}", chunk(b, l));
    }
    for (b, l) in [(1, 64), (1, 160), (1, 2048), (64, 160)] {
        assert!(!page_window(chunk(b, l)), "B{b} x {l}: {}", chunk(b, l));
    }
    // Deterministic partitions are long enough too.
    assert!(page_window(DETERMINISTIC_CHUNK));
    // verify's long paged decode case (`verify::wave_cases`): 528 sequences of 1030 keys over 2
    // KV heads stay whole, so its blocks take the window, at 2 to 5 blocks an SM.
    for per_sm in 2..=5 {
        let p = plan_work(
            &SeqLens::uniform(528, 1, 1030),
            4,
            2,
            4,
            per_sm * 132,
            false,
        );
        assert!(page_window(p.chunk), "{per_sm} an SM: {}", p.chunk);
    }
}

#[test]
fn verify_paged_decode_cases_reach_what_they_test() {
    // `verify::wave_cases`'s 527 sequences of 300 keys and one of 1100 over pages of 256: the
    // long one splits at 320 keys, so its 128-key stages start mid-page and cross into the
    // next page (a stage's pages once assumed one page where pages outgrow stages), in short
    // partitions that look their pages up a stage at a time; at 2 to 5 blocks an SM.
    let mut cu = vec![0u64];
    let mut kv = vec![300u64; 527];
    kv.push(1100);
    for _ in &kv {
        cu.push(cu.last().unwrap() + 1);
    }
    let lens = SeqLens::new(&cu, &kv).unwrap();
    for per_sm in 2..=5 {
        let p = plan_work(&lens, 4, 2, 4, per_sm * 132, false);
        assert_eq!((p.chunk, p.items.len()), (320, 531), "{per_sm} an SM");
        assert!(!page_window(p.chunk));
        assert_eq!(p.chunk % 128, 64);
    }
}
