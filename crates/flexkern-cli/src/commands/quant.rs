//! `flexkern quantize | dequantize | gemv`: the quantized-weight formats over files.
//! Raw `.bin` files hold exactly the bytes a GGUF tensor of the format holds (for MLX: packed
//! weights, scales, biases concatenated; see `flexkern_quant::mlx`).

use anyhow::{bail, Context, Result};
use clap::Args;
use flexkern::npy::{self, NpyData};
use flexkern_quant::{Activation, Format, QuantMatrix};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// Format name: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k..q6_k q8_k iq4_nl iq4_xs
    /// mxfp4, or mlx:BITS:GROUP[:bf16] (BITS 2 3 4 5 6 8, GROUP 32 64 128).
    #[arg(long)]
    pub format: String,
    /// Input weights, .npy f32 (or f16) of shape [N, K] (or [K] for one row).
    #[arg(long = "in")]
    pub input: PathBuf,
    /// Output raw tensor bytes.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct DequantizeArgs {
    #[arg(long)]
    pub format: String,
    /// Input raw tensor bytes.
    #[arg(long = "in")]
    pub input: PathBuf,
    /// Tensor shape `N,K`.
    #[arg(long)]
    pub shape: String,
    /// Output .npy f32 [N, K].
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct GemvArgs {
    #[arg(long)]
    pub format: String,
    /// Raw weight bytes of shape [N, K].
    #[arg(long)]
    pub weight: PathBuf,
    /// Weight shape `N,K`.
    #[arg(long)]
    pub shape: String,
    /// Activations .npy, f32 or f16, [M, K] or [K].
    #[arg(long)]
    pub x: PathBuf,
    /// Output .npy f32, [M, N] (or [N] for a 1-D x).
    #[arg(long)]
    pub out: PathBuf,
    /// Run on the calling thread only.
    #[arg(long)]
    pub single_thread: bool,
}

/// Parses `N,K`.
pub fn parse_shape(s: &str) -> Result<(usize, usize)> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != 2 {
        bail!("--shape must be N,K, got `{s}`");
    }
    let n = parts[0]
        .parse()
        .with_context(|| format!("--shape: bad N `{}`", parts[0]))?;
    let k = parts[1]
        .parse()
        .with_context(|| format!("--shape: bad K `{}`", parts[1]))?;
    Ok((n, k))
}

fn matrix_shape(shape: &[usize], path: &std::path::Path) -> Result<(usize, usize)> {
    match *shape {
        [k] => Ok((1, k)),
        [n, k] => Ok((n, k)),
        _ => bail!(
            "{}: expected a 1-D or 2-D array, got shape {shape:?}",
            path.display()
        ),
    }
}

pub fn run_quantize(a: &QuantizeArgs) -> Result<()> {
    let format = Format::from_name(&a.format).context("--format")?;
    let arr = npy::read(&a.input)?;
    let (n, k) = matrix_shape(&arr.shape, &a.input)?;
    let bytes = flexkern_quant::quantize(format, &arr.to_f32(), n, k)
        .with_context(|| format!("quantizing {} as {format}", a.input.display()))?;
    std::fs::write(&a.out, &bytes).with_context(|| format!("writing {}", a.out.display()))?;
    Ok(())
}

pub fn run_dequantize(a: &DequantizeArgs) -> Result<()> {
    let format = Format::from_name(&a.format).context("--format")?;
    let (n, k) = parse_shape(&a.shape)?;
    let bytes =
        std::fs::read(&a.input).with_context(|| format!("reading {}", a.input.display()))?;
    let w = flexkern_quant::dequantize(format, &bytes, n, k)
        .with_context(|| format!("dequantizing {} as {format} [{n}, {k}]", a.input.display()))?;
    npy::write_f32(&a.out, &[n, k], &w)?;
    Ok(())
}

pub fn run_gemv(a: &GemvArgs) -> Result<()> {
    let format = Format::from_name(&a.format).context("--format")?;
    let (n, k) = parse_shape(&a.shape)?;
    let bytes =
        std::fs::read(&a.weight).with_context(|| format!("reading {}", a.weight.display()))?;
    let w = QuantMatrix::new(format, n, k, &bytes)
        .with_context(|| format!("{} as {format} [{n}, {k}]", a.weight.display()))?
        .with_parallel(!a.single_thread);
    let x = npy::read(&a.x)?;
    let (m, kx) = matrix_shape(&x.shape, &a.x)?;
    if kx != k {
        bail!(
            "{}: activation K = {kx} does not match weight K = {k}",
            a.x.display()
        );
    }
    // K = 0 bounds neither N (by the weight file) nor M (by the x file): the guard does.
    let mut y = flexkern::mem::try_zeroed_vec("--shape", m.saturating_mul(n))?;
    let xf;
    let act = match &x.data {
        NpyData::F16(v) => Activation::F16(v),
        _ => {
            xf = x.to_f32();
            Activation::F32(&xf)
        }
    };
    w.gemv_batch(act, m, &mut y)?;
    let shape: Vec<usize> = if x.shape.len() == 1 {
        vec![n]
    } else {
        vec![m, n]
    };
    npy::write_f32(&a.out, &shape, &y)?;
    Ok(())
}
