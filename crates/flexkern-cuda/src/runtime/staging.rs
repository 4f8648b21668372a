//! Pinned staging for small uploads. A copy from pageable host memory makes the driver wait
//! for the stream before it starts (CUDA's documented behaviour for pageable host-to-device
//! copies), so each per-step upload of the model (attention step buffers, KV scales, token
//! ids) was a full stream sync. Small uploads are copied into a pinned arena and sent from
//! there instead: truly asynchronous. Arena space is reused only after the stream has been
//! synchronized, when every copy that read it has finished.

use crate::error::{driver, Result};
use cudarc::driver::result;
use cudarc::driver::sys::{CUdeviceptr, CUstream};

/// Bytes of the arena; larger uploads (weights) take the direct path.
pub(crate) const ARENA: usize = 8 << 20;

#[derive(Default)]
pub(crate) struct Staging {
    ptr: usize,
    used: usize,
}

impl Staging {
    /// Queues the copy of `src` to `dst` through the arena; `sync` waits for the stream when the
    /// arena is full. Returns false when `src` is too large to stage (the caller copies it
    /// directly).
    pub(crate) fn upload(
        &mut self,
        dst: CUdeviceptr,
        src: &[u8],
        stream: CUstream,
        sync: impl FnOnce() -> Result<()>,
    ) -> Result<bool> {
        if src.len() > ARENA / 4 {
            return Ok(false);
        }
        if self.ptr == 0 {
            // SAFETY: a plain pinned allocation, freed in `free`.
            let p = unsafe { result::malloc_host(ARENA, 0) }
                .map_err(|e| driver("cuMemHostAlloc", e))?;
            self.ptr = p as usize;
        }
        let mut at = self.used.next_multiple_of(16);
        if at + src.len() > ARENA {
            sync()?;
            at = 0;
        }
        // SAFETY: [at, at + len) lies inside the arena, which no queued copy reads (space is
        // handed out once between synchronizations).
        let staged = unsafe {
            let p = (self.ptr as *mut u8).add(at);
            std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len());
            std::slice::from_raw_parts(p as *const u8, src.len())
        };
        // SAFETY: the caller checked `dst`'s range; the pinned source outlives the copy.
        unsafe { result::memcpy_htod_async(dst, staged, stream) }
            .map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
        self.used = at + src.len();
        Ok(true)
    }

    /// The stream has passed every queued copy: the whole arena is free again.
    pub(crate) fn reset(&mut self) {
        self.used = 0;
    }

    /// Frees the arena (the stream must be idle).
    pub(crate) fn free(&mut self) {
        if self.ptr != 0 {
            // SAFETY: `ptr` came from `malloc_host`; no copy is in flight.
            unsafe {
                let _ = result::free_host(self.ptr as *mut std::ffi::c_void);
            }
            self.ptr = 0;
        }
    }
}
