//! Which GEMV kernel serves a call: direct, staged or streamed, rows per warp, the integer
//! path, the streamed kernel's plan. Decided on the host from the matrix, the batch and the
//! device (planned here, launched in `gemv.rs`), so the choice is testable without a GPU.

use super::matrix::DeviceMatrix;
pub use super::matrix::MatrixTraits;
use super::{unit_elems, GemvConfig, Mode, Staged, Stream, StreamActs, MAX_M};
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
    /// Thread-block clusters with distributed shared memory (sm_90).
    pub clusters: bool,
}

impl GemvTarget {
    pub fn of(p: &DeviceProps) -> GemvTarget {
        GemvTarget {
            sms: p.sms,
            smem_per_sm: p.smem_per_sm,
            bulk_copies: p.compute_capability.0 >= 9,
            clusters: p.compute_capability.0 >= 9,
        }
    }

    /// An H100 / H200 (132 SMs, 228 KB of shared memory per SM): the planner's tests.
    pub fn hopper() -> GemvTarget {
        GemvTarget {
            sms: 132,
            smem_per_sm: 233472,
            bulk_copies: true,
            clusters: true,
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
    // the kernel where the format has the integer dot (StreamActs), else f32. So does MLX
    // where it has one (4 and 8 bits, the default precision; `Stream::plan`).
    let mlx = matches!(a.format, Format::MlxAffine { .. });
    if (c.staged.is_some() || mlx) && c.mb == 1 && mode != Mode::DownSwiglu && stream_enabled() {
        c.stream = Stream::plan(
            a.format,
            a.k,
            c.matrices(),
            a.quantized_acts,
            dev.smem_per_sm,
        )
        .map(|st| st.for_device(a.format, mode, a.n, a.k, c.matrices(), dev));
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
    if c.staged.is_none() && c.stream.is_none() {
        c.unroll = direct_unroll(a.format, c.mb);
        c.xs = direct_stages_x(a.format, c.mb, a.k);
    }
    c
}

/// The most activation bytes the direct kernel stages in shared memory (`FK_DXS`): rows of up
/// to 16384 floats.
pub const DXS_MAX_BYTES: usize = 64 << 10;

/// Whether the direct kernel stages a single activation row of `k` in shared memory for `f`
/// (`FK_DXS`): MLX, whose 32-weight units read straight from global memory held its GEMVs at
/// 10-22 % of copy (H200, session 34 call i: each load of a warp touches 32 lines).
/// `FLEXKERN_GEMV_DXS=0` turns it off (A/B runs).
pub fn direct_stages_x(f: Format, mb: usize, k: usize) -> bool {
    knobs().dxs != Some(false)
        && matches!(f, Format::MlxAffine { .. })
        && mb == 1
        && k.is_multiple_of(unit_elems(f))
        && 4 * k <= DXS_MAX_BYTES
}

/// The direct kernel's units a lane loads per loop step before any FMA (`FK_DUN`): two for a
/// single row of 16-bit floats, else one. `FLEXKERN_GEMV_DUNROLL=1..8` overrides (A/B runs).
/// H200, session 34 call e, against one: `bench gemv --graph` F16 14336 x 4096 93.7 against
/// 88.3-88.5 % of copy, BF16 93.6 against 87.1-87.4, 4096 x 4096 and 4096 x 14336 within half a
/// point; 8B F16 decode 238.9-243.9 against 231.5-234.0 tok/s, SmolLM2 F16 the same. Four lost
/// (8B 236.5-236.8, SmolLM2 5 % slower, 4096 x 14336 79.8 %). Batches keep one: their
/// accumulators already fill the registers.
pub fn direct_unroll(f: Format, mb: usize) -> usize {
    let planned = if mb == 1 && matches!(f, Format::F16 | Format::BF16) {
        2
    } else {
        1
    };
    knobs().dunroll.unwrap_or(planned)
}

/// Whether the streamed kernel serves a single-row `mode` GEMV on `a` with activations at
/// `x`: then `gemv` can normalize the activations first (`norm`); else the caller runs the
/// norm as a separate op. Every kernel adds into its output (`accumulate`).
pub fn streams(dev: &Device, mode: Mode, a: &DeviceMatrix, m: usize, x: &DeviceBuf) -> bool {
    m == 1 && x.ptr().is_multiple_of(16) && config_for(&dev.props, mode, a, 1).stream.is_some()
}

/// Whether `gemv` normalizes the activations of a `mode` GEMV on `a` itself (its `norm`): a
/// single row on the streamed kernel, or on the direct one (`FK_DNORM`); else the caller runs
/// the norm as a separate op.
pub fn normalizes(dev: &Device, mode: Mode, a: &DeviceMatrix, m: usize, x: &DeviceBuf) -> bool {
    let c = config_for(&dev.props, mode, a, 1);
    m == 1
        && x.ptr().is_multiple_of(16)
        && mode != Mode::DownSwiglu
        && (c.stream.is_some()
            || (c.staged.is_none()
                && direct_normalizes(a.format)
                && direct_norm_pays(a.bytes() * c.matrices())))
}

/// The most weight bytes a direct launch normalizes x itself for (`FLEXKERN_GEMV_DNORM_MAX`
/// overrides). Each warp then loads the norm's weights beside x and sums x's squares: 8B F16's
/// Q, K, V and gate/up (50-235 MB) decoded 9 % slower that way than after a norm launch (the
/// squares' loads went out before the weights'), and the same once they no longer did (232-234
/// against 231-235 tok/s, session 34 call d), while SmolLM2's (1-4 MB), bound by launches,
/// gained (H200, session 33 call b).
pub const DNORM_MAX_BYTES: usize = 8 << 20;

/// Whether the direct kernel's fused norm pays for a launch reading `bytes` of weights.
pub fn direct_norm_pays(bytes: usize) -> bool {
    bytes <= knobs().dnorm_max.unwrap_or(DNORM_MAX_BYTES)
}

/// Whether the direct kernel can normalize a row of `f` (`FK_DNORM`): units of at most 32
/// weights (plain floats, MLX, the 32-weight blocks). Q4_K's and Q5_K's 64-weight units spill
/// with the norm's loads and sums.
pub fn direct_normalizes(f: Format) -> bool {
    unit_elems(f) <= 32
}

/// The staged kernel's constants for `f` at `mb` activation rows, when it serves `f`: block
/// formats (weights decoded from shared memory), and batches of MLX (its codes' windows, each
/// group's scale and bias read in place). Plain floats keep the direct kernel; single rows of
/// MLX stream (4 and 8 bits, the default precision) or keep it. `FLEXKERN_GEMV_STAGED=0` turns
/// it off (A/B runs).
pub fn staged(f: Format, mb: usize) -> Option<Staged> {
    if knobs().staged_off {
        return None;
    }
    match f {
        Format::F32 | Format::F16 | Format::BF16 => None,
        Format::MlxAffine { .. } if mb <= 1 => None,
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
pub(super) struct Knobs {
    pub(super) staged_off: bool,
    pub(super) stream_off: bool,
    /// `FLEXKERN_GEMV_DP4A`: Some(true) `=1`, Some(false) `=0`.
    dp4a: Option<bool>,
    pub(super) rows: Option<usize>,
    /// `FLEXKERN_GEMV_FIT`: the blocks per SM the streamed plan sizes its rings for.
    pub(super) fit: Option<usize>,
    /// `FLEXKERN_GEMV_GRID`: the streamed grid's blocks per SM (at most the resident count).
    pub(super) grid: Option<usize>,
    /// `FLEXKERN_GEMV_CHUNK`: the most weight bytes a streamed stage takes per matrix.
    pub(super) chunk: Option<usize>,
    /// `FLEXKERN_GEMV_DIRECT`: `=0` keeps formats of 16-byte blocks on the ring (not with Q8_0
    /// activations).
    pub(super) direct_aligned: Option<bool>,
    /// `FLEXKERN_GEMV_SUN`: the direct streamed kernel's units per batch.
    pub(super) sun: Option<usize>,
    /// `FLEXKERN_GEMV_PIPE=0`: Q8_K activations (Q4_K) unroll a row's units instead of the
    /// pipelined batches (Q8_0 activations have only the latter).
    pub(super) pipe: Option<bool>,
    /// `FLEXKERN_GEMV_BULK`: `=0` keeps the register batches; `=n` forces an n-stage bulk ring
    /// (scoped: `gateup:3,4096x4096:2`).
    pub(super) bulk: Scoped,
    /// `FLEXKERN_GEMV_LATE`: weights asked for after the activations' loads (`Stream::with_late`;
    /// scoped as `FLEXKERN_GEMV_BULK`).
    pub(super) late: Scoped,
    /// `FLEXKERN_GEMV_CLUSTER`: blocks a cluster shares its activation prologue among (1: none).
    pub(super) cluster: Option<usize>,
    /// `FLEXKERN_GEMV_LANES`: lanes a 32-block of Q8_0 activations is quantized by.
    pub(super) lanes: Option<usize>,
    /// `FLEXKERN_GEMV_WARPS`: warps a block of the streamed kernel's register paths.
    pub(super) warps: Option<usize>,
    /// `FLEXKERN_GEMV_DNORM_MAX`: the most weight bytes a direct launch normalizes x for.
    pub(super) dnorm_max: Option<usize>,
    /// `FLEXKERN_GEMV_DUNROLL`: the direct kernel's units a lane loads per loop step.
    dunroll: Option<usize>,
    /// `FLEXKERN_GEMV_DXS=0`: the direct kernel reads MLX activations from global memory.
    dxs: Option<bool>,
}

/// An A/B knob's values, each for every launch or for one mode (`plain`, `gateup`, `stack`) or
/// shape (`NxK`): `3`, `gateup:3`, `gateup:3,4096x4096:2`. The first entry that applies wins.
#[derive(Debug, Default)]
pub(super) struct Scoped(Vec<(Option<String>, usize)>);

impl Scoped {
    /// Entries whose value is at most `max`; the others are dropped.
    pub(super) fn parse(v: Option<&str>, max: usize) -> Scoped {
        let entry = |e: &str| {
            let (scope, value) = match e.split_once(':') {
                Some((s, v)) => (Some(s.trim().to_string()), v),
                None => (None, e),
            };
            let value = value.trim().parse::<usize>().ok().filter(|&x| x <= max)?;
            Some((scope, value))
        };
        Scoped(v.map_or(Vec::new(), |v| v.split(',').filter_map(entry).collect()))
    }

    /// The value for a launch of `mode` over [n, k] matrices.
    pub(super) fn get(&self, mode: Mode, n: usize, k: usize) -> Option<usize> {
        let shape = format!("{n}x{k}");
        self.0
            .iter()
            .find(|(s, _)| s.as_deref().is_none_or(|s| s == mode.name() || s == shape))
            .map(|&(_, v)| v)
    }

    /// Whether any entry applies to launches of `mode` (any shape).
    pub(super) fn names(&self, mode: Mode) -> bool {
        self.0
            .iter()
            .any(|(s, _)| s.as_deref() == Some(mode.name()))
    }
}

pub(super) fn knobs() -> &'static Knobs {
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
            bulk: Scoped::parse(var("FLEXKERN_GEMV_BULK").as_deref(), 8),
            late: Scoped::parse(var("FLEXKERN_GEMV_LATE").as_deref(), 8),
            cluster: var("FLEXKERN_GEMV_CLUSTER")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|c| matches!(c, 1 | 2 | 4 | 8)),
            lanes: var("FLEXKERN_GEMV_LANES")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|c| matches!(c, 1 | 2 | 4 | 8)),
            warps: var("FLEXKERN_GEMV_WARPS")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|w| matches!(w, 4 | 8 | 16)),
            dnorm_max: var("FLEXKERN_GEMV_DNORM_MAX").and_then(|v| v.parse::<usize>().ok()),
            dxs: var("FLEXKERN_GEMV_DXS").map(|v| v != "0"),
            dunroll: var("FLEXKERN_GEMV_DUNROLL")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|u| (1..=8).contains(u)),
        }
    })
}

/// The integer-dot path (Q8_0 activations, dp4a): Q8_0 and Q4_0 weights, k whole 32-blocks,
/// not the down projection that forms its input on load. `FLEXKERN_GEMV_DP4A=0` turns it off
/// (`=1` takes it for single rows too).
pub fn dp4a_applies(f: Format, mode: Mode, k: usize) -> bool {
    knobs().dp4a != Some(false)
        && matches!(
            f,
            Format::Q8_0 | Format::Q4_0 | Format::MlxAffine { bits: 4 | 8, .. }
        )
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
        norm: false,
        unroll: 1,
        xs: false,
    }
}
