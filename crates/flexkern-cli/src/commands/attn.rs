//! `flexkern attn`: attention over .npy files, the interop path for Python users.

use anyhow::{bail, Context, Result};
use clap::Args;
use flexkern::builtins;
use flexkern::npy::{self, Npy, NpyData};
use flexkern::tensor::TensorView;
use flexkern::{AttentionArgs, CpuBackend, Variant};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct AttnArgs {
    /// Q as [tokens, Hq, D] (.npy, f32 or f16).
    #[arg(long)]
    pub q: PathBuf,
    /// K as [tokens, Hkv, D].
    #[arg(long)]
    pub k: PathBuf,
    /// V as [tokens, Hkv, Dv].
    #[arg(long)]
    pub v: PathBuf,
    /// Output O, f32 [tokens, Hq, Dv].
    #[arg(long)]
    pub out: PathBuf,
    /// Output LSE, f32 [tokens, Hq], natural log.
    #[arg(long)]
    pub lse: Option<PathBuf>,
    /// Cumulative query lengths, e.g. 0,5,9 (default: one sequence).
    #[arg(long, value_delimiter = ',')]
    pub cu_q_lens: Option<Vec<u64>>,
    /// Cumulative KV lengths, e.g. 0,100,130.
    #[arg(long, value_delimiter = ',')]
    pub cu_kv_lens: Option<Vec<u64>>,
    /// Mask, repeatable (ANDed): causal | sliding:W | local:L:R | chunked:C | prefix-lm:N | document:IDS.npy
    #[arg(long = "mask")]
    pub masks: Vec<String>,
    /// Logit soft-capping C: s -> C * tanh(s / C).
    #[arg(long)]
    pub softcap: Option<f64>,
    /// ALiBi slopes per q head (.npy f32 [Hq]).
    #[arg(long)]
    pub alibi: Option<PathBuf>,
    /// Attention-sink logits per q head (.npy f32 [Hq]).
    #[arg(long)]
    pub sinks: Option<PathBuf>,
    /// Score scale (default 1/sqrt(D)).
    #[arg(long)]
    pub scale: Option<f32>,
    /// Page K/V into a paged cache of this page size (shuffled page order) and run paged attention.
    #[arg(long)]
    pub page_size: Option<usize>,
    /// Store the paged cache as fp8e4m3 | fp8e5m2 | int8 (per-head scales); needs --page-size.
    #[arg(long)]
    pub kv_dtype: Option<String>,
    /// Seed of the shuffled page order.
    #[arg(long, default_value_t = 1)]
    pub page_seed: u64,
    #[arg(long, value_enum, default_value_t)]
    pub device: super::device::Device,
    #[command(flatten)]
    pub expr: super::attn_expr::ExprArgs,
}

/// Parses repeated `--mask` flags into one ANDed mask. Each spec takes exactly its fields
/// (`causal:1:2` is refused, not read as `causal`); window and chunk sizes must be >= 1.
pub fn parse_masks(masks: &[String], mut v: Variant) -> Result<Variant> {
    const USAGE: &str = "causal, sliding:W, local:L:R, chunked:C, prefix-lm:N, document:IDS.npy";
    for m in masks {
        let parts: Vec<&str> = m.split(':').collect();
        let want = match parts[0] {
            "causal" => 1,
            "local" => 3,
            "sliding" | "chunked" | "prefix-lm" | "document" => 2,
            other => bail!("--mask: unknown mask `{other}` ({USAGE})"),
        };
        if parts.len() != want {
            bail!(
                "--mask {m}: `{}` takes {} field(s) after its name, got {} ({USAGE})",
                parts[0],
                want - 1,
                parts.len() - 1
            );
        }
        let num = |i: usize, min: i64| -> Result<i64> {
            let x = parts[i]
                .parse::<i64>()
                .with_context(|| format!("--mask {m}: `{}` is not an integer", parts[i]))?;
            if x < min {
                bail!("--mask {m}: {x} is below {min}");
            }
            Ok(x)
        };
        let e = match parts[0] {
            "causal" => builtins::causal(),
            "sliding" => builtins::sliding_window(num(1, 1)?),
            "local" => builtins::local(num(1, 0)?, num(2, 0)?),
            "chunked" => builtins::chunked(num(1, 1)?),
            "prefix-lm" => builtins::prefix_lm(num(1, 0)?),
            _ => {
                let path = parts[1];
                if path.is_empty() {
                    bail!("--mask document:IDS.npy needs a file");
                }
                let ids = npy::read(path.as_ref())
                    .and_then(|a| a.to_i64(path))
                    .with_context(|| format!("--mask {m}"))?;
                builtins::document(ids)
            }
        };
        v = v.mask(e);
    }
    Ok(v)
}

/// A per-query-head vector (`--alibi`, `--sinks`): 1-D, `heads` long.
fn f32_vec(path: &std::path::Path, what: &str, heads: usize) -> Result<Vec<f32>> {
    let a = npy::read(path)?;
    if a.shape.len() != 1 {
        bail!("--{what}: expected a 1-D array, got shape {:?}", a.shape);
    }
    if a.shape[0] != heads {
        bail!("--{what}: {} values for {heads} query heads", a.shape[0]);
    }
    Ok(a.to_f32())
}

fn view<'a>(a: &'a Npy, name: &'static str) -> Result<TensorView<'a>> {
    if a.shape.len() != 3 {
        bail!(
            "--{name}: expected [tokens, heads, dim], got shape {:?}",
            a.shape
        );
    }
    Ok(match &a.data {
        NpyData::F32(v) => TensorView::contiguous(v.as_slice(), &a.shape),
        NpyData::F16(v) => TensorView::contiguous(v.as_slice(), &a.shape),
        _ => bail!("--{name}: expected f32 or f16 data"),
    })
}

pub fn run_attn(a: &AttnArgs) -> Result<()> {
    let (q, k, v) = (npy::read(&a.q)?, npy::read(&a.k)?, npy::read(&a.v)?);
    // Mixed f16/f32 inputs are widened to f32 so every operand has one dtype.
    let widen = |x: &Npy| -> Npy {
        match x.data {
            NpyData::F16(_) => Npy {
                shape: x.shape.clone(),
                data: NpyData::F32(x.to_f32()),
            },
            _ => x.clone(),
        }
    };
    let same = matches!(
        (&q.data, &k.data, &v.data),
        (NpyData::F16(_), NpyData::F16(_), NpyData::F16(_))
    );
    let (q, k, v) = if same {
        (q, k, v)
    } else {
        (widen(&q), widen(&k), widen(&v))
    };
    let (qv, kv, vv) = (view(&q, "q")?, view(&k, "k")?, view(&v, "v")?);
    let hq = q.shape[1];
    let mut variant = parse_masks(&a.masks, Variant::full())?;
    if let Some(c) = a.softcap {
        if !(c.is_finite() && c > 0.0) {
            bail!("--softcap {c}: the cap must be finite and > 0");
        }
        variant = variant.score(builtins::softcap(c));
    }
    if let Some(p) = &a.alibi {
        let slopes = f32_vec(p, "alibi", hq)?;
        if let Some(x) = slopes.iter().find(|x| !x.is_finite()) {
            bail!("--alibi: slopes must be finite, got {x}");
        }
        variant = variant.score(builtins::alibi(slopes));
    }
    if let Some(p) = &a.sinks {
        variant = variant.sinks(f32_vec(p, "sinks", hq)?);
    }
    let q_tokens = q.shape.first().copied().unwrap_or(0);
    variant = super::attn_expr::apply(&a.expr, variant, q_tokens, a.cu_q_lens.as_deref())?;
    let mut args = AttentionArgs::new(qv, kv, vv).variant(variant);
    match (&a.cu_q_lens, &a.cu_kv_lens) {
        (Some(cq), Some(ck)) => {
            // The outputs have one row per Q token: the lengths must cover Q exactly.
            for (flag, cu, what, n) in [
                ("--cu-q-lens", cq, "--q", q.shape[0]),
                ("--cu-kv-lens", ck, "--k", k.shape[0]),
            ] {
                if cu.last().is_some_and(|&e| e != n as u64) {
                    bail!(
                        "{flag} ends at {} but {what} holds {n} tokens",
                        cu[cu.len() - 1]
                    );
                }
            }
            args = args.ragged(cq, ck)
        }
        (None, None) => {}
        _ => bail!("give both --cu-q-lens and --cu-kv-lens, or neither"),
    }
    if let Some(s) = a.scale {
        args = args.scale(s);
    }
    // Every argument is validated before the outputs are sized by them (a zero-size dimension
    // once sized a 64 TB output), and the outputs go through the memory guard.
    args.prepare()?;
    let (tokens, dv) = (q.shape[0], v.shape[2]);
    let mut o = flexkern::mem::try_zeroed_vec("out", tokens.saturating_mul(hq).saturating_mul(dv))?;
    let mut lse = flexkern::mem::try_zeroed_vec("lse", tokens.saturating_mul(hq))?;
    match (a.page_size, &a.kv_dtype) {
        (_, Some(_)) if a.page_size.is_none() => bail!("--kv-dtype needs --page-size"),
        _ if a.device == super::device::Device::Cuda => {
            let paged = match a.page_size {
                Some(ps) => {
                    let dt = a
                        .kv_dtype
                        .as_deref()
                        .map(super::paged::parse_kv_dtype)
                        .transpose()?;
                    Some((ps, dt.unwrap_or(flexkern::DType::F32), a.page_seed))
                }
                None => None,
            };
            (o, lse) = super::cuda::attention(&args, paged)?;
        }
        (Some(ps), dt) => {
            let dt = dt
                .as_deref()
                .map(super::paged::parse_kv_dtype)
                .transpose()?;
            super::paged::attention_paged(
                &CpuBackend,
                &args,
                ps,
                dt,
                a.page_seed,
                &mut o,
                Some(&mut lse),
            )?;
        }
        (None, Some(_)) => bail!("--kv-dtype needs --page-size"),
        (None, None) => flexkern::attention(&CpuBackend, &args, None, &mut o, Some(&mut lse))?,
    }
    npy::write_f32(&a.out, &[tokens, hq, dv], &o)?;
    if let Some(p) = &a.lse {
        npy::write_f32(p, &[tokens, hq], &lse)?;
    }
    Ok(())
}
