//! Which GEMV kernel serves a call: direct, staged or streamed, rows per warp, the integer
//! path, the streamed kernel's plan. Decided on the host from the matrix, the batch and the
//! device (planned here, launched in `gemv.rs`), so the choice is testable without a GPU.

use super::matrix::DeviceMatrix;
pub use super::matrix::MatrixTraits;
use super::{unit_elems, GemvConfig, Mode, Staged, MAX_M};
use crate::runtime::{Device, DeviceBuf, DeviceProps};
use flexkern_quant::Format;

/// Activation rows per launch for a batch of `m` (a power of two, at most `MAX_M`).
pub(super) fn batch_rows(m: usize) -> usize {
    m.clamp(1, MAX_M).next_power_of_two()
}

/// What the GEMV plan reads of the device: its SMs, shared memory per SM, and whether it has
/// bulk copies into shared memory (Hopper's `cp.async.bulk`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvTarget {
    pub sms: usize,
    pub smem_per_sm: usize,
    pub bulk_copies: bool,
}

impl GemvTarget {
    pub fn of(p: &DeviceProps) -> GemvTarget {
        GemvTarget {
            sms: p.sms,
            smem_per_sm: p.smem_per_sm,
            bulk_copies: p.compute_capability.0 >= 9,
        }
    }

    /// An H100 / H200 (132 SMs, 228 KB of shared memory per SM): the planner's tests.
    pub fn hopper() -> GemvTarget {
        GemvTarget {
            sms: 132,
            smem_per_sm: 233472,
            bulk_copies: true,
        }
    }
}

/// The kernel configuration for a GEMV of `m` rows on `a` on the device `p` describes.
pub fn config_for(p: &DeviceProps, mode: Mode, a: &DeviceMatrix, m: usize) -> GemvConfig {
    choose(&GemvTarget::of(p), mode, &a.traits(), m)
}

/// `config_for` on a matrix's traits (no device needed).
pub fn choose(dev: &GemvTarget, mode: Mode, a: &MatrixTraits, m: usize) -> GemvConfig {
    let mut c = config(dev.sms, mode, a.unit, a.n, a.k, m);
    c.staged = staged(a.format, c.mb);
    // The staged kernel's integer path serves batches; single rows stream (below), and
    // `FLEXKERN_GEMV_DP4A=1` takes it for the staged single rows too (A/B runs with
    // `FLEXKERN_GEMV_STREAM=0`).
    let single = knobs().dp4a == Some(true);
    c.dp4a = c.staged.is_some()
        && (c.mb > 1 || single)
        && a.quantized_acts
        && dp4a_applies(a.format, mode, a.k);
    // Single rows of block formats stream (plain, gate/up, stacked): activations quantized in
    // the kernel where the format has the integer dot (StreamActs), else f32.
    if c.staged.is_some() && c.mb == 1 && mode != Mode::DownSwiglu && stream_enabled() {
        c.stream = Stream::plan(
            a.format,
            a.k,
            c.matrices(),
            a.quantized_acts,
            dev.smem_per_sm,
        )
        // Stacked Q, K, V launches keep the register batches: the ring was measured and
        // verified for plain and gate/up launches only.
        .map(|st| match mode {
            Mode::Stack => st,
            _ => st.with_bulk(a.format, a.n, a.k, c.matrices(), dev),
        });
        if let Some(st) = c.stream {
            c.dp4a = st.acts != StreamActs::F32;
            c.rows = 1;
        }
    }
    // The staged and streamed kernels read 16-byte windows around each row's blocks: the last
    // one may end up to 15 bytes past the weights, inside the allocation's size class.
    if !a.slack {
        c.staged = None;
        c.stream = None;
        c.dp4a = false;
    }
    // The direct kernel (plain floats, MLX) keeps one row per warp below 64 rows per SM: two
    // cost F16 a tenth at 4096 x 4096 on the H100 (2200-2300 -> 2000 GB/s).
    if c.staged.is_none() && a.n < 64 * dev.sms.max(1) && forced_rows().is_none() {
        c.rows = 1;
    }
    c
}

/// Whether the streamed kernel serves a single-row `mode` GEMV on `a` with activations at
/// `x`: then `gemv` can add the product into its output (`accumulate`) and normalize the
/// activations first (`norm`); else the caller runs those as separate ops.
pub fn streams(dev: &Device, mode: Mode, a: &DeviceMatrix, m: usize, x: &DeviceBuf) -> bool {
    m == 1 && x.ptr().is_multiple_of(16) && config_for(&dev.props, mode, a, 1).stream.is_some()
}

/// The staged kernel's constants for `f` at `mb` activation rows, when it serves `f`: block
/// formats (weights decoded from shared memory); plain floats and MLX keep the direct kernel.
/// `FLEXKERN_GEMV_STAGED=0` turns it off (A/B runs).
pub fn staged(f: Format, mb: usize) -> Option<Staged> {
    if knobs().staged_off {
        return None;
    }
    match f {
        Format::F32 | Format::F16 | Format::BF16 | Format::MlxAffine { .. } => None,
        f => Some(Staged::new(
            super::layout::device_block_bytes(f),
            mb,
            unit_elems(f),
        )),
    }
}

/// The streamed grid's blocks per SM, of `resident` that fit: `FLEXKERN_GEMV_GRID` lowers it
/// (A/B runs), leaving room for the next kernel's blocks to start early.
pub fn stream_grid_blocks(resident: usize) -> usize {
    let r = resident.max(1);
    knobs().grid.map_or(r, |g| g.min(r))
}

/// `FLEXKERN_GEMV_STREAM=0` turns the streamed single-row kernel off (A/B runs).
fn stream_enabled() -> bool {
    !knobs().stream_off
}

/// The GEMV's A/B switches, read once: a decode step launches hundreds of GEMVs, and each
/// environment lookup takes a lock and walks the environment.
struct Knobs {
    staged_off: bool,
    stream_off: bool,
    /// `FLEXKERN_GEMV_DP4A`: Some(true) `=1`, Some(false) `=0`.
    dp4a: Option<bool>,
    rows: Option<usize>,
    /// `FLEXKERN_GEMV_FIT`: the blocks per SM the streamed plan sizes its rings for.
    fit: Option<usize>,
    /// `FLEXKERN_GEMV_GRID`: the streamed grid's blocks per SM (at most the resident count).
    grid: Option<usize>,
    /// `FLEXKERN_GEMV_CHUNK`: the most weight bytes a streamed stage takes per matrix.
    chunk: Option<usize>,
    /// `FLEXKERN_GEMV_DIRECT`: `=0` keeps formats of 16-byte blocks on the ring (not with Q8_0
    /// activations).
    direct_aligned: Option<bool>,
    /// `FLEXKERN_GEMV_SUN`: the direct streamed kernel's units per batch.
    sun: Option<usize>,
    /// `FLEXKERN_GEMV_PIPE=0`: Q8_K activations (Q4_K) unroll a row's units instead of the
    /// pipelined batches (Q8_0 activations have only the latter).
    pipe: Option<bool>,
    /// `FLEXKERN_GEMV_BULK`: `=0` keeps the register batches; `=n` forces an n-stage bulk ring.
    bulk: Option<usize>,
}

fn knobs() -> &'static Knobs {
    static K: std::sync::OnceLock<Knobs> = std::sync::OnceLock::new();
    K.get_or_init(|| {
        let var = |n: &str| std::env::var(n).ok();
        let zero = |n: &str| var(n).is_some_and(|v| v == "0");
        Knobs {
            staged_off: zero("FLEXKERN_GEMV_STAGED"),
            stream_off: zero("FLEXKERN_GEMV_STREAM"),
            dp4a: match var("FLEXKERN_GEMV_DP4A").as_deref() {
                Some("1") => Some(true),
                Some("0") => Some(false),
                _ => None,
            },
            rows: var("FLEXKERN_GEMV_ROWS")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|r| matches!(r, 1 | 2 | 4)),
            fit: var("FLEXKERN_GEMV_FIT")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|b| (1..=8).contains(b)),
            grid: var("FLEXKERN_GEMV_GRID")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|b| (1..=8).contains(b)),
            chunk: var("FLEXKERN_GEMV_CHUNK").and_then(|v| v.parse::<usize>().ok()),
            direct_aligned: var("FLEXKERN_GEMV_DIRECT").map(|v| v != "0"),
            sun: var("FLEXKERN_GEMV_SUN")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|r| (1..=16).contains(r)),
            pipe: var("FLEXKERN_GEMV_PIPE").map(|v| v != "0"),
            bulk: var("FLEXKERN_GEMV_BULK")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|&b| b <= 8),
        }
    })
}

/// The weights a launch reads from which Q4_0 takes the bulk ring (`Stream::with_bulk`).
pub const BULK_MIN_BYTES: usize = 24 << 20;

/// The bulk ring's bytes per unit of `f` (`SH_UB`, `SH_USB` in quant_blocks.cuh): its codes in
/// the device layout and its side entry (planar formats); the formats whose pipelined batches
/// can take the ring.
fn bulk_unit_bytes(f: Format) -> Option<(usize, usize)> {
    let (ue, qk) = (unit_elems(f), f.block_elems());
    let bb = super::layout::device_block_bytes(f);
    match f {
        Format::Q4_0 | Format::Q8_0 | Format::Q4K => Some((
            bb * ue / qk,
            super::layout::planar(f).map_or(0, |p| p.side * ue / qk),
        )),
        _ => None,
    }
}

/// Register bytes of one unit in a pipelined batch (`F::Raw` in quant_blocks.cuh), for the
/// formats that have one: a planar unit's codes and its d word; a Q4_K unit's 32 code bytes
/// and its block's 16-byte head.
fn raw_unit_bytes(f: Format) -> Option<usize> {
    match f {
        Format::Q4_0 => Some(20),
        Format::Q8_0 => Some(36),
        Format::Q4K => Some(48),
        _ => None,
    }
}

/// The integer-dot path (Q8_0 activations, dp4a): Q8_0 and Q4_0 weights, k whole 32-blocks,
/// not the down projection that forms its input on load. `FLEXKERN_GEMV_DP4A=0` turns it off
/// (`=1` takes it for single rows too).
pub fn dp4a_applies(f: Format, mode: Mode, k: usize) -> bool {
    knobs().dp4a != Some(false)
        && matches!(f, Format::Q8_0 | Format::Q4_0)
        && mode != Mode::DownSwiglu
        && k.is_multiple_of(32)
}

/// `FLEXKERN_GEMV_ROWS=1|2|4`: the rows per warp of single-row plain GEMVs, forced (A/B runs;
/// 4 only for formats whose staged window fits: Q4_0, Q8_0 and the like).
fn forced_rows() -> Option<usize> {
    knobs().rows
}

/// Two rows per warp for single-row plain GEMVs with enough rows to give every SM several
/// blocks, else one.
pub fn config(dev_sms: usize, mode: Mode, unit: &str, n: usize, k: usize, m: usize) -> GemvConfig {
    let mb = batch_rows(m);
    let single = mb == 1 && mode == Mode::Plain;
    let rows = match forced_rows() {
        Some(r) if single => r,
        // Two rows per warp from 16 per SM (H100: A/B at 4096 and 14336 rows, 8B decode
        // 154 -> 167 tok/s); fewer rows keep one per warp, which fills more SMs.
        _ if single && n >= 16 * dev_sms.max(1) => 2,
        _ => 1,
    };
    GemvConfig {
        unit: unit.to_string(),
        mb,
        rows,
        mode,
        xvec: k.is_multiple_of(4),
        staged: None,
        dp4a: false,
        stream: None,
        acc: false,
        rope: false,
    }
}

/// The streamed GEMV's constants (kernels/gemv_stream.cu): the format's block bytes and
/// weights, weights per chunk, ring stages per warp, warps per block, and the blocks per SM the
/// shared memory and register budget (`__launch_bounds__`) are planned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stream {
    /// What the weights are dotted with.
    pub acts: StreamActs,
    /// Units loaded straight into registers, no ring (`FK_SREG`): planar formats and blocks of
    /// whole 16-byte words (Q4_K, Q5_K), whose codes are 16-byte aligned in global memory.
    /// `chunk` and `stages` are then unused.
    pub direct: bool,
    /// Direct only: units a lane loads as one batch before computing any (`FK_SUN`).
    pub unroll: usize,
    /// Direct with an integer dot: the batches hold the units' raw words and run as a software
    /// pipeline across rows, two in flight (`FK_SPIPE`); else a row's units are unrolled.
    pub pipe: bool,
    pub block_bytes: usize,
    pub block_elems: usize,
    pub chunk: usize,
    pub stages: usize,
    pub warps: usize,
    pub blocks: usize,
    /// Pipelined batches through each warp's ring of this many bulk-copy stages (`FK_SBULK`,
    /// `with_bulk`); 0: register batches.
    pub bulk: usize,
    /// Bytes of one bulk stage (every matrix's codes and side entries of one batch).
    pub bulk_stage: usize,
}

/// The streamed kernel's activations (`FK_DP4A`): f32, or quantized in the kernel as the CPU's
/// default precision quantizes them for the format's integer dot (Q8_0 for Q4_0 and Q8_0,
/// Q8_K for Q4_K and Q6_K) and dotted with dp4a.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamActs {
    F32 = 0,
    Q8_0 = 1,
    Q8K = 2,
}

impl StreamActs {
    /// The integer dot the streamed kernel has for `f` (None: f32 activations).
    pub fn for_format(f: Format) -> Option<StreamActs> {
        match f {
            Format::Q4_0 | Format::Q8_0 => Some(StreamActs::Q8_0),
            Format::Q4K | Format::Q6K => Some(StreamActs::Q8K),
            _ => None,
        }
    }

    /// Shared memory for an activation row of `k`.
    fn bytes(self, k: usize) -> usize {
        match self {
            StreamActs::F32 => 4 * k,
            StreamActs::Q8_0 => k + k / 32 * 8,
            StreamActs::Q8K => k + k / 256 * 4 + k / 16 * 4,
        }
    }
}

impl Stream {
    /// For `f` (a block format) with rows of `k`, `matrices` (1, or 2 for gate and up) and
    /// activations quantized when `quantized` (and the format has the integer dot), on a device with `smem_per_sm` bytes of shared memory per
    /// SM. Each warp's chain of instructions sets the pace (ncu, H100: 12 cycles per issued
    /// instruction at 16 warps per SM), so the integer-dot path, light on registers, plans
    /// three blocks of 8 warps per SM and the f32 path two. Within that, the largest chunk (at
    /// most 4 KB of weights a stage) and deepest ring (4 to 2 stages) that fit: 2-3 stages in
    /// flight per warp, 60-110 KB per SM, above the ~40 KB an H100 needs at full bandwidth.
    /// Chunks split k evenly in rounds of one unit per lane. None when nothing fits (very long
    /// rows of f32 activations): the staged kernel serves those.
    pub fn plan(
        f: Format,
        k: usize,
        matrices: usize,
        quantized: bool,
        smem_per_sm: usize,
    ) -> Option<Stream> {
        let acts = StreamActs::for_format(f)
            .filter(|_| quantized)
            .unwrap_or(StreamActs::F32);
        let (bb, qk, ue) = (
            super::layout::device_block_bytes(f),
            f.block_elems(),
            unit_elems(f),
        );
        let round = 32 * ue;
        if !round.is_multiple_of(qk) || !k.is_multiple_of(qk) || k == 0 {
            return None;
        }
        // Planar formats, and blocks of whole 16-byte words (Q4_K, Q5_K), load straight into
        // registers. `FLEXKERN_GEMV_DIRECT=0` keeps the ring for all but Q8_0 activations,
        // which only the register batches take (A/B runs).
        let ring = knobs().direct_aligned == Some(false) && acts != StreamActs::Q8_0;
        if (super::layout::planar(f).is_some() || bb.is_multiple_of(16)) && !ring {
            // Two blocks of eight warps per SM (at most 128 registers a thread): the next
            // kernel's blocks fit beside them and start early (programmatic launch), and each
            // block's activation prologue repeats fewer times. Against three blocks (H100, A/B
            // in one call): 4096 x 14336 Q4_0 51 -> 59 % of copy, 4096 x 4096 Q8_0 59 -> 64 %.
            // Units per batch (more lost in A/B runs): pipelined batches hold their units' raw
            // words, two batches live; a row's unrolled units (Q6_K, and Q4_K with
            // `FLEXKERN_GEMV_PIPE=0`) up to 128 bytes of loads a lane; f32 activations widen
            // every unit to 32 floats, so two units.
            let unit_bytes = (ue * bb / qk).max(1);
            let int = acts != StreamActs::F32;
            // Q8_0 activations only have the pipelined form; Q8_K ones take it for Q4_K, whose
            // rows hold two units a lane at k 4096 (H100, A/B in one call: 14336 x 4096 61 ->
            // 68 % of copy). Q6_K's eight 32-weight units a block, unrolled over a row, beat
            // its half blocks in batches (76 against 63 %; 49152 x 4096 90 against 73 %).
            let raw = raw_unit_bytes(f).map(|b| matrices.max(1) * b);
            let pipe =
                acts == StreamActs::Q8_0 || (int && raw.is_some() && knobs().pipe != Some(false));
            let unroll = knobs().sun.unwrap_or(if pipe {
                // Explicit batches: each unit's raw words (F::Raw) per matrix, two batches live
                // (the first loaded before the wait), within 40 registers each, and a row's
                // units a lane split evenly among its batches (a batch never spans rows: 4 units
                // in batches of 3 ran as 3 + 1). H100, 8B Q4_0 decode, gate and up at k 4096
                // in one batch of 4 against 3 + 1: 366-376 against 363-369 tok/s (three rounds).
                let cap = (160 / raw.unwrap_or(160)).clamp(1, 4);
                let per_row = (k / ue).div_ceil(32).max(1);
                per_row.div_ceil(per_row.div_ceil(cap))
            } else if int {
                (128 / (matrices.max(1) * unit_bytes)).clamp(2, 4)
            } else if ue >= 64 {
                1 // 64 floats a unit: two spill (Q5_K)
            } else {
                2
            });
            let st = Stream {
                acts,
                direct: true,
                unroll,
                pipe,
                block_bytes: bb,
                block_elems: qk,
                chunk: round,
                stages: 2,
                warps: 8,
                blocks: knobs().fit.unwrap_or(2),
                bulk: 0,
                bulk_stage: 0,
            };
            let limit = smem_per_sm.saturating_sub(1024 * st.blocks) / st.blocks;
            return (st.smem_bytes(matrices, k) <= limit).then_some(st);
        }
        let round_bytes = round / qk * bb * matrices.max(1);
        let rounds = k.div_ceil(round);
        let forced = knobs().fit.map(|b| [b]);
        let blocks: &[usize] = match &forced {
            Some(b) => b,
            None if acts != StreamActs::F32 => &[3, 2],
            None => &[2],
        };
        blocks.iter().find_map(|&blocks| {
            // The driver reserves 1 KB of shared memory per block.
            let limit = smem_per_sm.saturating_sub(1024 * blocks) / blocks;
            [
                (4096, 4),
                (4096, 3),
                (2048, 4),
                (2048, 3),
                (1024, 3),
                (1024, 2),
            ]
            .into_iter()
            .filter(|&(budget, _)| knobs().chunk.is_none_or(|c| budget <= c))
            .map(|(budget, stages)| {
                let per = (budget / round_bytes).max(1);
                let chunks = rounds.div_ceil(per);
                Stream {
                    acts,
                    direct: false,
                    unroll: 1,
                    pipe: false,
                    block_bytes: bb,
                    block_elems: qk,
                    chunk: rounds.div_ceil(chunks) * round,
                    stages,
                    warps: 8,
                    blocks,
                    bulk: 0,
                    bulk_stage: 0,
                }
            })
            .find(|s| s.smem_bytes(matrices, k) <= limit)
        })
    }

    /// On a device with bulk copies, the pipelined batches through rings of bulk copies
    /// (kernels/gemv_stream.cu, FK_SBULK) where they win: planar Q4_0 launches of at least
    /// `BULK_MIN_BYTES` of weights, two stages a warp (`choose` asks for plain and gate/up
    /// launches only). The kernel also serves Q8_0 and Q4_K, and
    /// any depth that fits; every batch's codes and side entries must be 16-byte aligned spans
    /// (k a multiple of 256: rows of side entries and a row's last, shorter batch end on whole
    /// words). Else `self`. `FLEXKERN_GEMV_BULK=0` keeps the register batches everywhere, `=n`
    /// asks for n stages wherever the kernel serves (A/B runs).
    ///
    /// H200, `bench gemv --graph` against the register batches in one call (session 22): Q4_0
    /// 14336 x 4096 66.3-66.9 against 61.3-61.5 % of copy, 4096 x 14336 53.0 against 50.4-50.7,
    /// but 4096 x 4096 35.8 against 38.7-38.8 (the copies' latency shows on short launches);
    /// Q8_0 and Q4_K lost at every shape (Q4_K 14336 x 4096 46.5 against 54.3), and rings of
    /// three or four stages lost to two (Q4_0 14336 x 4096 58.6-62.2 %: every warp's burst of
    /// early copies delays the first batch each one computes).
    pub fn with_bulk(
        self,
        f: Format,
        n: usize,
        k: usize,
        matrices: usize,
        dev: &GemvTarget,
    ) -> Stream {
        let Some((ub, usb)) = bulk_unit_bytes(f) else {
            return self;
        };
        if !dev.bulk_copies || !self.pipe || !k.is_multiple_of(256) {
            return self;
        }
        let weights = matrices.max(1) * f.tensor_bytes(n, k).unwrap_or(0);
        let bulk = match knobs().bulk {
            Some(b) => b,
            None if f == Format::Q4_0 && weights >= BULK_MIN_BYTES => 2,
            None => 0,
        };
        let st = Stream {
            bulk,
            bulk_stage: matrices.max(1) * 32 * self.unroll * (ub + usb),
            ..self
        };
        // The driver reserves 1 KB a block; the stages' mbarriers are static, 8 bytes each.
        let limit = dev.smem_per_sm.saturating_sub(1024 * self.blocks) / self.blocks;
        if bulk >= 2 && st.smem_bytes(matrices, k) + 8 * st.warps * bulk <= limit {
            st
        } else {
            self
        }
    }

    /// One matrix's stage: the chunk's blocks plus the 16-byte alignment slack.
    pub fn window(&self) -> usize {
        (self.chunk / self.block_elems * self.block_bytes).next_multiple_of(16) + 16
    }

    /// Dynamic shared memory of a launch: the warps' rings, then the activation row (Q8_0
    /// codes and their (scale, sum) pairs, or floats).
    pub fn smem_bytes(&self, matrices: usize, k: usize) -> usize {
        if self.direct {
            return self.warps * self.bulk * self.bulk_stage + self.acts.bytes(k);
        }
        self.warps * self.stages * matrices * self.window() + self.acts.bytes(k)
    }
}
