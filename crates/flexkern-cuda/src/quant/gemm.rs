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

use super::matrix::{DeviceMatrix, FkMat, GemvCall};
use super::{prelude, Mode};
use crate::error::{invalid, Result};
use crate::runtime::compile::KernelSource;
use crate::runtime::Device;
use cudarc::driver::sys::CUtensorMap;
use flexkern_quant::Format;
use std::ffi::c_void;
use std::sync::Arc;

const GEMM_PREP: &str = include_str!("../../kernels/gemm_prep.cu");
const GEMM_MMA: &str = include_str!("../../kernels/gemm_mma.cu");
const GEMM_WGMMA: &str = include_str!("../../kernels/gemm_wgmma.cu");

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

/// Launches `f` with `grid` blocks of `threads` and `smem` bytes on the device's stream.
fn launch(
    dev: &Device,
    f: cudarc::driver::sys::CUfunction,
    grid: (u32, u32),
    threads: usize,
    smem: usize,
    params: &mut [*mut c_void],
) -> Result<()> {
    dev.bind()?;
    // SAFETY: every caller passes its kernel's parameters in order, each pointer range checked
    // against its buffer (`gemv`'s `validate`, the scratch sized here); the kernels start with
    // FK_PDL_ENTER.
    unsafe {
        crate::runtime::launch_grid(
            f,
            (grid.0, grid.1, 1),
            (threads as u32, 1, 1),
            smem as u32,
            dev.stream(),
            params,
            dev.pdl(),
        )
    }
}

/// The TMA descriptor of a `[rows, kp]` operand at `ptr` (16-bit, rows `kp` elements apart) read
/// in boxes of 64 elements x `box_rows` rows (the Hopper kernel's staging layout); rows past
/// `rows` arrive as zeros.
fn tensor_map(
    ptr: u64,
    rows: usize,
    kp: usize,
    box_rows: usize,
    op: Operand,
) -> Result<CUtensorMap> {
    crate::runtime::tma::tiled_map(
        ptr,
        op == Operand::BF16,
        &[kp as u64, rows as u64],
        &[(kp * 2) as u64],
        &[K_TILE as u32, box_rows as u32],
    )
}

impl DeviceMatrix {
    /// The tensor-core GEMM's plan for `m` rows of a `mode` product, where it serves them.
    pub fn gemm_plan(&self, mode: Mode, m: usize) -> Option<super::gemm::Gemm> {
        let t = Target::for_device(self.buf.device().props.compute_capability)?;
        Gemm::plan(
            &t,
            self.format,
            self.n,
            self.k,
            m,
            mode,
            self.quantized_acts,
            self.buf.ptr().is_multiple_of(16),
        )
    }
}

/// Runs `c` (already validated by `gemv`) as planned by `g`.
pub(super) fn run(dev: &Arc<Device>, c: &GemvCall, g: &Gemm) -> Result<()> {
    let (n, k, m) = (c.a.n, c.a.k, c.m);
    let kp = k.next_multiple_of(K_TILE);
    if m > i32::MAX as usize {
        return Err(invalid("m", "larger than i32::MAX"));
    }
    let mma = dev.module_keyed(&g.mma_source().name, || g.mma_source())?;
    let (gemm, _) = mma.kernel("fk_gemm", g.threads() as u32, g.smem_bytes())?;
    let prep = {
        let src = prep_source(c.a.unit(), g.operand);
        dev.module_keyed(&src.name.clone(), || src)?
    };

    // The activation operand: m rows of kp.
    let acts = dev.alloc(m * kp * 2)?;
    {
        let (mut x, mut x2, mut dst) = (c.x.ptr(), c.x2.map_or(0, |b| b.ptr()), acts.ptr());
        let (mut mm, mut kk, mut kpp) = (m as i64, k as i64, kp as i64);
        let mut mode = (c.mode == Mode::DownSwiglu) as i32 * 2;
        let mut p: [*mut c_void; 7] = [
            (&mut x as *mut u64).cast(),
            (&mut x2 as *mut u64).cast(),
            (&mut dst as *mut u64).cast(),
            (&mut mm as *mut i64).cast(),
            (&mut kk as *mut i64).cast(),
            (&mut kpp as *mut i64).cast(),
            (&mut mode as *mut i32).cast(),
        ];
        let blocks = (m * kp / 8).div_ceil(256);
        launch(
            dev,
            prep.function("fk_gemm_acts")?,
            (blocks as u32, 1),
            256,
            0,
            &mut p,
        )?;
    }

    let passes: Vec<(&DeviceMatrix, i32)> = match c.mode {
        Mode::GateUp => {
            let b =
                c.b.ok_or_else(|| invalid("b", "the fused gate/up GEMM needs `up`"))?;
            vec![(c.a, 0), (b, 2)]
        }
        _ => vec![(c.a, if c.accumulate { 1 } else { 0 })],
    };
    // `plan` saw a's alignment; up's must match for its rows to be read directly.
    if g.direct && passes.iter().any(|(w, _)| !w.buf.ptr().is_multiple_of(16)) {
        return Err(invalid(
            "b",
            "up's weights are not 16-byte aligned as gate's are",
        ));
    }
    let panel = g.panel_rows(n, k);
    let scratch = if g.direct {
        None
    } else {
        Some(dev.alloc(panel * kp * 2)?)
    };
    let weights = prep.function("fk_gemm_weights")?;
    for (w, mode) in passes {
        let mat = w.mat();
        let mut r0 = 0;
        while r0 < n {
            let rows = panel.min(n - r0);
            let mut b = match &scratch {
                None => mat.w + (r0 * w.format.row_bytes(k).unwrap_or(0)) as u64,
                Some(s) => {
                    let (mut a, mut dst) = (mat, s.ptr());
                    let (mut r, mut nr, mut kk, mut kpp) =
                        (r0 as i64, rows as i64, k as i64, kp as i64);
                    let mut p: [*mut c_void; 6] = [
                        (&mut a as *mut FkMat).cast(),
                        (&mut dst as *mut u64).cast(),
                        (&mut r as *mut i64).cast(),
                        (&mut nr as *mut i64).cast(),
                        (&mut kk as *mut i64).cast(),
                        (&mut kpp as *mut i64).cast(),
                    ];
                    let ue = super::unit_elems(w.format);
                    let threads = rows * kp.div_ceil(ue);
                    launch(
                        dev,
                        weights,
                        (threads.div_ceil(256) as u32, 1),
                        256,
                        0,
                        &mut p,
                    )?;
                    s.ptr()
                }
            };
            let (mut a, mut y) = (acts.ptr(), c.y.ptr() + (r0 * 4) as u64);
            let (mut mm, mut nn, mut kpp, mut ldy, mut md) =
                (m as i32, rows as i64, kp as i64, n as i64, mode);
            // The Hopper kernel takes its operands as TMA descriptors.
            let (mut ta, mut tb) = if g.wgmma {
                (
                    tensor_map(a, m, kp, g.bm, g.operand)?,
                    tensor_map(b, rows, kp, g.bn, g.operand)?,
                )
            } else {
                // SAFETY: plain bytes, unused by the mma.sync kernel.
                unsafe { (std::mem::zeroed(), std::mem::zeroed()) }
            };
            let (pa, pb): (*mut c_void, *mut c_void) = if g.wgmma {
                (
                    (&mut ta as *mut CUtensorMap).cast(),
                    (&mut tb as *mut CUtensorMap).cast(),
                )
            } else {
                ((&mut a as *mut u64).cast(), (&mut b as *mut u64).cast())
            };
            let mut p: [*mut c_void; 8] = [
                pa,
                pb,
                (&mut y as *mut u64).cast(),
                (&mut mm as *mut i32).cast(),
                (&mut nn as *mut i64).cast(),
                (&mut kpp as *mut i64).cast(),
                (&mut ldy as *mut i64).cast(),
                (&mut md as *mut i32).cast(),
            ];
            let grid = (m.div_ceil(g.bm) as u32, rows.div_ceil(g.bn) as u32);
            launch(dev, gemm, grid, g.threads(), g.smem_bytes(), &mut p)?;
            r0 += rows;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const AMPERE: Target = Target {
        min_m: 17,
        wgmma: false,
        bn: None,
    };
    const HOPPER: Target = Target {
        min_m: 17,
        wgmma: true,
        bn: None,
    };

    fn plan(f: Format, n: usize, k: usize, m: usize) -> Option<Gemm> {
        Gemm::plan(&AMPERE, f, n, k, m, Mode::Plain, true, true)
    }

    #[test]
    fn the_plan_follows_the_batch_the_format_and_the_device() {
        assert_eq!(
            plan(Format::Q4_0, 4096, 4096, 16),
            None,
            "GEMV below 17 rows"
        );
        assert_eq!(
            Gemm::plan(
                &AMPERE,
                Format::Q4_0,
                4096,
                4096,
                64,
                Mode::Plain,
                false,
                true
            ),
            None,
            "the precise path keeps f32 activations"
        );
        assert_eq!(plan(Format::F32, 4096, 4096, 64), None);
        assert_eq!(
            Gemm::plan(&AMPERE, Format::Q4_0, 64, 64, 64, Mode::Stack, true, true),
            None
        );
        let g = plan(Format::Q4_0, 14336, 4096, 512).expect("planned");
        assert_eq!((g.bm, g.wm, g.stages, g.threads()), (128, 2, 3, 256));
        assert!(
            !g.direct && g.panel_rows(14336, 4096) == 14336,
            "one panel at 8B's widest"
        );
        assert!(g.smem_bytes() * 2 <= 227 << 10, "two blocks per H100 SM");
        let g = plan(Format::Q8_0, 128256, 4096, 512).expect("planned");
        let p = g.panel_rows(128256, 4096);
        assert!(p.is_multiple_of(g.bn) && p * 4096 * 2 <= PANEL_BYTES && p < 128256);
        let g = plan(Format::Q4K, 4096, 4096, 20).expect("planned");
        assert_eq!((g.bm, g.wm, g.threads()), (32, 1, 128));
        let g = plan(Format::F16, 4096, 4096, 100).expect("planned");
        assert!(g.direct && g.operand == Operand::F16 && g.bm == 128);
        let g = plan(Format::BF16, 45, 1001, 100).expect("planned");
        assert!(
            !g.direct && g.operand == Operand::BF16,
            "k off the tile: a padded copy"
        );
        let g = Gemm::plan(
            &AMPERE,
            Format::F16,
            4096,
            4096,
            100,
            Mode::Plain,
            true,
            false,
        );
        assert!(!g.expect("planned").direct, "unaligned weights are copied");
        // Hopper: warpgroup MMA from 64 rows, mma.sync below.
        let h = |m| {
            Gemm::plan(
                &HOPPER,
                Format::Q4_0,
                4096,
                4096,
                m,
                Mode::Plain,
                true,
                true,
            )
        };
        assert!(!h(63).expect("planned").wgmma);
        let g = h(64).expect("planned");
        assert!(g.wgmma && g.bm == 128 && g.bn == 128 && g.threads() == 384);
        let wide_n = Gemm::plan(
            &HOPPER,
            Format::F16,
            14336,
            4096,
            512,
            Mode::Plain,
            true,
            true,
        );
        assert_eq!(
            wide_n.expect("planned").bn,
            256,
            "wide matrices take n256 tiles"
        );
        assert!(g.smem_bytes() <= 227 << 10);
        let wide = Target {
            bn: Some(256),
            ..HOPPER
        };
        let g = Gemm::plan(
            &wide,
            Format::Q4_0,
            4096,
            4096,
            512,
            Mode::Plain,
            true,
            true,
        );
        assert!(
            g.expect("planned").smem_bytes() <= 227 << 10,
            "n256 fits too"
        );
    }

    /// Every tile shape the plan picks compiles for sm_90a without spilling (needs NVRTC).
    #[test]
    fn gemm_kernels_compile_without_spills() {
        if !crate::runtime::nvrtc_present() {
            eprintln!("skipped: no NVRTC");
            return;
        }
        let wide = Target {
            bn: Some(256),
            ..HOPPER
        };
        for (t, m) in [
            (AMPERE, 20),
            (AMPERE, 40),
            (AMPERE, 300),
            (HOPPER, 300),
            (wide, 300),
        ] {
            for f in [Format::Q4_0, Format::BF16] {
                let g = Gemm::plan(&t, f, 4096, 4096, m, Mode::Plain, true, true).expect("planned");
                let (_, log) = crate::runtime::compile::compile_verbose(&g.mma_source(), "sm_90a")
                    .expect("compiles");
                let (_, spills, stack) = crate::runtime::compile::ptxas_resources(&log);
                assert_eq!((spills, stack), (0, 0), "{log}");
            }
        }
        for (f, k) in [
            (Format::Q4_0, 4096),
            (Format::Q4K, 4096),
            (Format::Q6K, 4096),
            (Format::BF16, 1001),
        ] {
            let unit = super::super::unit_type(f, k).expect("unit");
            crate::runtime::compile::compile_for(&prep_source(&unit, Operand::F16), "sm_90a")
                .expect("prep compiles");
        }
    }
}
