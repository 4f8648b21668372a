//! The backend interface for the non-attention kernels of a transformer forward pass:
//! quantized matrix products, fused SwiGLU, embedding, RMSNorm, RoPE and elementwise adds.
//!
//! Activations are row-major f32 `[rows, width]` backend buffers (a buffer may hold more rows
//! than a call uses: each call names its row count). Weights go through `prepare_weight` once:
//! the CPU makes its interleaved copy there, a GPU uploads the file's layout. A model written
//! against `B: TensorOps` never calls a CPU function directly and never touches host memory
//! inside a step, so a device backend plugs in by implementing the traits.

use super::{AttnIo, Backend, Buffer, Pages, Slice};
use crate::attention::plan::Plan;
use crate::attention::problem::Problem;
use crate::error::{invalid, Result};
use flexkern_quant::QuantMatrix;

/// Which elements RoPE rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(x[2i], x[2i+1])` (GGUF llama / mistral: the converter permuted Q and K).
    Normal,
    /// Halves `(x[i], x[i + n_rot/2])` (GPT-NeoX, qwen2).
    Neox,
}

/// Rotary embedding parameters; the frequency table is computed once.
#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    pub style: RopeStyle,
    /// Rotated dimensions per head (the rest pass through).
    pub n_rot: usize,
    /// `freq_scale * base^(-2i / n_rot)` for `i < n_rot / 2`.
    pub inv_freq: Vec<f32>,
    /// Magnitude factor on the rotated pairs (`cos` and `sin` are scaled by it): 1 except
    /// under YaRN.
    pub mscale: f32,
}

/// YaRN context extension (ggml's `rope_yarn`): frequencies below the `beta_slow` correction
/// dimension are interpolated by `1 / factor`, those above `beta_fast` kept, a linear ramp
/// between, and the rotated pairs scaled by `attn_factor * (1 + 0.1 ln(factor))`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    pub factor: f32,
    pub orig_ctx: usize,
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
}

/// How a layer's new Q and K rotate and where its K and V go: `rope_kv_write`'s and
/// `norm_qkv_rope_kv_write`'s shared arguments. `heads`: (Q heads, KV heads); `positions` and
/// `slots`: one per token.
pub struct RopeKv<'a, B> {
    pub heads: (usize, usize),
    pub head_dim: usize,
    pub positions: Slice<'a, B>,
    pub rope: &'a Rope,
    pub inv_freq: &'a B,
    pub pages: Pages<'a, B>,
    pub slots: Slice<'a, B>,
}

impl<'a, B> RopeKv<'a, B> {
    /// Positions and slots as whole buffers (one element per token).
    pub fn whole(
        heads: (usize, usize),
        head_dim: usize,
        positions: &'a B,
        rope: &'a Rope,
        inv_freq: &'a B,
        pages: Pages<'a, B>,
        slots: &'a B,
    ) -> Self
    where
        B: Buffer,
    {
        RopeKv {
            heads,
            head_dim,
            positions: Slice::all(positions),
            rope,
            inv_freq,
            pages,
            slots: Slice::all(slots),
        }
    }
}

impl Rope {
    /// `freq_scale` is 1 / (linear scaling factor).
    pub fn new(style: RopeStyle, n_rot: usize, freq_base: f32, freq_scale: f32) -> Rope {
        let inv_freq = (0..n_rot / 2)
            .map(|i| {
                let f = (freq_base as f64).powf(-2.0 * i as f64 / n_rot as f64);
                (f * freq_scale as f64) as f32
            })
            .collect();
        Rope {
            style,
            n_rot,
            inv_freq,
            mscale: 1.0,
        }
    }

    /// YaRN frequencies over base `freq_base` (replaces any linear scale given to `new`).
    pub fn yarn(style: RopeStyle, n_rot: usize, freq_base: f32, y: &Yarn) -> Result<Rope> {
        if !(y.factor.is_finite() && y.factor >= 1.0) {
            return Err(invalid("yarn", format!("factor {} must be >= 1", y.factor)));
        }
        if y.orig_ctx == 0 || !(y.beta_fast > 0.0 && y.beta_slow > 0.0) {
            return Err(invalid(
                "yarn",
                "original context and beta_fast / beta_slow must be positive",
            ));
        }
        // ggml_rope_yarn_corr_dims: the dimension whose wavelength fits `beta` rotations
        // into the original context.
        let corr = |beta: f32| {
            n_rot as f64 * (y.orig_ctx as f64 / (beta as f64 * 2.0 * std::f64::consts::PI)).ln()
                / (2.0 * (freq_base as f64).ln())
        };
        let low = corr(y.beta_fast).floor().max(0.0);
        let high = corr(y.beta_slow).ceil().min(n_rot as f64 - 1.0);
        let fs = 1.0 / y.factor as f64;
        let inv_freq = (0..n_rot / 2)
            .map(|i| {
                let extrap = (freq_base as f64).powf(-2.0 * i as f64 / n_rot as f64);
                let ramp = 1.0 - ((i as f64 - low) / (high - low).max(0.001)).clamp(0.0, 1.0);
                let mix = ramp * y.ext_factor as f64;
                (extrap * (fs * (1.0 - mix) + mix)) as f32
            })
            .collect();
        let mut mscale = y.attn_factor;
        if y.ext_factor != 0.0 {
            mscale *= 1.0 + 0.1 * (1.0 / fs as f32).ln();
        }
        Ok(Rope {
            style,
            n_rot,
            inv_freq,
            mscale,
        })
    }

    /// Divides each frequency by its factor (Llama 3's `rope_freqs` tensor, as ggml's
    /// `rope_ext` applies it): `factors` has `n_rot / 2` positive finite entries.
    pub fn with_freq_factors(mut self, factors: &[f32]) -> Result<Rope> {
        if factors.len() != self.inv_freq.len() {
            return Err(invalid(
                "factors",
                format!(
                    "{} factors for {} frequencies",
                    factors.len(),
                    self.inv_freq.len()
                ),
            ));
        }
        if let Some(i) = factors.iter().position(|f| !(f.is_finite() && *f > 0.0)) {
            return Err(invalid("factors", format!("factor {i} is {}", factors[i])));
        }
        for (f, &d) in self.inv_freq.iter_mut().zip(factors) {
            *f /= d;
        }
        Ok(self)
    }
}

/// Kernels a transformer forward pass needs besides attention.
pub trait TensorOps: Backend {
    /// A weight matrix `[n, k]` prepared for this backend; it may borrow the file's bytes.
    type Weight<'w>: Send + Sync
    where
        Self: 'w;

    /// Makes `w` ready for this backend's GEMV (at load time, once).
    fn prepare_weight<'w>(&self, w: QuantMatrix<'w>) -> Result<Self::Weight<'w>>;

    /// `(n, k)` of a prepared weight.
    fn weight_shape(w: &Self::Weight<'_>) -> (usize, usize);

    /// `y[m, n] = x[m, k] · Wᵀ` on the first `m` rows of `x` and `y`.
    fn matmul(
        &self,
        w: &Self::Weight<'_>,
        x: &Self::Buffer,
        m: usize,
        y: &mut Self::Buffer,
    ) -> Result<()>;

    /// `acc[m, n] += x[m, k] · Wᵀ` (a residual connection), `scratch` holding at least
    /// `m * n` elements the call may overwrite. By default `matmul` into `scratch`, then `add`;
    /// a backend may fuse the two (the CUDA decode GEMV adds in its epilogue, one launch).
    fn matmul_add(
        &self,
        w: &Self::Weight<'_>,
        x: &Self::Buffer,
        m: usize,
        acc: &mut Self::Buffer,
        scratch: &mut Self::Buffer,
    ) -> Result<()> {
        self.matmul(w, x, m, scratch)?;
        self.add(acc, scratch, m * Self::weight_shape(w).0)
    }

    /// `ys[i] = rms_norm(x) · ws[i]ᵀ` (the attention block's input norm and Q, K, V), with
    /// `h` (at least `m * k` elements) free for the normalized rows. By default `rms_norm` into
    /// `h`, then `matmul_many`; a backend may normalize inside the product (the CUDA decode
    /// GEMV: one launch fewer).
    fn norm_matmul_many(
        &self,
        norm: Norm<'_, Self::Buffer>,
        ws: &[&Self::Weight<'_>],
        x: &Self::Buffer,
        m: usize,
        h: &mut Self::Buffer,
        ys: &mut [&mut Self::Buffer],
    ) -> Result<()> {
        for w in ws {
            norm.check(Self::weight_shape(w).1)?;
        }
        self.rms_norm(x, m, norm.weight, norm.eps, h)?;
        self.matmul_many(ws, h, m, ys)
    }

    /// `out = swiglu(rms_norm(x))` (the feed-forward block's norm, gate and up), `h` as in
    /// `norm_matmul_many`.
    #[allow(clippy::too_many_arguments)]
    fn norm_swiglu(
        &self,
        norm: Norm<'_, Self::Buffer>,
        gate: &Self::Weight<'_>,
        up: &Self::Weight<'_>,
        x: &Self::Buffer,
        m: usize,
        h: &mut Self::Buffer,
        out: &mut Self::Buffer,
    ) -> Result<()> {
        norm.check(Self::weight_shape(gate).1)?;
        self.rms_norm(x, m, norm.weight, norm.eps, h)?;
        self.swiglu(gate, up, h, m, out)
    }

    /// `ys[i] = x · ws[i]ᵀ` for matrices sharing `k` (Q, K, V): one scheduling round / launch.
    fn matmul_many(
        &self,
        ws: &[&Self::Weight<'_>],
        x: &Self::Buffer,
        m: usize,
        ys: &mut [&mut Self::Buffer],
    ) -> Result<()>;

    /// `out[m, n] = silu(x · gateᵀ) * (x · upᵀ)`, both matrices `[n, k]`, one pass.
    fn swiglu(
        &self,
        gate: &Self::Weight<'_>,
        up: &Self::Weight<'_>,
        x: &Self::Buffer,
        m: usize,
        out: &mut Self::Buffer,
    ) -> Result<()>;

    /// Rows `ids` (U32) of `table` (`[vocab, dim]`), dequantized into the first rows of `out`.
    fn embedding(
        &self,
        table: &Self::Weight<'_>,
        ids: Slice<'_, Self::Buffer>,
        out: &mut Self::Buffer,
    ) -> Result<()>;

    /// Row-wise `out = x / sqrt(mean(x²) + eps) * weight` over `rows` rows of `weight.len()`.
    fn rms_norm(
        &self,
        x: &Self::Buffer,
        rows: usize,
        weight: &Self::Buffer,
        eps: f32,
        out: &mut Self::Buffer,
    ) -> Result<()>;

    /// Rotates the first `positions.len` rows of `x` (`[rows, heads, head_dim]`) in place; row
    /// `t` sits at position `positions[t]` (U32). `inv_freq` holds `rope.inv_freq` (f32).
    fn rope(
        &self,
        x: &mut Self::Buffer,
        heads: usize,
        head_dim: usize,
        positions: Slice<'_, Self::Buffer>,
        rope: &Rope,
        inv_freq: &Self::Buffer,
    ) -> Result<()>;

    /// RoPE on `q` (`heads.0` heads) and `k` (`heads.1`), as `rope` does to each, then K and
    /// V stored at `slots` of `pages` (`kv_write`), and the rotated Q rounded into `q16` (F16
    /// or BF16, as `convert` rounds) where given. By default those calls; a backend may fuse
    /// them (the CUDA decode step: one launch instead of five).
    fn rope_kv_write(
        &self,
        q: &mut Self::Buffer,
        q16: Option<&mut Self::Buffer>,
        k: &mut Self::Buffer,
        v: &Self::Buffer,
        at: RopeKv<'_, Self::Buffer>,
    ) -> Result<()> {
        let RopeKv {
            heads,
            head_dim,
            positions,
            rope,
            inv_freq,
            pages,
            slots,
        } = at;
        let nq = positions.len * heads.0 * head_dim;
        if let Some(h) = &q16 {
            check_q16(q, h, nq)?;
        }
        self.rope(q, heads.0, head_dim, positions, rope, inv_freq)?;
        self.rope(k, heads.1, head_dim, positions, rope, inv_freq)?;
        self.kv_write(pages, slots, k, v)?;
        match q16 {
            Some(h) => self.convert(q, h, nq),
            None => Ok(()),
        }
    }

    /// The attention block's Q, K and V without biases: `norm_matmul_many` into `q`, `k`, `v`,
    /// then `rope_kv_write` (its `q16` and `at`). By default those two calls; a backend
    /// may fuse them (the CUDA decode step rotates and appends in the projection's epilogue,
    /// one launch fewer a layer).
    #[allow(clippy::too_many_arguments)]
    fn norm_qkv_rope_kv_write(
        &self,
        norm: Norm<'_, Self::Buffer>,
        ws: [&Self::Weight<'_>; 3],
        x: &Self::Buffer,
        m: usize,
        h: &mut Self::Buffer,
        (q, k, v): (&mut Self::Buffer, &mut Self::Buffer, &mut Self::Buffer),
        q16: Option<&mut Self::Buffer>,
        at: RopeKv<'_, Self::Buffer>,
    ) -> Result<()> {
        self.norm_matmul_many(norm, &ws, x, m, h, &mut [&mut *q, &mut *k, &mut *v])?;
        self.rope_kv_write(q, q16, k, v, at)
    }

    /// `acc[..len] += x[..len]`.
    fn add(&self, acc: &mut Self::Buffer, x: &Self::Buffer, len: usize) -> Result<()>;

    /// Adds `bias` to each of the first `rows` rows of `x` (rows of `bias.len()` elements).
    fn add_bias(&self, x: &mut Self::Buffer, rows: usize, bias: &Self::Buffer) -> Result<()>;

    /// `out[..len] = x[..len]` rounded (to nearest, ties to even) from f32 to `out`'s dtype, F16
    /// or BF16: a GPU's prompt attention then runs on tensor cores. The default goes through
    /// the host; a device backend does it in place.
    fn convert(&self, x: &Self::Buffer, out: &mut Self::Buffer, len: usize) -> Result<()> {
        check_convert(x, out, len)?;
        let mut raw = vec![0u8; 4 * len];
        self.download(x, 0, &mut raw)?;
        let to = out.dtype();
        let bits: Vec<u16> = raw
            .chunks_exact(4)
            .map(|c| {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if to == crate::DType::F16 {
                    half::f16::from_f32(v).to_bits()
                } else {
                    half::bf16::from_f32(v).to_bits()
                }
            })
            .collect();
        self.upload(out, 0, bytemuck::cast_slice(&bits))
    }

    /// The `k` largest of `x[..n]` (f32; `k` 0: all) as `(index, value)`, largest first,
    /// equal values (-0 equal to +0) by lower index, found where `x` lives so that only they
    /// come back (sampling on the device). NaN in `x` is an error. `Ok(None)`: not found here
    /// (the default); the caller downloads `x`.
    fn largest(&self, x: &Self::Buffer, n: usize, k: usize) -> Result<Option<Vec<(u32, f32)>>> {
        let _ = (x, n, k);
        Ok(None)
    }

    /// Starts recording the ops this backend queues (until `record_end`) into a graph that
    /// `replay` runs again without the host's per-op work (CUDA graphs). Recording queues
    /// nothing: the recorded ops do not run. `Ok(false)`: this backend does not record (the
    /// default) and nothing changed.
    fn record_begin(&self) -> Result<bool> {
        Ok(false)
    }

    /// Ends the recording `record_begin` started: the graph's id. An op that failed or could
    /// not be recorded makes this an error (the graph is discarded; run eagerly instead).
    fn record_end(&self) -> Result<GraphId> {
        Err(invalid("record_end", "this backend does not record graphs"))
    }

    /// Runs graph `id` again with its attention calls re-planned for `attn`: the recorded
    /// calls all had the problem and buffers of `attn` but their K/V pools (the layers of one
    /// model step), and `attn` gives this step's lengths and page tables. Returns `Ok(false)`,
    /// having run nothing, when the graph cannot serve `attn` (record a new one).
    fn replay(
        &self,
        id: GraphId,
        attn: (&Problem, &Plan, AttnIo<'_, Self::Buffer>),
    ) -> Result<bool> {
        let _ = (id, attn);
        Ok(false)
    }

    /// Frees graph `id` (unknown ids are ignored).
    fn graph_free(&self, id: GraphId) {
        let _ = id;
    }
}

/// `convert`'s checks: f32 in, F16 or BF16 out, both holding `len` elements.
pub fn check_convert<B: Buffer>(x: &B, out: &B, len: usize) -> Result<()> {
    if x.dtype() != crate::DType::F32 || x.len() < len {
        return Err(invalid("x", format!("{len} f32 elements expected")));
    }
    if !matches!(out.dtype(), crate::DType::F16 | crate::DType::BF16) || out.len() < len {
        return Err(invalid(
            "out",
            format!(
                "{len} f16 or bf16 elements expected, got {} {}",
                out.len(),
                out.dtype().name()
            ),
        ));
    }
    Ok(())
}

/// `rope_kv_write`'s 16-bit copy of Q: `convert`'s rules, the error naming `q16`.
pub fn check_q16<B: Buffer>(q: &B, q16: &B, len: usize) -> Result<()> {
    check_convert(q, q16, len).map_err(|e| match e {
        crate::Error::InvalidArgument { arg: "out", msg } => invalid("q16", msg),
        e => e,
    })
}

/// An RMSNorm fused into a product: rows become `x / sqrt(mean(x²) + eps) * weight`, exactly
/// as `TensorOps::rms_norm` computes them.
pub struct Norm<'a, B> {
    pub weight: &'a B,
    pub eps: f32,
}

impl<B: super::Buffer> Norm<'_, B> {
    /// The weights must cover the product's `k` exactly: `rms_norm` takes the row length
    /// from them, so a shorter vector would normalize part of each row and leave the rest.
    pub fn check(&self, k: usize) -> Result<()> {
        if self.weight.len() != k {
            return Err(invalid(
                "norm",
                format!("{} weights for rows of {k}", self.weight.len()),
            ));
        }
        Ok(())
    }
}

// By hand: derived impls would ask `B: Copy`.
impl<B> Clone for Norm<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for Norm<'_, B> {}

/// A graph recorded by `TensorOps::record_end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphId(pub u64);

#[cfg(test)]
mod tests {
    use super::*;

    /// `convert` rounds to nearest even as `half` does (ties, subnormals, overflow to
    /// infinity, NaN stays NaN) and refuses wrong dtypes and short buffers.
    #[test]
    fn convert_rounds_as_half_and_checks_its_buffers() {
        use crate::backend::to_device;
        use crate::{CpuBackend, DType};
        let b = CpuBackend;
        let v: Vec<f32> = vec![
            1.0 + f32::EPSILON,
            1.000_488_3, // an f16 tie
            -65_520.0,   // rounds past f16's largest: -inf
            1e-7,        // an f16 subnormal
            f32::NAN,
            1.234_567_8,
            -0.0,
        ];
        let x = to_device(&b, &v).unwrap();
        for dt in [DType::F16, DType::BF16] {
            let mut out = b.alloc(dt, v.len()).unwrap();
            b.convert(&x, &mut out, v.len()).unwrap();
            let mut raw = vec![0u8; 2 * v.len()];
            b.download(&out, 0, &mut raw).unwrap();
            let got: &[u16] = bytemuck::cast_slice(&raw);
            for (g, &f) in got.iter().zip(&v) {
                let want = if dt == DType::F16 {
                    half::f16::from_f32(f).to_bits()
                } else {
                    half::bf16::from_f32(f).to_bits()
                };
                assert!(
                    *g == want || (f.is_nan() && *g & 0x7fff > 0x7c00),
                    "{f} -> {g:#x}"
                );
            }
        }
        let mut short = b.alloc(DType::F16, 2).unwrap();
        assert!(b.convert(&x, &mut short, v.len()).is_err());
        let mut f32_out = b.alloc(DType::F32, v.len()).unwrap();
        assert!(b.convert(&x, &mut f32_out, v.len()).is_err());
        let mut h = b.alloc(DType::F16, v.len()).unwrap();
        let hx = b.alloc(DType::F16, v.len()).unwrap();
        assert!(b.convert(&hx, &mut h, v.len()).is_err(), "f16 input");
    }

    #[test]
    fn freq_factors_and_yarn_and_their_bad_parameters() {
        let r = Rope::new(RopeStyle::Neox, 8, 10_000.0, 1.0);
        let f = r.clone().with_freq_factors(&[1.0, 2.0, 4.0, 8.0]).unwrap();
        for i in 0..4 {
            assert_eq!(f.inv_freq[i], r.inv_freq[i] / (1 << i) as f32);
        }
        let y = Yarn {
            factor: 4.0,
            orig_ctx: 4096,
            ext_factor: 1.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
        };
        let ok = Rope::yarn(RopeStyle::Neox, 128, 10_000.0, &y).unwrap();
        assert!((ok.mscale - (1.0 + 0.1 * 4f32.ln())).abs() < 1e-6);
        for bad in [
            Yarn { factor: 0.5, ..y },
            Yarn { orig_ctx: 0, ..y },
            Yarn {
                beta_slow: 0.0,
                ..y
            },
        ] {
            let e = Rope::yarn(RopeStyle::Neox, 128, 10_000.0, &bad).unwrap_err();
            assert!(e.to_string().contains("yarn"), "{e}");
        }
        for bad in [
            &[1.0, 2.0, 3.0][..],
            &[1.0, 0.0, 1.0, 1.0],
            &[1.0, f32::NAN, 1.0, 1.0],
        ] {
            let e = r.clone().with_freq_factors(bad).unwrap_err();
            assert!(e.to_string().contains("factors"), "{e}");
        }
    }
}
