//! Quantized GEMV and embedding on the GPU for every weight format flexkern-quant reads (the
//! file's blocks as they are, uploaded once): the unit types of `kernels/quant_blocks.cuh`
//! named per format, the kernel sources (one module per format and configuration, compiled
//! on first use), and the launches (`gemv.rs`).

pub mod choose;
pub mod stream;
pub use stream::{Stream, StreamActs};
pub mod gemm;
pub mod gemv;
#[cfg(test)]
mod host_dots;
pub mod layout;
pub mod matrix;
#[cfg(test)]
mod tests;

use crate::error::{invalid, Result};
use crate::runtime::compile::KernelSource;
use flexkern_quant::{Format, MlxScale};

pub(crate) const BLOCKS: &str = include_str!("../../kernels/quant_blocks.cuh");
pub(crate) const GEMV: &str = include_str!("../../kernels/gemv.cu");
pub(crate) const GEMV_ACTS: &str = include_str!("../../kernels/gemv_acts.cu");
pub(crate) const GEMV_STREAM: &str = include_str!("../../kernels/gemv_stream.cu");

/// The largest activation batch one launch takes; larger `m` runs in groups of this many.
pub const MAX_M: usize = 16;

/// The largest power of two (<= 16) dividing `bytes`: the alignment of rows of that length.
pub fn align_of(bytes: usize) -> usize {
    if bytes == 0 {
        16
    } else {
        (1usize << bytes.trailing_zeros()).min(16)
    }
}

/// The C++ unit type that decodes `f` with rows of `k` weights, or a typed error for formats
/// the GPU does not take (the activation-only Q8_1 and Q8_K) and for `k` the format cannot
/// hold.
pub fn unit_type(f: Format, k: usize) -> Result<String> {
    f.blocks_per_row(k)
        .map_err(|e| invalid("k", e.to_string()))?;
    let row_bytes = f.row_bytes(k).map_err(|e| invalid("k", e.to_string()))?;
    Ok(match f {
        Format::F32 => format!("FkFloat<0, {}>", align_of(row_bytes).max(4)),
        Format::F16 => format!("FkFloat<1, {}>", align_of(row_bytes)),
        Format::BF16 => format!("FkFloat<2, {}>", align_of(row_bytes)),
        Format::Q4_0 => "FkQ4_0P".into(),
        Format::Q4_1 => "FkQ4_1".into(),
        Format::Q5_0 => "FkQ5_0".into(),
        Format::Q5_1 => "FkQ5_1".into(),
        Format::Q8_0 => "FkQ8_0P".into(),
        Format::Q2K => "FkQ2K".into(),
        Format::Q3K => "FkQ3K".into(),
        Format::Q4K => "FkQ4K".into(),
        Format::Q5K => "FkQ5K".into(),
        Format::Q6K => "FkQ6KP".into(),
        Format::IQ4NL => "FkIQ4NL".into(),
        Format::IQ4XS => "FkIQ4XS".into(),
        Format::MXFP4 => "FkMXFP4".into(),
        Format::MlxAffine {
            bits,
            group_size,
            scales,
        } => format!(
            "FkMlx<{bits}, {group_size}, {}>",
            matches!(scales, MlxScale::BF16)
        ),
        Format::Q8_1 | Format::Q8K => {
            return Err(invalid(
                "format",
                format!("{f} is an activation format, not a weight format the GPU reads"),
            ))
        }
    })
}

/// Weights per unit of `f` (the kernels' inner step): K-quants Q4_K / Q5_K 64, plain floats 8,
/// the rest 32.
pub fn unit_elems(f: Format) -> usize {
    match f {
        Format::F32 | Format::F16 | Format::BF16 => 8,
        Format::Q4K | Format::Q5K => 64,
        _ => 32,
    }
}

/// The prelude every quant module starts with: integer types, the layout, the unit types.
pub(crate) fn prelude() -> String {
    format!(
        "{}\n{}\n{}\n",
        crate::headers::text(&[crate::headers::COMMON]),
        layout::header().replace("#pragma once", ""),
        BLOCKS.replace("#pragma once", "")
    )
}

/// GEMV variants: plain, gate and up fused with SwiGLU, down with the activation formed on load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Plain = 0,
    GateUp = 1,
    DownSwiglu = 2,
    /// Two or three matrices' rows stacked into one launch (Q, K, V): the streamed kernel, or
    /// the direct one (a row per warp).
    Stack = 3,
}

impl Mode {
    /// The mode's name in kernel names and knob scopes.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::GateUp => "gateup",
            Mode::DownSwiglu => "downswiglu",
            Mode::Stack => "stack",
        }
    }

    /// Weight matrices one launch of this mode reads: gate and up, or one.
    pub fn matrices(self) -> usize {
        if self == Mode::GateUp {
            2
        } else {
            1
        }
    }
}

/// One compiled GEMV configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GemvConfig {
    pub unit: String,
    /// Activation rows the kernel holds accumulators for (1, 2, 4, 8 or 16).
    pub mb: usize,
    /// Weight rows per warp.
    pub rows: usize,
    pub mode: Mode,
    /// Activation rows 16-byte aligned (k % 4 == 0): float4 loads.
    pub xvec: bool,
    /// The staged kernel (kernels/gemv.cu, FK_STAGED) for a block format.
    pub staged: Option<Staged>,
    /// Activations quantized to Q8_0 and dotted with dp4a (`FK_DP4A`, staged Q8_0 / Q4_0).
    pub dp4a: bool,
    /// The streamed kernel (kernels/gemv_stream.cu) for a single row of a block format.
    pub stream: Option<Stream>,
    /// The streamed kernel adds its result into the output (`FK_ACC`: a residual connection).
    pub acc: bool,
    /// The stacked Q, K, V launch applies RoPE and appends K and V to the page store in its
    /// epilogue (`FK_SROPE`; `gemv_stacked_rope`).
    pub rope: bool,
    /// The direct kernel RMS-normalizes its single activation row (`FK_DNORM`); the streamed
    /// kernel takes its norm as an argument instead.
    pub norm: bool,
    /// The direct kernel's units a lane loads before their FMAs, per loop step (`FK_DUN`,
    /// `choose::direct_unroll`); 1 elsewhere.
    pub unroll: usize,
    /// The direct kernel stages its activation row in shared memory and walks the row groups
    /// grid-stride over the resident blocks (`FK_DXS`, `choose::direct_stages_x`).
    pub xs: bool,
}

/// The staged GEMV's constants: the format's block bytes and the weights per chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Staged {
    pub block_bytes: usize,
    pub chunk: usize,
}

impl Staged {
    /// For `mb` activation rows of a format with `unit_elems`-weight units: one unit per lane
    /// where `mb` chunks of activations fit in 64 KB (16 rows: 1024 weights).
    pub fn new(block_bytes: usize, mb: usize, unit_elems: usize) -> Staged {
        Staged {
            block_bytes,
            chunk: (32 * unit_elems).min(16384 / mb.max(1)),
        }
    }

    /// Dynamic shared memory of a launch: the activation rows of one chunk.
    pub fn smem_bytes(&self, mb: usize) -> usize {
        mb * self.chunk * 4
    }
}

pub(super) fn ident(unit: &str) -> String {
    unit.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>()
        .trim_end_matches('_')
        .to_string()
}

/// `FLEXKERN_GEMV_MINB=n`: the blocks per SM the GEMV kernels' register budget must allow
/// (`__launch_bounds__`'s second argument; A/B runs of occupancy against registers).
fn forced_min_blocks() -> Option<u32> {
    std::env::var("FLEXKERN_GEMV_MINB")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&b| (1..=16).contains(&b))
}

impl GemvConfig {
    /// A single row of `f` (rows of `k`) in `mode` on the streamed kernel with the integer
    /// dot's activations, as `stream` plans it: the shorthand of tests and tools. A typed error
    /// where `unit_type` gives one.
    pub fn streamed(f: Format, k: usize, mode: Mode, stream: Option<Stream>) -> Result<GemvConfig> {
        Ok(GemvConfig {
            unit: unit_type(f, k)?,
            mb: 1,
            rows: 1,
            mode,
            xvec: true,
            staged: choose::staged(f, 1),
            dp4a: true,
            stream,
            acc: false,
            rope: false,
            norm: false,
            unroll: 1,
            xs: false,
        })
    }

    /// Weight matrices one launch reads: gate and up, or one.
    pub fn matrices(&self) -> usize {
        self.mode.matrices()
    }

    pub fn source(&self) -> KernelSource {
        let minb = forced_min_blocks();
        let mode = self.mode.name();
        if let Some(st) = self.stream {
            return KernelSource {
                name: format!(
                    "gemv_{}_{mode}_stream_{}_w{}_b{}{}{}{}",
                    ident(&self.unit),
                    if st.direct {
                        format!(
                            "reg{}{}{}",
                            st.unroll,
                            if st.pipe { "p" } else { "" },
                            if st.bulk > 0 {
                                format!("k{}", st.bulk)
                            } else {
                                String::new()
                            }
                        )
                    } else {
                        format!("c{}_s{}", st.chunk, st.stages)
                    },
                    st.warps,
                    st.blocks,
                    ["", "_q8", "_q8k"][st.acts as usize],
                    if self.acc { "_acc" } else { "" },
                    if self.rope { "_rope" } else { "" }
                ) + &if st.cluster > 1 {
                    format!("_c{}", st.cluster)
                } else {
                    String::new()
                } + &if st.lanes > 1 {
                    format!("_l{}", st.lanes)
                } else {
                    String::new()
                } + &if st.late > 0 {
                    format!("_e{}", st.late)
                } else {
                    String::new()
                },
                source: format!(
                    "#define FK_FMT {}\n#define FK_MB 1\n#define FK_R 1\n#define FK_MODE {}\n#define FK_XV 1\n\
                     #define FK_STREAM 1\n#define FK_BB {}\n#define FK_CW {}\n#define FK_SS {}\n\
                     #define FK_SNW {}\n#define FK_SMINB {}\n#define FK_DP4A {}\n#define FK_ACC {}\n#define FK_SREG {}\n#define FK_SUN {}\n#define FK_SPIPE {}\n#define FK_SBULK {}\n#define FK_SROPE {}\n#define FK_SCL {}\n#define FK_SQL {}\n#define FK_SLATE {}\n{}\n{}{GEMV}\n{GEMV_ACTS}\n{GEMV_STREAM}",
                    self.unit,
                    self.mode as i32,
                    st.block_bytes,
                    st.chunk,
                    st.stages,
                    st.warps,
                    st.blocks,
                    st.acts as i32,
                    self.acc as i32,
                    st.direct as i32,
                    st.unroll,
                    st.pipe as i32,
                    st.bulk,
                    self.rope as i32,
                    st.cluster,
                    st.lanes,
                    st.late,
                    prelude(),
                    if self.rope {
                        crate::headers::kv_store() + "\n"
                    } else {
                        String::new()
                    } + &gemv::FkStack::cuda()
                ),
            };
        }
        KernelSource {
            name: format!(
                "gemv_{}_{mode}_m{}_r{}{}{}",
                ident(&self.unit),
                self.mb,
                self.rows,
                if self.xvec { "" } else { "_xs" },
                if self.staged.is_some() { "_st" } else { "" },
            ) + if self.dp4a { "_q8" } else { "" }
                + if self.acc { "_acc" } else { "" }
                + if self.norm { "_norm" } else { "" }
                + &minb.map_or(String::new(), |b| format!("_b{b}"))
                + &if self.unroll > 1 {
                    format!("_u{}", self.unroll)
                } else {
                    String::new()
                }
                + if self.xs { "_dx" } else { "" },
            source: format!(
                "{}{}#define FK_FMT {}\n#define FK_MB {}\n#define FK_R {}\n#define FK_MODE {}\n#define FK_XV {}\n#define FK_ACC {}\n#define FK_DNORM {}\n#define FK_DXS {}\n{}{}\n{GEMV}",
                minb.map_or(String::new(), |b| format!("#define FK_MINB {b}\n")),
                if self.unroll > 1 {
                    format!("#define FK_DUN {}\n", self.unroll)
                } else {
                    String::new()
                },
                self.unit,
                self.mb,
                self.rows,
                self.mode as i32,
                self.xvec as i32,
                self.acc as i32,
                self.norm as i32,
                self.xs as i32,
                self.staged.map_or(String::new(), |st| format!(
                    "#define FK_STAGED 1\n#define FK_BB {}\n#define FK_CW {}\n#define FK_DP4A {}\n",
                    st.block_bytes, st.chunk, self.dp4a as i32
                )),
                prelude()
                    + &if self.mode == Mode::Stack || self.norm {
                        gemv::FkStack::cuda()
                    } else {
                        String::new()
                    }
            ),
        }
    }
}

/// The embedding module of a unit type.
pub fn embed_source(unit: &str) -> KernelSource {
    KernelSource {
        name: format!("embed_{}", ident(unit)),
        source: format!(
            "#define FK_FMT {unit}\n#define FK_EMBED 1\n#define FK_MODE 0\n#define FK_XV 0\n{}\n{GEMV}",
            prelude()
        ),
    }
}

/// Every format the GPU GEMV takes: the fixed ones, then MLX at every width, group and scale
/// type.
pub fn gpu_formats() -> Vec<Format> {
    let mut v: Vec<Format> = Format::all_fixed()
        .filter(|f| !matches!(f, Format::Q8_1 | Format::Q8K))
        .collect();
    for bits in flexkern_quant::format::MLX_BITS {
        for g in flexkern_quant::format::MLX_GROUPS {
            for s in [MlxScale::F16, MlxScale::BF16] {
                v.push(Format::mlx(bits, g, s).expect("catalogued MLX format"));
            }
        }
    }
    v
}
