//! The work list: rows per block, the split of each row tile's keys into partitions sized to
//! fill whole waves, and the launch order.

use super::SOLE;
use flexkern::attention::problem::SeqLens;

/// Keys per kernel tile (`FK_TILE`); partitions are multiples of it.
pub const TILE: usize = 128;
/// Partition length in deterministic mode: fixed, so a sequence's partitions (and hence its
/// rounding) never depend on what else is in the batch.
pub const DETERMINISTIC_CHUNK: usize = 1024;
/// Most partitions one row tile is split into (`FK_MAX_PARTS`, the merge's shared weights).
pub const MAX_PARTS: usize = 4096;
/// Smallest partition the planner makes. Splitting also costs a merge (`MERGE_COST_KEYS`),
/// so short sequences on a full card stay whole; a lone decode sequence of a few hundred keys,
/// whose 8 blocks (one per KV head) would leave the card idle, is split.
pub const MIN_CHUNK: usize = 128;
/// Partition lengths are multiples of this (the tensor-core kernel's stage).
pub const CHUNK_STEP: usize = 64;

/// Decode partitions of at least this many keys read their pages from a window the block holds
/// (`FkPageWindow`, attention_stage.cu) instead of looking each stage's pages up as it is
/// queued. H200, session 31 (calls d, e), % of read against the stage lookups: B8 x 32k paged
/// 89.3-89.8 against 88.5-88.8, SmolLM2's B64 x 8k 79.1-79.3 against 77.8-77.9, B1 x 128k
/// +0.3; but at a model step's 160 keys the call took 9.5 against 9.2 us, hence a threshold
/// (the shortest partition measured winning was 2688 keys).
pub const PAGE_WINDOW_KEYS: usize = 1024;

/// Whether a paged decode call whose partitions hold `chunk` keys reads its pages from a window.
/// `FLEXKERN_CUDA_PAGE_WINDOW=keys` moves the threshold (0: every paged decode; A/B runs and
/// verify).
pub fn page_window(chunk: usize) -> bool {
    let keys = std::env::var("FLEXKERN_CUDA_PAGE_WINDOW")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(PAGE_WINDOW_KEYS);
    chunk >= keys
}

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
    /// Per item, keys `[full[0], full[1])` the mask keeps for every row (empty: none known).
    pub full: Vec<[u32; 2]>,
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

/// Splits every row tile's KV range into partitions (fixed `DETERMINISTIC_CHUNK` ones when
/// `deterministic`). `wave` is how many blocks the card runs at once (SMs x resident blocks per
/// SM of the kernel): the partition length is chosen so that the blocks fill whole waves, since
/// a last wave a third full costs as much as a full one.
pub fn plan_work(
    lens: &SeqLens,
    group: usize,
    num_kv_heads: usize,
    rows: usize,
    wave: usize,
    deterministic: bool,
) -> WorkPlan {
    let row_tiles = |s: usize| (lens.q_len(s) * group).div_ceil(rows);
    let chunk = if deterministic {
        DETERMINISTIC_CHUNK
    } else {
        wave_chunk(lens, &row_tiles, num_kv_heads, wave.max(1), split_costs())
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
            let sole = if parts == 1 { SOLE } else { 0 };
            for p in 0..parts {
                let (k0, k1) = (p * chunk, ((p + 1) * chunk).min(kl));
                items.push([s as u32, rt as u32 | sole, k0 as u32, k1 as u32]);
            }
        }
    }
    WorkPlan {
        rows,
        chunk,
        full: vec![[0, 0]; items.len()],
        items,
        tiles,
    }
}

/// Puts the row tiles with the most keys left to read first (their items stay together), so
/// the GPU starts the longest blocks first and the short ones fill the last wave: causal
/// prefill's row tiles grow along the sequence, and in launch order the longest came last.
pub fn longest_first(plan: &mut WorkPlan) {
    let work = |t: &[u32; 4]| -> u64 {
        let its = &plan.items[t[2] as usize..(t[2] + t[3]) as usize];
        its.iter()
            .map(|i| u64::from(i[3] - i[2]))
            .max()
            .unwrap_or(0)
    };
    let mut order: Vec<(u64, usize)> = plan
        .tiles
        .iter()
        .enumerate()
        .map(|(i, t)| (work(t), i))
        .collect();
    if order.windows(2).all(|w| w[0].0 >= w[1].0) {
        return;
    }
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut items = Vec::with_capacity(plan.items.len());
    let mut full = Vec::with_capacity(plan.full.len());
    let mut tiles = Vec::with_capacity(plan.tiles.len());
    for &(_, i) in &order {
        let t = plan.tiles[i];
        let r = t[2] as usize..(t[2] + t[3]) as usize;
        tiles.push([t[0], t[1], items.len() as u32, t[3]]);
        items.extend_from_slice(&plan.items[r.clone()]);
        full.extend_from_slice(&plan.full[r]);
    }
    (plan.items, plan.tiles, plan.full) = (items, tiles, full);
}

/// Fixed cost of a block in keys (its Q load, pipeline fill and partial write), for the
/// wave model below.
const BLOCK_COST_KEYS: usize = 64;
/// Cost in keys of splitting at all: the merge launch (about 5 us on an H100, as long as a
/// block takes for ~200 keys at decode); a sole partition is written by the attention kernel.
pub(super) const MERGE_COST_KEYS: usize = 192;

/// The partition search's bounds and costs: (smallest chunk, merge cost, largest chunk).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct SplitCosts {
    pub(super) min_chunk: usize,
    pub(super) merge_cost: usize,
    pub(super) max_chunk: usize,
}

/// `MIN_CHUNK`, `MERGE_COST_KEYS` and no largest chunk, or
/// `FLEXKERN_CUDA_SPLIT=min_chunk,merge_cost[,max_chunk]` (A/B runs; chunks positive multiples of
/// `CHUNK_STEP`).
fn split_costs() -> SplitCosts {
    let env = std::env::var("FLEXKERN_CUDA_SPLIT").unwrap_or_default();
    let v: Vec<usize> = env
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect();
    let chunk = |c: usize| c > 0 && c.is_multiple_of(CHUNK_STEP);
    match v[..] {
        [c, m] if chunk(c) => SplitCosts {
            min_chunk: c,
            merge_cost: m,
            max_chunk: usize::MAX,
        },
        [c, m, x] if chunk(c) && chunk(x) && x >= c => SplitCosts {
            min_chunk: c,
            merge_cost: m,
            max_chunk: x,
        },
        _ => SplitCosts {
            min_chunk: MIN_CHUNK,
            merge_cost: MERGE_COST_KEYS,
            max_chunk: usize::MAX,
        },
    }
}

/// The partition length that minimizes waves x (partition + block cost): candidates are the
/// lengths that split the longest sequence into p equal parts, from one part up to 16 waves of
/// blocks, within `costs`' bounds; more than one part adds the merge.
pub(super) fn wave_chunk(
    lens: &SeqLens,
    row_tiles: &dyn Fn(usize) -> usize,
    hkv: usize,
    wave: usize,
    costs: SplitCosts,
) -> usize {
    let (min_chunk, merge_cost) = (costs.min_chunk, costs.merge_cost);
    let n = lens.num_seqs();
    let longest = (0..n).map(|s| lens.kv_len(s)).max().unwrap_or(0);
    let blocks = |chunk: usize| -> usize {
        hkv * (0..n)
            .map(|s| row_tiles(s) * lens.kv_len(s).div_ceil(chunk).max(1))
            .sum::<usize>()
    };
    let mut best = (
        usize::MAX,
        min_chunk.max(longest.div_ceil(CHUNK_STEP) * CHUNK_STEP),
    );
    let mut last = 0;
    // Past `longest` parts every chunk is the smallest step: nothing new to try.
    for p in 1..=longest.max(1) {
        let chunk = longest.div_ceil(p).div_ceil(CHUNK_STEP) * CHUNK_STEP;
        if chunk < min_chunk {
            break;
        }
        if chunk == last || chunk > costs.max_chunk {
            continue;
        }
        last = chunk;
        let b = blocks(chunk);
        let merge = if p > 1 { merge_cost } else { 0 };
        let cost = b.div_ceil(wave) * (chunk + BLOCK_COST_KEYS) + merge;
        if cost < best.0 {
            best = (cost, chunk);
        }
        if b > 16 * wave {
            break;
        }
    }
    best.1
}
