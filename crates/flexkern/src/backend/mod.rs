//! The backend interface: a device owns its memory (buffers), runs planned attention over
//! buffers, writes KV pages, and (through `TensorOps`) runs the rest of a forward pass.
//!
//! Calls are asynchronous in meaning: they are ordered on the backend's stream, and only
//! `download` and `synchronize` wait. The CPU backend runs everything at once. Host data
//! reaches a device only through `upload`, so a test backend that counts uploads and downloads
//! proves how much host traffic a caller makes (`tests/host_transfers.rs` in flexkern-model).

pub mod counting;
pub mod cpu;
pub mod host;
pub mod tensor_ops;

use crate::attention::plan::Plan;
use crate::attention::problem::PagedLayout;
use crate::attention::problem::Problem;
use crate::device::Caps;
use crate::dtype::{DType, Scalar};
use crate::error::{invalid, Result};

/// Memory a backend owns: `len` elements of `dtype`.
pub trait Buffer: Send + Sync {
    fn dtype(&self) -> DType;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Elements `start..start + len` of a buffer: index arrays packed into one uploaded buffer.
#[derive(Debug)]
pub struct Slice<'a, B> {
    pub buf: &'a B,
    pub start: usize,
    pub len: usize,
}

impl<B> Clone for Slice<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for Slice<'_, B> {}

impl<'a, B: Buffer> Slice<'a, B> {
    /// The whole buffer.
    pub fn all(buf: &'a B) -> Self {
        Slice {
            buf,
            start: 0,
            len: buf.len(),
        }
    }

    /// `len` elements from `start`, checked against the buffer and its dtype.
    pub fn new(
        arg: &'static str,
        buf: &'a B,
        start: usize,
        len: usize,
        dtype: DType,
    ) -> Result<Self> {
        if buf.dtype() != dtype {
            return Err(invalid(
                arg,
                format!(
                    "expected a {} buffer, got {}",
                    dtype.name(),
                    buf.dtype().name()
                ),
            ));
        }
        if start.checked_add(len).is_none_or(|end| end > buf.len()) {
            return Err(invalid(
                arg,
                format!("elements {start}..+{len} of a buffer of {}", buf.len()),
            ));
        }
        Ok(Slice { buf, start, len })
    }
}

/// K/V of an attention call.
#[derive(Debug)]
pub enum KvBufs<'a, B> {
    /// Laid out as the problem's `KvLayout::Strided` says.
    Strided { k: &'a B, v: &'a B },
    /// Pages `[num_pages, page_size, Hkv, D]`. Sequence `s` owns
    /// `page_indices[cu_pages[s]..cu_pages[s + 1]]`, whose first entry is logical page
    /// `first_page[s]` (pages before it were evicted by a window). All three are U32.
    Paged {
        k: &'a B,
        v: &'a B,
        cu_pages: Slice<'a, B>,
        first_page: Slice<'a, B>,
        page_indices: Slice<'a, B>,
    },
}

/// The K and V page buffers of one paged cache and their layout (`kv_cache::PageStore::pages`).
pub struct Pages<'a, B> {
    pub k: &'a mut B,
    pub v: &'a mut B,
    pub layout: &'a PagedLayout,
}

/// The buffers of one attention call: Q as the problem's `q` layout says, O `[tokens, Hq, Dv]`
/// f32, LSE `[tokens, Hq]` f32 (natural log).
pub struct AttnIo<'a, B> {
    pub q: &'a B,
    pub kv: KvBufs<'a, B>,
    pub out: &'a mut B,
    pub lse: Option<&'a mut B>,
}

/// A device that runs flexkern's kernels.
pub trait Backend: Send + Sync {
    type Buffer: Buffer;

    fn caps(&self) -> Caps;

    /// `len` zeroed elements of `dtype`; a typed error (never an abort) when memory runs out.
    fn alloc(&self, dtype: DType, len: usize) -> Result<Self::Buffer>;

    /// Copies `src` (the bytes of elements of `dst`'s dtype) into `dst` from element `at`.
    fn upload(&self, dst: &mut Self::Buffer, at: usize, src: &[u8]) -> Result<()>;

    /// Copies elements of `src` from `at` into `dst` (whole elements' bytes); waits for the
    /// work queued before it.
    fn download(&self, src: &Self::Buffer, at: usize, dst: &mut [u8]) -> Result<()>;

    /// Device-side copy of `len` elements between buffers of one dtype.
    fn copy(
        &self,
        src: &Self::Buffer,
        src_at: usize,
        dst: &mut Self::Buffer,
        dst_at: usize,
        len: usize,
    ) -> Result<()>;

    /// Device-side copy of `len` elements inside one buffer (ranges may overlap).
    fn copy_within(
        &self,
        buf: &mut Self::Buffer,
        src_at: usize,
        dst_at: usize,
        len: usize,
    ) -> Result<()>;

    /// Waits for every queued call.
    fn synchronize(&self) -> Result<()>;

    /// Runs a planned attention call. `p` and `plan` are host data (plain index arrays, built
    /// without touching the device); the buffers must match `p`'s layouts.
    fn attention(&self, p: &Problem, plan: &Plan, io: AttnIo<'_, Self::Buffer>) -> Result<()>;

    /// Writes `m` tokens' K and V rows (`[m, Hkv, D]` f32) into the page slots `slots` (U32,
    /// slot = page * page_size + offset), encoding to the store's dtype with its scales.
    fn kv_write(
        &self,
        pages: Pages<'_, Self::Buffer>,
        slots: Slice<'_, Self::Buffer>,
        k: &Self::Buffer,
        v: &Self::Buffer,
    ) -> Result<()>;
}

/// Checks that `len` elements from `at` lie inside a buffer of `have`.
pub fn check_range(arg: &'static str, at: usize, len: usize, have: usize) -> Result<()> {
    if at.checked_add(len).is_none_or(|end| end > have) {
        return Err(invalid(
            arg,
            format!("elements {at}..+{len} outside a buffer of {have}"),
        ));
    }
    Ok(())
}

/// Checks a byte count against whole elements of `dtype`.
pub fn elements_of(arg: &'static str, bytes: usize, dtype: DType) -> Result<usize> {
    if !bytes.is_multiple_of(dtype.size()) {
        return Err(invalid(
            arg,
            format!("{bytes} bytes are not whole {} elements", dtype.name()),
        ));
    }
    Ok(bytes / dtype.size())
}

/// A new buffer holding `data` (one upload).
pub fn to_device<B: Backend + ?Sized, T: Scalar>(b: &B, data: &[T]) -> Result<B::Buffer> {
    to_device_as(b, T::DTYPE, data)
}

/// As `to_device`, tagging the buffer `dtype` (fp8 codes travel as u8).
pub fn to_device_as<B: Backend + ?Sized, T: Scalar>(
    b: &B,
    dtype: DType,
    data: &[T],
) -> Result<B::Buffer> {
    let mut buf = b.alloc(dtype, std::mem::size_of_val(data) / dtype.size())?;
    b.upload(&mut buf, 0, bytemuck::cast_slice(data))?;
    Ok(buf)
}

/// The whole buffer on the host (one download).
pub fn to_host<B: Backend + ?Sized, T: Scalar>(b: &B, buf: &B::Buffer) -> Result<Vec<T>> {
    if buf.dtype().size() != std::mem::size_of::<T>() {
        return Err(invalid(
            "buf",
            format!(
                "a {} buffer read as {}",
                buf.dtype().name(),
                T::DTYPE.name()
            ),
        ));
    }
    let mut out: Vec<T> = bytemuck::zeroed_vec(buf.len());
    b.download(buf, 0, bytemuck::cast_slice_mut(&mut out))?;
    Ok(out)
}
