//! The CUDA runtime: one context and stream per device, a caching allocator, events, and the
//! NVRTC module cache. Every entry point probes for the driver first, so a machine without one
//! gets `CudaError::NoDevice` instead of cudarc's panic on a missing library.

pub mod alloc;
pub mod compile;
pub mod event;
pub mod graph;
pub mod profile;
mod staging;
pub mod step_trace;
pub mod tma;

use crate::error::{driver, CudaError, Result};
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUstream};
use cudarc::driver::{result, CudaContext};
use std::sync::{Arc, Mutex};

pub use alloc::DeviceBuf;
pub use event::Event;

/// What the planner and the kernels need to know of the card.
#[derive(Clone, Debug)]
pub struct DeviceProps {
    pub name: String,
    pub sms: usize,
    pub compute_capability: (u32, u32),
    pub smem_per_block: usize,
    pub smem_per_block_optin: usize,
    pub smem_per_sm: usize,
    pub l2_bytes: usize,
    pub total_mem: usize,
    /// `cuDriverGetVersion`, e.g. 13000.
    pub driver_version: i32,
}

impl DeviceProps {
    /// The NVRTC architecture flag: Hopper gets the `a` target (wgmma, setmaxnreg).
    pub fn arch_flag(&self) -> String {
        let (ma, mi) = self.compute_capability;
        if (ma, mi) == (9, 0) {
            "sm_90a".to_string()
        } else {
            format!("sm_{ma}{mi}")
        }
    }
}

struct Stream(CUstream);
// SAFETY: a CUstream handle may be used from any thread whose current context is the stream's;
// every use goes through `Device::bind`, which makes it current first.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

/// One GPU: its primary context, one stream all work is ordered on, the allocator, the modules.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Stream,
    pub props: DeviceProps,
    pub(crate) pool: Mutex<alloc::Pool>,
    pub(crate) modules: compile::ModuleCache,
    pub(crate) staging: Mutex<staging::Staging>,
    /// This device's tuned tensor-core tiles (the tune table's entry for its name).
    tuned: Mutex<crate::plan::TunedTiles>,
    /// Kernels that take it launch with programmatic dependent launch (see `launch`).
    pdl: bool,
    /// The stream is being captured into a graph (`graph.rs`): uploads refuse.
    capturing: std::sync::atomic::AtomicBool,
    /// The step timeline's buffer (`FLEXKERN_CUDA_TRACE=step`, `step_trace.rs`).
    step_trace: Mutex<Option<u64>>,
}

/// Whether libcuda can be loaded at all (cudarc panics on first use otherwise).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its candidate names.
    let present = std::panic::catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() });
    present.unwrap_or(false)
}

/// Whether libnvrtc can be loaded.
pub fn nvrtc_present() -> bool {
    let present = std::panic::catch_unwind(|| unsafe { cudarc::nvrtc::sys::is_culib_present() });
    present.unwrap_or(false)
}

fn attr(dev: cudarc::driver::sys::CUdevice, a: Attr) -> Result<usize> {
    // SAFETY: `dev` came from `device::get`.
    let v = unsafe { result::device::get_attribute(dev, a) }
        .map_err(|e| driver("cuDeviceGetAttribute", e))?;
    Ok(v.max(0) as usize)
}

impl Device {
    /// Opens device `ordinal`, or says why not (no driver, no device, driver error).
    pub fn open(ordinal: usize) -> Result<Arc<Device>> {
        if !driver_present() {
            return Err(CudaError::NoDevice(
                "libcuda could not be loaded (no NVIDIA driver on this machine)".into(),
            ));
        }
        let init = std::panic::catch_unwind(result::init)
            .map_err(|_| CudaError::NoDevice("the CUDA driver panicked on init".into()))?;
        init.map_err(|e| CudaError::NoDevice(format!("cuInit failed: {e:?}")))?;
        let count = result::device::get_count().map_err(|e| driver("cuDeviceGetCount", e))?;
        if ordinal >= count.max(0) as usize {
            return Err(CudaError::NoDevice(format!(
                "device {ordinal} requested, the driver reports {count}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("cuDevicePrimaryCtxRetain", e))?;
        let dev = ctx.cu_device();
        let mut driver_version = 0i32;
        // SAFETY: writes one int.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(|e| driver("cuDriverGetVersion", e))?;
        let props = DeviceProps {
            name: ctx.name().map_err(|e| driver("cuDeviceGetName", e))?,
            sms: attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            compute_capability: (
                attr(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
                attr(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
            ),
            smem_per_block: attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            smem_per_block_optin: attr(
                dev,
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            smem_per_sm: attr(
                dev,
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            )?,
            l2_bytes: attr(dev, Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            total_mem: ctx.total_mem().map_err(|e| driver("cuDeviceTotalMem", e))?,
            driver_version,
        };
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| driver("cuStreamCreate", e))?;
        let (tuned, warning) = flexkern::tune::load(
            flexkern::tune::table_path().as_deref(),
            &props.name,
            flexkern::tune::CUDA_ATTENTION,
            crate::plan::TunedTiles::from_params,
        );
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        Ok(Arc::new(Device {
            ctx,
            stream: Stream(stream),
            pool: Mutex::new(alloc::Pool::default()),
            modules: compile::ModuleCache::default(),
            staging: Mutex::new(staging::Staging::default()),
            tuned: Mutex::new(tuned.unwrap_or_default()),
            // Hopper and later; `FLEXKERN_CUDA_PDL=0` turns it off (A/B runs).
            pdl: props.compute_capability.0 >= 9
                && !std::env::var("FLEXKERN_CUDA_PDL").is_ok_and(|v| v == "0"),
            props,
            capturing: Default::default(),
            step_trace: Default::default(),
        }))
    }

    /// The tensor-core tiles the planner uses on this device.
    pub fn tuned(&self) -> crate::plan::TunedTiles {
        *self.tuned.lock().expect("tuned lock")
    }

    /// Replaces them (`flexkern tune` trying candidates; plans made before keep theirs).
    pub fn set_tuned(&self, t: crate::plan::TunedTiles) {
        *self.tuned.lock().expect("tuned lock") = t;
    }

    /// Makes the context current on the calling thread (cheap; every entry point calls it).
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver("cuCtxSetCurrent", e))
    }

    pub fn stream(&self) -> CUstream {
        self.stream.0
    }

    /// Whether kernels written for it launch with programmatic dependent launch.
    pub fn pdl(&self) -> bool {
        self.pdl
    }

    /// The step timeline's buffer, allocated and zeroed on first use; None unless
    /// `FLEXKERN_CUDA_TRACE=step`.
    pub(crate) fn step_trace_buf(&self) -> Result<Option<u64>> {
        if !step_trace::enabled() {
            return Ok(None);
        }
        // Held across the allocation: two threads' first modules get one buffer.
        let mut slot = self.step_trace.lock().expect("step trace lock");
        if let Some(p) = *slot {
            return Ok(Some(p));
        }
        self.bind()?;
        let bytes = step_trace::WORDS * 8;
        // SAFETY: a fresh allocation, zeroed before any kernel sees its address.
        let p = unsafe { result::malloc_sync(bytes) }.map_err(|e| driver("cuMemAlloc", e))?;
        unsafe { result::memset_d8_sync(p, 0, bytes) }.map_err(|e| driver("cuMemsetD8", e))?;
        *slot = Some(p);
        Ok(Some(p))
    }

    /// Empties the step timeline (queued on the stream, before the launches to record).
    pub fn step_trace_reset(&self) -> Result<()> {
        if let Some(p) = self.step_trace_buf()? {
            self.bind()?;
            // SAFETY: the counter's 8 bytes lie in the buffer.
            unsafe { result::memset_d8_async(p, 0, 8, self.stream()) }
                .map_err(|e| driver("cuMemsetD8Async", e))?;
        }
        Ok(())
    }

    /// The blocks recorded since the last reset (after the stream's work finished).
    pub fn step_trace_blocks(&self) -> Result<Option<Vec<step_trace::Block>>> {
        let Some(p) = self.step_trace_buf()? else {
            return Ok(None);
        };
        self.synchronize()?;
        let mut head = [0u64; 2];
        // SAFETY: both copies stay inside the buffer and complete before returning.
        unsafe { result::memcpy_dtoh_sync(&mut head[..], p) }
            .map_err(|e| driver("cuMemcpyDtoH", e))?;
        let n = (head[0] as u32 as usize).min(step_trace::RECORDS);
        let mut words = vec![0u64; 2 + 5 * n];
        unsafe { result::memcpy_dtoh_sync(&mut words[..], p) }
            .map_err(|e| driver("cuMemcpyDtoH", e))?;
        Ok(Some(step_trace::parse(&words)))
    }

    /// Waits for all work queued on the stream.
    pub fn synchronize(&self) -> Result<()> {
        // The staging lock is held across the sync: a copy another thread queued between the
        // sync and the reset would otherwise have its pinned source overwritten in flight.
        let mut s = self.staging.lock().expect("staging lock");
        self.sync_stream()?;
        s.reset();
        Ok(())
    }

    fn sync_stream(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the stream is alive while `self` is.
        unsafe { result::stream::synchronize(self.stream.0) }
            .map_err(|e| driver("cuStreamSynchronize", e))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.synchronize();
        if let Ok(mut p) = self.pool.lock() {
            p.release_all();
        }
        self.modules.unload_all();
        if let Ok(mut s) = self.staging.lock() {
            s.free();
        }
        if let Some(p) = self.step_trace.lock().ok().and_then(|s| *s) {
            // SAFETY: the stream is idle and no module that wrote it is loaded.
            let _ = unsafe { result::free_sync(p) };
        }
        // SAFETY: nothing uses the stream after this.
        unsafe {
            let _ = result::stream::destroy(self.stream.0);
        }
    }
}

/// Launches `f` (a 1-D grid) on `stream`, with programmatic stream serialization when `pdl`:
/// the kernel may start while the previous one finishes, so it must run `griddepcontrol.wait`
/// (FK_PDL_ENTER in fk_common.cuh) before touching what that kernel wrote. On a decode step of
/// a few hundred small kernels this hides most of each launch's ramp.
///
/// # Safety
/// `params` must match `f`'s parameters, and the launch's reads and writes stay in bounds.
pub unsafe fn launch(
    f: cudarc::driver::sys::CUfunction,
    (grid, threads, smem): (u32, u32, u32),
    stream: CUstream,
    params: &mut [*mut std::ffi::c_void],
    pdl: bool,
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { launch_grid(f, (grid, 1, 1), (threads, 1, 1), smem, stream, params, pdl) }
}

/// `launch` with a 3-D grid and block.
///
/// # Safety
/// As `launch`.
pub unsafe fn launch_grid(
    f: cudarc::driver::sys::CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    smem: u32,
    stream: CUstream,
    params: &mut [*mut std::ffi::c_void],
    pdl: bool,
) -> Result<()> {
    use cudarc::driver::sys;
    if !pdl {
        // SAFETY: the caller's contract.
        return unsafe { result::launch_kernel(f, grid, block, smem, stream, params) }
            .map_err(|e| driver("cuLaunchKernel", e));
    }
    // SAFETY: a zeroed attribute is valid; the union member set is the one `id` names.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let cfg = sys::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block.0,
        blockDimY: block.1,
        blockDimZ: block.2,
        sharedMemBytes: smem,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: the caller's contract; `cfg` and `attr` outlive the call.
    unsafe { sys::cuLaunchKernelEx(&cfg, f, params.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
        .map_err(|e| driver("cuLaunchKernelEx", e))
}
