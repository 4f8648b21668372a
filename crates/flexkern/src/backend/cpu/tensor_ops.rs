//! `TensorOps` on the CPU: quantized products through flexkern-quant's GEMV driver, the rest as
//! plain loops written so the compiler vectorizes them (independent lanes, no reductions across
//! a single accumulator), threaded with rayon where the work is large enough.

use crate::attention::{attention, AttentionArgs};
use crate::backend::cpu::CpuBackend;
use crate::backend::tensor_ops::{AttnShape, Rope, RopeStyle, TensorOps};
use crate::error::{invalid, Error, Result};
use crate::tensor::TensorView;
use crate::variant::{builtins, Variant};
use flexkern_quant::{gemv_many, swiglu_gate_up, Activation, QuantMatrix};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Activation rows per batched GEMV call: each weight row is dotted with this many rows while it
/// sits in L1, and the quantized activations stay in L2.
const GEMV_ROWS: usize = 16;

/// Set once the generic attention path reports that this build has no CPU kernel for it.
static FLEX_ATTENTION_MISSING: AtomicBool = AtomicBool::new(false);

fn check(arg: &'static str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(invalid(arg, format!("expected {want} elements, got {got}")));
    }
    Ok(())
}

/// Dot product with 8 independent lanes (vectorizes to one FMA register).
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] = x[l].mul_add(y[l], acc[l]);
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

impl TensorOps for CpuBackend {
    fn matmul(&self, w: &QuantMatrix, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        let (n, k) = (w.n(), w.k());
        check("x", x.len(), m * k)?;
        check("y", y.len(), m * n)?;
        for (xc, yc) in x.chunks(GEMV_ROWS * k).zip(y.chunks_mut(GEMV_ROWS * n)) {
            w.gemv_batch(Activation::F32(xc), xc.len() / k.max(1), yc)?;
        }
        Ok(())
    }

    fn matmul_many(
        &self,
        ws: &[&QuantMatrix],
        x: &[f32],
        m: usize,
        ys: &mut [&mut [f32]],
    ) -> Result<()> {
        check("ys", ys.len(), ws.len())?;
        let Some(k) = ws.first().map(|w| w.k()) else {
            return Ok(());
        };
        check("x", x.len(), m * k)?;
        // Every output is sliced per chunk below: lengths first, so a short one is an error.
        for (w, y) in ws.iter().zip(ys.iter()) {
            check("ys", y.len(), m * w.n())?;
        }
        let mut r0 = 0;
        for xc in x.chunks(GEMV_ROWS * k) {
            let mc = xc.len() / k.max(1);
            let mut outs: Vec<&mut [f32]> = ys
                .iter_mut()
                .zip(ws)
                .map(|(y, w)| &mut y[r0 * w.n()..(r0 + mc) * w.n()])
                .collect();
            gemv_many(ws, Activation::F32(xc), mc, &mut outs)?;
            r0 += mc;
        }
        Ok(())
    }

    fn swiglu(
        &self,
        gate: &QuantMatrix,
        up: &QuantMatrix,
        x: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let (n, k) = (gate.n(), gate.k());
        check("x", x.len(), m * k)?;
        check("out", out.len(), m * n)?;
        for (xc, oc) in x.chunks(GEMV_ROWS * k).zip(out.chunks_mut(GEMV_ROWS * n)) {
            swiglu_gate_up(gate, up, Activation::F32(xc), xc.len() / k.max(1), oc)?;
        }
        Ok(())
    }

    fn embedding(&self, table: &QuantMatrix, ids: &[u32], out: &mut [f32]) -> Result<()> {
        Ok(table.embedding(ids, out)?)
    }

    fn rms_norm(&self, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
        let d = weight.len();
        if d == 0 || !x.len().is_multiple_of(d) {
            return Err(invalid(
                "x",
                format!("length {} is not a multiple of {d}", x.len()),
            ));
        }
        check("out", out.len(), x.len())?;
        for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            // Sum of squares in f64, as ggml does, so long rows lose nothing.
            let ss: f64 = xr.iter().map(|&v| (v as f64) * (v as f64)).sum();
            let scale = (1.0 / (ss / d as f64 + eps as f64).sqrt()) as f32;
            for ((o, &v), &g) in or.iter_mut().zip(xr).zip(weight) {
                *o = v * scale * g;
            }
        }
        Ok(())
    }

    fn rope(
        &self,
        x: &mut [f32],
        heads: usize,
        head_dim: usize,
        positions: &[usize],
        rope: &Rope,
    ) -> Result<()> {
        check("x", x.len(), positions.len() * heads * head_dim)?;
        if rope.n_rot > head_dim
            || !rope.n_rot.is_multiple_of(2)
            || rope.inv_freq.len() != rope.n_rot / 2
        {
            return Err(invalid(
                "rope",
                format!("n_rot {} for head_dim {head_dim}", rope.n_rot),
            ));
        }
        let half = rope.n_rot / 2;
        let mut cs = vec![(0.0f32, 0.0f32); half];
        for (row, &p) in x.chunks_exact_mut(heads * head_dim).zip(positions) {
            for (c, &f) in cs.iter_mut().zip(&rope.inv_freq) {
                let (s, co) = (p as f32 * f).sin_cos();
                *c = (co * rope.mscale, s * rope.mscale);
            }
            for h in row.chunks_exact_mut(head_dim) {
                for (i, &(c, s)) in cs.iter().enumerate() {
                    let (a, b) = match rope.style {
                        RopeStyle::Normal => (2 * i, 2 * i + 1),
                        RopeStyle::Neox => (i, i + half),
                    };
                    let (x0, x1) = (h[a], h[b]);
                    h[a] = x0 * c - x1 * s;
                    h[b] = x0 * s + x1 * c;
                }
            }
        }
        Ok(())
    }

    fn add(&self, acc: &mut [f32], x: &[f32]) -> Result<()> {
        check("x", x.len(), acc.len())?;
        for (a, &b) in acc.iter_mut().zip(x) {
            *a += b;
        }
        Ok(())
    }

    fn add_bias(&self, x: &mut [f32], bias: &[f32]) -> Result<()> {
        let d = bias.len();
        if d == 0 || !x.len().is_multiple_of(d) {
            return Err(invalid(
                "x",
                format!("length {} is not a multiple of {d}", x.len()),
            ));
        }
        for row in x.chunks_exact_mut(d) {
            for (a, &b) in row.iter_mut().zip(bias) {
                *a += b;
            }
        }
        Ok(())
    }

    fn causal_attention(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        s: AttnShape,
        out: &mut [f32],
    ) -> Result<()> {
        let AttnShape {
            q_heads,
            kv_heads,
            head_dim: d,
        } = s;
        if kv_heads == 0 || q_heads % kv_heads != 0 || d == 0 {
            return Err(invalid(
                "shape",
                format!("{q_heads} query heads over {kv_heads} KV heads, dim {d}"),
            ));
        }
        let m = q.len() / (q_heads * d);
        let n = k.len() / (kv_heads * d);
        check("q", q.len(), m * q_heads * d)?;
        check("k", k.len(), n * kv_heads * d)?;
        check("v", v.len(), n * kv_heads * d)?;
        check("out", out.len(), q.len())?;
        if m > n {
            return Err(invalid(
                "q",
                format!("{m} queries but only {n} KV positions"),
            ));
        }
        if !FLEX_ATTENTION_MISSING.load(Ordering::Relaxed) {
            let args = AttentionArgs::new(
                TensorView::contiguous(q, &[m, q_heads, d]),
                TensorView::contiguous(k, &[n, kv_heads, d]),
                TensorView::contiguous(v, &[n, kv_heads, d]),
            )
            .variant(Variant::full().mask(builtins::causal()));
            match attention(self, &args, None, out, None) {
                Err(Error::Backend { .. }) => FLEX_ATTENTION_MISSING.store(true, Ordering::Relaxed),
                r => return r,
            }
        }
        direct_causal(q, k, v, s, m, n, out);
        Ok(())
    }
}

/// Causal GQA attention straight over contiguous K/V, one rayon task per (query, head): the
/// fallback while the generic CPU attention kernels are not in the build.
fn direct_causal(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    s: AttnShape,
    m: usize,
    n: usize,
    out: &mut [f32],
) {
    let AttnShape {
        q_heads,
        kv_heads,
        head_dim: d,
    } = s;
    let group = q_heads / kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let row = kv_heads * d;
    out.par_chunks_mut(d).enumerate().for_each_init(
        || Vec::with_capacity(n),
        |scores, (i, o)| {
            let (t, h) = (i / q_heads, i % q_heads);
            let kvh = h / group;
            let qv = &q[i * d..(i + 1) * d];
            let visible = n - m + t + 1;
            scores.clear();
            let mut max = f32::NEG_INFINITY;
            for j in 0..visible {
                let sc = dot(qv, &k[j * row + kvh * d..][..d]) * scale;
                max = max.max(sc);
                scores.push(sc);
            }
            let mut sum = 0.0f32;
            for sc in scores.iter_mut() {
                *sc = (*sc - max).exp();
                sum += *sc;
            }
            o.fill(0.0);
            for (j, &p) in scores.iter().enumerate() {
                let vr = &v[j * row + kvh * d..][..d];
                for (a, &b) in o.iter_mut().zip(vr) {
                    *a = p.mul_add(b, *a);
                }
            }
            let inv = 1.0 / sum;
            for a in o.iter_mut() {
                *a *= inv;
            }
        },
    );
}

#[cfg(test)]
// `CpuBackend` may gain state; `default()` keeps these tests valid either way.
mod tests {
    use super::*;
    use crate::error::Error;

    fn is_invalid<T: std::fmt::Debug>(r: Result<T>) -> bool {
        matches!(r, Err(Error::InvalidArgument { .. }))
    }

    #[test]
    fn malformed_arguments_are_typed_errors() {
        let b = CpuBackend;
        let mut out = vec![0.0; 3];
        assert!(is_invalid(b.rms_norm(&[1.0; 3], &[1.0; 2], 1e-5, &mut out)));
        assert!(is_invalid(b.add(&mut out, &[1.0; 2])));
        assert!(is_invalid(b.add_bias(&mut out, &[1.0; 2])));
        let rope = Rope::new(RopeStyle::Normal, 4, 10_000.0, 1.0);
        assert!(is_invalid(b.rope(&mut [0.0; 8], 1, 4, &[0], &rope)));
        assert!(is_invalid(b.rope(&mut [0.0; 2], 1, 2, &[0], &rope)));
        let s = AttnShape {
            q_heads: 3,
            kv_heads: 2,
            head_dim: 2,
        };
        assert!(is_invalid(b.causal_attention(
            &[0.0; 6],
            &[0.0; 4],
            &[0.0; 4],
            s,
            &mut [0.0; 6]
        )));
        let s = AttnShape {
            q_heads: 2,
            kv_heads: 1,
            head_dim: 2,
        };
        // Two queries over one KV position.
        assert!(is_invalid(b.causal_attention(
            &[0.0; 8],
            &[0.0; 2],
            &[0.0; 2],
            s,
            &mut [0.0; 8]
        )));
    }

    /// One fused call over Q/K/V-like matrices equals separate matmuls, across the 16-row
    /// activation chunks; wrong counts and lengths are typed errors, not panics.
    #[test]
    fn matmul_many_matches_matmul_and_rejects_bad_outputs() {
        use flexkern_quant::{quantize, Format};
        let b = CpuBackend;
        let (k, m) = (64, 20);
        let val = |i: usize| ((i * 7919 % 997) as f32 / 498.0) - 1.0;
        let shapes = [(Format::Q4_1, 12usize), (Format::Q8_0, 5), (Format::F32, 9)];
        let bytes: Vec<Vec<u8>> = shapes
            .iter()
            .enumerate()
            .map(|(j, &(f, n))| {
                let w: Vec<f32> = (0..n * k).map(|i| val(i + 1000 * j)).collect();
                quantize(f, &w, n, k).unwrap()
            })
            .collect();
        let mats: Vec<QuantMatrix> = shapes
            .iter()
            .zip(&bytes)
            .map(|(&(f, n), b)| QuantMatrix::new(f, n, k, b).unwrap())
            .collect();
        let refs: Vec<&QuantMatrix> = mats.iter().collect();
        let x: Vec<f32> = (0..m * k).map(|i| val(i + 77)).collect();
        let mut outs: Vec<Vec<f32>> = mats.iter().map(|q| vec![f32::NAN; m * q.n()]).collect();
        let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|v| v.as_mut_slice()).collect();
        b.matmul_many(&refs, &x, m, &mut views).unwrap();
        for (q, got) in mats.iter().zip(&outs) {
            let mut want = vec![f32::NAN; m * q.n()];
            b.matmul(q, &x, m, &mut want).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{g} vs {w}");
            }
        }
        let mut short = vec![0.0; m * mats[0].n() - 1];
        assert!(is_invalid(b.matmul_many(
            &refs[..1],
            &x,
            m,
            &mut [&mut short]
        )));
        assert!(is_invalid(b.matmul_many(
            &refs[..2],
            &x,
            m,
            &mut [&mut short]
        )));
        assert!(is_invalid(b.matmul_many(
            &refs[..1],
            &x[1..],
            m,
            &mut [&mut short]
        )));
    }

    #[test]
    fn rope_styles_rotate_the_documented_pairs() {
        let b = CpuBackend;
        let x0: Vec<f32> = (0..8).map(|i| i as f32 + 1.0).collect();
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            let rope = Rope::new(style, 8, 100.0, 1.0);
            let mut x = x0.clone();
            b.rope(&mut x, 1, 8, &[3], &rope).unwrap();
            for i in 0..4 {
                let (a, c) = match style {
                    RopeStyle::Normal => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + 4),
                };
                let th = 3.0 * 100f64.powf(-2.0 * i as f64 / 8.0);
                let (s, co) = th.sin_cos();
                let want_a = x0[a] as f64 * co - x0[c] as f64 * s;
                let want_c = x0[a] as f64 * s + x0[c] as f64 * co;
                assert!((x[a] as f64 - want_a).abs() < 1e-5, "{style:?} {i}");
                assert!((x[c] as f64 - want_c).abs() < 1e-5, "{style:?} {i}");
            }
        }
    }

    #[test]
    fn direct_attention_matches_the_generic_path() {
        let (m, n, s) = (
            3,
            5,
            AttnShape {
                q_heads: 4,
                kv_heads: 2,
                head_dim: 8,
            },
        );
        let gen = |len: usize, seed: u32| -> Vec<f32> {
            (0..len)
                .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
                .collect()
        };
        let (q, k, v) = (gen(m * 32, 1), gen(n * 16, 2), gen(n * 16, 3));
        let mut want = vec![f32::NAN; m * 32];
        direct_causal(&q, &k, &v, s, m, n, &mut want);
        let mut got = vec![f32::NAN; m * 32];
        CpuBackend
            .causal_attention(&q, &k, &v, s, &mut got)
            .unwrap();
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
}
