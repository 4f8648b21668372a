//! The GPU work list: which blocks run which (sequence, row tile, KV range), and how the
//! partitions of each row tile are merged. Plain index arrays built on the host from lengths
//! alone (no device access, no sync), uploaded with the rest of the step in one copy.

use flexkern::attention::problem::SeqLens;
use flexkern::expr::Expr;
use flexkern::variant::interval::{classify, Domain, Tri};

/// Bit set in an item's row-tile word when interval analysis proved the mask true over the
/// whole item: the kernel skips the mask hook there.
pub const MASK_TRUE: u32 = 1 << 31;
/// Bit set in an item's row-tile word when it is its row tile's only partition: the
/// tensor-core kernel then writes the rows' final O and LSE itself (when there are no sinks)
/// and the merge leaves them alone.
pub const SOLE: u32 = 1 << 30;
/// The row-tile index under the two flags.
pub const ROW_TILE_BITS: u32 = SOLE - 1;

/// Classifies each item's (rows x keys) box under `mask`: all-true items get `MASK_TRUE`,
/// all-false items get an empty key range (nothing is read, the row tile's partial is -inf),
/// and with `trim > 0` the others lose the whole `trim`-key tiles at either end that the mask
/// hides and get the run of whole tiles the mask keeps entirely (`full`: the kernel skips the
/// mask there). This is the BlockMask, built from the expression by interval analysis.
pub fn classify_items(
    plan: &mut WorkPlan,
    lens: &SeqLens,
    group: usize,
    num_q_heads: usize,
    mask: Option<&Expr>,
    trim: usize,
) {
    // A sequence whose whole (rows x keys) box the mask keeps makes every item of it true: one
    // interval evaluation a sequence instead of one an item (decode under causal masks: host
    // planning of 640 items took 26 us on the H100's host).
    let seq_true: Vec<bool> = (0..lens.num_seqs())
        .map(|s| {
            let (ql, kl) = (lens.q_len(s) as i64, lens.kv_len(s) as i64);
            mask.is_some_and(|m| {
                ql > 0
                    && kl > 0
                    && classify(m, &lens.domain(s, num_q_heads, (0, ql - 1), (0, kl - 1)))
                        == Tri::True
            })
        })
        .collect();
    for (it, full) in plan.items.iter_mut().zip(plan.full.iter_mut()) {
        let (s, rt, k0, k1) = (
            it[0] as usize,
            (it[1] & ROW_TILE_BITS) as usize,
            it[2] as i64,
            it[3] as i64,
        );
        let Some(m) = mask else {
            it[1] |= MASK_TRUE;
            *full = [it[2], it[3]];
            continue;
        };
        let ql = lens.q_len(s) as i64;
        if k1 <= k0 || ql == 0 {
            continue;
        }
        if seq_true[s] {
            it[1] |= MASK_TRUE;
            *full = [it[2], it[3]];
            continue;
        }
        let qi0 = (rt * plan.rows / group) as i64;
        let qi1 = (((rt + 1) * plan.rows - 1) / group).min(ql as usize - 1) as i64;
        let d = lens.domain(s, num_q_heads, (qi0, qi1), (k0, k1 - 1));
        let at = |k0: i64, k1: i64| {
            classify(
                m,
                &Domain {
                    kv_pos: (k0, k1 - 1),
                    ..d
                },
            )
        };
        match at(k0, k1) {
            Tri::True => {
                it[1] |= MASK_TRUE;
                *full = [it[2], it[3]];
            }
            Tri::False => it[3] = it[2],
            // Trim whole hidden tiles off both ends (causal: the keys past the diagonal; a
            // window: the keys before it), so prefill blocks do not compute them.
            Tri::Unknown if k1 - k0 > trim as i64 && trim > 0 => {
                let g = trim as i64;
                let lo = first_visible(&at, k0, k1, g, false).unwrap_or(k1);
                let hi = first_visible(&at, lo, k1, g, true).unwrap_or(lo);
                (it[2], it[3]) = (lo as u32, hi as u32);
                if hi > lo && at(lo, hi) == Tri::True {
                    it[1] |= MASK_TRUE;
                    *full = [it[2], it[3]];
                } else if hi > lo {
                    let (a, b) = full_tiles(&at, lo, hi, g);
                    *full = [a as u32, b as u32];
                }
            }
            Tri::Unknown => {}
        }
    }
}

/// A run `[a, b)` of whole `g`-key tiles of `[lo, hi)` (tile-aligned from `lo`) that the mask
/// keeps entirely, starting at the first or second tile (a causal row tile's run starts at its
/// first tile; a window's after the tile it enters in): `at` proving `[a, b)` true is monotone
/// in `b`, so `b` is found by bisection. Empty when neither tile starts one.
fn full_tiles(at: &impl Fn(i64, i64) -> Tri, lo: i64, hi: i64, g: i64) -> (i64, i64) {
    let end = |t: i64, a: i64| (a + t * g).min(hi);
    for a in [lo, lo + g] {
        if a >= hi || at(a, end(1, a)) != Tri::True {
            continue;
        }
        let (mut good, mut bad) = (1, (hi - a + g - 1) / g + 1);
        while bad - good > 1 {
            let mid = (good + bad) / 2;
            if at(a, end(mid, a)) == Tri::True {
                good = mid;
            } else {
                bad = mid;
            }
        }
        return (a, end(good, a));
    }
    (0, 0)
}

/// The start (or, `from_end`, the end) of the first (last) `g`-key tile of `[k0, k1)` that
/// `at` does not prove hidden, by bisection: a handful of interval evaluations for masks whose
/// visible keys are one run (causal, windows), never more than one per tile.
fn first_visible(
    at: &impl Fn(i64, i64) -> Tri,
    k0: i64,
    k1: i64,
    g: i64,
    from_end: bool,
) -> Option<i64> {
    if k1 <= k0 || at(k0, k1) == Tri::False {
        return None;
    }
    if k1 - k0 <= g {
        return Some(if from_end { k1 } else { k0 });
    }
    // Split on a tile boundary (relative to k0, so trimmed ranges stay tile-aligned).
    let mid = k0 + (k1 - k0 + 2 * g - 1) / (2 * g) * g;
    let (a, b) = ((k0, mid), (mid, k1));
    let (first, second) = if from_end { (b, a) } else { (a, b) };
    first_visible(at, first.0, first.1, g, from_end)
        .or_else(|| first_visible(at, second.0, second.1, g, from_end))
}

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

/// The tensor-core kernel's shape (`attention_mma.cu`): m-tiles of 16 rows per block, keys per
/// shared-memory stage, stages in flight. Warps not needed for m-tiles split each stage's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaShape {
    pub m_tiles: usize,
    pub tile: usize,
    pub stages: usize,
    /// Threads that copy one K/V row (0: as many as it has 16-byte chunks, up to a warp) and
    /// the L2 prefetch hint of those copies in bytes (0, 64, 128 or 256).
    pub copy_threads: usize,
    pub l2_prefetch: usize,
    /// Blocks per SM the kernel's register budget must allow (`__launch_bounds__`).
    pub min_blocks: usize,
    /// The Hopper kernel (`attention_wgmma.cu`): two consumer warpgroups of 64 rows and a
    /// producer warpgroup, wgmma instead of mma.sync.
    pub wg: bool,
    /// How its Q K^T reads Q (`FK_WG_S`): 0 shared memory in n64 instructions, 1 shared memory
    /// in one n128 instruction per k16 step (128-key tiles), 2 registers.
    pub wg_s: usize,
    /// Whether its softmax of a tile runs while the previous tile's P V does
    /// (`FK_WG_OVERLAP`, FlashAttention-3's intra-warpgroup overlap). It keeps P live through
    /// the softmax: where that spills, `prepare` turns it off before narrowing the tile.
    pub wg_overlap: bool,
}

impl MmaShape {
    /// Threads per block: the warps, plus the Hopper kernel's producer warpgroup.
    pub fn threads(&self, warps: usize) -> usize {
        warps * 32 + if self.wg { 128 } else { 0 }
    }
}

/// Tensor-core tile choices measured on a device (`flexkern tune --device cuda`): keys per
/// stage and stages of the Hopper prefill kernel, the mma.sync prefill kernel and decode.
/// `None` keeps the planner's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TunedTiles {
    pub wg: Option<(usize, usize)>,
    pub prefill: Option<(usize, usize)>,
    pub decode: Option<(usize, usize)>,
}

/// The table knobs of the `cuda-attention` family: (name, low, high, multiple of).
const CUDA_KNOBS: [(&str, u64, u64, u64); 6] = [
    ("wg_tile", 64, 128, 64),
    ("wg_stages", 3, 8, 1),
    ("prefill_tile", 16, 256, 16),
    ("prefill_stages", 2, 8, 1),
    ("decode_tile", 16, 256, 16),
    ("decode_stages", 2, 8, 1),
];

impl TunedTiles {
    /// From a table entry; an unknown knob, a value out of range or a tile without its stages
    /// (or the reverse) is an error naming it.
    pub fn from_params(p: &std::collections::BTreeMap<String, u64>) -> Result<TunedTiles, String> {
        for (k, &v) in p {
            let Some(&(_, lo, hi, step)) = CUDA_KNOBS.iter().find(|(n, ..)| n == k) else {
                return Err(format!("unknown knob {k:?}"));
            };
            if !(lo..=hi).contains(&v) || !v.is_multiple_of(step) {
                return Err(format!(
                    "{k} = {v} is outside {lo}..={hi} (multiples of {step})"
                ));
            }
        }
        let pair = |name: &str| match (
            p.get(&format!("{name}_tile")),
            p.get(&format!("{name}_stages")),
        ) {
            (Some(&t), Some(&s)) => Ok(Some((t as usize, s as usize))),
            (None, None) => Ok(None),
            _ => Err(format!("{name}_tile and {name}_stages go together")),
        };
        Ok(TunedTiles {
            wg: pair("wg")?,
            prefill: pair("prefill")?,
            decode: pair("decode")?,
        })
    }

    /// The table entry's knobs.
    pub fn to_params(&self) -> std::collections::BTreeMap<String, u64> {
        let mut m = std::collections::BTreeMap::new();
        for (name, v) in [
            ("wg", self.wg),
            ("prefill", self.prefill),
            ("decode", self.decode),
        ] {
            if let Some((t, s)) = v {
                m.insert(format!("{name}_tile"), t as u64);
                m.insert(format!("{name}_stages"), s as u64);
            }
        }
        m
    }
}

/// What the tensor-core path needs to know about a call.
pub struct MmaQuery {
    /// Element codes (attention.rs `elem_code`): 1 f16, 2 bf16, 3 / 4 fp8, 5 i8.
    pub qt: u32,
    pub kt: u32,
    pub vt: u32,
    pub dk: usize,
    pub dv: usize,
    /// Every K and V row starts on a 16-byte boundary (cp.async copies whole 16-byte chunks).
    pub rows_aligned: bool,
    /// Consecutive keys' rows are adjacent in memory (head-major strided KV), so an L2
    /// prefetch wider than a row fetches the next key's row, not another head's.
    pub rows_adjacent: bool,
    /// GQA group x longest query.
    pub q_rows: usize,
    pub compute_capability: (u32, u32),
    pub warps: usize,
    /// Bytes of a K and a V element, and the shared memory a block may opt in to.
    pub k_size: usize,
    pub v_size: usize,
    pub smem_optin: usize,
    /// The device's tuned tiles (an environment override beats them).
    pub tuned: TunedTiles,
}

/// Rows per block and shape of the tensor-core kernel, or `None` where it does not apply (f32
/// inputs, K/V of another 2-byte type than Q, head sizes not whole k16 steps or above 256,
/// unaligned rows, GPUs before sm_80, stages that do not fit). Decode (at most 16 rows) is one m-tile whose keys are
/// split among the warps; prefill gives each warp its own m-tile (FlashAttention-2).
/// `FLEXKERN_CUDA_MMA=0` turns the path off, `=tile,stages` overrides the pipeline,
/// `=tile,stages,copy_threads,l2_prefetch` the copies too (A/B runs).
pub fn mma_shape(q: &MmaQuery) -> Option<(usize, MmaShape)> {
    let env = std::env::var("FLEXKERN_CUDA_MMA").ok();
    let over: Vec<usize> = env
        .as_deref()
        .map(|s| {
            s.split(',')
                .map(|x| x.trim().parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    if over.first() == Some(&0) {
        return None;
    }
    let two_byte = |t: u32| t == 1 || t == 2;
    let kv_ok = |t: u32| t == q.qt || (3..=5).contains(&t);
    if !two_byte(q.qt)
        || !kv_ok(q.kt)
        || !kv_ok(q.vt)
        || !q.dk.is_multiple_of(16)
        || !q.dv.is_multiple_of(16)
        || q.dk.max(q.dv) > 256
        || !q.rows_aligned
        || q.compute_capability.0 < 8
    {
        return None;
    }
    // The environment's pipeline, else the tuned one of the path that applies.
    let pick = |tuned: Option<(usize, usize)>| match (over.is_empty(), tuned) {
        (true, Some((t, s))) => vec![t, s],
        _ => over.clone(),
    };
    if let Some(w) = wgmma_shape(q, &pick(q.tuned.wg)) {
        return Some(w);
    }
    let m_tiles = q.q_rows.div_ceil(16).next_power_of_two().min(q.warps);
    let over = pick(if m_tiles == 1 {
        q.tuned.decode
    } else {
        q.tuned.prefill
    });
    let rows = if m_tiles == 1 {
        q.q_rows.next_power_of_two()
    } else {
        16 * m_tiles
    };
    let splits = q.warps / m_tiles;
    // Keys per stage: 16 per warp of a key split at least; wide heads halve it (registers);
    // 1-byte KV decode doubles it, so a stage still carries as many bytes.
    let one_byte = q.k_size == 1 && q.v_size == 1 && m_tiles == 1;
    let tile = if q.dk.max(q.dv) > 128 {
        32
    } else if one_byte {
        128
    } else {
        64
    }
    .max(16 * splits);
    // Decode is bound by bandwidth: two stages leave room for a third block per SM, which
    // keeps more copies in flight than a third stage (H100, PERFORMANCE.md). The L2 prefetch
    // covers one row unless the next key's row follows it.
    // Prefill keeps three stages at two blocks per SM. Two stages with a register budget for
    // three blocks (`FLEXKERN_CUDA_MMA=64,2`) measured no faster on the H100 (D 64 non-causal
    // 126 against 137 TFLOP/s; D 128 spills), though ncu shows the kernel latency-bound at 2
    // warps per scheduler: the limit is its own instruction stream, not occupancy.
    let dmax = q.dk.max(q.dv);
    let stages = if m_tiles == 1 { 2 } else { 3 };
    let row_bytes = (q.dk * q.k_size).min(q.dv * q.v_size);
    let l2 = if q.rows_adjacent {
        256
    } else {
        row_bytes.clamp(64, 256)
    };
    let (mut copy_threads, mut l2_prefetch) = (
        0,
        [64, 128, 256]
            .into_iter()
            .filter(|&b| b <= l2)
            .max()
            .unwrap_or(64),
    );
    let (tile, stages) = match over[..] {
        [t, st, ..]
            if t % (16 * splits) == 0 && (16..=256).contains(&t) && (2..=8).contains(&st) =>
        {
            if let [_, _, c, l2] = over[..] {
                if [0, 1, 2, 4, 8, 16, 32].contains(&c) && [0, 64, 128, 256].contains(&l2) {
                    (copy_threads, l2_prefetch) = (c, l2);
                }
            }
            (t, st)
        }
        _ => (tile, stages),
    };
    // Fewer stages where shared memory is short (wide heads); two at least.
    (2..=stages).rev().find_map(|stages| {
        let m = MmaShape {
            m_tiles,
            tile,
            stages,
            copy_threads,
            l2_prefetch,
            min_blocks: if m_tiles > 1 && dmax <= 128 && stages == 2 {
                3
            } else {
                1
            },
            wg: false,
            wg_s: 0,
            wg_overlap: false,
        };
        (mma_smem(&m, q.dk, q.dv, q.k_size, q.v_size, q.warps) <= q.smem_optin).then_some((rows, m))
    })
}

/// An H100's query for `q_rows` rows of element codes `qt` (Q) and `kt` (K and V) at head size
/// `dk` (tests of the planner and of the kernels' compiles).
#[cfg(test)]
pub(crate) fn h100_query(qt: u32, kt: u32, dk: usize, q_rows: usize) -> MmaQuery {
    let size = |t: u32| [4, 2, 2, 1, 1, 1][t as usize];
    MmaQuery {
        qt,
        kt,
        vt: kt,
        dk,
        dv: dk,
        rows_aligned: true,
        rows_adjacent: false,
        q_rows,
        compute_capability: (9, 0),
        warps: 4,
        k_size: size(kt),
        v_size: size(kt),
        smem_optin: 227 * 1024,
        tuned: TunedTiles::default(),
    }
}

/// The Hopper kernel's Q mode (`MmaShape::wg_s`): Q in registers at D 64 (16 of them; 2-3 %
/// faster there), else from shared memory in n128 instructions (1-2 % faster than n64; Q in
/// registers spills at D 128 and falls back to 64-key tiles, 6 % slower), measured on an H200
/// (PERFORMANCE.md). `FLEXKERN_CUDA_WG_S=0|1|2` for A/B runs.
fn wg_q_mode(dk: usize) -> usize {
    match std::env::var("FLEXKERN_CUDA_WG_S")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        Some("0") => 0,
        Some("1") => 1,
        Some("2") => 2,
        _ if dk <= 64 => 2,
        _ => 1,
    }
}

/// Whether the Hopper kernel overlaps a tile's softmax with the previous tile's P V
/// (`FLEXKERN_CUDA_WG_OVERLAP=1`). Off by default: on the H100 the softmax ran 30 % slower
/// beside its own warpgroup's P V, and the other warpgroup's MMA already fills that time
/// (session 21: D128 non-causal 646 / 606 against 658 / 621 TFLOP/s; D64 softcap 7 % faster,
/// ALiBi 6 % slower).
fn wg_overlap() -> bool {
    std::env::var("FLEXKERN_CUDA_WG_OVERLAP").is_ok_and(|v| v.trim() == "1")
}

/// Warps of the Hopper kernel's consumers (two warpgroups).
pub const WG_WARPS: usize = 8;
/// Registers per thread the Hopper kernel launches with (65536 / 384, rounded down to 8): its
/// producer gives back to 40, its consumers take 232.
pub const WG_LAUNCH_REGS: i32 = 168;

/// The Hopper kernel's shape where it applies: sm_90 prefill (more than 64 rows) with Q, K and V
/// of one 2-byte type and head sizes of whole 128-byte swizzle columns up to 128 (wider heads
/// need more registers than two warpgroups have). 128 keys per stage, as many stages as fit
/// (three at D 128, four at D 64; never two, which deadlocks). `FLEXKERN_CUDA_WGMMA=0` turns
/// it off (A/B runs); `FLEXKERN_CUDA_MMA=tile,stages` with a tile of 64 or 128 and 3 to 8
/// stages overrides its pipeline.
fn wgmma_shape(q: &MmaQuery, over: &[usize]) -> Option<(usize, MmaShape)> {
    let off = std::env::var("FLEXKERN_CUDA_WGMMA").is_ok_and(|v| v.trim() == "0");
    let sizes = [64, 128];
    if off
        || q.compute_capability != (9, 0)
        || q.kt != q.qt
        || q.vt != q.qt
        || !sizes.contains(&q.dk)
        || !sizes.contains(&q.dv)
        || q.q_rows <= 64
    {
        return None;
    }
    let (tile, stages) = match over {
        [t @ (64 | 128), st @ 3..=8, ..] => (*t, *st),
        _ => (128, 4),
    };
    // Three stages at least: with two, the producer and the consumers wait for each other
    // (attention_wgmma.cu).
    (3..=stages).rev().find_map(|stages| {
        let m = MmaShape {
            m_tiles: 8,
            tile,
            stages,
            // The producer's copy layout is fixed (a chunk position per thread).
            copy_threads: 0,
            l2_prefetch: 256,
            min_blocks: 1,
            wg: true,
            wg_s: wg_q_mode(q.dk),
            wg_overlap: wg_overlap(),
        };
        (mma_smem(&m, q.dk, q.dv, q.k_size, q.v_size, WG_WARPS) <= q.smem_optin).then_some((128, m))
    })
}

/// Shared memory of the tensor-core kernel: its stages, or the warps' (O, max, sum) exchange
/// at the end if larger (it reuses the stage memory).
pub fn mma_smem(
    s: &MmaShape,
    dk: usize,
    dv: usize,
    k_size: usize,
    v_size: usize,
    warps: usize,
) -> usize {
    if s.wg {
        // Unpadded swizzled K/V rows, the 128 Q rows (of K's type; reserved in every Q mode:
        // the barriers follow them), 1 KiB of slack to align them, a full and an empty barrier
        // per stage.
        return s.stages * s.tile * (dk * k_size + dv * v_size)
            + 128 * dk * k_size
            + 1024
            + 16 * s.stages;
    }
    let stages = s.stages * s.tile * (dk * k_size + 16 + dv * v_size + 16);
    let exchange = warps * 16 * (dv + 2) * 4;
    stages.max(exchange)
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
const MERGE_COST_KEYS: usize = 192;

/// The partition search's bounds and costs: (smallest chunk, merge cost, largest chunk).
#[derive(Clone, Copy, Debug, PartialEq)]
struct SplitCosts {
    min_chunk: usize,
    merge_cost: usize,
    max_chunk: usize,
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
fn wave_chunk(
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
            let point =
                |s: usize, qi: i64, k: i64| classify(&m, &lens.domain(s, hq, (qi, qi), (k, k)));
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
        // Prefill: an m-tile per warp; on Hopper two warpgroups of 64 rows (D 64 and 128).
        let (rows, m) = mma_shape(&h100_query(1, 1, 64, 4096)).unwrap();
        assert_eq!(
            (rows, m.m_tiles, m.wg, m.tile, m.stages),
            (128, 8, true, 128, 4)
        );
        let (_, m) = mma_shape(&h100_query(2, 2, 128, 4096)).unwrap();
        assert_eq!((m.wg, m.stages), (true, 3));
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
        // The L2 prefetch covers a row, or more where the next key's row follows.
        let l2 = |q: MmaQuery| mma_shape(&q).unwrap().1.l2_prefetch;
        assert_eq!(l2(h100_query(2, 2, 64, 4)), 128);
        assert_eq!(l2(h100_query(2, 3, 128, 4)), 128);
        assert_eq!(l2(h100_query(2, 2, 128, 4)), 256);
        assert_eq!(
            l2(MmaQuery {
                rows_adjacent: true,
                ..h100_query(2, 2, 64, 4)
            }),
            256
        );
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
}
