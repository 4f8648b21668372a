//! The contract every block format implements (ggml's "type traits").

use super::kind::Format;

/// A ggml block format. `ELEMS` weights are stored in one `Self` value of `size_of::<Self>()` bytes.
///
/// `Dot` is the activation block type the integer dot product runs against
/// (ggml's `vec_dot_type`: Q8_0, Q8_1 or Q8_K).
pub trait QuantBlock: bytemuck::Pod + Send + Sync + 'static {
    const FORMAT: Format;
    /// Weights per block (ggml's QK).
    const ELEMS: usize;
    /// Activation block type for `vec_dot`.
    type Dot: QuantBlock;

    /// ggml's `quantize_row_<t>_ref`: `src.len() == dst.len() * ELEMS`. Non-finite inputs are
    /// rejected by the caller (`crate::quantize`) before this runs.
    fn quantize_ref(src: &[f32], dst: &mut [Self]);

    /// `dst.len() == src.len() * ELEMS`.
    fn dequantize(src: &[Self], dst: &mut [f32]);

    /// Quantizes an activation row for `vec_dot` (used when `Self` is another format's `Dot`).
    /// The default is `quantize_ref`; Q8_0 and Q8_1 follow ggml's x86 SIMD quantizer instead,
    /// the one llama.cpp runs on activations (see `legacy`).
    fn quantize_activation(src: &[f32], dst: &mut [Self]) {
        Self::quantize_ref(src, dst)
    }

    /// Sum over blocks of dot(w, a) where both cover the same number of elements
    /// (`w.len() * ELEMS == a.len() * Dot::ELEMS`). Chooses a SIMD path at run time.
    fn vec_dot(w: &[Self], a: &[Self::Dot]) -> f32;

    /// `out[i] = vec_dot(row i, a)` for `out.len()` consecutive rows of `w`, each
    /// `w.len() / out.len()` blocks. Formats override it to share each activation block's loads
    /// and scale across several weight rows (Akunu's and ggml's multi-row GEMV).
    fn vec_dot_rows(w: &[Self], a: &[Self::Dot], out: &mut [f32]) {
        if out.is_empty() {
            return;
        }
        let nb = w.len() / out.len();
        for (i, o) in out.iter_mut().enumerate() {
            *o = Self::vec_dot(&w[i * nb..(i + 1) * nb], a);
        }
    }

    /// `out[i * a.len() + j] = vec_dot(row i, a[j])` for the `out.len() / a.len()` consecutive
    /// rows of `w` and every activation row `a[j]`: the batched GEMV. Formats override it to
    /// decode each weight block once for several activation rows; each output must be bit for
    /// bit what `vec_dot_rows` gives that activation row alone.
    fn vec_dot_rows_batch(w: &[Self], a: &[&[Self::Dot]], out: &mut [f32]) {
        let m = a.len();
        if m == 0 || out.is_empty() {
            return;
        }
        let mut tmp = vec![0.0f32; out.len() / m];
        for (j, a) in a.iter().enumerate() {
            Self::vec_dot_rows(w, a, &mut tmp);
            for (i, &v) in tmp.iter().enumerate() {
                out[i * m + j] = v;
            }
        }
    }
}
