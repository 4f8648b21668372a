//! `TensorOps` on the CPU: quantized products through flexkern-quant's GEMV driver, the rest as
//! plain loops written so the compiler vectorizes them (independent lanes, no reductions across
//! a single accumulator). Weights are prepared into the 8-row interleaved layout where the
//! format has one (the CPU's "buffer type" for weights, as ggml's repack).

use crate::backend::cpu::CpuBackend;
use crate::backend::host::HostBuffer;
use crate::backend::tensor_ops::{Rope, RopeStyle, TensorOps};
use crate::backend::Slice;
use crate::error::{invalid, Result};
use flexkern_quant::{gemv_many, swiglu_gate_up, Activation, Precision, QuantMatrix};

/// Activation rows per batched GEMV call: each weight row is dotted with this many rows while it
/// sits in L1, and the quantized activations stay in L2.
const GEMV_ROWS: usize = 16;

/// The first `n` elements of an f32 buffer.
fn rows<'a>(arg: &'static str, b: &'a HostBuffer, n: usize) -> Result<&'a [f32]> {
    let s = b.f32(arg)?;
    s.get(..n).ok_or_else(|| short(arg, n, s.len()))
}

fn rows_mut<'a>(arg: &'static str, b: &'a mut HostBuffer, n: usize) -> Result<&'a mut [f32]> {
    let s = b.f32_mut(arg)?;
    let have = s.len();
    s.get_mut(..n).ok_or_else(|| short(arg, n, have))
}

fn short(arg: &'static str, need: usize, have: usize) -> crate::error::Error {
    invalid(
        arg,
        format!("needs {need} elements, the buffer holds {have}"),
    )
}

fn size(arg: &'static str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| invalid(arg, "size overflows"))
}

impl TensorOps for CpuBackend {
    type Weight<'w> = QuantMatrix<'w>;

    fn prepare_weight<'w>(&self, w: QuantMatrix<'w>) -> Result<QuantMatrix<'w>> {
        // Precise mode's kernels read the file's layout; the integer dots are faster on the
        // interleaved copy where the format has one (the same bytes).
        if w.precision() == Precision::Precise {
            return Ok(w);
        }
        Ok(w.repacked().unwrap_or(w))
    }

    fn weight_shape(w: &QuantMatrix<'_>) -> (usize, usize) {
        (w.n(), w.k())
    }

    fn matmul(&self, w: &QuantMatrix, x: &HostBuffer, m: usize, y: &mut HostBuffer) -> Result<()> {
        let (n, k) = (w.n(), w.k());
        let x = rows("x", x, size("x", m, k)?)?;
        let y = rows_mut("y", y, size("y", m, n)?)?;
        for (xc, yc) in x.chunks(GEMV_ROWS * k).zip(y.chunks_mut(GEMV_ROWS * n)) {
            w.gemv_batch(Activation::F32(xc), xc.len() / k.max(1), yc)?;
        }
        Ok(())
    }

    fn matmul_many(
        &self,
        ws: &[&QuantMatrix],
        x: &HostBuffer,
        m: usize,
        ys: &mut [&mut HostBuffer],
    ) -> Result<()> {
        if ws.len() != ys.len() {
            return Err(invalid(
                "ys",
                format!("{} outputs for {} matrices", ys.len(), ws.len()),
            ));
        }
        let Some(k) = ws.first().map(|w| w.k()) else {
            return Ok(());
        };
        let x = rows("x", x, size("x", m, k)?)?;
        // Every output is checked before any is written, so a short one is an error.
        let mut outs = Vec::with_capacity(ys.len());
        for (w, y) in ws.iter().zip(ys.iter_mut()) {
            outs.push(rows_mut("ys", y, size("ys", m, w.n())?)?);
        }
        let mut r0 = 0;
        for xc in x.chunks(GEMV_ROWS * k) {
            let mc = xc.len() / k.max(1);
            let mut part: Vec<&mut [f32]> = outs
                .iter_mut()
                .zip(ws)
                .map(|(y, w)| &mut y[r0 * w.n()..(r0 + mc) * w.n()])
                .collect();
            gemv_many(ws, Activation::F32(xc), mc, &mut part)?;
            r0 += mc;
        }
        Ok(())
    }

    fn swiglu(
        &self,
        gate: &QuantMatrix,
        up: &QuantMatrix,
        x: &HostBuffer,
        m: usize,
        out: &mut HostBuffer,
    ) -> Result<()> {
        let (n, k) = (gate.n(), gate.k());
        let x = rows("x", x, size("x", m, k)?)?;
        let out = rows_mut("out", out, size("out", m, n)?)?;
        for (xc, oc) in x.chunks(GEMV_ROWS * k).zip(out.chunks_mut(GEMV_ROWS * n)) {
            swiglu_gate_up(gate, up, Activation::F32(xc), xc.len() / k.max(1), oc)?;
        }
        Ok(())
    }

    fn embedding(
        &self,
        table: &QuantMatrix,
        ids: Slice<'_, HostBuffer>,
        out: &mut HostBuffer,
    ) -> Result<()> {
        let all = ids.buf.u32("ids")?;
        crate::backend::check_range("ids", ids.start, ids.len, all.len())?;
        let ids = &all[ids.start..ids.start + ids.len];
        let out = rows_mut("out", out, size("out", ids.len(), table.k())?)?;
        Ok(table.embedding(ids, out)?)
    }

    fn rms_norm(
        &self,
        x: &HostBuffer,
        n_rows: usize,
        weight: &HostBuffer,
        eps: f32,
        out: &mut HostBuffer,
    ) -> Result<()> {
        let weight = weight.f32("weight")?;
        let d = weight.len();
        if d == 0 {
            return Err(invalid("weight", "empty"));
        }
        let n = size("x", n_rows, d)?;
        let x = rows("x", x, n)?;
        let out = rows_mut("out", out, n)?;
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
        x: &mut HostBuffer,
        heads: usize,
        head_dim: usize,
        positions: Slice<'_, HostBuffer>,
        rope: &Rope,
        inv_freq: &HostBuffer,
    ) -> Result<()> {
        let all = positions.buf.u32("positions")?;
        crate::backend::check_range("positions", positions.start, positions.len, all.len())?;
        let positions = &all[positions.start..positions.start + positions.len];
        let inv_freq = inv_freq.f32("inv_freq")?;
        if rope.n_rot > head_dim
            || !rope.n_rot.is_multiple_of(2)
            || inv_freq.len() != rope.n_rot / 2
        {
            return Err(invalid(
                "rope",
                format!(
                    "n_rot {} with {} frequencies for head_dim {head_dim}",
                    rope.n_rot,
                    inv_freq.len()
                ),
            ));
        }
        let row = size("x", heads, head_dim)?;
        let x = rows_mut("x", x, size("x", positions.len(), row)?)?;
        let half = rope.n_rot / 2;
        let mut cs = vec![(0.0f32, 0.0f32); half];
        for (r, &p) in x.chunks_exact_mut(row.max(1)).zip(positions) {
            for (c, &f) in cs.iter_mut().zip(inv_freq) {
                let (s, co) = (p as f32 * f).sin_cos();
                *c = (co * rope.mscale, s * rope.mscale);
            }
            for h in r.chunks_exact_mut(head_dim.max(1)) {
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

    fn add(&self, acc: &mut HostBuffer, x: &HostBuffer, len: usize) -> Result<()> {
        let x = rows("x", x, len)?;
        for (a, &b) in rows_mut("acc", acc, len)?.iter_mut().zip(x) {
            *a += b;
        }
        Ok(())
    }

    fn add_bias(&self, x: &mut HostBuffer, n_rows: usize, bias: &HostBuffer) -> Result<()> {
        let bias = bias.f32("bias")?;
        if bias.is_empty() {
            return Err(invalid("bias", "empty"));
        }
        let x = rows_mut("x", x, size("x", n_rows, bias.len())?)?;
        for row in x.chunks_exact_mut(bias.len()) {
            for (a, &b) in row.iter_mut().zip(bias) {
                *a += b;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tensor_ops::RopeKv;
    use crate::backend::{to_device, to_host, Backend};
    use crate::dtype::DType;
    use crate::error::Error;

    fn is_invalid<T: std::fmt::Debug>(r: Result<T>) -> bool {
        matches!(r, Err(Error::InvalidArgument { .. }))
    }

    fn buf(x: &[f32]) -> HostBuffer {
        to_device(&CpuBackend, x).unwrap()
    }

    #[test]
    fn malformed_arguments_are_typed_errors() {
        let b = CpuBackend;
        let mut out = buf(&[0.0; 3]);
        assert!(is_invalid(b.rms_norm(
            &buf(&[1.0; 3]),
            2,
            &buf(&[1.0; 2]),
            1e-5,
            &mut out
        )));
        assert!(is_invalid(b.add(&mut out, &buf(&[1.0; 2]), 3)));
        assert!(is_invalid(b.add_bias(&mut out, 2, &buf(&[1.0; 2]))));
        let rope = Rope::new(RopeStyle::Normal, 4, 10_000.0, 1.0);
        let freqs = buf(&rope.inv_freq);
        let pos = to_device(&b, &[0u32]).unwrap();
        let p = Slice::all(&pos);
        assert!(is_invalid(b.rope(
            &mut buf(&[0.0; 8]),
            1,
            2,
            p,
            &rope,
            &freqs
        )));
        assert!(is_invalid(b.rope(
            &mut buf(&[0.0; 2]),
            1,
            4,
            p,
            &rope,
            &freqs
        )));
        // A u32 buffer where f32 is expected, and f32 positions.
        assert!(is_invalid(b.add(&mut out, &pos, 1)));
        assert!(is_invalid(b.rope(
            &mut buf(&[0.0; 4]),
            1,
            4,
            Slice::all(&freqs),
            &rope,
            &freqs
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
            .map(|(&(f, n), bytes)| b.prepare_weight(QuantMatrix::new(f, n, k, bytes).unwrap()))
            .collect::<Result<_>>()
            .unwrap();
        let refs: Vec<&QuantMatrix> = mats.iter().collect();
        let x = buf(&(0..m * k).map(|i| val(i + 77)).collect::<Vec<_>>());
        let mut outs: Vec<HostBuffer> = mats
            .iter()
            .map(|q| buf(&vec![f32::NAN; m * q.n()]))
            .collect();
        let mut views: Vec<&mut HostBuffer> = outs.iter_mut().collect();
        b.matmul_many(&refs, &x, m, &mut views).unwrap();
        for (q, got) in mats.iter().zip(&outs) {
            let mut want = buf(&vec![f32::NAN; m * q.n()]);
            b.matmul(q, &x, m, &mut want).unwrap();
            let (g, w) = (
                to_host::<_, f32>(&b, got).unwrap(),
                to_host::<_, f32>(&b, &want).unwrap(),
            );
            for (g, w) in g.iter().zip(&w) {
                assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{g} vs {w}");
            }
        }
        let mut short = b.alloc(DType::F32, m * mats[0].n() - 1).unwrap();
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
            &x,
            m + 1,
            &mut [&mut short]
        )));
    }

    #[test]
    fn rope_styles_rotate_the_documented_pairs() {
        let b = CpuBackend;
        let x0: Vec<f32> = (0..8).map(|i| i as f32 + 1.0).collect();
        let pos = to_device(&b, &[3u32]).unwrap();
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            let rope = Rope::new(style, 8, 100.0, 1.0);
            let mut xb = buf(&x0);
            b.rope(&mut xb, 1, 8, Slice::all(&pos), &rope, &buf(&rope.inv_freq))
                .unwrap();
            let x: Vec<f32> = to_host(&b, &xb).unwrap();
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

    /// The default `matmul_add` is `matmul` then `add`, bit for bit; a short accumulator or
    /// scratch is a typed error and leaves the accumulator as it was.
    #[test]
    fn matmul_add_is_matmul_then_add_and_rejects_short_buffers() {
        use flexkern_quant::{quantize, Format};
        let b = CpuBackend;
        let (n, k, m) = (7, 64, 3);
        let val = |i: usize| ((i * 7919 % 997) as f32 / 498.0) - 1.0;
        let wb = quantize(Format::Q8_0, &(0..n * k).map(val).collect::<Vec<_>>(), n, k).unwrap();
        let w = b
            .prepare_weight(QuantMatrix::new(Format::Q8_0, n, k, &wb).unwrap())
            .unwrap();
        let x = buf(&(0..m * k).map(|i| val(i + 5)).collect::<Vec<_>>());
        let acc0: Vec<f32> = (0..m * n).map(|i| val(i + 99)).collect();
        let mut acc = buf(&acc0);
        let mut scratch = buf(&vec![f32::NAN; m * n]);
        b.matmul_add(&w, &x, m, &mut acc, &mut scratch).unwrap();
        let mut y = buf(&vec![f32::NAN; m * n]);
        b.matmul(&w, &x, m, &mut y).unwrap();
        let mut want = buf(&acc0);
        b.add(&mut want, &y, m * n).unwrap();
        let (g, w2) = (
            to_host::<_, f32>(&b, &acc).unwrap(),
            to_host::<_, f32>(&b, &want).unwrap(),
        );
        assert!(g.iter().zip(&w2).all(|(g, w)| g.to_bits() == w.to_bits()));
        let mut short = buf(&vec![0.0; m * n - 1]);
        let mut acc = buf(&acc0);
        assert!(is_invalid(b.matmul_add(&w, &x, m, &mut acc, &mut short)));
        assert!(is_invalid(b.matmul_add(
            &w,
            &x,
            m,
            &mut short,
            &mut scratch
        )));
        assert_eq!(to_host::<_, f32>(&b, &acc).unwrap(), acc0);
    }

    /// The fused defaults (`norm_matmul_many`, `norm_swiglu`, `rope_kv_write`) equal their
    /// parts bit for bit and give the parts' typed errors; a slot outside the pool leaves the
    /// store untouched. `largest` finds nothing on the CPU (callers sort the row).
    #[test]
    fn fused_defaults_equal_their_parts_and_refuse_bad_input() {
        use crate::kv_cache::{CacheConfig, PageStore};
        use flexkern_quant::{quantize, Format};
        let b = CpuBackend;
        let (n, k) = (5, 64);
        let val = |i: usize| ((i * 7919 % 997) as f32 / 498.0) - 1.0;
        let wb = quantize(Format::Q8_0, &(0..n * k).map(val).collect::<Vec<_>>(), n, k).unwrap();
        let w = b
            .prepare_weight(QuantMatrix::new(Format::Q8_0, n, k, &wb).unwrap())
            .unwrap();
        let x = buf(&(0..k).map(|i| val(i + 3)).collect::<Vec<_>>());
        let g = buf(&(0..k).map(|i| val(i + 11) + 1.5).collect::<Vec<_>>());
        let norm = crate::backend::tensor_ops::Norm {
            weight: &g,
            eps: 1e-5,
        };
        let (mut h, mut y) = (buf(&[f32::NAN; 64]), buf(&[f32::NAN; 5]));
        b.norm_matmul_many(norm, &[&w], &x, 1, &mut h, &mut [&mut y])
            .unwrap();
        let (mut h2, mut y2) = (buf(&[0.0; 64]), buf(&[0.0; 5]));
        b.rms_norm(&x, 1, &g, 1e-5, &mut h2).unwrap();
        b.matmul(&w, &h2, 1, &mut y2).unwrap();
        let bits = |v: &HostBuffer| -> Vec<u32> {
            to_host::<_, f32>(&b, v)
                .unwrap()
                .iter()
                .map(|f| f.to_bits())
                .collect()
        };
        assert_eq!(bits(&y), bits(&y2));
        let short = buf(&[1.0; 63]);
        let bad = crate::backend::tensor_ops::Norm {
            weight: &short,
            eps: 1e-5,
        };
        assert!(is_invalid(b.norm_matmul_many(
            bad,
            &[&w],
            &x,
            1,
            &mut h,
            &mut [&mut y]
        )));
        assert!(is_invalid(
            b.norm_swiglu(bad, &w, &w, &x, 1, &mut h, &mut y)
        ));

        // RoPE + KV write (+ Q rounded to f16): the separate ops' result; a slot past the pool
        // or a 16-bit Q of the wrong type or length refused before anything is stored.
        let (hq, hkv, hd) = (2, 1, 4);
        let rope = Rope::new(RopeStyle::Neox, 4, 10_000.0, 1.0);
        let freqs = buf(&rope.inv_freq);
        let cfg = CacheConfig::new(2, 4, hkv, hd);
        let pos = to_device(&b, &[3u32]).unwrap();
        let q0: Vec<f32> = (0..hq * hd).map(val).collect();
        let kv0: Vec<f32> = (0..hkv * hd).map(|i| val(i + 40)).collect();
        let mut stores = Vec::new();
        for (fused, slot, q16) in [
            (true, 5u32, Some((DType::F16, hq * hd))),
            (false, 5, Some((DType::F16, hq * hd))),
            (true, 8, None),
            (true, 5, Some((DType::F32, hq * hd))),
            (true, 5, Some((DType::BF16, hq * hd - 1))),
        ] {
            let mut store = PageStore::new(&b, &cfg).unwrap();
            let slots = to_device(&b, &[slot]).unwrap();
            let (mut q, mut kk, v) = (buf(&q0), buf(&kv0), buf(&kv0));
            let mut qh = q16.map(|(t, n)| b.alloc(t, n).unwrap());
            let r = if fused {
                b.rope_kv_write(
                    &mut q,
                    qh.as_mut(),
                    &mut kk,
                    &v,
                    RopeKv::whole((hq, hkv), hd, &pos, &rope, &freqs, store.pages(), &slots),
                )
            } else {
                b.rope(&mut q, hq, hd, Slice::all(&pos), &rope, &freqs)
                    .and_then(|_| b.rope(&mut kk, hkv, hd, Slice::all(&pos), &rope, &freqs))
                    .and_then(|_| b.kv_write(store.pages(), Slice::all(&slots), &kk, &v))
                    .and_then(|_| b.convert(&q, qh.as_mut().unwrap(), hq * hd))
            };
            let half = qh.and_then(|h| {
                let mut raw = vec![0u8; 2 * hq * hd];
                b.download(&h, 0, &mut raw).ok().map(|_| raw)
            });
            stores.push((r, bits(&q), to_host::<_, f32>(&b, &store.k).unwrap(), half));
        }
        assert!(stores[0].0.is_ok() && stores[1].0.is_ok());
        assert_eq!(stores[0].1, stores[1].1);
        assert_eq!(stores[0].2, stores[1].2);
        assert_eq!(stores[0].3, stores[1].3);
        assert!(stores[0].3.as_ref().is_some_and(|h| h.len() == 2 * hq * hd));
        for (i, arg) in [(2, "pages"), (3, "q16"), (4, "q16")] {
            let e = stores[i].0.as_ref().expect_err("refused");
            assert!(
                matches!(e, crate::Error::InvalidArgument { arg: a, .. } if *a == arg || arg == "pages"),
                "case {i}: {e}"
            );
            assert!(
                stores[i].2.iter().all(|&x| x == 0.0),
                "case {i}: nothing stored"
            );
        }
        assert_eq!(b.largest(&x, k, 3).unwrap(), None);

        // Q, K, V, RoPE and the append as one call: the parts' result, and their typed errors
        // (a short norm, a slot past the pool) with nothing stored.
        let (hq, hd) = (2, 4);
        let qkv_bytes = |rows: usize, seed: usize| {
            let v: Vec<f32> = (0..rows * k).map(|i| val(i + seed)).collect();
            quantize(Format::Q8_0, &v, rows, k).unwrap()
        };
        let rows = [hq * hd, hkv * hd, hkv * hd];
        let qkv_b: Vec<_> = rows
            .iter()
            .zip(1..)
            .map(|(&r, s)| qkv_bytes(r, s))
            .collect();
        let qkv_w: Vec<_> = rows
            .iter()
            .zip(&qkv_b)
            .map(|(&r, bytes)| {
                b.prepare_weight(QuantMatrix::new(Format::Q8_0, r, k, bytes).unwrap())
                    .unwrap()
            })
            .collect();
        let (wq, wk, wv) = (&qkv_w[0], &qkv_w[1], &qkv_w[2]);
        let mut out = Vec::new();
        for (fused, slot, nw) in [
            (true, 5u32, &g),
            (false, 5, &g),
            (true, 8, &g),
            (true, 5, &short),
        ] {
            let mut store = PageStore::new(&b, &cfg).unwrap();
            let slots = to_device(&b, &[slot]).unwrap();
            let (mut q, mut kk, mut v, mut h) = (
                buf(&[0.0; 8]),
                buf(&[0.0; 4]),
                buf(&[0.0; 4]),
                buf(&[0.0; 64]),
            );
            let nm = crate::backend::tensor_ops::Norm {
                weight: nw,
                eps: 1e-5,
            };
            let r = if fused {
                b.norm_qkv_rope_kv_write(
                    nm,
                    [wq, wk, wv],
                    &x,
                    1,
                    &mut h,
                    (&mut q, &mut kk, &mut v),
                    None,
                    RopeKv::whole((hq, hkv), hd, &pos, &rope, &freqs, store.pages(), &slots),
                )
            } else {
                b.norm_matmul_many(
                    nm,
                    &[wq, wk, wv],
                    &x,
                    1,
                    &mut h,
                    &mut [&mut q, &mut kk, &mut v],
                )
                .and_then(|_| {
                    b.rope_kv_write(
                        &mut q,
                        None,
                        &mut kk,
                        &v,
                        RopeKv::whole((hq, hkv), hd, &pos, &rope, &freqs, store.pages(), &slots),
                    )
                })
            };
            out.push((r, bits(&q), to_host::<_, f32>(&b, &store.k).unwrap()));
        }
        assert!(out[0].0.is_ok() && out[1].0.is_ok());
        assert_eq!((&out[0].1, &out[0].2), (&out[1].1, &out[1].2));
        assert!(out[0].2.iter().any(|&x| x != 0.0), "K stored");
        for i in [2, 3] {
            assert!(
                matches!(out[i].0, Err(crate::Error::InvalidArgument { .. })),
                "case {i}"
            );
            assert!(
                out[i].2.iter().all(|&x| x == 0.0),
                "case {i}: nothing stored"
            );
        }
    }
}
