//! `flexkern verify --device cuda`'s forward-pass op cases, through `TensorOps` on
//! `CudaBackend`: RMSNorm, RoPE (normal / NeoX, linear scaling, YaRN, Llama-3 frequency
//! factors, partial rotation, large positions), add, add_bias, and GEMV / SwiGLU through
//! `prepare_weight`. Oracles in f64 from the CPU's formulas (the angle is the CPU's f32
//! product `pos * inv_freq`); outputs NaN-poisoned; adds bit-exact.

use crate::backend::{CudaBackend, CudaBuffer};
use crate::error::{invalid, Result};
use flexkern::backend::tensor_ops::{Rope, RopeKv, RopeStyle, TensorOps, Yarn};
use flexkern::backend::{to_device, to_host, Backend, Buffer, Slice};
use flexkern::verify::{Outcome, Rng};
use flexkern::DType;
use flexkern_quant::{Format, MlxScale, QuantMatrix};
use std::sync::Arc;

fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform() * 2.0 - 1.0).collect()
}

fn up(b: &CudaBackend, x: &[f32]) -> Result<CudaBuffer> {
    Ok(to_device(b, x)?)
}

fn poisoned(b: &CudaBackend, n: usize) -> Result<CudaBuffer> {
    up(b, &vec![f32::NAN; n])
}

fn down(b: &CudaBackend, buf: &CudaBuffer) -> Result<Vec<f32>> {
    Ok(to_host(b, buf)?)
}

/// max |got - want| / max(1e-30, max |want|); NaN is infinite.
fn err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    got.iter().zip(want).fold(0.0, |e, (&g, &w)| {
        if g.is_finite() {
            e.max((g as f64 - w).abs() / scale)
        } else {
            f64::INFINITY
        }
    })
}

fn rms_norm(b: &CudaBackend, rng: &mut Rng, rows: usize, d: usize) -> Result<f64> {
    let x = random(rng, rows * d);
    let w = random(rng, d);
    let out = poisoned(b, rows * d)?;
    let mut out = out;
    b.rms_norm(&up(b, &x)?, rows, &up(b, &w)?, 1e-5, &mut out)?;
    let got = down(b, &out)?;
    let mut want = vec![0f64; rows * d];
    for r in 0..rows {
        let xr = &x[r * d..(r + 1) * d];
        let ss: f64 = xr.iter().map(|&v| v as f64 * v as f64).sum();
        let s = 1.0 / (ss / d as f64 + 1e-5f32 as f64).sqrt();
        for i in 0..d {
            want[r * d + i] = xr[i] as f64 * s * w[i] as f64;
        }
    }
    Ok(err(&got, &want))
}

fn rope_case(
    b: &CudaBackend,
    rng: &mut Rng,
    rope: &Rope,
    heads: usize,
    head_dim: usize,
    positions: &[u32],
) -> Result<f64> {
    let t = positions.len();
    let x = random(rng, t * heads * head_dim);
    let mut xd = up(b, &x)?;
    let pos = to_device(b, positions)?;
    let freqs = up(b, &rope.inv_freq)?;
    b.rope(&mut xd, heads, head_dim, Slice::all(&pos), rope, &freqs)?;
    let got = down(b, &xd)?;
    let mut want: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let half = rope.n_rot / 2;
    for (ti, &p) in positions.iter().enumerate() {
        for h in 0..heads {
            let base = (ti * heads + h) * head_dim;
            for (i, &f) in rope.inv_freq.iter().enumerate() {
                let ang = (p as f32 * f) as f64;
                let (s, c) = (
                    ang.sin() * rope.mscale as f64,
                    ang.cos() * rope.mscale as f64,
                );
                let (a, bb) = match rope.style {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + half),
                };
                let (x0, x1) = (x[base + a] as f64, x[base + bb] as f64);
                want[base + a] = x0 * c - x1 * s;
                want[base + bb] = x0 * s + x1 * c;
            }
        }
    }
    Ok(err(&got, &want))
}

fn ropes(b: &CudaBackend, rng: &mut Rng) -> Vec<(String, Result<f64>)> {
    let yarn = Yarn {
        factor: 4.0,
        orig_ctx: 4096,
        ext_factor: 1.0,
        attn_factor: 1.0,
        beta_fast: 32.0,
        beta_slow: 1.0,
    };
    let factors: Vec<f32> = (0..64).map(|i| 1.0 + (i % 7) as f32).collect();
    let pos: Vec<u32> = vec![0, 1, 17, 4095, 100_000, 131_071];
    let mut v = Vec::new();
    for style in [RopeStyle::Normal, RopeStyle::Neox] {
        let cases: Vec<(&str, std::result::Result<Rope, flexkern::Error>)> = vec![
            ("plain", Ok(Rope::new(style, 128, 500_000.0, 1.0))),
            ("linear x4", Ok(Rope::new(style, 128, 10_000.0, 0.25))),
            ("YaRN x4", Rope::yarn(style, 128, 10_000.0, &yarn)),
            (
                "Llama-3 factors",
                Rope::new(style, 128, 500_000.0, 1.0).with_freq_factors(&factors),
            ),
            ("partial 32 of 64", Ok(Rope::new(style, 32, 10_000.0, 1.0))),
        ];
        for (what, r) in cases {
            let hd = if what.starts_with("partial") { 64 } else { 128 };
            let res = match r {
                Ok(r) => rope_case(b, rng, &r, 3, hd, &pos),
                Err(e) => Err(e.into()),
            };
            v.push((format!("rope {style:?} {what}"), res));
        }
    }
    v
}

/// A device buffer's bytes.
fn bytes_of(b: &CudaBackend, buf: &CudaBuffer) -> Result<Vec<u8>> {
    let mut out = vec![0u8; buf.len() * buf.dtype().size()];
    b.download(buf, 0, &mut out)?;
    Ok(out)
}

/// The fused call's outputs (`fused`) against the separate calls' (`split`), named `what`: the
/// same bytes, else a typed error naming `op` and the first output that differs.
fn same_bytes(
    op: &'static str,
    what: &[&str],
    fused: &[Vec<u8>],
    split: &[Vec<u8>],
) -> Result<f64> {
    match what
        .iter()
        .zip(fused.iter().zip(split))
        .find(|(_, (f, s))| f != s)
    {
        Some((w, _)) => Err(invalid(op, format!("{w} differs from the separate calls"))),
        None => Ok(0.0),
    }
}

/// `rope_kv_write` (one fused launch) against `rope`, `rope`, `kv_write` (and `convert`) on a
/// copy: the same bits in Q, K, both stores and the 16-bit Q the model's attention reads (f16
/// beside 1-byte stores, the store's type beside 16-bit ones, none beside f32), for a store of
/// `dtype`, partial rotation (`n_rot` < head size) and a slot per token anywhere in the pool.
fn rope_kv_fused(b: &CudaBackend, rng: &mut Rng, style: RopeStyle, dtype: DType) -> Result<f64> {
    use flexkern::kv_cache::quant::Scales;
    use flexkern::kv_cache::{CacheConfig, PageStore};
    let (hq, hkv, hd, t) = (6, 2, 64, 3);
    let rope = Rope::new(style, 48, 10_000.0, 1.0);
    let mut cfg = CacheConfig::new(5, 16, hkv, hd);
    (cfg.k_dtype, cfg.v_dtype) = (dtype, dtype);
    if dtype == DType::I8 || dtype == DType::Fp8E4M3 {
        let per_head = |a: f32| (0..hkv).map(|h| a + 0.02 * h as f32).collect();
        cfg.k_scales = Some(Scales::PerHead(per_head(0.03)));
        cfg.v_scales = Some(Scales::PerHead(per_head(0.02)));
    }
    let q16_dtype = match dtype {
        DType::F32 => None,
        DType::BF16 => Some(DType::BF16),
        _ => Some(DType::F16),
    };
    let (q, k, v) = (
        random(rng, t * hq * hd),
        random(rng, t * hkv * hd),
        random(rng, t * hkv * hd),
    );
    let pos = to_device(b, &[0u32, 77, 4095])?;
    let slots = to_device(b, &[79u32, 3, 40])?;
    let freqs = up(b, &rope.inv_freq)?;
    let mut got = Vec::new();
    for fused in [true, false] {
        let mut store = PageStore::new(b, &cfg)?;
        let (mut qd, mut kd, vd) = (up(b, &q)?, up(b, &k)?, up(b, &v)?);
        // Poisoned: every element must be written.
        let mut qh = match q16_dtype {
            Some(d) => {
                let mut h = b.alloc(d, t * hq * hd)?;
                b.upload(&mut h, 0, &vec![0xffu8; t * hq * hd * 2])?;
                Some(h)
            }
            None => None,
        };
        if fused {
            b.rope_kv_write(
                &mut qd,
                qh.as_mut(),
                &mut kd,
                &vd,
                RopeKv::whole((hq, hkv), hd, &pos, &rope, &freqs, store.pages(), &slots),
            )?;
        } else {
            b.rope(&mut qd, hq, hd, Slice::all(&pos), &rope, &freqs)?;
            b.rope(&mut kd, hkv, hd, Slice::all(&pos), &rope, &freqs)?;
            b.kv_write(store.pages(), Slice::all(&slots), &kd, &vd)?;
            if let Some(h) = qh.as_mut() {
                b.convert(&qd, h, t * hq * hd)?;
            }
        }
        let q16 = match &qh {
            Some(h) => bytes_of(b, h)?,
            None => vec![],
        };
        got.push(vec![
            bytes_of(b, &qd)?,
            bytes_of(b, &kd)?,
            bytes_of(b, &store.k)?,
            bytes_of(b, &store.v)?,
            q16,
        ]);
    }
    same_bytes(
        "rope_kv_write",
        &["q", "k", "k store", "v store", "16-bit q"],
        &got[0],
        &got[1],
    )
}

/// `norm_qkv_rope_kv_write` on one decode token, where the stacked projection applies RoPE and
/// the KV append in its epilogue, against `norm_matmul_many` then `rope_kv_write`: the same bits
/// in Q, K, V, both stores and the 16-bit Q, for weights of `f`, a store of `dtype` and heads
/// of `hd` dims (partial rotation: 48) and `hq` / `hkv` heads. An odd `hd` puts rotated pairs
/// across the kernel's row pairs, so the call must take the separate path (the fused one lost
/// rows there). A block's warps split its pairs (8 x 2 heads: one row or none a warp; the 8B's
/// 32 x 8 heads of 128: two or three rows), so pairs meet across warps in both.
fn qkv_rope_fused(
    b: &CudaBackend,
    rng: &mut Rng,
    f: Format,
    dtype: DType,
    hd: usize,
    (hq, hkv): (usize, usize),
) -> Result<f64> {
    use flexkern::backend::tensor_ops::Norm;
    use flexkern::kv_cache::quant::Scales;
    use flexkern::kv_cache::{CacheConfig, PageStore};
    let k = 512;
    let rope = Rope::new(RopeStyle::Normal, 48, 10_000.0, 1.0);
    let mut cfg = CacheConfig::new(5, 16, hkv, hd);
    (cfg.k_dtype, cfg.v_dtype) = (dtype, dtype);
    if dtype == DType::I8 || dtype == DType::Fp8E4M3 {
        let per_head = |a: f32| (0..hkv).map(|h| a + 0.02 * h as f32).collect();
        cfg.k_scales = Some(Scales::PerHead(per_head(0.03)));
        cfg.v_scales = Some(Scales::PerHead(per_head(0.02)));
    }
    let weight = |rng: &mut Rng, n: usize| -> Result<_> {
        let bytes = flexkern_quant::quantize(f, &random(rng, n * k), n, k)
            .map_err(|e| invalid("w", e.to_string()))?;
        let m = QuantMatrix::new(f, n, k, &bytes).map_err(|e| invalid("w", e.to_string()))?;
        Ok(b.prepare_weight(m)?)
    };
    let ws = [
        weight(rng, hq * hd)?,
        weight(rng, hkv * hd)?,
        weight(rng, hkv * hd)?,
    ];
    let x = up(b, &random(rng, k))?;
    let nw = up(
        b,
        &random(rng, k)
            .iter()
            .map(|w| 1.0 + w.abs())
            .collect::<Vec<_>>(),
    )?;
    let norm = || Norm {
        weight: &nw,
        eps: 1e-5,
    };
    let wr: [&_; 3] = [&ws[0], &ws[1], &ws[2]];
    if !crate::quant::gemv::stacks_rope(&b.dev, &wr, x.device_buf()) {
        return Err(invalid(
            "ws",
            format!("{f}: the stacked kernel does not take them"),
        ));
    }
    let pos = to_device(b, &[4093u32])?;
    let slots = to_device(b, &[37u32])?;
    let freqs = up(b, &rope.inv_freq)?;
    let q16_dtype = if dtype == DType::BF16 {
        DType::BF16
    } else {
        DType::F16
    };
    let mut got = Vec::new();
    for fused in [true, false] {
        let mut store = PageStore::new(b, &cfg)?;
        let (mut q, mut kk, mut v) = (
            poisoned(b, hq * hd)?,
            poisoned(b, hkv * hd)?,
            poisoned(b, hkv * hd)?,
        );
        let mut h = poisoned(b, k)?;
        let mut qh = b.alloc(q16_dtype, hq * hd)?;
        b.upload(&mut qh, 0, &vec![0xffu8; hq * hd * 2])?;
        let at = |pages| RopeKv::whole((hq, hkv), hd, &pos, &rope, &freqs, pages, &slots);
        if fused {
            b.norm_qkv_rope_kv_write(
                norm(),
                wr,
                &x,
                1,
                &mut h,
                (&mut q, &mut kk, &mut v),
                Some(&mut qh),
                at(store.pages()),
            )?;
        } else {
            b.norm_matmul_many(norm(), &wr, &x, 1, &mut h, &mut [&mut q, &mut kk, &mut v])?;
            b.rope_kv_write(&mut q, Some(&mut qh), &mut kk, &v, at(store.pages()))?;
        }
        got.push(
            [&q, &kk, &v, &store.k, &store.v, &qh]
                .into_iter()
                .map(|buf| bytes_of(b, buf))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    same_bytes(
        "norm_qkv_rope_kv_write",
        &["q", "k", "v", "k store", "v store", "16-bit q"],
        &got[0],
        &got[1],
    )
}

/// `largest` (the device's top k) against the host's order on rows with ties, signed zeros
/// and -inf: the same ids and bits. NaN is a typed error; a row of one repeated value (more
/// ties than the kernel ranks) falls back (`None`) or is still right.
fn top_k(b: &CudaBackend, rng: &mut Rng) -> Result<f64> {
    let order = |a: &(u32, f32), c: &(u32, f32)| {
        c.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.cmp(&c.0))
    };
    for (n, k) in [
        (49152, 1),
        (49152, 40),
        (128_256, 64),
        (100, 7),
        (64, 64),
        (5000, 3),
    ] {
        // Coarse values: many exact ties.
        let mut x: Vec<f32> = (0..n)
            .map(|_| ((rng.uniform() * 64.0).floor() - 32.0) / 4.0)
            .collect();
        x[n / 3] = -0.0;
        x[n / 2] = f32::NEG_INFINITY;
        let mut want: Vec<(u32, f32)> = x.iter().enumerate().map(|(i, &v)| (i as u32, v)).collect();
        want.sort_by(order);
        want.truncate(k);
        let got = b
            .largest(&up(b, &x)?, n, k)?
            .ok_or_else(|| invalid("largest", format!("n {n} k {k}: not found on the device")))?;
        let same = got.len() == k
            && got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.0 == w.0 && g.1.to_bits() == w.1.to_bits());
        if !same {
            return Err(invalid(
                "largest",
                format!(
                    "n {n} k {k}: {:?} vs {:?}",
                    &got[..got.len().min(4)],
                    &want[..4.min(k)]
                ),
            ));
        }
    }
    let mut x = random(rng, 1000);
    x[617] = f32::NAN;
    if !matches!(
        b.largest(&up(b, &x)?, 1000, 5),
        Err(flexkern::Error::InvalidArgument { .. })
    ) {
        return Err(invalid("largest", "NaN logits: no typed error"));
    }
    let flat = vec![1.5f32; 10_000];
    if let Some(got) = b.largest(&up(b, &flat)?, 10_000, 3)? {
        if got != vec![(0, 1.5), (1, 1.5), (2, 1.5)] {
            return Err(invalid("largest", format!("a flat row gave {got:?}")));
        }
    }
    Ok(0.0)
}

fn adds(b: &CudaBackend, rng: &mut Rng) -> Result<f64> {
    let (rows, d) = (7, 333);
    let a = random(rng, rows * d);
    let x = random(rng, rows * d);
    let bias = random(rng, d);
    let mut ad = up(b, &a)?;
    b.add(&mut ad, &up(b, &x)?, rows * d - 5)?;
    b.add_bias(&mut ad, rows - 1, &up(b, &bias)?)?;
    let got = down(b, &ad)?;
    for i in 0..rows * d {
        let mut w = a[i];
        if i < rows * d - 5 {
            w += x[i];
        }
        if i < (rows - 1) * d {
            w += bias[i % d];
        }
        if got[i].to_bits() != w.to_bits() {
            return Err(invalid("add", format!("element {i}: {} vs {w}", got[i])));
        }
    }
    Ok(0.0)
}

/// `convert`: f32 to f16 and bf16 rounded as `half` rounds (random values, ties, overflow,
/// subnormals, NaN), bit for bit, and a short output refused.
fn convert(b: &CudaBackend, rng: &mut Rng) -> Result<f64> {
    let mut x = random(rng, 1000);
    x.extend([
        1.000_488_3,
        -65_520.0,
        1e-7,
        f32::NAN,
        -0.0,
        3e38,
        1.0 + f32::EPSILON,
    ]);
    let xd = up(b, &x)?;
    for dt in [DType::F16, DType::BF16] {
        let mut out = b.alloc(dt, x.len())?;
        b.convert(&xd, &mut out, x.len())?;
        let mut raw = vec![0u8; 2 * x.len()];
        b.download(&out, 0, &mut raw)?;
        for (i, (g, &f)) in bytemuck::cast_slice::<u8, u16>(&raw)
            .iter()
            .zip(&x)
            .enumerate()
        {
            let want = if dt == DType::F16 {
                half::f16::from_f32(f).to_bits()
            } else {
                half::bf16::from_f32(f).to_bits()
            };
            let nan = f.is_nan() && g & 0x7fff > 0x7c00;
            if *g != want && !nan {
                return Err(invalid(
                    "convert",
                    format!("{} element {i}: {f} -> {g:#x}, want {want:#x}", dt.name()),
                ));
            }
        }
        let mut short = b.alloc(dt, 10)?;
        if b.convert(&xd, &mut short, x.len()).is_ok() {
            return Err(invalid("convert", "a short output was accepted"));
        }
    }
    Ok(0.0)
}

/// `matmul` and `swiglu` through `prepare_weight` (the file's bytes, MLX's three arrays), in the
/// default precision: where the planned kernel quantizes the activations first (MLX's integer
/// dot), the oracle takes the CPU's quantized activations.
fn prepared(
    b: &CudaBackend,
    dev: &crate::runtime::Device,
    rng: &mut Rng,
    f: Format,
) -> Result<f64> {
    let (n, k, m) = (70, 512, 3);
    let wq = |rng: &mut Rng| -> Result<(Vec<u8>, Vec<f32>)> {
        let w = random(rng, n * k);
        let bytes =
            flexkern_quant::quantize(f, &w, n, k).map_err(|e| invalid("w", e.to_string()))?;
        let d =
            flexkern_quant::dequantize(f, &bytes, n, k).map_err(|e| invalid("w", e.to_string()))?;
        Ok((bytes, d))
    };
    let (gb, gd) = wq(rng)?;
    let (ub, ud) = wq(rng)?;
    let qm = |bytes| QuantMatrix::new(f, n, k, bytes).map_err(|e| invalid("w", e.to_string()));
    let gate = b.prepare_weight(qm(&gb)?)?;
    let upw = b.prepare_weight(qm(&ub)?)?;
    let x = random(rng, m * k);
    let xd = up(b, &x)?;
    let mut y = poisoned(b, m * n)?;
    let mut s = poisoned(b, m * n)?;
    b.matmul(&gate, &xd, m, &mut y)?;
    b.swiglu(&gate, &upw, &xd, m, &mut s)?;
    let (gy, gs) = (down(b, &y)?, down(b, &s)?);
    // The activations each call dots with: x, or its Q8_0 rounding where the plan says so.
    let acts = |mode| -> Result<Vec<f32>> {
        let dp4a = crate::quant::choose::config_for(&dev.props, mode, &gate, m).dp4a;
        match f.dot_format().filter(|_| dp4a) {
            None => Ok(x.clone()),
            Some(d) => {
                let q = flexkern_quant::quantize_activation(d, &x, m, k)
                    .map_err(|e| invalid("x", e.to_string()))?;
                flexkern_quant::dequantize(d, &q, m, k).map_err(|e| invalid("x", e.to_string()))
            }
        }
    };
    let (xp, xg) = (
        acts(crate::quant::Mode::Plain)?,
        acts(crate::quant::Mode::GateUp)?,
    );
    let dot = |w: &[f32], x: &[f32], j: usize, r: usize| -> f64 {
        (0..k)
            .map(|e| w[r * k + e] as f64 * x[j * k + e] as f64)
            .sum()
    };
    let silu = |v: f64| v / (1.0 + (-v).exp());
    let (mut wy, mut ws) = (vec![0f64; m * n], vec![0f64; m * n]);
    for j in 0..m {
        for r in 0..n {
            wy[j * n + r] = dot(&gd, &xp, j, r);
            ws[j * n + r] = silu(dot(&gd, &xg, j, r)) * dot(&ud, &xg, j, r);
        }
    }
    Ok(err(&gy, &wy).max(err(&gs, &ws)))
}

/// Every op check as verify rows.
pub fn ops_checks(dev: &Arc<crate::runtime::Device>, seed: u64) -> Vec<Outcome> {
    let b = CudaBackend::on(dev.clone());
    let mut rng = Rng::new(seed);
    let row = |name: String, tol: f64, r: Result<f64>| {
        super::outcome(name, DType::F32, tol, r.map(|e| (e, 0.0)))
    };
    let mut v = vec![
        row(
            "rms_norm 5x4096".into(),
            2e-6,
            rms_norm(&b, &mut rng, 5, 4096),
        ),
        row(
            "rms_norm 3x1001".into(),
            2e-6,
            rms_norm(&b, &mut rng, 3, 1001),
        ),
        // Rows past what the kernel keeps in registers (8 elements a thread) take its loop.
        row(
            "rms_norm 2x14336".into(),
            2e-6,
            rms_norm(&b, &mut rng, 2, 14336),
        ),
        row("add + add_bias (bit-exact)".into(), 0.0, adds(&b, &mut rng)),
        row(
            "convert f32 -> f16 / bf16 (bit-exact, nearest even)".into(),
            0.0,
            convert(&b, &mut rng),
        ),
        row(
            "largest: the device's top k, ids and bits as the host orders them".into(),
            0.0,
            top_k(&b, &mut rng),
        ),
    ];
    for (name, r) in ropes(&b, &mut rng) {
        v.push(row(name, 2e-6, r));
    }
    for style in [RopeStyle::Normal, RopeStyle::Neox] {
        for dtype in [
            DType::F16,
            DType::BF16,
            DType::F32,
            DType::I8,
            DType::Fp8E4M3,
        ] {
            v.push(row(
                format!(
                    "rope_kv_write {style:?} {} store (bit-exact with rope + kv_write + convert)",
                    dtype.name()
                ),
                0.0,
                rope_kv_fused(&b, &mut rng, style, dtype),
            ));
        }
    }
    for (f, dtype, hd, heads) in [
        (Format::Q4_0, DType::F16, 64, (8, 2)),
        (Format::Q4_0, DType::Fp8E4M3, 64, (8, 2)),
        (Format::Q8_0, DType::BF16, 64, (8, 2)),
        (Format::Q4K, DType::I8, 64, (8, 2)),
        (Format::Q4_0, DType::F16, 63, (8, 2)),
        (Format::Q4_0, DType::F16, 128, (32, 8)),
        (Format::Q6K, DType::F16, 128, (32, 8)),
        (Format::Q4K, DType::BF16, 64, (9, 3)),
    ] {
        v.push(row(
            format!(
                "norm_qkv_rope_kv_write {f} into a {} store, {} x {} heads of {hd} (RoPE + append in the projection; bit-exact with the separate calls)",
                dtype.name(), heads.0, heads.1
            ),
            0.0,
            qkv_rope_fused(&b, &mut rng, f, dtype, hd, heads),
        ));
    }
    for f in [
        Format::Q4K,
        Format::mlx(4, 64, MlxScale::F16).expect("valid"),
    ] {
        v.push(row(
            format!("TensorOps matmul + swiglu {f} (prepare_weight)"),
            1e-5,
            prepared(&b, dev, &mut rng, f),
        ));
    }
    let _ = b.synchronize();
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn same_bytes_names_the_first_output_that_differs() {
        let a = vec![vec![1u8, 2], vec![3], vec![4]];
        let mut b = a.clone();
        assert_eq!(
            super::same_bytes("op", &["x", "y", "z"], &a, &b).unwrap(),
            0.0
        );
        b[1][0] = 9;
        b[2][0] = 9;
        let e = super::same_bytes("op", &["x", "y", "z"], &a, &b).unwrap_err();
        assert!(e.to_string().contains("y differs"), "{e}");
    }
}
