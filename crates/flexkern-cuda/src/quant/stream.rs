//! The streamed single-row GEMV's plan (kernels/gemv_stream.cu): register batches or a ring of
//! cp.async stages per warp, on Hopper a ring of bulk copies, the activations' form, and the
//! shared memory it all takes. `choose.rs` asks for it where a single row of a block format
//! streams.

use super::choose::{knobs, GemvTarget};
use super::{unit_elems, Mode};
use flexkern_quant::Format;

/// The weights a launch reads from which Q4_0 and Q4_K take the bulk ring (`Stream::with_bulk`).
pub const BULK_MIN_BYTES: usize = 24 << 20;
/// The weights from which Q6_K's short rows keep the register batches (`Stream::with_bulk`).
pub const BULK_MAX_BYTES_Q6K: usize = 96 << 20;
/// The rows a Q4_K matrix of short rows needs besides for the bulk ring (4096 x 4096 lost on
/// it); rows of `LONG_ROWS_K` take a deeper ring instead (`Stream::with_bulk`).
pub const BULK_MIN_ROWS_Q4K: usize = 8192;
/// Rows at least this long (activations) stream in one block of sixteen warps an SM.
pub const LONG_ROWS_K: usize = 8192;

/// The bulk ring's bytes for a batch of `units` units of `f` (whole blocks; `SH_UB`, `SH_USB`
/// and `SH_UPS` in quant_blocks.cuh): their codes in the device layout and their blocks' side
/// entries (planar formats); None for formats whose pipelined batches cannot take the ring.
fn bulk_batch_bytes(f: Format, units: usize) -> Option<usize> {
    let blocks = units * unit_elems(f) / f.block_elems();
    let side = super::layout::planar(f).map_or(0, |p| p.side);
    match f {
        Format::Q4_0 | Format::Q8_0 | Format::Q4K | Format::Q6K => {
            Some(blocks * (super::layout::device_block_bytes(f) + side))
        }
        _ => None,
    }
}

/// The row length whose every batch (a row's last, shorter one too) copies whole 16-byte words
/// of `f`'s side entries: 256 weights (eight 2-byte entries of 32-weight blocks), Q6_K 2048
/// (eight of its 256-weight blocks').
fn bulk_k_multiple(f: Format) -> usize {
    if f == Format::Q6K {
        2048
    } else {
        256
    }
}

/// Register bytes of one unit in a pipelined batch (`F::Raw` in quant_blocks.cuh), for the
/// formats that have one: a planar unit's codes and its d word; a Q4_K unit's 32 code bytes
/// and its block's 16-byte head; a Q6_K unit's 24 code bytes, scales and d.
fn raw_unit_bytes(f: Format) -> Option<usize> {
    match f {
        Format::Q4_0 => Some(20),
        Format::Q8_0 => Some(36),
        Format::Q4K => Some(48),
        // Its low and high code words, its scales and d (`q6k_units`, layout.rs).
        Format::Q6K => Some(32),
        // Its codes, and its group's scale and bias bits.
        Format::MlxAffine { bits, .. } => Some(4 * bits as usize + 4),
        _ => None,
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
    /// Blocks of a cluster that share the activation prologue (`FK_SCL`, `with_cluster`; 1:
    /// every block quantizes the whole row itself). The grid is a multiple of it.
    pub cluster: usize,
    /// Lanes that quantize one 32-element block of Q8_0 activations together (`FK_SQL`,
    /// `with_lanes`; 1 for Q8_K and f32 activations).
    pub lanes: usize,
    /// Of the weights asked for before the wait (the bulk ring's stages, or the first register
    /// batch), how many follow the activations' loads instead (`FK_SLATE`, `with_late`).
    pub late: usize,
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
            Format::MlxAffine { bits: 4 | 8, .. } => Some(StreamActs::Q8_0),
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
        // MLX streams only against Q8_0 activations (4 and 8 bits, the default precision):
        // its f32 form keeps the direct kernel, which stages the row in shared memory.
        let mlx = matches!(f, Format::MlxAffine { .. });
        if mlx && acts != StreamActs::Q8_0 {
            return None;
        }
        let (bb, qk, ue) = (
            super::layout::device_block_bytes(f),
            f.block_elems(),
            unit_elems(f),
        );
        let round = 32 * ue;
        if !round.is_multiple_of(qk) || !k.is_multiple_of(qk) || k == 0 {
            return None;
        }
        // Planar formats, blocks of whole 16-byte words (Q4_K, Q5_K) and MLX (its codes apart
        // from its scales, 16 or 32 bytes a unit) load straight into registers.
        // `FLEXKERN_GEMV_DIRECT=0` keeps the ring for all but Q8_0 activations, which only the
        // register batches take (A/B runs).
        let ring = knobs().direct_aligned == Some(false) && acts != StreamActs::Q8_0;
        if (super::layout::planar(f).is_some() || bb.is_multiple_of(16) || mlx) && !ring {
            // Two blocks of eight warps per SM (at most 128 registers a thread): the next
            // kernel's blocks fit beside them and start early (programmatic launch), and each
            // block's activation prologue repeats fewer times. Against three blocks (H100, A/B
            // in one call): 4096 x 14336 Q4_0 51 -> 59 % of copy, 4096 x 4096 Q8_0 59 -> 64 %.
            // Units per batch (more lost in A/B runs): pipelined batches hold their units' raw
            // words, two batches live; a row's unrolled units (Q4_K and Q6_K with
            // `FLEXKERN_GEMV_PIPE=0`) up to 128 bytes of loads a lane; f32 activations widen
            // every unit to 32 floats, so two units.
            let unit_bytes = (ue * bb / qk).max(1);
            let int = acts != StreamActs::F32;
            // Q8_0 activations only have the pipelined form; Q8_K ones take it for Q4_K, whose
            // rows hold two units a lane at k 4096 (H100, A/B in one call: 14336 x 4096 61 ->
            // 68 % of copy), and for single Q6_K matrices, whose 32-weight units are 24 code
            // bytes in its device layout (layout.rs, `q6k_units`). H200, session 37 calls b
            // and c, pipelined against unrolled rows on that layout: 14336 x 4096 77.2-77.5
            // against 74.2 % of copy, 4096 x 4096 54.0-54.3 against 45.6; in an 8B Q6_K step
            // Q, K, V 11.4 against 12.6 us, down 17.7 against 18.7, but gate and up 29.5
            // against 27.5, so they keep the unrolled rows.
            let raw = raw_unit_bytes(f).map(|b| matrices.max(1) * b);
            let pipe = acts == StreamActs::Q8_0
                || (int
                    && raw.is_some()
                    && knobs().pipe != Some(false)
                    && !(f == Format::Q6K && matrices > 1));
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
                // Where that leaves a row's last round of units short, a larger divisor of the
                // lane's units if one fits (8 units a matrix at most): Q6_K at k 14336 (14
                // units a lane) in rounds of 7 rather than 4, 4, 4, 2 (H200, 4096 x 14336:
                // 61.6-61.7 against 58.8-58.9 % of copy, session 26 call k).
                let base = (128 / (matrices.max(1) * unit_bytes)).clamp(2, 4);
                let per_row = (k / ue).div_ceil(32);
                if per_row.is_multiple_of(base) {
                    base
                } else {
                    (base + 1..=8 / matrices.max(1))
                        .rev()
                        .find(|d| per_row.is_multiple_of(*d))
                        .unwrap_or(base)
                }
            } else if ue >= 64 {
                1 // 64 floats a unit: two spill (Q5_K)
            } else {
                2
            });
            // Rows of at least `LONG_ROWS_K` of one matrix (a down projection): one block of
            // sixteen warps an SM, each row's prologue shared by twice the warps. H200, session
            // 26 call o, 4096 x 14336 against two blocks of eight: Q4_0 63.0-63.2 against
            // 58.9-59.3 % of copy, Q4_K 57.9-58.2 / 53.6-53.9, Q6_K 65.4-65.5 / 60.9-61.2, Q8_0
            // 80.2 / 78.5-79.0, and 1-3 points at 14336 x 14336; at k 4096 Q6_K and Q8_0 lost
            // (4096 x 4096 Q6_K 41.2-41.4 against 47.4-47.5).
            let (warps, blocks) = if k >= LONG_ROWS_K && matrices <= 1 {
                (16, 1)
            } else {
                (8, 2)
            };
            let st = Stream {
                acts,
                direct: true,
                unroll,
                pipe,
                block_bytes: bb,
                block_elems: qk,
                chunk: round,
                stages: 2,
                warps: knobs().warps.unwrap_or(warps),
                blocks: knobs().fit.unwrap_or(blocks),
                bulk: 0,
                bulk_stage: 0,
                cluster: 1,
                lanes: 1,
                late: 0,
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
                    cluster: 1,
                    lanes: 1,
                    late: 0,
                }
            })
            .find(|s| s.smem_bytes(matrices, k) <= limit)
        })
    }

    /// The device's refinements of the plan for a launch of `mode` over `matrices` [n, k]
    /// matrices of `f`: the bulk ring (`with_bulk`; stacked Q, K, V launches keep the register
    /// batches: the ring was measured and verified for plain and gate/up launches only), then
    /// the clusters (`with_cluster`), then the quantizer's lanes (`with_lanes`).
    pub fn for_device(
        self,
        f: Format,
        mode: Mode,
        n: usize,
        k: usize,
        matrices: usize,
        dev: &GemvTarget,
    ) -> Stream {
        // Stacked launches keep the register batches but for A/B runs that name them.
        let st = if mode == Mode::Stack && !knobs().bulk.names(Mode::Stack) {
            self
        } else {
            self.with_bulk(f, mode, n, k, matrices, dev)
        };
        st.with_cluster(mode == Mode::Plain, k, dev)
            .with_lanes(k)
            .with_late(mode, n, k)
    }

    /// The weights asked for after the activations' loads rather than before the wait
    /// (`FK_SLATE`, gemv_acts.cu `fk_late`): the second stage of plain launches' two-stage bulk
    /// rings. Asked for before the wait, it queued the activations' loads behind it (session 38's
    /// trace: the activations arrived 0.8 us after the wait, their codes stored 1.4 us later);
    /// after them, they come first and it streams in during the quantization. H200, session 39
    /// call b, `bench gemv --graph`, % of copy, one late stage / none: Q4_0 14336 x 4096
    /// 86.2 / 77.9, 85.9 / 77.4; Q4_K 73.9 / 71.6, 72.9 / 71.5. Not elsewhere: both stages
    /// late lost (Q4_0 75.2-75.4), rings of three stages (the down projection) stayed within
    /// 0.5, register batches lost 3-11 points (Q4_0 4096 x 4096 51.0 / 40.5, Q8_0 14336 x 4096
    /// 87.8 / 82.6), and an 8B step's gate and up (the norm fused, blocks started 5 us before
    /// their wait) took 21.95 us against 19.05. `FLEXKERN_GEMV_LATE=n` (scoped as
    /// `FLEXKERN_GEMV_BULK`) moves the last n stages, at most the ring's, or the first register
    /// batch (n >= 1), there (A/B runs).
    pub fn with_late(self, mode: Mode, n: usize, k: usize) -> Stream {
        let most = if self.bulk > 0 {
            self.bulk
        } else {
            usize::from(self.pipe)
        };
        let planned = usize::from(mode == Mode::Plain && self.bulk == 2);
        let late = knobs().late.get(mode, n, k).unwrap_or(planned).min(most);
        Stream { late, ..self }
    }

    /// On a device with bulk copies, the pipelined batches through rings of bulk copies
    /// (kernels/gemv_stream.cu, FK_SBULK) where they win: planar Q4_0 launches of at least
    /// `BULK_MIN_BYTES` of weights, Q4_K ones that also have `BULK_MIN_ROWS_Q4K` rows, and
    /// single Q6_K matrices below `BULK_MAX_BYTES_Q6K`, two stages a warp; single matrices of
    /// the three with rows of `LONG_ROWS_K` or more, three (`choose` asks for plain and gate/up
    /// launches only). The kernel also serves Q8_0, and any depth that fits; every batch's
    /// codes and side entries must be 16-byte aligned spans (k a multiple of 256, Q6_K's of
    /// 2048: rows of side entries and a row's last, shorter batch end on whole words). Else
    /// `self`. `FLEXKERN_GEMV_BULK=0` keeps the register batches everywhere, `=n`
    /// asks for n stages wherever the kernel serves (A/B runs).
    ///
    /// H200, `bench gemv --graph` against the register batches in one call (session 22): Q4_0
    /// 14336 x 4096 66.3-66.9 against 61.3-61.5 % of copy, 4096 x 14336 53.0 against 50.4-50.7,
    /// but 4096 x 4096 35.8 against 38.7-38.8 (the copies' latency shows on short launches);
    /// Q8_0 and Q4_K lost at every shape (Q4_K 14336 x 4096 46.5 against 54.3). Session 26, after
    /// the activation codes lost their bank conflicts: Q4_K 14336 x 4096 70.5-70.9 against
    /// 65.3-66.1, 28672 x 4096 82.2-82.4 against 73.7-74.1, 14336 x 14336 75.4 against 73.7, but
    /// 4096 x 4096 36.9-37.2 against 42.8-43.4 and 4096 x 14336 50.8 against 53.7. Rings of
    /// three or four stages lost to two (Q4_0 14336 x 4096 58.6-62.2 %: every warp's burst of
    /// early copies delays the first batch each one computes).
    pub fn with_bulk(
        self,
        f: Format,
        mode: Mode,
        n: usize,
        k: usize,
        matrices: usize,
        dev: &GemvTarget,
    ) -> Stream {
        let Some(batch) = bulk_batch_bytes(f, 32 * self.unroll) else {
            return self;
        };
        if !dev.bulk_copies || !self.pipe || !k.is_multiple_of(bulk_k_multiple(f)) {
            return self;
        }
        let weights = matrices.max(1) * f.tensor_bytes(n, k).unwrap_or(0);
        let bulk = match knobs().bulk.get(mode, n, k) {
            Some(b) => b,
            // Rows of at least `LONG_ROWS_K` (a down projection, one block of sixteen warps an
            // SM): three stages. H200, 4096 x 14336 against two (Q4_0) or the register batches
            // (Q4_K, which took no ring there), session 37 call a: Q4_0 65.4 against 64.0-64.2 %
            // of copy, Q4_K 66.3 against 59.1-59.8; Q8_0 lost (77.1 against 82.8-83.1).
            // Q6_K too (session 39 call d: 67.3 against 66.0-66.3).
            None if matches!(f, Format::Q4_0 | Format::Q4K | Format::Q6K)
                && weights >= BULK_MIN_BYTES
                && k >= LONG_ROWS_K
                && matrices <= 1 =>
            {
                3
            }
            None if f == Format::Q4_0 && weights >= BULK_MIN_BYTES => 2,
            // Q6_K (single matrices: its gate/up unrolls rows) below `BULK_MAX_BYTES_Q6K`.
            // H200, session 39 call d, against the register batches (pairs of blocks), two
            // rounds: 14336 x 4096 77.4 / 77.1 against 75.4 / 75.9 % of copy, but 49152 x 4096
            // (the 8B output head) 84.8 / 85.1 against 87.0 / 87.5.
            None if f == Format::Q6K && (BULK_MIN_BYTES..BULK_MAX_BYTES_Q6K).contains(&weights) => {
                2
            }
            None if f == Format::Q4K && weights >= BULK_MIN_BYTES && n >= BULK_MIN_ROWS_Q4K => 2,
            None => 0,
        };
        let st = Stream {
            bulk,
            bulk_stage: matrices.max(1) * batch,
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

    /// On a device with clusters, pairs of blocks share the activation prologue (each
    /// quantizes half of the row into both, kernels/gemv_acts.cu) where that measured faster on
    /// the H200: rows of at least `CLUSTER_MIN_K` activations, and plain launches on register
    /// batches (`plain`: one matrix, no fused norm in the model's use; not the bulk ring).
    /// Graph replays, % of copy, pairs / one block: k 14336 Q4_0 55.6 / 52.4, Q8_0 75.5 / 70.2,
    /// Q4_K 44.8 / 41.3, Q6_K 58.9 / 52.6; 4096 x 4096 Q4_0 41.3 / 38.8, Q6_K 47.3 / 46.0. They
    /// lost on the Q4_0 bulk ring at k 4096 (63.3 / 66.2) and where the launch fuses the norm (an
    /// 8B step's gate/up 24.1 / 20.7 us, Q, K, V 10.6 / 10.1); clusters of 4 or 8 lost
    /// everywhere (a third to a half slower: fewer clusters than blocks fit at once). Float
    /// activations keep one block. `FLEXKERN_GEMV_CLUSTER=1|2|4|8` overrides.
    pub fn with_cluster(self, plain: bool, k: usize, dev: &GemvTarget) -> Stream {
        const CLUSTER_MIN_K: usize = 8192;
        if !dev.clusters || self.acts == StreamActs::F32 {
            return self;
        }
        let cluster = match knobs().cluster {
            Some(c) => c,
            None if k >= CLUSTER_MIN_K || (plain && self.bulk == 0) => 2,
            None => 1,
        };
        Stream { cluster, ..self }
    }

    /// Q8_0 activations: the lanes per 32-element block that spread this block's share of the
    /// row (1 / `cluster` of its blocks) over its threads, at most four (gemv_acts.cu,
    /// `FK_SQL`; the kernel takes up to eight). H200, `bench gemv --graph`, % of copy, planned lanes / one lane (two rounds
    /// each, session 24): Q8_0 14336 x 4096 85.0-85.5 / 83.5-83.7, 4096 x 4096 64.5-65.2 /
    /// 62.6; Q4_0 4096 x 4096 43.2-43.7 / 42.1-42.2; k 14336 (one lane planned either way)
    /// equal; 8B Q4_0 step: gate/up 19.7 / 20.8 us, Q, K, V 9.0 / 10.1, wo 6.5 / 7.1. Plain
    /// launches on the bulk ring too (they kept one lane from session 24 to 37): H200,
    /// session 38 call e, two lanes / one, Q4_0 14336 x 4096 76.2-76.9 / 70.4-71.1, 49152 x 4096
    /// 90.5-90.7 / 86.3-86.7, 4096 x 14336 67.5 / 64.0-64.1 (four: 75.4, 89.2, 67.4); call d's
    /// trace put 1.5-2 us between a block's first activation load and its codes stored with one
    /// lane. Shares of more 32-blocks than half the threads take two (session 26: k 14336
    /// on a pair of eight-warp blocks; plain rows that long now run sixteen warps a block,
    /// which their share fits). Eight lanes lost everywhere. `FLEXKERN_GEMV_LANES=1|2|4|8`
    /// overrides.
    pub fn with_lanes(self, k: usize) -> Stream {
        if self.acts != StreamActs::Q8_0 {
            return self;
        }
        let share = (k / 32).div_ceil(self.cluster).max(1);
        let fit = (self.warps * 32 / share).clamp(1, 8);
        let planned = if share > self.warps * 16 {
            // More 32-blocks than half the threads (k 14336 on a pair of eight-warp blocks):
            // two lanes a block halve each lane's chain though the threads loop twice (H200,
            // 4096 x 14336 on eight warps: Q4_0 59.5-59.6 against 56.6-56.8 % of copy, Q8_0
            // 79.9-80.9 against 77.3; four lanes 57.2-57.5 / 74.4-75.4; session 26 call k).
            2
        } else {
            1 << fit.ilog2().min(2)
        };
        let lanes = knobs().lanes.unwrap_or(planned);
        Stream { lanes, ..self }
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
