//! ggml tensor types (block size, bytes per block) and tensor descriptors.

use super::header::Cursor;
use crate::error::{GgufError, Result};

macro_rules! ggml_types {
    ($($name:ident = $id:literal, $blck:literal, $size:literal;)*) => {
        /// ggml tensor element types, with the ids GGUF stores.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        pub enum GgmlType { $($name = $id,)* }

        impl GgmlType {
            /// The type with this GGUF id; ids of removed or unknown types give `None`.
            pub fn from_id(id: u32) -> Option<Self> {
                match id { $($id => Some(GgmlType::$name),)* _ => None }
            }
            /// Elements per block.
            pub fn block_size(self) -> u64 {
                match self { $(GgmlType::$name => $blck,)* }
            }
            /// Bytes per block.
            pub fn type_size(self) -> u64 {
                match self { $(GgmlType::$name => $size,)* }
            }
            pub fn name(self) -> &'static str {
                match self { $(GgmlType::$name => stringify!($name),)* }
            }
        }
    };
}

// Sizes from ggml's block structs (d/dmin are f16 unless noted).
ggml_types! {
    F32 = 0, 1, 4;
    F16 = 1, 1, 2;
    Q4_0 = 2, 32, 18;
    Q4_1 = 3, 32, 20;
    Q5_0 = 6, 32, 22;
    Q5_1 = 7, 32, 24;
    Q8_0 = 8, 32, 34;
    Q8_1 = 9, 32, 36;
    Q2_K = 10, 256, 84;
    Q3_K = 11, 256, 110;
    Q4_K = 12, 256, 144;
    Q5_K = 13, 256, 176;
    Q6_K = 14, 256, 210;
    Q8_K = 15, 256, 292; // f32 d + 256 qs + 16 i16 bsums
    IQ2_XXS = 16, 256, 66;
    IQ2_XS = 17, 256, 74;
    IQ3_XXS = 18, 256, 98;
    IQ1_S = 19, 256, 50;
    IQ4_NL = 20, 32, 18;
    IQ3_S = 21, 256, 110;
    IQ2_S = 22, 256, 82;
    IQ4_XS = 23, 256, 136;
    I8 = 24, 1, 1;
    I16 = 25, 1, 2;
    I32 = 26, 1, 4;
    I64 = 27, 1, 8;
    F64 = 28, 1, 8;
    IQ1_M = 29, 256, 56;
    BF16 = 30, 1, 2;
    TQ1_0 = 34, 256, 54;
    TQ2_0 = 35, 256, 66;
    MXFP4 = 39, 32, 17;
}

impl GgmlType {
    /// Bytes of a tensor with these dims (ne[0] fastest); `None` when ne[0] is not a whole
    /// number of blocks or the size overflows.
    pub fn tensor_bytes(self, dims: &[u64]) -> Option<u64> {
        let (&ne0, rest) = dims.split_first()?;
        if ne0 % self.block_size() != 0 {
            return None;
        }
        let row = (ne0 / self.block_size()).checked_mul(self.type_size())?;
        rest.iter().try_fold(row, |acc, &d| acc.checked_mul(d))
    }
}

/// Most dimensions a ggml tensor has.
pub const MAX_DIMS: usize = 4;

/// One tensor's descriptor. `offset` is relative to the start of the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// GGUF order: dims[0] is the fastest-varying (ggml ne[0]).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    pub offset: u64,
    pub size_bytes: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        // Already proven not to overflow when the size was computed.
        self.dims.iter().product()
    }
}

/// Reads one descriptor and checks its shape and type; placement is checked later.
pub(crate) fn read_tensor_info(c: &mut Cursor<'_>) -> Result<TensorInfo> {
    let name = c.string("tensor name")?;
    let bad = |reason: String| GgufError::BadTensor {
        tensor: name.clone(),
        reason,
    };
    let n_dims = c.u32("tensor n_dims")?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        return Err(bad(format!("n_dims {n_dims} not in 1..={MAX_DIMS}")));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        let d = c.u64("tensor dims")?;
        // ggml stores ne as i64; zero-sized tensors hold no weights.
        if d == 0 || d > i64::MAX as u64 {
            return Err(bad(format!("dimension {d} out of range")));
        }
        dims.push(d);
    }
    let id = c.u32("tensor type")?;
    let ggml_type = GgmlType::from_id(id).ok_or_else(|| GgufError::UnknownTensorType {
        tensor: name.clone(),
        id,
    })?;
    let offset = c.u64("tensor offset")?;
    if dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .is_none()
    {
        return Err(bad("element count overflows".into()));
    }
    let size_bytes = ggml_type.tensor_bytes(&dims).ok_or_else(|| {
        bad(format!(
            "dims {dims:?} not a whole number of {} blocks of {} or size overflows",
            ggml_type.name(),
            ggml_type.block_size()
        ))
    })?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        size_bytes,
    })
}
