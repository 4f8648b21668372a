//! The format catalogue's names: every weight format flexkern reads, as plain data (the
//! fallible constructors and sizes are in `format`, the block contract in `format::block`).

/// Element type of MLX's separate scale and bias arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MlxScale {
    F16,
    BF16,
}

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
    /// IQ4_NL: 32 weights, f16 scale, 4-bit codes into a 16-value non-linear table.
    IQ4NL,
    /// IQ4_XS: 256 weights, f16 super-scale, 6-bit sub-block scales, IQ4_NL's table.
    IQ4XS,
    /// MXFP4: 32 e2m1 weights with an e8m0 (power of two) shared scale.
    MXFP4,
    /// MLX affine quantization: packed u32 words plus separate scale and bias arrays.
    /// `scales` is the element type of both the scale and the bias arrays.
    MlxAffine {
        bits: u8,
        group_size: u16,
        scales: MlxScale,
    },
}
