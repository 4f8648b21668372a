//! The backend interface for the non-attention kernels of a transformer forward pass:
//! quantized matrix products, fused SwiGLU, embedding, RMSNorm, RoPE and elementwise adds.
//!
//! Activations are row-major f32 `[rows, width]` slices. A model written against
//! `B: Backend + TensorOps` never calls a CPU function directly, so a device backend plugs in
//! by implementing both traits.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freq_factors_divide_frequencies_and_bad_ones_are_typed_errors() {
        let r = Rope::new(RopeStyle::Neox, 8, 10_000.0, 1.0);
        let f = r.clone().with_freq_factors(&[1.0, 2.0, 4.0, 8.0]).unwrap();
        for i in 0..4 {
            assert_eq!(f.inv_freq[i], r.inv_freq[i] / (1 << i) as f32);
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
