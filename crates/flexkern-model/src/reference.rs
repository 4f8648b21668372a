//! The f64 reference forward: the same model written as plainly as possible (dequantized
//! weights, f64 arithmetic, full causal attention). Tests only; slow by design.

use crate::config::Config;
use crate::error::Result;
use crate::weights::Weights;
use flexkern::backend::tensor_ops::RopeStyle;
use flexkern_quant::QuantMatrix;

/// `y[n] = W x` with `W` dequantized to f64.
fn matvec(w: &[f64], n: usize, x: &[f64]) -> Vec<f64> {
    let k = x.len();
    (0..n)
        .map(|r| {
            w[r * k..(r + 1) * k]
                .iter()
                .zip(x)
                .map(|(a, b)| a * b)
                .sum()
        })
        .collect()
}

fn deq(w: &QuantMatrix) -> Result<Vec<f64>> {
    Ok(w.dequantize()?.into_iter().map(f64::from).collect())
}

fn rms_norm(x: &[f64], g: &[f32], eps: f32) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + eps as f64).sqrt();
    x.iter().zip(g).map(|(v, &g)| v * s * g as f64).collect()
}

/// ggml's `rope_yarn` for pair `i`: the angle and the magnitude factor.
fn yarn_theta(
    c: &Config,
    y: &flexkern::backend::tensor_ops::Yarn,
    i: usize,
    pos: usize,
) -> (f64, f64) {
    let n = c.rope_dims as f64;
    let base = c.rope_base as f64;
    let corr_dim = |beta: f64| {
        n * (y.orig_ctx as f64 / (beta * 2.0 * std::f64::consts::PI)).ln() / (2.0 * base.ln())
    };
    let low = corr_dim(y.beta_fast as f64).floor().max(0.0);
    let high = corr_dim(y.beta_slow as f64).ceil().min(n - 1.0);
    let extrap = pos as f64 * base.powf(-2.0 * i as f64 / n);
    let interp = extrap / y.factor as f64;
    let ramp = 1.0 - ((i as f64 - low) / (high - low).max(0.001)).clamp(0.0, 1.0);
    let mix = ramp * y.ext_factor as f64;
    let mut mscale = y.attn_factor as f64;
    if y.ext_factor != 0.0 {
        mscale *= 1.0 + 0.1 * (y.factor as f64).ln();
    }
    (interp * (1.0 - mix) + extrap * mix, mscale)
}

fn rope(c: &Config, ff: Option<&[f32]>, x: &mut [f64], heads: usize, pos: usize) {
    let (d, n_rot) = (c.head_dim, c.rope_dims);
    for h in x.chunks_exact_mut(d).take(heads) {
        for i in 0..n_rot / 2 {
            let f = (c.rope_base as f64).powf(-2.0 * i as f64 / n_rot as f64)
                / ff.map_or(1.0, |ff| ff[i] as f64);
            let (theta, m) = match &c.rope_yarn {
                Some(y) => yarn_theta(c, y, i, pos),
                None => (pos as f64 * c.rope_freq_scale as f64 * f, 1.0),
            };
            let (a, b) = match c.rope_style {
                RopeStyle::Normal => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + n_rot / 2),
            };
            let (x0, x1) = (h[a], h[b]);
            let (s, co) = (theta.sin() * m, theta.cos() * m);
            h[a] = x0 * co - x1 * s;
            h[b] = x0 * s + x1 * co;
        }
    }
}

fn add_bias(x: &mut [f64], b: &Option<Vec<f32>>) {
    if let Some(b) = b {
        x.iter_mut().zip(b).for_each(|(x, &b)| *x += b as f64);
    }
}

/// Logits `[tokens.len(), vocab]` for `tokens` run from position 0.
pub fn forward(c: &Config, w: &Weights, tokens: &[u32]) -> Result<Vec<f64>> {
    let (d, hd) = (c.n_embd, c.head_dim);
    let group = c.n_head / c.n_head_kv;
    let emb = deq(&w.tok_embd)?;
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| emb[t as usize * d..(t as usize + 1) * d].to_vec())
        .collect();
    for l in &w.layers {
        let (wq, wk, wv, wo) = (deq(&l.wq)?, deq(&l.wk)?, deq(&l.wv)?, deq(&l.wo)?);
        let (wg, wu, wd) = (deq(&l.gate)?, deq(&l.up)?, deq(&l.down)?);
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        let mut qs = Vec::new();
        for (p, x) in xs.iter().enumerate() {
            let h = rms_norm(x, &l.attn_norm, c.rms_eps);
            let mut q = matvec(&wq, c.n_head * hd, &h);
            let mut k = matvec(&wk, c.n_head_kv * hd, &h);
            let mut v = matvec(&wv, c.n_head_kv * hd, &h);
            add_bias(&mut q, &l.bq);
            add_bias(&mut k, &l.bk);
            add_bias(&mut v, &l.bv);
            rope(c, w.rope_freqs.as_deref(), &mut q, c.n_head, p);
            rope(c, w.rope_freqs.as_deref(), &mut k, c.n_head_kv, p);
            qs.push(q);
            ks.push(k);
            vs.push(v);
        }
        for (p, x) in xs.iter_mut().enumerate() {
            let mut att = vec![0.0f64; c.n_head * hd];
            for h in 0..c.n_head {
                let kh = h / group;
                let q = &qs[p][h * hd..(h + 1) * hd];
                let s: Vec<f64> = (0..=p)
                    .map(|j| {
                        let k = &ks[j][kh * hd..(kh + 1) * hd];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt()
                    })
                    .collect();
                let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - max).exp()).collect();
                let z: f64 = e.iter().sum();
                for (j, &pj) in e.iter().enumerate() {
                    let v = &vs[j][kh * hd..(kh + 1) * hd];
                    for (o, &vv) in att[h * hd..(h + 1) * hd].iter_mut().zip(v) {
                        *o += pj / z * vv;
                    }
                }
            }
            let o = matvec(&wo, d, &att);
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let h = rms_norm(x, &l.ffn_norm, c.rms_eps);
            let g = matvec(&wg, c.n_ff, &h);
            let u = matvec(&wu, c.n_ff, &h);
            let act: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(&g, &u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let y = matvec(&wd, d, &act);
            x.iter_mut().zip(&y).for_each(|(a, b)| *a += b);
        }
    }
    let out = deq(&w.output)?;
    let mut logits = Vec::with_capacity(tokens.len() * c.vocab);
    for x in &xs {
        logits.extend(matvec(
            &out,
            c.vocab,
            &rms_norm(x, &w.output_norm, c.rms_eps),
        ));
    }
    Ok(logits)
}
