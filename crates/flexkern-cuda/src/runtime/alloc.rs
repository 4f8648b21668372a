//! A caching device allocator: freed blocks go back to per-size-class free lists and are reused
//! in stream order (all work runs on the device's one stream, so a block freed after queued work
//! and handed to later work is ordered behind it). cuMemAlloc, which synchronizes the device,
//! runs only when a class's list is empty.

use super::Device;
use crate::error::{driver, Result};
use cudarc::driver::result;
use cudarc::driver::sys::CUdeviceptr;
use std::collections::HashMap;
use std::sync::Arc;

/// Size classes: powers of two from 256 B to 1 MiB, then multiples of 2 MiB (waste <= 50 %
/// small, <= 2 MiB large).
pub fn size_class(bytes: usize) -> usize {
    const MIB: usize = 1 << 20;
    if bytes <= MIB {
        bytes.max(256).next_power_of_two()
    } else {
        bytes.div_ceil(2 * MIB) * 2 * MIB
    }
}

#[derive(Default)]
pub(crate) struct Pool {
    free: HashMap<usize, Vec<CUdeviceptr>>,
    /// Bytes held by the pool (in use or free), for reports.
    pub held: usize,
    pub allocs: usize,
    pub reuses: usize,
}

impl Pool {
    pub(crate) fn release_all(&mut self) {
        for (_, list) in self.free.drain() {
            for p in list {
                // SAFETY: the pointer came from cuMemAlloc and nothing refers to it.
                unsafe {
                    let _ = result::free_sync(p);
                }
            }
        }
        self.held = 0;
    }
}

/// A device allocation of at least `bytes` bytes, returned to the pool on drop.
pub struct DeviceBuf {
    dev: Arc<Device>,
    ptr: CUdeviceptr,
    bytes: usize,
    class: usize,
}

impl DeviceBuf {
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// Bytes allocated (the size class): readable past `bytes` without leaving the allocation.
    pub fn capacity(&self) -> usize {
        self.class
    }
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }
}

impl Drop for DeviceBuf {
    fn drop(&mut self) {
        if let Ok(mut p) = self.dev.pool.lock() {
            p.free.entry(self.class).or_default().push(self.ptr);
        }
    }
}

impl Device {
    /// `bytes` of device memory (contents undefined), from the pool when a block is free.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> Result<DeviceBuf> {
        let class = size_class(bytes);
        let mut pool = self.pool.lock().expect("pool lock");
        let ptr = match pool.free.get_mut(&class).and_then(|l| l.pop()) {
            Some(p) => {
                pool.reuses += 1;
                p
            }
            None => {
                self.bind()?;
                // SAFETY: plain allocation of `class` bytes on the current context.
                let p = match unsafe { result::malloc_sync(class) } {
                    Ok(p) => p,
                    Err(_) => {
                        // Out of memory: give the cached blocks back and try once more.
                        pool.release_all();
                        unsafe { result::malloc_sync(class) }
                            .map_err(|e| driver("cuMemAlloc", e))?
                    }
                };
                pool.allocs += 1;
                pool.held += class;
                p
            }
        };
        Ok(DeviceBuf {
            dev: self.clone(),
            ptr,
            bytes,
            class,
        })
    }

    /// A device copy of `src` (queued on the stream; `src` is staged before this returns).
    pub fn upload<T: Copy>(self: &Arc<Self>, src: &[T]) -> Result<DeviceBuf> {
        let buf = self.alloc(std::mem::size_of_val(src))?;
        self.write(&buf, 0, src)?;
        Ok(buf)
    }

    /// Copies `src` into `dst` at byte offset `at`.
    pub fn write<T: Copy>(&self, dst: &DeviceBuf, at: usize, src: &[T]) -> Result<()> {
        let n = std::mem::size_of_val(src);
        if n == 0 {
            return Ok(());
        }
        assert!(at + n <= dst.bytes, "write past the buffer (caller checks)");
        if self.capturing() {
            return Err(crate::error::invalid(
                "graph",
                "an upload inside a graph capture would replay stale bytes",
            ));
        }
        self.bind()?;
        // SAFETY: reinterprets `src`'s initialized elements as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), n) };
        let mut staging = self.staging.lock().expect("staging lock");
        if staging.upload(dst.ptr + at as u64, bytes, self.stream(), || {
            self.sync_stream()
        })? {
            return Ok(());
        }
        drop(staging);
        // SAFETY: the range lies inside `dst`; pageable host memory is staged synchronously.
        unsafe { result::memcpy_htod_async(dst.ptr + at as u64, src, self.stream()) }
            .map_err(|e| driver("cuMemcpyHtoDAsync", e))
    }

    /// Fills `bytes` bytes of `dst` from `at` with `value`.
    pub fn memset(&self, dst: &DeviceBuf, at: usize, bytes: usize, value: u8) -> Result<()> {
        assert!(
            at + bytes <= dst.bytes,
            "memset past the buffer (caller checks)"
        );
        self.bind()?;
        // SAFETY: the range lies inside `dst`.
        unsafe { result::memset_d8_async(dst.ptr + at as u64, value, bytes, self.stream()) }
            .map_err(|e| driver("cuMemsetD8Async", e))
    }

    /// Copies `dst.len()` elements from `src` at byte offset `at` and waits for them.
    pub fn read<T: Copy>(&self, src: &DeviceBuf, at: usize, dst: &mut [T]) -> Result<()> {
        let n = std::mem::size_of_val(dst);
        if n == 0 {
            return Ok(());
        }
        assert!(at + n <= src.bytes, "read past the buffer (caller checks)");
        if self.capturing() {
            return Err(crate::error::invalid(
                "graph",
                "a download cannot be captured in a graph",
            ));
        }
        self.bind()?;
        // SAFETY: the range lies inside `src`; we synchronize before `dst` is used.
        unsafe { result::memcpy_dtoh_async(dst, src.ptr + at as u64, self.stream()) }
            .map_err(|e| driver("cuMemcpyDtoHAsync", e))?;
        self.synchronize()
    }

    /// Device-to-device copy of `bytes` bytes.
    pub fn copy(&self, src: &DeviceBuf, dst: &DeviceBuf, bytes: usize) -> Result<()> {
        self.copy_at(src, 0, dst, 0, bytes)
    }

    /// Device-to-device copy of `bytes` bytes between byte offsets (ranges must not overlap).
    pub fn copy_at(
        &self,
        src: &DeviceBuf,
        src_at: usize,
        dst: &DeviceBuf,
        dst_at: usize,
        bytes: usize,
    ) -> Result<()> {
        assert!(
            src_at + bytes <= src.bytes && dst_at + bytes <= dst.bytes,
            "copy past a buffer (caller checks)"
        );
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: both ranges lie inside their buffers.
        unsafe {
            result::memcpy_dtod_async(
                dst.ptr + dst_at as u64,
                src.ptr + src_at as u64,
                bytes,
                self.stream(),
            )
        }
        .map_err(|e| driver("cuMemcpyDtoDAsync", e))
    }

    /// (bytes held by the pool, fresh allocations, reuses).
    pub fn pool_stats(&self) -> (usize, usize, usize) {
        let p = self.pool.lock().expect("pool lock");
        (p.held, p.allocs, p.reuses)
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_cover_the_request_with_bounded_waste() {
        assert_eq!(size_class(0), 256);
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(257), 512);
        assert_eq!(size_class(1 << 20), 1 << 20);
        assert_eq!(size_class((1 << 20) + 1), 2 << 20);
        assert_eq!(size_class(5 << 20), 6 << 20);
        for b in [3usize, 1000, 70_000, 3 << 20, 123_456_789] {
            let c = size_class(b);
            assert!(c >= b && (c - b) <= (b.max(2 << 20)));
        }
    }
}
