//! Borrowed, strided, dtype-tagged tensor views over host memory.
//!
//! Attention operands are rank 3 `[tokens, heads, dim]` (ragged batches through `cu_*_lens`) or
//! rank 4 `[batch, seq, heads, dim]` with arbitrary strides, so batch-major `[B, H, S, D]` storage
//! is passed by permuting strides, without a copy. Strides are in elements; the last dimension
//! must be contiguous (stride 1), as every peer kernel requires.

use crate::dtype::DType;
use crate::error::{invalid, Error, Result};
use half::{bf16, f16};

/// Host data of one of the activation dtypes.
#[derive(Clone, Copy, Debug)]
pub enum HostData<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
}

impl HostData<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            HostData::F32(_) => DType::F32,
            HostData::F16(_) => DType::F16,
            HostData::BF16(_) => DType::BF16,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(s) => s.len(),
            HostData::F16(s) => s.len(),
            HostData::BF16(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Element `i` widened to f32 (bounds are checked by the view's validation).
    #[inline(always)]
    pub fn get_f32(&self, i: usize) -> f32 {
        match self {
            HostData::F32(s) => s[i],
            HostData::F16(s) => s[i].to_f32(),
            HostData::BF16(s) => s[i].to_f32(),
        }
    }
    /// Widens `n` contiguous elements starting at `start` into `dst`.
    #[inline]
    pub fn read_f32(&self, start: usize, dst: &mut [f32]) {
        let n = dst.len();
        match self {
            HostData::F32(s) => dst.copy_from_slice(&s[start..start + n]),
            HostData::F16(s) => {
                for (d, x) in dst.iter_mut().zip(&s[start..start + n]) {
                    *d = x.to_f32();
                }
            }
            HostData::BF16(s) => {
                for (d, x) in dst.iter_mut().zip(&s[start..start + n]) {
                    *d = x.to_f32();
                }
            }
        }
    }
}

impl<'a> From<&'a [f32]> for HostData<'a> {
    fn from(s: &'a [f32]) -> Self {
        HostData::F32(s)
    }
}
impl<'a> From<&'a [f16]> for HostData<'a> {
    fn from(s: &'a [f16]) -> Self {
        HostData::F16(s)
    }
}
impl<'a> From<&'a [bf16]> for HostData<'a> {
    fn from(s: &'a [bf16]) -> Self {
        HostData::BF16(s)
    }
}

/// A strided view: `shape` and `strides` (elements) of rank 3 or 4, last stride 1.
#[derive(Clone, Debug)]
pub struct TensorView<'a> {
    pub data: HostData<'a>,
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
}

impl<'a> TensorView<'a> {
    /// A contiguous (row-major) view.
    pub fn contiguous(data: impl Into<HostData<'a>>, shape: &[usize]) -> Self {
        let mut strides = vec![1usize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
        }
        TensorView {
            data: data.into(),
            shape: shape.to_vec(),
            strides,
        }
    }

    /// A view with explicit strides.
    pub fn strided(data: impl Into<HostData<'a>>, shape: &[usize], strides: &[usize]) -> Self {
        TensorView {
            data: data.into(),
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        }
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Checks rank, unit last stride, and that the largest reachable offset lies inside the data
    /// (64-bit checked arithmetic).
    pub fn validate(&self, arg: &'static str) -> Result<()> {
        if self.shape.len() != self.strides.len() {
            return Err(invalid(
                arg,
                format!(
                    "{} dims but {} strides",
                    self.shape.len(),
                    self.strides.len()
                ),
            ));
        }
        if self.shape.len() != 3 && self.shape.len() != 4 {
            return Err(invalid(
                arg,
                format!(
                    "rank {} (expected 3: [tokens, heads, dim] or 4: [batch, seq, heads, dim])",
                    self.shape.len()
                ),
            ));
        }
        if *self.strides.last().unwrap() != 1 && *self.shape.last().unwrap() > 1 {
            return Err(invalid(arg, "the last (head) dimension must have stride 1"));
        }
        if self.shape.contains(&0) {
            return Ok(());
        }
        let mut max = 0u64;
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (d as u64 - 1)
                .checked_mul(s as u64)
                .ok_or_else(|| invalid(arg, "offset overflows 64 bits"))?;
            max = max
                .checked_add(reach)
                .ok_or_else(|| invalid(arg, "offset overflows 64 bits"))?;
        }
        if max >= self.data.len() as u64 {
            return Err(Error::InvalidArgument {
                arg,
                msg: format!(
                    "shape {:?} with strides {:?} reaches element {max} but the data holds {}",
                    self.shape,
                    self.strides,
                    self.data.len()
                ),
            });
        }
        Ok(())
    }
}
