//! What the GEMV driver runs: a weight matrix joined with its prepared activation rows
//! (`Rows`), and activation rows quantized to a format's `Dot` type (`Acts`).

use crate::format::QuantBlock;
use std::sync::Arc;

/// A weight matrix joined with its prepared activation rows.
pub(crate) trait Rows: Sync {
    /// Activation rows prepared.
    fn m(&self) -> usize;
    /// For rows `r0 .. r0 + out.len() / m`: `out[(r - r0) * m + j] = dot(W[r], x_j)`.
    fn rows(&self, r0: usize, out: &mut [f32]);
    /// Weight bytes per row (for task sizing).
    fn row_bytes(&self) -> usize;
}

/// Activation rows quantized to a format's `Dot` type, shareable by several matrices.
pub(crate) type Acts<B> = Arc<Vec<Vec<<B as QuantBlock>::Dot>>>;

/// `x` is `[m, k]` f32; `k` must be a multiple of `B::Dot::ELEMS`.
pub(crate) fn quantize_acts<B: QuantBlock>(x: &[f32], k: usize, m: usize) -> Acts<B> {
    let nb_dot = k / <B::Dot as QuantBlock>::ELEMS;
    let acts = (0..m)
        .map(|j| {
            let mut a = vec![<B::Dot as bytemuck::Zeroable>::zeroed(); nb_dot];
            <B::Dot as QuantBlock>::quantize_activation(&x[j * k..(j + 1) * k], &mut a);
            a
        })
        .collect();
    Arc::new(acts)
}
