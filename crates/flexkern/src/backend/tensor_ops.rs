//! The backend interface for the non-attention kernels of a transformer forward pass:
//! quantized matrix products, fused SwiGLU, embedding, RMSNorm, RoPE and elementwise adds.
//!
//! Activations are row-major f32 `[rows, width]` slices. A model written against
//! `B: Backend + TensorOps` never calls a CPU function directly, so a device backend plugs in
//! by implementing both traits.

use crate::error::Result;
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
        }
    }
}

/// Head geometry of one causal GQA attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnShape {
    pub q_heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

/// Kernels a transformer forward pass needs besides attention.
pub trait TensorOps: Sync {
    /// `y[m, n] = x[m, k] · Wᵀ` for `w` of shape `[n, k]`.
    fn matmul(&self, w: &QuantMatrix, x: &[f32], m: usize, y: &mut [f32]) -> Result<()>;

    /// `ys[i] = x · ws[i]ᵀ` for matrices sharing `k` (Q, K, V). Backends fuse them into one
    /// launch; the default runs them one by one.
    fn matmul_many(
        &self,
        ws: &[&QuantMatrix],
        x: &[f32],
        m: usize,
        ys: &mut [&mut [f32]],
    ) -> Result<()> {
        if ws.len() != ys.len() {
            return Err(crate::error::invalid(
                "ys",
                format!("{} outputs for {} matrices", ys.len(), ws.len()),
            ));
        }
        for (w, y) in ws.iter().zip(ys.iter_mut()) {
            self.matmul(w, x, m, y)?;
        }
        Ok(())
    }

    /// `out[m, n] = silu(x · gateᵀ) * (x · upᵀ)`, both matrices `[n, k]`, one pass.
    fn swiglu(
        &self,
        gate: &QuantMatrix,
        up: &QuantMatrix,
        x: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<()>;

    /// Rows `ids` of `table` (`[vocab, dim]`), dequantized into `out` (`[ids.len(), dim]`).
    fn embedding(&self, table: &QuantMatrix, ids: &[u32], out: &mut [f32]) -> Result<()>;

    /// Row-wise `out = x / sqrt(mean(x²) + eps) * weight`; rows have `weight.len()` elements.
    fn rms_norm(&self, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) -> Result<()>;

    /// Rotates `x` (`[positions.len(), heads, head_dim]`) in place; row `t` sits at
    /// `positions[t]`.
    fn rope(
        &self,
        x: &mut [f32],
        heads: usize,
        head_dim: usize,
        positions: &[usize],
        rope: &Rope,
    ) -> Result<()>;

    /// `acc += x`.
    fn add(&self, acc: &mut [f32], x: &[f32]) -> Result<()>;

    /// Adds `bias` to every row of `x` (rows of `bias.len()` elements).
    fn add_bias(&self, x: &mut [f32], bias: &[f32]) -> Result<()>;

    /// Causal GQA attention of the last `m` positions of one sequence: `q` is
    /// `[m, q_heads, head_dim]`, `k` and `v` are `[n, kv_heads, head_dim]` with `n >= m`
    /// (query `t` sits at position `n - m + t`), `out` is `[m, q_heads, head_dim]`.
    fn causal_attention(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        shape: AttnShape,
        out: &mut [f32],
    ) -> Result<()>;
}
