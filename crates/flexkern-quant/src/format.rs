//! The contract every block format implements, and the format catalogue.
//!
//! A block format (ggml's "type traits") supplies block decode and block dot; the generic
//! GEMV driver (`crate::gemv`) supplies threading and tiling. Block structs are `#[repr(C)]`,
//! `Pod`, and byte-identical to ggml's, so a GGUF tensor is a `&[Block]` without conversion.

use crate::error::QuantError;

/// Every weight format flexkern reads. Discriminants are ggml's `ggml_type` ids where one exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
    /// MLX affine quantization: packed u32 words plus separate scale and bias arrays.
    MlxAffine { bits: u8, group_size: u16 },
}

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

    /// Sum over blocks of dot(w, a) where both cover the same number of elements
    /// (`w.len() * ELEMS == a.len() * Dot::ELEMS`). Chooses a SIMD path at run time.
    fn vec_dot(w: &[Self], a: &[Self::Dot]) -> f32;
}
