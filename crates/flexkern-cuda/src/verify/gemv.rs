//! `flexkern verify --device cuda`'s GEMV cases: every weight format, plain and batched (M 1,
//! 4, 16, 33), both SwiGLU forms, odd N and K, and the embedding (see `gemv_cases`), against an f64 oracle over
//! the exactly dequantized weights (flexkern-quant's `dequantize`) and the f32 activations, on
//! fresh random inputs with NaN-poisoned outputs.
//!
//! Error: max over outputs of |got - oracle| / (sum |w x| over the row), the f32 accumulation's
//! natural scale. Tolerance from the accumulation: each lane sums a unit's UE products, then
//! K / (32 UE) unit results, then 5 shuffle levels, each step one rounding of at most
//! `eps * (the partial magnitude)`, plus a few for scales, offsets and the SwiGLU activation:
//! `(UE + K / (32 UE) + 24) * eps`, at most the
//! project's 1e-5. NaN or infinity never passes; the embedding is bit-exact.

use super::outcome;
use crate::error::{invalid, Result};
use crate::quant::gemm::{Gemm, Operand, Target};
use crate::quant::gemv::{embedding, gemv, gemv_stacked, DeviceMatrix, GemvCall, GemvNorm};
use crate::quant::{gpu_formats, unit_elems, Mode};
use crate::runtime::Device;
use flexkern::verify::{Outcome, Rng};
use flexkern::DType;
use flexkern_quant::{Format, MlxScale};
use std::sync::Arc;

/// One GEMV check.
#[derive(Clone, Debug)]
pub struct GemvCase {
    pub format: Format,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub mode: Mode,
    /// Activations quantized first as the default precision does for the format's integer dot
    /// (Q8_0; Q8_K for the K-quants, single rows); the oracle then takes the CPU's quantized
    /// activations, so one differing code fails the case.
    pub quantized: bool,
    /// The result is added into a random `y` (the streamed kernel's residual epilogue).
    pub accumulate: bool,
    /// The activation row is RMS-normalized in the kernel first (the streamed kernel's fused
    /// norm); the oracle normalizes as `rms_norm` does, then quantizes as the case says.
    pub norm: bool,
}

impl GemvCase {
    pub fn name(&self) -> String {
        let mode = match self.mode {
            Mode::Plain => "gemv",
            Mode::GateUp => "swiglu gate+up",
            Mode::DownSwiglu => "down(silu(g)*u)",
            Mode::Stack => "stacked q/k/v",
        };
        let q8 = if self.quantized { " q8" } else { "" };
        let acc = if self.accumulate { " y+=" } else { "" };
        let norm = if self.norm { " rmsnorm(x)" } else { "" };
        let (q8, tc) = match self.gemm() {
            Some(g) => ("", format!(" tensor cores {:?}", g.operand)),
            None => (q8, String::new()),
        };
        format!(
            "{mode} {} N{} K{} M{}{q8}{acc}{norm}{tc}",
            self.format, self.n, self.k, self.m
        )
    }

    /// The tensor-core GEMM's plan where it serves the case (batches of the default precision).
    pub fn gemm(&self) -> Option<Gemm> {
        Gemm::plan(
            &Target::any_device()?,
            self.format,
            self.n,
            self.k,
            self.m,
            self.mode,
            self.quantized,
            true,
        )
    }

    fn tol(&self) -> f64 {
        if self.gemm().is_some() {
            // 16-bit operands (the oracle takes the same rounded ones): the project allows 1e-2;
            // f32 accumulation of k / 16 tensor-core partial sums stays far below this bound,
            // which still fails any misplaced or missing product.
            return GEMM_TOL;
        }
        let ue = unit_elems(self.format) as f64;
        ((ue + self.k as f64 / (32.0 * ue) + 24.0) * f32::EPSILON as f64).min(1e-5)
    }
}

/// The tensor-core GEMM's tolerance (see `GemvCase::tol`).
const GEMM_TOL: f64 = 1e-4;

/// The formats that run every mode and batch size: one per unit shape (UE 32 / 64 / 8, one or
/// two groups, with and without offsets, the plain-float tail, MLX's separate arrays). The
/// modes and batching are format-independent code over those shapes.
pub fn mode_formats() -> Vec<Format> {
    vec![
        Format::Q4_0,
        Format::Q4_1,
        Format::Q2K,
        Format::Q6K,
        Format::Q4K,
        Format::F16,
        Format::mlx(4, 64, MlxScale::F16).expect("valid"),
    ]
}

/// The case list: every format at M 1 and 33 (one launch of 16 rows twice, then 1; MLX with
/// bf16 scales at M 1), the mode formats also at M 4 and 16 and in both SwiGLU forms (M 1 and
/// 5), plain floats at odd K (unaligned rows, the tail), two rows per warp at a large N.
/// Shapes stay small: verify's cost is compiling the modules (about 150).
pub fn gemv_cases() -> Vec<GemvCase> {
    let c = |format, n, k, m, mode| GemvCase {
        format,
        n,
        k,
        m,
        mode,
        quantized: false,
        accumulate: false,
        norm: false,
    };
    let mut v = Vec::new();
    let modes = mode_formats();
    for f in gpu_formats() {
        let k = if f.block_elems() == 256 { 1536 } else { 1024 };
        let bf16 = matches!(
            f,
            Format::MlxAffine {
                scales: MlxScale::BF16,
                ..
            }
        );
        let ms: &[usize] = if bf16 {
            &[1]
        } else if modes.contains(&f) {
            &[1, 4, 16, 33]
        } else {
            &[1, 33]
        };
        for &m in ms {
            v.push(c(f, 131, k, m, Mode::Plain));
        }
        if modes.contains(&f) {
            for m in [1, 5] {
                v.push(c(f, 67, k, m, Mode::GateUp));
                v.push(c(f, 67, k, m, Mode::DownSwiglu));
            }
        }
    }
    for f in [Format::F32, Format::F16, Format::BF16] {
        v.push(c(f, 45, 1001, 1, Mode::Plain));
        v.push(c(f, 45, 1001, 4, Mode::Plain));
        // The residual add in the direct kernel's epilogue (a float model's decode step).
        for m in [1, 4] {
            v.push(GemvCase {
                accumulate: true,
                ..c(f, 45, 1001, m, Mode::Plain)
            });
        }
        v.push(c(f, 45, 1003, 2, Mode::GateUp));
        v.push(c(f, 45, 1003, 2, Mode::DownSwiglu));
    }
    for f in [Format::Q4_0, Format::Q4K, Format::F16, Format::Q6K] {
        v.push(c(f, 8999, 256, 1, Mode::Plain));
    }
    // And in the staged kernel's, a batch.
    v.push(GemvCase {
        accumulate: true,
        ..c(Format::Q4K, 131, 1024, 5, Mode::Plain)
    });
    v.push(c(
        Format::mlx(4, 64, MlxScale::F16).expect("valid"),
        8999,
        256,
        1,
        Mode::Plain,
    ));
    // The streamed single-row kernel: rows of several chunks (K 14336, and 3104 whose last
    // chunk leaves lanes idle), several rows per warp (N 8999), gate/up, f32 activations and
    // quantized ones (Q8_0; Q8_K for Q4_K and Q6_K).
    for f in [Format::Q4_0, Format::Q8_0, Format::Q4K, Format::Q6K] {
        let q8 = crate::quant::StreamActs::for_format(f).is_some();
        for quantized in [false, q8]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
        {
            for (n, k, mode) in [
                (131, 14336, Mode::Plain),
                (67, 14336, Mode::GateUp),
                (8999, 512, Mode::Plain),
                (2500, 1536, Mode::GateUp),
            ] {
                v.push(GemvCase {
                    quantized,
                    ..c(f, n, k, 1, mode)
                });
            }
            if f.block_elems() == 32 {
                v.push(GemvCase {
                    quantized,
                    ..c(f, 131, 3104, 1, Mode::Plain)
                });
            }
            v.push(GemvCase {
                quantized,
                accumulate: true,
                ..c(f, 2500, 1536, 1, Mode::Plain)
            });
        }
    }
    // Hopper's bulk ring (`Stream::with_bulk`): Q4_0 and Q6_K launches of at least 24 MiB of
    // weights and Q4_K ones of 8192 rows too, plain, gate/up with the fused norm, and the residual
    // add; the register batches elsewhere. The last: a down projection's rows of 14336 on the
    // ring in one block of sixteen warps an SM.
    for (f, n, k, mode, accumulate, norm) in [
        (Format::Q4_0, 12288, 4096, Mode::Plain, false, false),
        (Format::Q4_0, 6144, 4096, Mode::GateUp, false, true),
        (Format::Q4_0, 12288, 4096, Mode::Plain, true, false),
        (Format::Q4K, 12288, 4096, Mode::Plain, false, false),
        (Format::Q4K, 8192, 4096, Mode::GateUp, false, true),
        (Format::Q4K, 12288, 4096, Mode::Plain, true, false),
        (Format::Q4_0, 4096, 14336, Mode::Plain, true, false),
        // Q6_K's ring: a side entry a block, eight units (2048-weight multiples of k).
        (Format::Q6K, 12288, 4096, Mode::Plain, false, false),
        (Format::Q6K, 12288, 4096, Mode::Plain, true, false),
        (Format::Q6K, 4096, 14336, Mode::Plain, true, false),
    ] {
        v.push(GemvCase {
            quantized: true,
            accumulate,
            norm,
            ..c(f, n, k, 1, mode)
        });
    }
    // Q, K and V in one streamed launch: N rows, then two of N / 4 + 1 (see `stacked_case`),
    // three rows per warp at N 2500.
    for f in [Format::Q4_0, Format::Q8_0, Format::Q4K, Format::Q6K] {
        for (n, quantized) in [(131, false), (131, true), (2500, true)] {
            v.push(GemvCase {
                quantized,
                ..c(f, n, 1536, 1, Mode::Stack)
            });
        }
    }
    // The direct kernel's single rows (plain floats, MLX): Q, K and V in one launch, and the
    // fused RMSNorm (FK_DNORM) plain, gate/up and stacked; an odd k (scalar loads and a tail).
    let mlx = Format::mlx(4, 64, MlxScale::F16).expect("catalogued MLX format");
    for (f, n, k, mode, norm) in [
        (Format::F16, 131, 1536, Mode::Stack, false),
        (Format::BF16, 2500, 1536, Mode::Stack, false),
        (Format::F32, 131, 1027, Mode::Stack, false),
        (Format::F16, 131, 1536, Mode::Plain, true),
        (Format::BF16, 67, 1536, Mode::GateUp, true),
        (Format::F16, 2500, 1536, Mode::Stack, true),
        (Format::F32, 131, 1027, Mode::Plain, true),
        (Format::F32, 131, 1027, Mode::Stack, true),
        (mlx, 131, 1024, Mode::Plain, true),
        // MLX's row in shared memory (FK_DXS): stacked, the norm in gate/up and stacked, and a
        // row of 14336 (56 KB, past the default 48 KB of shared memory).
        (mlx, 131, 1024, Mode::Stack, false),
        (mlx, 67, 1024, Mode::GateUp, true),
        (mlx, 2500, 1024, Mode::Stack, true),
        (mlx, 67, 14336, Mode::Plain, false),
    ] {
        v.push(GemvCase {
            norm,
            ..c(f, n, k, 1, mode)
        });
    }
    // MLX's integer dot on the streamed kernel (4 and 8 bits against Q8_0 activations, single
    // rows): each width at every group size and scale type, then the launch forms (gate/up,
    // stacked, the residual add, the fused norm, rows of 14336 shared by a pair of blocks,
    // several rows a warp).
    for bits in [4, 8] {
        for group in flexkern_quant::format::MLX_GROUPS {
            for s in [MlxScale::F16, MlxScale::BF16] {
                let f = Format::mlx(bits, group, s).expect("catalogued MLX format");
                v.push(GemvCase {
                    quantized: true,
                    ..c(f, 131, 1024, 1, Mode::Plain)
                });
            }
        }
        let f = Format::mlx(bits, 64, MlxScale::F16).expect("catalogued MLX format");
        for (n, k, mode, accumulate, norm) in [
            (67, 1024, Mode::GateUp, false, false),
            (131, 1024, Mode::Stack, false, false),
            (2500, 1536, Mode::Plain, true, false),
            (131, 1536, Mode::Plain, false, true),
            (67, 1536, Mode::GateUp, false, true),
            (131, 1536, Mode::Stack, false, true),
            (131, 14336, Mode::Plain, false, false),
            (8999, 512, Mode::Plain, false, false),
        ] {
            v.push(GemvCase {
                quantized: true,
                accumulate,
                norm,
                ..c(f, n, k, 1, mode)
            });
        }
    }
    // MLX batches on the staged kernel with the integer dot (the default precision; its f32
    // form runs the mode formats' batches above): both widths, gate/up, the residual add, a
    // ragged group count (K 1536 at groups of 128), several rows a warp.
    for (f, n, k, m, mode, accumulate) in [
        (
            Format::mlx(4, 64, MlxScale::F16),
            131,
            1024,
            2,
            Mode::Plain,
            false,
        ),
        (
            Format::mlx(4, 32, MlxScale::BF16),
            131,
            1024,
            15,
            Mode::Plain,
            false,
        ),
        (
            Format::mlx(8, 64, MlxScale::F16),
            131,
            1024,
            4,
            Mode::Plain,
            false,
        ),
        (
            Format::mlx(8, 128, MlxScale::BF16),
            67,
            1536,
            5,
            Mode::GateUp,
            false,
        ),
        (
            Format::mlx(4, 128, MlxScale::F16),
            67,
            1536,
            5,
            Mode::GateUp,
            false,
        ),
        (
            Format::mlx(4, 64, MlxScale::F16),
            300,
            1024,
            3,
            Mode::Plain,
            true,
        ),
        (
            Format::mlx(8, 32, MlxScale::F16),
            8999,
            256,
            3,
            Mode::Plain,
            false,
        ),
    ] {
        v.push(GemvCase {
            quantized: true,
            accumulate,
            ..c(f.expect("catalogued MLX format"), n, k, m, mode)
        });
    }
    // The fused RMSNorm (decode's Q/K/V and gate/up): plain, gate/up and stacked, with f32 and
    // quantized activations.
    for f in [Format::Q4_0, Format::Q8_0, Format::Q4K, Format::Q6K] {
        for quantized in [false, true] {
            for (n, mode) in [(131, Mode::Plain), (67, Mode::GateUp), (131, Mode::Stack)] {
                v.push(GemvCase {
                    quantized,
                    norm: true,
                    ..c(f, n, 1536, 1, mode)
                });
            }
        }
    }
    // Pairs of blocks sharing the activation prologue (`Stream::with_cluster`) where the
    // plain cases above do not reach: gate/up with the fused norm and stacked launches, rows of
    // 8192 (with the norm, the prologue's one pass over the row on cluster modules).
    for f in [Format::Q4_0, Format::Q4K] {
        v.push(GemvCase {
            quantized: true,
            norm: true,
            ..c(f, 67, 8192, 1, Mode::GateUp)
        });
        v.push(GemvCase {
            quantized: true,
            ..c(f, 131, 8192, 1, Mode::Stack)
        });
    }
    // The integer-dot path (batches of 2 or more rows): plain and gate/up, a large N.
    for f in [Format::Q8_0, Format::Q4_0] {
        for (n, k, m, mode) in [
            (131, 1024, 2, Mode::Plain),
            (131, 1024, 4, Mode::Plain),
            (131, 1024, 16, Mode::Plain),
            (131, 1024, 33, Mode::Plain),
            (67, 1024, 2, Mode::GateUp),
            (67, 1024, 5, Mode::GateUp),
            (8999, 256, 3, Mode::Plain),
        ] {
            v.push(GemvCase {
                quantized: true,
                ..c(f, n, k, m, mode)
            });
        }
    }
    // The tensor-core GEMM (batches of 16 rows and more at the default precision): every format
    // once; the mode formats in every mode, several m-tiles (one ragged) and n-tiles; plain
    // floats at an odd k (a padded copy) and at whole k-tiles (read in place); the residual
    // add; a matrix of several decoded panels.
    for f in gpu_formats().into_iter().filter(|&f| f != Format::F32) {
        let k = if f.block_elems() == 256 { 1536 } else { 1024 };
        v.push(GemvCase {
            quantized: true,
            ..c(f, 131, k, 40, Mode::Plain)
        });
    }
    for f in mode_formats()
        .into_iter()
        .chain([Format::Q8_0, Format::BF16])
    {
        let k = if f.block_elems() == 256 { 1536 } else { 1024 };
        for (n, m, mode) in [
            (300, 200, Mode::Plain),
            (300, 70, Mode::GateUp),
            (300, 70, Mode::DownSwiglu),
        ] {
            v.push(GemvCase {
                quantized: true,
                ..c(f, n, k, m, mode)
            });
        }
    }
    for f in [Format::F16, Format::BF16] {
        v.push(GemvCase {
            quantized: true,
            ..c(f, 45, 1003, 19, Mode::Plain)
        });
        v.push(GemvCase {
            quantized: true,
            ..c(f, 45, 1003, 19, Mode::GateUp)
        });
    }
    v.push(GemvCase {
        quantized: true,
        accumulate: true,
        ..c(Format::Q4K, 300, 1536, 50, Mode::Plain)
    });
    v.push(GemvCase {
        quantized: true,
        ..c(Format::Q8_0, 16500, 4096, 17, Mode::Plain)
    });
    v
}

/// `v` rounded to the GEMM's operand type (as `cvt.rn` rounds).
fn round_to(op: Operand, v: f32) -> f32 {
    match op {
        Operand::F16 => half::f16::from_f32(v).to_f32(),
        Operand::BF16 => half::bf16::from_f32(v).to_f32(),
    }
}

/// The GEMM's f32 SwiGLU activation, as `fk_silu` computes it before rounding.
fn silu_f32(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

fn random(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| (rng.uniform() * 2.0 - 1.0) * scale)
        .collect()
}

/// A random `[n, k]` matrix of `f` on the device and its exact dequantization.
fn matrix(
    dev: &Arc<Device>,
    rng: &mut Rng,
    f: Format,
    n: usize,
    k: usize,
) -> Result<(DeviceMatrix, Vec<f32>)> {
    let w = random(rng, n * k, 1.0);
    let bytes = flexkern_quant::quantize(f, &w, n, k).map_err(|e| invalid("w", e.to_string()))?;
    let deq =
        flexkern_quant::dequantize(f, &bytes, n, k).map_err(|e| invalid("w", e.to_string()))?;
    Ok((DeviceMatrix::upload(dev, f, n, k, &bytes)?, deq))
}

/// Row `r` of `w` dotted with `x` in f64: (value, sum of |products|).
fn dot(w: &[f32], x: &[f64]) -> (f64, f64) {
    w.iter().zip(x).fold((0.0, 0.0), |(s, a), (&wv, &xv)| {
        let p = wv as f64 * xv;
        (s + p, a + p.abs())
    })
}

/// What the weights are dotted with: `x` (`m` rows of `c.k`), or for a quantized case the CPU
/// default path's activations (Q8_0, or Q8_K for the K-quants), dequantized.
fn dotted(c: &GemvCase, x: &[f32], m: usize) -> Result<Vec<f32>> {
    if !c.quantized {
        return Ok(x.to_vec());
    }
    let dot = c
        .format
        .dot_format()
        .ok_or_else(|| invalid("format", "no integer dot"))?;
    let q = flexkern_quant::quantize_activation(dot, x, m, c.k)
        .map_err(|e| invalid("x", e.to_string()))?;
    flexkern_quant::dequantize(dot, &q, m, c.k).map_err(|e| invalid("x", e.to_string()))
}

/// Random RMSNorm weights for `k` elements (positive and negative, as trained norms can be).
fn norm_weights(rng: &mut Rng, k: usize) -> Vec<f32> {
    (0..k).map(|_| rng.uniform() * 1.5 - 0.25).collect()
}

/// `x` (`m` rows of `k`) normalized as `rms_norm` computes it: the sum of squares in f64, the
/// scale rounded to f32, then `x * scale * w`, each product rounded.
fn rms_rows(x: &[f32], w: &[f32], k: usize, eps: f32) -> Vec<f32> {
    x.chunks_exact(k)
        .flat_map(|r| {
            let ss: f64 = r.iter().map(|&v| v as f64 * v as f64).sum();
            let scale = (1.0 / (ss / k as f64 + eps as f64).sqrt()) as f32;
            r.iter().zip(w).map(move |(&v, &g)| v * scale * g)
        })
        .collect()
}

/// The eps the norm cases use (Llama's).
const NORM_EPS: f32 = 1e-5;

/// |got - want| over the row's natural scale; a NaN or infinity never passes.
fn rel_err(got: f32, want: f64, scale: f64) -> f64 {
    let g = got as f64;
    if g.is_finite() {
        (g - want).abs() / scale.max(f64::MIN_POSITIVE)
    } else {
        f64::INFINITY
    }
}

/// A stacked case: matrices of N, N / 4 + 1 and N / 4 + 1 rows (Q, K, V) in one launch, each
/// output against the oracle; the error is the worst of the three.
fn stacked_case(dev: &Arc<Device>, c: &GemvCase, seed: u64) -> Result<f64> {
    let mut rng = Rng::new(seed);
    let ns = [c.n, c.n / 4 + 1, c.n / 4 + 1];
    let mut mats = Vec::new();
    for &n in &ns {
        let (m, w) = matrix(dev, &mut rng, c.format, n, c.k)?;
        mats.push((m.with_quantized_activations(c.quantized), w));
    }
    let x = random(&mut rng, c.k, 1.0);
    let nw = norm_weights(&mut rng, c.k);
    let xn = if c.norm {
        rms_rows(&x, &nw, c.k, NORM_EPS)
    } else {
        x.clone()
    };
    let xr: Vec<f64> = dotted(c, &xn, 1)?.iter().map(|&v| v as f64).collect();
    let xd = dev.upload(&x)?;
    let nwd = dev.upload(&nw)?;
    let norm = c.norm.then_some(GemvNorm {
        weight: &nwd,
        eps: NORM_EPS,
    });
    let ys = ns
        .iter()
        .map(|&n| {
            let y = dev.alloc(n * 4)?;
            dev.memset(&y, 0, n * 4, 0xff)?;
            Ok(y)
        })
        .collect::<Result<Vec<_>>>()?;
    let ws: Vec<&DeviceMatrix> = mats.iter().map(|(m, _)| m).collect();
    if !gemv_stacked(dev, &ws, &xd, norm, &ys.iter().collect::<Vec<_>>(), None)? {
        return Err(invalid(
            "ws",
            "the stacked launch did not take these matrices",
        ));
    }
    let mut worst = 0.0f64;
    for ((&n, (_, w)), y) in ns.iter().zip(&mats).zip(&ys) {
        let mut got = vec![0f32; n];
        dev.read(y, 0, &mut got)?;
        for r in 0..n {
            let (want, scale) = dot(&w[r * c.k..(r + 1) * c.k], &xr);
            worst = worst.max(rel_err(got[r], want, scale));
        }
    }
    Ok(worst)
}

/// Runs one case: the normalized error.
pub fn run_gemv_case(dev: &Arc<Device>, c: &GemvCase, seed: u64) -> Result<f64> {
    if c.mode == Mode::Stack {
        return stacked_case(dev, c, seed);
    }
    let mut rng = Rng::new(seed);
    let (n, k, m) = (c.n, c.k, c.m);
    let (a, wa) = matrix(dev, &mut rng, c.format, n, k)?;
    let a = a.with_quantized_activations(c.quantized);
    let b = if c.mode == Mode::GateUp {
        let (b, wb) = matrix(dev, &mut rng, c.format, n, k)?;
        Some((b.with_quantized_activations(c.quantized), wb))
    } else {
        None
    };
    let x = random(&mut rng, m * k, 1.0);
    let nw = norm_weights(&mut rng, k);
    let xq = if c.gemm().is_some() {
        x.clone()
    } else if c.norm {
        dotted(c, &rms_rows(&x, &nw, k, NORM_EPS), m)?
    } else {
        dotted(c, &x, m)?
    };
    let x2 = random(&mut rng, m * k, 1.0);
    let xd = dev.upload(&x)?;
    let x2d = dev.upload(&x2)?;
    let nwd = dev.upload(&nw)?;
    // Accumulating: y starts random (and its old values are part of the expected result);
    // else poisoned.
    let y0 = random(&mut rng, m * n, 4.0);
    let y = if c.accumulate {
        dev.upload(&y0)?
    } else {
        let y = dev.alloc(m * n * 4)?;
        dev.memset(&y, 0, m * n * 4, 0xff)?;
        y
    };
    gemv(
        dev,
        &GemvCall {
            accumulate: c.accumulate,
            norm: c.norm.then_some(GemvNorm {
                weight: &nwd,
                eps: NORM_EPS,
            }),
            mode: c.mode,
            a: &a,
            b: b.as_ref().map(|b| &b.0),
            x: &xd,
            x2: (c.mode == Mode::DownSwiglu).then_some(&x2d),
            y: &y,
            m,
        },
    )?;
    let mut got = vec![0f32; m * n];
    dev.read(&y, 0, &mut got)?;
    // The GEMM's operands are 16-bit: the oracle takes the same rounded weights and
    // activations (the activation formed in f32 first, as the kernel forms it).
    let op = c.gemm().map(|g| g.operand);
    let (wa, b) = match op {
        Some(op) => (
            wa.iter().map(|&v| round_to(op, v)).collect(),
            b.map(|(d, wb)| (d, wb.iter().map(|&v| round_to(op, v)).collect::<Vec<_>>())),
        ),
        None => (wa, b),
    };
    let mut worst = 0.0f64;
    for j in 0..m {
        let xr: Vec<f64> = match (c.mode, op) {
            (Mode::DownSwiglu, Some(op)) => (0..k)
                .map(|e| round_to(op, silu_f32(x[j * k + e]) * x2[j * k + e]) as f64)
                .collect(),
            (Mode::DownSwiglu, None) => (0..k)
                .map(|e| silu(x[j * k + e] as f64) * x2[j * k + e] as f64)
                .collect(),
            (_, Some(op)) => x[j * k..(j + 1) * k]
                .iter()
                .map(|&v| round_to(op, v) as f64)
                .collect(),
            (_, None) => xq[j * k..(j + 1) * k].iter().map(|&v| v as f64).collect(),
        };
        for r in 0..n {
            let (ya, ma) = dot(&wa[r * k..(r + 1) * k], &xr);
            let (want, scale) = match &b {
                Some((_, wb)) => {
                    let (yb, mb) = dot(&wb[r * k..(r + 1) * k], &xr);
                    let out = silu(ya) * yb;
                    // First-order propagation of each dot's error (|silu'| <= 1.1).
                    (out, 1.1 * ma * yb.abs() + silu(ya).abs() * mb + out.abs())
                }
                None => (ya, ma),
            };
            let (want, scale) = if c.accumulate {
                let y0 = y0[j * n + r] as f64;
                (want + y0, scale + y0.abs())
            } else {
                (want, scale)
            };
            worst = worst.max(rel_err(got[j * n + r], want, scale));
        }
    }
    Ok(worst)
}

/// The embedding of every format: rows (first, last, repeated) decoded bit for bit. K 640 is
/// whole groups for every MLX group size (128 too; the H100 run caught 320).
fn embedding_case(dev: &Arc<Device>, f: Format, seed: u64) -> Result<f64> {
    let mut rng = Rng::new(seed);
    let (n, k) = (37, if f.block_elems() == 256 { 512 } else { 640 });
    let (a, w) = matrix(dev, &mut rng, f, n, k)?;
    let ids: Vec<u32> = vec![0, 36, 5, 5, 17];
    let idd = dev.upload(&ids)?;
    let out = dev.alloc(ids.len() * k * 4)?;
    dev.memset(&out, 0, ids.len() * k * 4, 0xff)?;
    embedding(dev, &a, &idd, 0, ids.len(), &out, None)?;
    let mut got = vec![0f32; ids.len() * k];
    dev.read(&out, 0, &mut got)?;
    for (t, &id) in ids.iter().enumerate() {
        let want = &w[id as usize * k..][..k];
        let row = &got[t * k..][..k];
        if let Some(e) = (0..k).find(|&e| row[e].to_bits() != want[e].to_bits()) {
            return Err(invalid(
                "embedding",
                format!(
                    "token {t} (row {id}) element {e}: {} vs {}",
                    row[e], want[e]
                ),
            ));
        }
    }
    // A bad id is a typed error and writes nothing.
    let bad = dev.upload(&[0u32, n as u32])?;
    match embedding(dev, &a, &bad, 0, 2, &out, None) {
        Err(crate::CudaError::Invalid { arg: "ids", .. }) => Ok(0.0),
        other => Err(invalid(
            "embedding",
            format!("an id past the table gave {other:?}"),
        )),
    }
}

/// Typed errors before any launch: wrong up shape, short buffers, missing x2, activation formats.
fn bad_input(dev: &Arc<Device>) -> Result<f64> {
    let mut rng = Rng::new(3);
    let (a, _) = matrix(dev, &mut rng, Format::Q4_0, 8, 64)?;
    let (b, _) = matrix(dev, &mut rng, Format::Q4_0, 9, 64)?;
    let x = dev.alloc(64 * 4)?;
    let y = dev.alloc(8 * 4)?;
    let small = dev.alloc(4)?;
    fn call<'a>(
        a: &'a DeviceMatrix,
        mode: Mode,
        b: Option<&'a DeviceMatrix>,
        x: &'a crate::runtime::DeviceBuf,
        y: &'a crate::runtime::DeviceBuf,
        m: usize,
    ) -> GemvCall<'a> {
        GemvCall {
            accumulate: false,
            norm: None,
            mode,
            a,
            b,
            x,
            x2: None,
            y,
            m,
        }
    }
    // The default precision's batches take the tensor-core GEMM: the same checks come first.
    let (aq, _) = matrix(dev, &mut rng, Format::Q4_0, 8, 64)?;
    let aq = aq.with_quantized_activations(true);
    let tc_x = dev.alloc(32 * 64 * 4)?;
    let tc = |mode, b, x, y, m| call(&aq, mode, b, x, y, m);
    let call = |mode, b, x, y, m| call(&a, mode, b, x, y, m);
    let cases: Vec<(&str, GemvCall)> = vec![
        (
            "32 rows in a one-row x (tensor cores)",
            tc(Mode::Plain, None, &x, &y, 32),
        ),
        (
            "32 rows into a one-row y (tensor cores)",
            tc(Mode::Plain, None, &tc_x, &y, 32),
        ),
        (
            "no up (tensor cores)",
            tc(Mode::GateUp, None, &tc_x, &y, 32),
        ),
        (
            "up of another shape",
            call(Mode::GateUp, Some(&b), &x, &y, 1),
        ),
        ("no up", call(Mode::GateUp, None, &x, &y, 1)),
        ("short x", call(Mode::Plain, None, &small, &y, 1)),
        ("short y", call(Mode::Plain, None, &x, &small, 1)),
        (
            "two rows in a one-row x",
            call(Mode::Plain, None, &x, &y, 2),
        ),
        ("no x2", call(Mode::DownSwiglu, None, &x, &y, 1)),
    ];
    for (what, c) in cases {
        if !matches!(gemv(dev, &c), Err(crate::CudaError::Invalid { .. })) {
            return Err(invalid("bad input", format!("{what}: no typed error")));
        }
    }
    // The fused norm, on the streamed kernel (Q4_0) and the direct one (F16): short weights, a
    // batch, a bad eps and the down projection formed on load are refused.
    let (f16m, _) = matrix(dev, &mut rng, Format::F16, 8, 64)?;
    let x2 = dev.alloc(2 * 64 * 4)?;
    let y2 = dev.alloc(2 * 8 * 4)?;
    let w63 = dev.alloc(63 * 4)?;
    let w64 = dev.alloc(64 * 4)?;
    fn with_norm<'a>(
        weight: &'a crate::runtime::DeviceBuf,
        eps: f32,
        c: GemvCall<'a>,
    ) -> GemvCall<'a> {
        GemvCall {
            norm: Some(GemvNorm { weight, eps }),
            ..c
        }
    }
    for w in [&a, &f16m] {
        let call = |mode, b, x, y, m| GemvCall {
            x2: (mode == Mode::DownSwiglu).then_some(&x2),
            ..call(mode, b, x, y, m)
        };
        let call = |mode, b, x, y, m| GemvCall {
            a: w,
            ..call(mode, b, x, y, m)
        };
        for (what, c) in [
            (
                "short norm weights",
                with_norm(&w63, 1e-5, call(Mode::Plain, None, &x, &y, 1)),
            ),
            (
                "norm in a batch",
                with_norm(&w64, 1e-5, call(Mode::Plain, None, &x2, &y2, 2)),
            ),
            (
                "NaN eps",
                with_norm(&w64, f32::NAN, call(Mode::Plain, None, &x, &y, 1)),
            ),
            (
                "norm before the down projection",
                with_norm(&w64, 1e-5, call(Mode::DownSwiglu, None, &x, &y, 1)),
            ),
        ] {
            if !matches!(gemv(dev, &c), Err(crate::CudaError::Invalid { .. })) {
                return Err(invalid(
                    "bad input",
                    format!("{what} ({}): no typed error", w.format),
                ));
            }
        }
    }
    // Stacked (streamed and direct): a short output and short norm weights are typed errors;
    // matrices of other formats are declined (Ok(false): the caller launches them one by one).
    let short_norm = GemvNorm {
        weight: &w63,
        eps: 1e-5,
    };
    for (what, ws) in [("q4_0", [&a, &b]), ("f16", [&f16m, &f16m])] {
        for (norm, ys) in [(None, [&y, &small]), (Some(short_norm), [&y, &y])] {
            if !matches!(
                gemv_stacked(dev, &ws, &x, norm, &ys, None),
                Err(crate::CudaError::Invalid { .. })
            ) {
                return Err(invalid(
                    "bad input",
                    format!("stacked {what}, short output or norm weights: no typed error"),
                ));
            }
        }
    }
    if gemv_stacked(dev, &[&a, &f16m], &x, None, &[&y, &y], None)? {
        return Err(invalid("bad input", "stacked mixed formats were launched"));
    }
    let bytes = vec![0u8; Format::Q8K.tensor_bytes(1, 256).unwrap_or(0)];
    if DeviceMatrix::upload(dev, Format::Q8K, 1, 256, &bytes).is_ok()
        || DeviceMatrix::upload(dev, Format::Q4_0, 1, 48, &[0u8; 27]).is_ok()
        || DeviceMatrix::upload(dev, Format::Q4_0, 2, 64, &[0u8; 36]).is_ok()
    {
        return Err(invalid("bad input", "a bad matrix was accepted"));
    }
    Ok(0.0)
}

/// Every GEMV check, run on `workers` threads sharing the device (first-use NVRTC compiles
/// overlap), in case order.
pub fn gemv_checks(dev: &Arc<Device>, seed: u64) -> Vec<Outcome> {
    enum Job {
        Gemv(GemvCase),
        Embed(Format),
        Bad,
    }
    let mut jobs: Vec<Job> = gemv_cases().into_iter().map(Job::Gemv).collect();
    jobs.extend(
        gpu_formats()
            .into_iter()
            .filter(|f| match *f {
                Format::MlxAffine {
                    bits,
                    group_size,
                    scales,
                } => matches!(
                    (bits, group_size, scales),
                    (4, 64, MlxScale::F16) | (3, 32, MlxScale::F16) | (5, 128, MlxScale::BF16)
                ),
                _ => true,
            })
            .map(Job::Embed),
    );
    jobs.push(Job::Bad);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<Outcome>>> =
        std::sync::Mutex::new(vec![None; jobs.len()]);
    let workers = std::thread::available_parallelism()
        .map_or(4, |p| p.get())
        .min(16);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let sd = seed.wrapping_add(7919 * i as u64);
                let o = match &jobs[i] {
                    Job::Gemv(c) => outcome(c.name(), DType::F32, c.tol(), {
                        run_gemv_case(dev, c, sd).map(|e| (e, 0.0))
                    }),
                    Job::Embed(f) => outcome(
                        format!("embedding {f} (bit-exact)"),
                        DType::F32,
                        0.0,
                        embedding_case(dev, *f, sd).map(|e| (e, 0.0)),
                    ),
                    Job::Bad => outcome(
                        "gemv bad input: typed errors".into(),
                        DType::F32,
                        0.0,
                        bad_input(dev).map(|e| (e, 0.0)),
                    ),
                };
                done.lock().expect("results lock")[i] = Some(o);
            });
        }
    });
    done.into_inner()
        .expect("results lock")
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_cover_every_format_and_mode() {
        let cases = gemv_cases();
        for f in gpu_formats() {
            assert!(cases.iter().any(|c| c.format == f), "{f}");
        }
        for m in [1, 4, 16, 33] {
            assert!(cases.iter().any(|c| c.m == m && c.mode == Mode::Plain));
        }
        assert!(cases.iter().any(|c| c.mode == Mode::GateUp && c.m > 1));
        assert!(cases
            .iter()
            .any(|c| c.mode == Mode::DownSwiglu && c.k % 4 != 0));
        assert!(cases.iter().all(|c| c.format.blocks_per_row(c.k).is_ok()));
        assert!(cases.iter().all(|c| c.tol() <= 1e-5 || c.gemm().is_some()));
        assert!(cases.iter().filter(|c| c.gemm().is_some()).count() >= 60);
        // The modules an H100 (132 SMs) compiles for them: verify's cost.
        let mut modules = std::collections::HashSet::new();
        for c in &cases {
            let unit = crate::quant::unit_type(c.format, c.k).unwrap();
            if let Some(g) = c.gemm() {
                modules.insert(g.mma_source().name);
                modules.insert(crate::quant::gemm::prep_source(&unit, g.operand).name);
                continue;
            }
            let mut left = c.m;
            while left > 0 {
                let mm = left.min(crate::quant::MAX_M);
                let mut cfg = crate::quant::choose::config(132, c.mode, &unit, c.n, c.k, mm);
                cfg.staged = crate::quant::choose::staged(c.format, cfg.mb);
                modules.insert(cfg.source().name);
                left -= mm;
            }
        }
        eprintln!("{} GEMV modules", modules.len());
        assert!(modules.len() <= 240, "{} modules", modules.len());
    }
}
