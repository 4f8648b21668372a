//! The prompt path's product on tensor cores (issue 14 item 2; batches of 16 rows and more):
//! the weights of any format decoded into 16-bit operands (a panel of rows at a time, into a
//! scratch buffer; F16 and BF16 weights serve as they are), the activation rows rounded to the
//! same type, then one GEMM with f32 accumulators (`kernels/gemm_prep.cu`, `kernels/gemm_mma.cu`
//! with mma.sync on any sm_80+ GPU, `kernels/gemm_wgmma.cu` with warpgroup MMA on Hopper).
//!
//! Written here rather than taken from cuBLAS: users may have a driver and no toolkit (NVRTC
//! only), and the operands' decode runs from the same block definitions as the GEMV. The extra
//! pass over the weights costs one write and one read of 2 bytes a weight; at a prompt's M that
//! is a fraction of the product's time.
//!
//! Precision: the default precision's, which already rounds activations (to Q8_0 / Q8_K on the
//! CPU); here both operands are rounded to f16 (bf16 for BF16 weights) and the products summed
//! in f32. The precise path (f32 activations) keeps the GEMV kernels.

use super::{prelude, Mode};
use crate::runtime::compile::KernelSource;
use flexkern_quant::Format;

mod launch;
pub(in crate::quant) use launch::run;
#[cfg(test)]
mod tests;

const GEMM_PREP: &str = include_str!("../../../kernels/gemm_prep.cu");
const GEMM_MMA: &str = include_str!("../../../kernels/gemm_mma.cu");
const GEMM_WGMMA: &str = include_str!("../../../kernels/gemm_wgmma.cu");

/// The GEMM's k-tile: operand rows are padded with zeros to a multiple of it.
pub const K_TILE: usize = 64;

/// The scratch a panel of decoded weights may take (the GEMM runs panel by panel below it:
/// Llama-3-8B's largest matrix, 14336 x 4096, is one panel; a vocabulary head is several).
const PANEL_BYTES: usize = 128 << 20;

/// 16-bit operand types of mma.sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    F16 = 1,
    BF16 = 2,
}

/// One GEMM launch plan: operand type, tiles, pipeline depth, and where the weights come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gemm {
    pub operand: Operand,
    /// Block tile (rows of activations x rows of weights) and its warps (m x n).
    pub bm: usize,
    pub bn: usize,
    pub wm: usize,
    pub wn: usize,
    /// cp.async stages.
    pub stages: usize,
    /// Blocks per SM the register budget must allow (`__launch_bounds__`).
    pub min_blocks: usize,
    /// The Hopper kernel (`gemm_wgmma.cu`) instead of mma.sync.
    pub wgmma: bool,
    /// The weight buffer is the B operand as it is (F16 / BF16 rows of whole k-tiles).
    pub direct: bool,
}

/// The smallest batch the GEMM takes by default. H100, 14336 x 4096 (session 13 call a), us
/// per call GEMV / GEMM: Q4_0 92 / 143 at 8 rows, 207 / 143 at 16; Q8_0 122 / 140, 243 / 141.
const MIN_M: usize = 16;

/// The GEMM's switches, read once (A/B runs): `FLEXKERN_GEMM=0` keeps every batch on the GEMV
/// kernels, `FLEXKERN_GEMM_MIN_M=m` moves the smallest batch the GEMM takes,
/// `FLEXKERN_GEMM_WGMMA=0` keeps Hopper on mma.sync, `FLEXKERN_GEMM_BN=128|256` forces the
/// Hopper kernel's tile width.
struct Knobs {
    min_m: Option<usize>,
    wgmma: bool,
    bn: Option<usize>,
}

fn knobs() -> &'static Knobs {
    static K: std::sync::OnceLock<Knobs> = std::sync::OnceLock::new();
    K.get_or_init(|| {
        let var = |n: &str| std::env::var(n).ok();
        Knobs {
            min_m: (var("FLEXKERN_GEMM").as_deref() != Some("0")).then(|| {
                var("FLEXKERN_GEMM_MIN_M")
                    .and_then(|v| v.parse().ok())
                    .filter(|&m: &usize| m >= 1)
                    .unwrap_or(MIN_M)
            }),
            wgmma: var("FLEXKERN_GEMM_WGMMA").as_deref() != Some("0"),
            bn: var("FLEXKERN_GEMM_BN")
                .and_then(|v| v.parse().ok())
                .filter(|b| matches!(b, 128 | 256)),
        }
    })
}

/// What the plan reads of the device and the switches.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The smallest batch the GEMM takes.
    pub min_m: usize,
    /// sm_90a's warpgroup MMA may serve (Hopper, not switched off).
    pub wgmma: bool,
    /// A forced Hopper tile width.
    pub bn: Option<usize>,
}

impl Target {
    /// For a device of compute capability `cc`; None when the GEMM is switched off.
    pub fn for_device(cc: (u32, u32)) -> Option<Target> {
        let k = knobs();
        Some(Target {
            min_m: k.min_m?,
            wgmma: k.wgmma && cc == (9, 0),
            bn: k.bn,
        })
    }

    /// Without a device: whether the GEMM serves a call (not which kernel) depends only on the
    /// call and the switches.
    pub fn any_device() -> Option<Target> {
        Target::for_device((0, 0))
    }
}

impl Gemm {
    /// The plan for `m` activation rows of a `mode` product on a matrix of `format` `[n, k]`
    /// (weights 16-byte aligned when `aligned`) on `t`, or None where the GEMV kernels serve
    /// it: small batches, the precise path (`quantized_acts` false), f32 weights, stacked
    /// launches.
    #[allow(clippy::too_many_arguments)]
    pub fn plan(
        t: &Target,
        format: Format,
        n: usize,
        k: usize,
        m: usize,
        mode: Mode,
        quantized_acts: bool,
        aligned: bool,
    ) -> Option<Gemm> {
        if m < t.min_m || !quantized_acts || mode == Mode::Stack || format == Format::F32 || n == 0
        {
            return None;
        }
        let operand = if format == Format::BF16 {
            Operand::BF16
        } else {
            Operand::F16
        };
        let direct =
            matches!(format, Format::F16 | Format::BF16) && k.is_multiple_of(K_TILE) && aligned;
        // Hopper from 64 rows: two consumer warpgroups of 64 rows and a TMA producer, as many
        // stages as fit (6 at n128: 192 KB, 4 at n256). 256 weight rows a tile from 8192 rows
        // (H100, M 512, session 13 call f: 14336 x 4096 F16 142 us against 158-189 at n128;
        // 4096 rows lose, 43-63 us against 65: too few tiles for 132 SMs).
        if t.wgmma && m >= 64 {
            let bn = t.bn.unwrap_or(if n >= 8192 { 256 } else { 128 });
            return Some(Gemm {
                operand,
                bm: 128,
                bn,
                wm: 2,
                wn: 4,
                stages: if bn == 256 { 4 } else { 6 },
                min_blocks: 1,
                wgmma: true,
                direct,
            });
        }
        // mma.sync: tiles follow the batch, 32, 64 or 128 activation rows (a warp holds 64 x
        // 32 of Y at most), 128 weight rows over four warps. The 128-row tile keeps 3 stages
        // (96 KB) so two blocks share an SM; the smaller ones, one warp-row deep, keep 4.
        let bm = m.next_power_of_two().clamp(32, 128);
        let wm = (bm / 64).max(1);
        Some(Gemm {
            operand,
            bm,
            bn: 128,
            wm,
            wn: 4,
            stages: if bm == 128 { 3 } else { 4 },
            min_blocks: if bm == 128 { 2 } else { 1 },
            wgmma: false,
            direct,
        })
    }

    /// Weight rows decoded per panel for a matrix `[n, k]` (all of them when direct).
    pub fn panel_rows(&self, n: usize, k: usize) -> usize {
        if self.direct {
            return n;
        }
        let kp = k.next_multiple_of(K_TILE);
        ((PANEL_BYTES / (2 * kp)).max(self.bn) / self.bn * self.bn).min(n)
    }

    /// Threads per block (the Hopper kernel adds its producer warpgroup).
    pub fn threads(&self) -> usize {
        32 * self.wm * self.wn + if self.wgmma { 128 } else { 0 }
    }

    /// Dynamic shared memory: the stages of both operands' tiles, 128 bytes a row (the Hopper
    /// kernel aligns them to 1 KiB within 1 KiB of slack and adds two mbarriers a stage).
    pub fn smem_bytes(&self) -> usize {
        self.stages * (self.bm + self.bn) * K_TILE * 2
            + if self.wgmma {
                1024 + 16 * self.stages
            } else {
                0
            }
    }

    /// The tile GEMM's module (format-independent): its name spells the defines.
    pub fn mma_source(&self) -> KernelSource {
        use crate::headers::{text, COMMON, MMA, WGMMA};
        let defines = [
            ("FK_GT", self.operand as usize),
            ("FK_BM", self.bm),
            ("FK_BN", self.bn),
            ("FK_WM", self.wm),
            ("FK_WN", self.wn),
            ("FK_GS", self.stages),
            ("FK_GMINB", self.min_blocks),
            ("FK_GWG", self.wgmma as usize),
        ];
        let name = defines
            .iter()
            .map(|(d, v)| format!("{}{v}", d[3..].to_lowercase()))
            .collect::<Vec<_>>()
            .join("_");
        let defs: String = defines
            .iter()
            .map(|(d, v)| format!("#define {d} {v}\n"))
            .collect();
        KernelSource {
            name: format!("gemm_{name}"),
            source: format!(
                "{defs}#define FK_QT FK_GT\n{}\n{GEMM_MMA}\n{GEMM_WGMMA}",
                text(&[COMMON, MMA, WGMMA])
            ),
        }
    }
}

/// The operand decode module of a unit type.
pub fn prep_source(unit: &str, operand: Operand) -> KernelSource {
    KernelSource {
        name: format!("gemm_prep_{}_t{}", super::ident(unit), operand as u8),
        source: format!(
            "#define FK_FMT {unit}\n#define FK_GT {}\n{}\n{GEMM_PREP}",
            operand as u8,
            prelude()
        ),
    }
}
