//! Host memory as a backend buffer: what the CPU backend allocates, and what its kernels read
//! through typed views. Large buffers sit on transparent huge pages (decode streams them).

use super::{check_range, elements_of, Buffer};
use crate::dtype::DType;
use crate::error::{invalid, Error, Result};
use crate::kv_cache::pool::PageBuf;
use crate::tensor::HostData;
use half::{bf16, f16};

/// Typed storage of a host buffer. fp8 codes are `U8` storage under an fp8 dtype tag.
#[derive(Clone, Debug, PartialEq)]
pub enum HostStore {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

/// A buffer of the CPU backend.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBuffer {
    dtype: DType,
    store: HostStore,
}

fn zeroed<T: bytemuck::Zeroable>(n: usize, dtype: DType) -> Result<Vec<T>> {
    crate::mem::try_huge_zeroed(n).map_err(|bytes| Error::OutOfMemory {
        what: format!("{n} {} elements", dtype.name()),
        bytes,
    })
}

macro_rules! each_store {
    ($s:expr, $v:ident => $e:expr) => {
        match $s {
            HostStore::F32($v) => $e,
            HostStore::F16($v) => $e,
            HostStore::BF16($v) => $e,
            HostStore::I8($v) => $e,
            HostStore::U8($v) => $e,
            HostStore::U32($v) => $e,
            HostStore::U64($v) => $e,
        }
    };
}

impl HostBuffer {
    /// `len` zeros of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> Result<HostBuffer> {
        let store = match dtype {
            DType::F32 => HostStore::F32(zeroed(len, dtype)?),
            DType::F16 => HostStore::F16(zeroed(len, dtype)?),
            DType::BF16 => HostStore::BF16(zeroed(len, dtype)?),
            DType::I8 => HostStore::I8(zeroed(len, dtype)?),
            DType::U8 | DType::Fp8E4M3 | DType::Fp8E5M2 => HostStore::U8(zeroed(len, dtype)?),
            DType::U32 => HostStore::U32(zeroed(len, dtype)?),
            DType::U64 => HostStore::U64(zeroed(len, dtype)?),
        };
        Ok(HostBuffer { dtype, store })
    }

    /// Takes `data` as a buffer of its own dtype (no copy).
    pub fn from_store(store: HostStore) -> HostBuffer {
        let dtype = match &store {
            HostStore::F32(_) => DType::F32,
            HostStore::F16(_) => DType::F16,
            HostStore::BF16(_) => DType::BF16,
            HostStore::I8(_) => DType::I8,
            HostStore::U8(_) => DType::U8,
            HostStore::U32(_) => DType::U32,
            HostStore::U64(_) => DType::U64,
        };
        HostBuffer { dtype, store }
    }

    pub fn store(&self) -> &HostStore {
        &self.store
    }

    pub(crate) fn store_mut(&mut self) -> &mut HostStore {
        &mut self.store
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        each_store!(&self.store, v => bytemuck::cast_slice(v))
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        each_store!(&mut self.store, v => bytemuck::cast_slice_mut(v))
    }

    /// The data as a float view (Q, K, V operands).
    pub fn host_data(&self, arg: &'static str) -> Result<HostData<'_>> {
        Ok(match &self.store {
            HostStore::F32(v) => HostData::F32(v),
            HostStore::F16(v) => HostData::F16(v),
            HostStore::BF16(v) => HostData::BF16(v),
            _ => return Err(self.wrong(arg, "f32, f16 or bf16")),
        })
    }

    /// The data as page storage of its KV dtype.
    pub fn page_buf(&self, arg: &'static str) -> Result<PageBuf<'_>> {
        Ok(match (&self.store, self.dtype) {
            (HostStore::F32(v), _) => PageBuf::F32(v),
            (HostStore::F16(v), _) => PageBuf::F16(v),
            (HostStore::BF16(v), _) => PageBuf::BF16(v),
            (HostStore::I8(v), _) => PageBuf::I8(v),
            (HostStore::U8(v), DType::Fp8E4M3) => PageBuf::Fp8E4M3(v),
            (HostStore::U8(v), DType::Fp8E5M2) => PageBuf::Fp8E5M2(v),
            _ => return Err(self.wrong(arg, "a KV dtype")),
        })
    }

    pub fn f32(&self, arg: &'static str) -> Result<&[f32]> {
        match &self.store {
            HostStore::F32(v) => Ok(v),
            _ => Err(self.wrong(arg, "f32")),
        }
    }

    pub fn f32_mut(&mut self, arg: &'static str) -> Result<&mut [f32]> {
        match &mut self.store {
            HostStore::F32(v) => Ok(v),
            _ => Err(invalid(
                arg,
                format!("expected f32, got {}", self.dtype.name()),
            )),
        }
    }

    pub fn u32(&self, arg: &'static str) -> Result<&[u32]> {
        match &self.store {
            HostStore::U32(v) => Ok(v),
            _ => Err(self.wrong(arg, "u32")),
        }
    }

    fn wrong(&self, arg: &'static str, want: &str) -> Error {
        invalid(
            arg,
            format!("expected a {want} buffer, got {}", self.dtype.name()),
        )
    }

    pub(crate) fn upload(&mut self, at: usize, src: &[u8]) -> Result<()> {
        let n = elements_of("src", src.len(), self.dtype)?;
        check_range("dst", at, n, self.len())?;
        let sz = self.dtype.size();
        self.bytes_mut()[at * sz..(at + n) * sz].copy_from_slice(src);
        Ok(())
    }

    pub(crate) fn download(&self, at: usize, dst: &mut [u8]) -> Result<()> {
        let n = elements_of("dst", dst.len(), self.dtype)?;
        check_range("src", at, n, self.len())?;
        let sz = self.dtype.size();
        dst.copy_from_slice(&self.bytes()[at * sz..(at + n) * sz]);
        Ok(())
    }

    pub(crate) fn copy_from(
        &mut self,
        src: &HostBuffer,
        src_at: usize,
        dst_at: usize,
        len: usize,
    ) -> Result<()> {
        if src.dtype.size() != self.dtype.size() {
            return Err(invalid(
                "dst",
                format!("copy from {} into {}", src.dtype.name(), self.dtype.name()),
            ));
        }
        check_range("src", src_at, len, src.len())?;
        check_range("dst", dst_at, len, self.len())?;
        let sz = self.dtype.size();
        self.bytes_mut()[dst_at * sz..(dst_at + len) * sz]
            .copy_from_slice(&src.bytes()[src_at * sz..(src_at + len) * sz]);
        Ok(())
    }

    pub(crate) fn copy_within(&mut self, src_at: usize, dst_at: usize, len: usize) -> Result<()> {
        check_range("src", src_at, len, self.len())?;
        check_range("dst", dst_at, len, self.len())?;
        let sz = self.dtype.size();
        self.bytes_mut()
            .copy_within(src_at * sz..(src_at + len) * sz, dst_at * sz);
        Ok(())
    }
}

impl Buffer for HostBuffer {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn len(&self) -> usize {
        each_store!(&self.store, v => v.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_download_and_copies_are_checked() {
        let mut b = HostBuffer::zeros(DType::U32, 6).unwrap();
        b.upload(2, bytemuck::cast_slice(&[7u32, 8, 9])).unwrap();
        assert_eq!(b.u32("b").unwrap(), &[0, 0, 7, 8, 9, 0]);
        assert!(b.upload(5, bytemuck::cast_slice(&[1u32, 2])).is_err());
        assert!(b.upload(0, &[1u8, 2, 3]).is_err(), "a partial element");
        b.copy_within(2, 0, 3).unwrap();
        let mut out = [0u32; 3];
        b.download(0, bytemuck::cast_slice_mut(&mut out)).unwrap();
        assert_eq!(out, [7, 8, 9]);
        assert!(b.copy_within(4, 0, 3).is_err());
        let mut f = HostBuffer::zeros(DType::F32, 2).unwrap();
        assert!(f.copy_from(&b, 0, 0, 2).is_ok(), "same element size");
        let h = HostBuffer::zeros(DType::F16, 2).unwrap();
        assert!(f.copy_from(&h, 0, 0, 1).is_err());
        assert!(f.u32("f").is_err() && f.page_buf("f").is_ok());
        let e4 = HostBuffer::zeros(DType::Fp8E4M3, 4).unwrap();
        assert!(matches!(e4.page_buf("k").unwrap(), PageBuf::Fp8E4M3(_)));
        assert!(e4.host_data("q").is_err());
    }

    #[test]
    fn huge_requests_are_typed_errors() {
        let e = HostBuffer::zeros(DType::F32, usize::MAX / 2).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    }
}
