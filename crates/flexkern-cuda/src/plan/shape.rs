//! The tensor-core kernels' shapes: m-tiles, keys per stage, stages, copy threads, the Hopper
//! prefill's warpgroup layout and its shared memory, from the query and the device's tuned
//! tiles.

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
    /// The Hopper kernel (`attention_wgmma.cu`): consumer warpgroups of 64 rows (`m_tiles / 4`
    /// of them, one warp per m-tile) and a producer warpgroup, wgmma instead of mma.sync.
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

    /// Registers per thread the Hopper kernel launches with: the register file over its
    /// threads, rounded down to 8 (168 for two consumer warpgroups, 128 for three). Its
    /// setmaxnreg budgets (40 + 2 x 232, 32 + 3 x 160) add up to exactly that, or the
    /// consumers would wait for registers forever.
    pub fn wg_launch_regs(&self) -> i32 {
        (65536 / self.threads(self.m_tiles) as i32) & !7
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
    // decode keys of at most 256 bytes of K and V (1-byte KV at D 128, 2-byte heads of 64)
    // double it, so a stage still carries 32 KB (SmolLM2's D 64: 81 against 79 % of copy,
    // H200, session 28).
    let narrow = m_tiles == 1 && q.dk * q.k_size + q.dv * q.v_size <= 256;
    let tile = if q.dk.max(q.dv) > 128 {
        32
    } else if narrow {
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
    // Decode asks for 128 bytes at most: on an H200 the 256-byte hint cost every decode case
    // 2-3 points of read bandwidth, adjacent rows or not, bf16 or fp8 (session 29, call e).
    let l2 = if m_tiles == 1 { l2.min(128) } else { l2 };
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
    // `FLEXKERN_CUDA_MMA_L2=0|64|128|256`: the L2 prefetch alone, the pipeline as planned.
    if let Some(l2) = std::env::var("FLEXKERN_CUDA_MMA_L2")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|l2| [0, 64, 128, 256].contains(l2))
    {
        l2_prefetch = l2;
    }
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

/// The Hopper kernel's Q mode (`MmaShape::wg_s`): Q in registers at D 64 with two consumer
/// warpgroups (16 of them; 2-3 % faster there), else from shared memory in n128 instructions
/// (1-2 % faster than n64; Q in registers spills at D 128 and falls back to 64-key tiles, 6 %
/// slower), measured on an H200 (PERFORMANCE.md). Three warpgroups' 160 registers never take
/// Q in registers: ptxas serializes their wgmma. `FLEXKERN_CUDA_WG_S=0|1|2` for A/B runs.
fn wg_q_mode(dk: usize, groups: usize) -> usize {
    match std::env::var("FLEXKERN_CUDA_WG_S")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        Some("0") => 0,
        Some("1") => 1,
        Some("2") if groups == 2 => 2,
        _ if dk <= 64 && groups == 2 => 2,
        _ => 1,
    }
}

/// Whether the Hopper kernel overlaps a tile's softmax with the previous tile's P V
/// (FlashAttention-3's intra-warpgroup overlap). With two consumer warpgroups, off: on the H100
/// the softmax ran 30 % slower beside its own warpgroup's P V, and the other warpgroup's MMA
/// already fills that time (session 21: D128 non-causal 646 / 606 against 658 / 621 TFLOP/s).
/// With three, on, as FA3 has it at D 64: non-causal 470 against 446 TFLOP/s (H200, session
/// 25; `prepare` turns it off where a mask or score hook would spill it).
/// `FLEXKERN_CUDA_WG_OVERLAP=0|1` for A/B runs.
fn wg_overlap(groups: usize) -> bool {
    forced_overlap().unwrap_or(groups == 3)
}

/// `FLEXKERN_CUDA_WG_OVERLAP`, where set to 0 or 1.
pub fn forced_overlap() -> Option<bool> {
    match std::env::var("FLEXKERN_CUDA_WG_OVERLAP")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    }
}

/// The Hopper kernel's consumer warpgroups: three (192 rows, FlashAttention-3's D 64 tile)
/// where both head sizes are 64 and the rows fill more than two, else two. At D 64 a
/// warpgroup's softmax of a 128-key tile takes about twice its Q K^T and P V: two warpgroups
/// leave the tensor cores waiting, a third fills them. Wider heads need the registers.
/// (`prepare` may still take two where the mask cuts many more tiles at 192 rows,
/// `three_groups_pay`.) `FLEXKERN_CUDA_WG_GROUPS=2|3` for A/B runs (3 only where it may
/// apply).
fn wg_groups(q: &MmaQuery) -> usize {
    let fits = q.dk == 64 && q.dv == 64;
    match forced_groups() {
        Some(2) => 2,
        Some(3) if fits => 3,
        _ if fits && q.q_rows > 128 => 3,
        _ => 2,
    }
}

/// `FLEXKERN_CUDA_WG_GROUPS`, where set to 2 or 3.
pub fn forced_groups() -> Option<usize> {
    match std::env::var("FLEXKERN_CUDA_WG_GROUPS")
        .ok()
        .as_deref()
        .map(str::trim)
    {
        Some("2") => Some(2),
        Some("3") => Some(3),
        _ => None,
    }
}

/// The Hopper shape `m` with two consumer warpgroups (128 rows): its Q mode and overlap for
/// two, the rest kept.
pub fn two_groups(m: &MmaShape, dk: usize) -> MmaShape {
    MmaShape {
        m_tiles: 8,
        wg_s: wg_q_mode(dk, 2),
        wg_overlap: wg_overlap(2),
        ..*m
    }
}

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
    let groups = wg_groups(q);
    // Three stages at least: with two, the producer and the consumers wait for each other
    // (attention_wgmma.cu).
    (3..=stages).rev().find_map(|stages| {
        let m = MmaShape {
            m_tiles: 4 * groups,
            tile,
            stages,
            // The producer's copy layout is fixed (a chunk position per thread).
            copy_threads: 0,
            l2_prefetch: 256,
            min_blocks: 1,
            wg: true,
            wg_s: wg_q_mode(q.dk, groups),
            wg_overlap: wg_overlap(groups),
        };
        (mma_smem(&m, q.dk, q.dv, q.k_size, q.v_size, m.m_tiles) <= q.smem_optin)
            .then_some((64 * groups, m))
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
        // Unpadded swizzled K/V rows, the Q rows (of K's type; reserved in every Q mode: the
        // barriers follow them), 1 KiB of slack to align them, a full and an empty barrier per
        // stage.
        return s.stages * s.tile * (dk * k_size + dv * v_size)
            + 16 * s.m_tiles * dk * k_size
            + 1024
            + 16 * s.stages;
    }
    let stages = s.stages * s.tile * (dk * k_size + 16 + dv * v_size + 16);
    // The warps' exchange of (O, max, sum): rows of dv + 8 floats at most (attention_mma.cu).
    let exchange = warps * 16 * (dv + 8 + 2) * 4;
    stages.max(exchange)
}
