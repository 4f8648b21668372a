//! The GPU work list: which blocks run which (sequence, row tile, KV range), and how the
//! partitions of each row tile are merged. Plain index arrays built on the host from lengths
//! alone (no device access, no sync), uploaded with the rest of the step in one copy.

use flexkern::attention::problem::SeqLens;
use flexkern::expr::Expr;
use flexkern::variant::interval::{classify, Domain, Tri};

/// Bit set in an item's row-tile word when interval analysis proved the mask true over the
/// whole item: the kernel skips the mask hook there.
pub const MASK_TRUE: u32 = 1 << 31;

/// Classifies each item's (rows x keys) box under `mask`: all-true items get `MASK_TRUE`,
/// all-false items get an empty key range (nothing is read, the row tile's partial is -inf).
pub fn classify_items(
    plan: &mut WorkPlan,
    lens: &SeqLens,
    group: usize,
    num_q_heads: usize,
    mask: Option<&Expr>,
) {
    for it in &mut plan.items {
        let (s, rt, k0, k1) = (it[0] as usize, it[1] as usize, it[2] as i64, it[3] as i64);
        let Some(m) = mask else {
            it[1] |= MASK_TRUE;
            continue;
        };
        let ql = lens.q_len(s) as i64;
        if k1 <= k0 || ql == 0 {
            continue;
        }
        let qi0 = (rt * plan.rows / group) as i64;
        let qi1 = (((rt + 1) * plan.rows - 1) / group).min(ql as usize - 1) as i64;
        let (p0, t0) = (lens.q_pos0(s), lens.q_start(s) as i64);
        let d = Domain {
            batch: (s as i64, s as i64),
            head: (0, num_q_heads as i64 - 1),
            q_pos: (p0 + qi0, p0 + qi1),
            kv_pos: (k0, k1 - 1),
            q_len: (ql, ql),
            kv_len: (lens.kv_len(s) as i64, lens.kv_len(s) as i64),
            q_token: (t0 + qi0, t0 + qi1),
        };
        match classify(m, &d) {
            Tri::True => it[1] |= MASK_TRUE,
            Tri::False => it[3] = it[2],
            Tri::Unknown => {}
        }
    }
}

/// Keys per kernel tile (`FK_TILE`); partitions are multiples of it.
pub const TILE: usize = 128;
/// Partition length in deterministic mode: fixed, so a sequence's partitions (and hence its
/// rounding) never depend on what else is in the batch.
pub const DETERMINISTIC_CHUNK: usize = 1024;
/// Most partitions one row tile is split into (`FK_MAX_PARTS`, the merge's shared weights).
pub const MAX_PARTS: usize = 4096;
/// Smallest partition the planner makes (shorter ones cost more in merging than they gain).
pub const MIN_CHUNK: usize = 512;

#[derive(Clone, Debug, PartialEq)]
pub struct WorkPlan {
    /// Rows (q head x query pairs) per block.
    pub rows: usize,
    /// Keys per partition.
    pub chunk: usize,
    /// (seq, row tile, first key, end key) per block column (grid x; grid y = kv heads).
    pub items: Vec<[u32; 4]>,
    /// (seq, row tile, first item, parts) per row tile (the merge's grid x).
    pub tiles: Vec<[u32; 4]>,
}

/// Rows per block: the whole GQA group of one query if possible (K/V read once for all its q
/// heads), fewer for large head sizes (registers), more for several queries per sequence.
pub fn rows_per_block(group: usize, max_q_len: usize, max_head_dim: usize) -> usize {
    let cap = match max_head_dim {
        0..=128 => 8,
        129..=256 => 4,
        _ => 2,
    };
    (group * max_q_len.max(1)).next_power_of_two().min(cap)
}

/// Splits every row tile's KV range into partitions so that about `8 * sms` blocks run (or
/// fixed `DETERMINISTIC_CHUNK` partitions when `deterministic`).
pub fn plan_work(
    lens: &SeqLens,
    group: usize,
    num_kv_heads: usize,
    rows: usize,
    sms: usize,
    deterministic: bool,
) -> WorkPlan {
    let row_tiles = |s: usize| (lens.q_len(s) * group).div_ceil(rows);
    let chunk = if deterministic {
        DETERMINISTIC_CHUNK
    } else {
        let work: usize = (0..lens.num_seqs())
            .map(|s| row_tiles(s) * lens.kv_len(s))
            .sum();
        let items_wanted = (8 * sms.max(1)).div_ceil(num_kv_heads.max(1)).max(1);
        work.div_ceil(items_wanted).max(MIN_CHUNK).div_ceil(TILE) * TILE
    };
    let mut items = Vec::new();
    let mut tiles = Vec::new();
    for s in 0..lens.num_seqs() {
        let kl = lens.kv_len(s);
        // The merge holds at most MAX_PARTS weights per row; a sequence's own length decides
        // (so deterministic mode stays independent of the batch).
        let chunk = chunk.max(kl.div_ceil(MAX_PARTS).div_ceil(TILE) * TILE);
        let parts = kl.div_ceil(chunk).max(1);
        for rt in 0..row_tiles(s) {
            tiles.push([s as u32, rt as u32, items.len() as u32, parts as u32]);
            for p in 0..parts {
                let (k0, k1) = (p * chunk, ((p + 1) * chunk).min(kl));
                items.push([s as u32, rt as u32, k0 as u32, k1 as u32]);
            }
        }
    }
    WorkPlan {
        rows,
        chunk,
        items,
        tiles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covers(p: &WorkPlan, lens: &SeqLens, group: usize) {
        for s in 0..lens.num_seqs() {
            let tiles: Vec<_> = p.tiles.iter().filter(|t| t[0] == s as u32).collect();
            assert_eq!(tiles.len(), (lens.q_len(s) * group).div_ceil(p.rows));
            for t in tiles {
                let parts = &p.items[t[2] as usize..(t[2] + t[3]) as usize];
                let mut next = 0u32;
                for it in parts {
                    assert_eq!((it[0], it[1], it[2]), (t[0], t[1], next));
                    next = it[3];
                }
                assert_eq!(next as usize, lens.kv_len(s));
            }
        }
    }

    #[test]
    fn partitions_fill_the_card_and_cover_every_key_once() {
        let sms = 132;
        for (b, l) in [(64, 8192), (8, 32768), (1, 131072), (3, 0), (5, 100)] {
            let lens = SeqLens::uniform(b, 1, l);
            let p = plan_work(&lens, 4, 8, 4, sms, false);
            covers(&p, &lens, 4);
            assert_eq!(p.chunk % TILE, 0);
            if b * l >= 8 * sms * MIN_CHUNK {
                let blocks = p.items.len() * 8;
                assert!(
                    blocks >= 4 * sms && blocks <= 16 * sms,
                    "{b}x{l}: {blocks} blocks"
                );
            }
        }
    }

    #[test]
    fn very_long_sequences_stay_within_the_merge_limit() {
        let lens = SeqLens::uniform(1, 1, 10_000_000);
        for det in [false, true] {
            let p = plan_work(&lens, 4, 8, 4, 132, det);
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
        classify_items(&mut p, &lens, 4, 32, Some(&m));
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
        classify_items(&mut q, &lens, 4, 32, None);
        assert!(q.items.iter().all(|it| it[1] & MASK_TRUE != 0));
    }

    #[test]
    fn rows_pack_the_gqa_group() {
        assert_eq!(rows_per_block(4, 1, 128), 4);
        assert_eq!(rows_per_block(3, 1, 64), 4);
        assert_eq!(rows_per_block(4, 200, 128), 8);
        assert_eq!(rows_per_block(8, 1, 576), 2);
        assert_eq!(rows_per_block(1, 1, 1), 1);
    }
}
