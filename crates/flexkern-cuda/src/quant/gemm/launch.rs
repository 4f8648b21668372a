//! The GEMM's launches: the operands' decode, the TMA descriptors of the Hopper kernel, and
//! the tile GEMM panel by panel.

use super::{prep_source, Gemm, Operand, Target, K_TILE};
use crate::error::{invalid, Result};
use crate::quant::matrix::{DeviceMatrix, FkMat, GemvCall};
use crate::quant::Mode;
use crate::runtime::Device;
use cudarc::driver::sys::CUtensorMap;
use std::ffi::c_void;
use std::sync::Arc;

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
    pub fn gemm_plan(&self, mode: Mode, m: usize) -> Option<Gemm> {
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
pub(in crate::quant) fn run(dev: &Arc<Device>, c: &GemvCall, g: &Gemm) -> Result<()> {
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
                    let ue = crate::quant::unit_elems(w.format);
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
