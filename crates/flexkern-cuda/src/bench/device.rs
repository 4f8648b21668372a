//! The benchmarks' tools on the device: random data made there, CUDA-event timing (on an idle
//! GPU, or queued behind GPU work), and the limits a run is rated against (copy and read-only
//! bandwidth), with their kernels in `kernels/fill.cu`.

use crate::error::{driver, Result};
use crate::runtime::compile::KernelSource;
use crate::runtime::{Device, DeviceBuf, Event};
use cudarc::driver::result::launch_kernel;
use flexkern::DType;
use std::ffi::c_void;
use std::sync::Arc;

const FILL: &str = include_str!("../../kernels/fill.cu");

fn fill_code(d: DType) -> i32 {
    match d {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        _ => 3,
    }
}

/// `n` random elements of `dtype` on the device.
pub fn random(dev: &Arc<Device>, n: usize, dtype: DType, seed: u64) -> Result<DeviceBuf> {
    let buf = dev.alloc(n.max(1) * dtype.size())?;
    let f = helpers(dev)?.function("fk_fill")?;
    let (mut ptr, mut n64, mut code, mut seed) = (buf.ptr(), n as u64, fill_code(dtype), seed);
    let mut params: [*mut c_void; 4] = [
        (&mut ptr as *mut u64).cast(),
        (&mut n64 as *mut u64).cast(),
        (&mut code as *mut i32).cast(),
        (&mut seed as *mut u64).cast(),
    ];
    dev.bind()?;
    let blocks = (n.div_ceil(256)).clamp(1, 4096) as u32;
    // SAFETY: fk_fill(u8*, u64, int, u64) writes `n` elements of `dtype` inside `buf`.
    unsafe { launch_kernel(f, (blocks, 1, 1), (256, 1, 1), 0, dev.stream(), &mut params) }
        .map_err(|e| driver("cuLaunchKernel", e))?;
    Ok(buf)
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The benchmark helpers' source (`fill.cu`: `fk_fill`, `fk_spin`, `fk_read`).
fn helpers_source() -> KernelSource {
    KernelSource {
        name: "fill".into(),
        source: format!(
            "{}\n{FILL}",
            crate::headers::text(&[crate::headers::COMMON])
        ),
    }
}

fn helpers(dev: &Arc<Device>) -> Result<Arc<crate::runtime::compile::Module>> {
    dev.module(&helpers_source())
}

#[cfg(test)]
#[test]
fn helpers_compile_with_nvrtc() {
    if !crate::runtime::nvrtc_present() {
        eprintln!("helpers_compile_with_nvrtc: libnvrtc not found, compile check skipped");
        return;
    }
    let (_, log) = crate::runtime::compile::compile_verbose(&helpers_source(), "sm_90a").unwrap();
    let (_, spills, _) = crate::runtime::compile::ptxas_resources(&log);
    assert_eq!(spills, 0, "{log}");
}

/// Times `f` as `time_ms` does, each run queued behind `SPIN_US` of GPU work (`fk_spin`): the
/// host's launch calls then land while the GPU is busy, so the events time the call's kernels
/// back to back, as a model's step runs them (where the previous kernel hides the host's work).
pub fn time_ms_queued(
    dev: &Arc<Device>,
    warm: usize,
    reps: usize,
    f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    const SPIN_US: u64 = 100;
    let spin = helpers(dev)?.function("fk_spin")?;
    let mut ns = SPIN_US * 1000;
    let mut params: [*mut c_void; 1] = [(&mut ns as *mut u64).cast()];
    let busy = || -> Result<()> {
        dev.bind()?;
        // SAFETY: fk_spin(u64) reads nothing but its argument.
        unsafe { launch_kernel(spin, (1, 1, 1), (1, 1, 1), 0, dev.stream(), &mut params) }
            .map_err(|e| driver("cuLaunchKernel", e))
    };
    time_behind(dev, warm, reps, busy, f)
}

/// Times `f` with events: `warm` untimed runs, then the median of `reps` (milliseconds).
pub fn time_ms(
    dev: &Device,
    warm: usize,
    reps: usize,
    f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    time_behind(dev, warm, reps, || Ok(()), f)
}

/// `time_ms`, with `before` queued ahead of each timed run's start event.
fn time_behind(
    dev: &Device,
    warm: usize,
    reps: usize,
    mut before: impl FnMut() -> Result<()>,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    for _ in 0..warm {
        f()?;
    }
    let mut ts = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (a, b) = (Event::new(dev)?, Event::new(dev)?);
        before()?;
        a.record(dev)?;
        f()?;
        b.record(dev)?;
        ts.push(a.elapsed_ms(&b)? as f64);
    }
    Ok(median(ts))
}

/// Device-to-device copy bandwidth in GB/s, counting bytes read and written (1 GiB copies).
pub fn copy_bandwidth(dev: &Arc<Device>, reps: usize) -> Result<f64> {
    let n = 1usize << 30;
    let (a, b) = (dev.alloc(n)?, dev.alloc(n)?);
    dev.memset(&a, 0, n, 1)?;
    let ms = time_ms(dev, 3, reps, || dev.copy(&a, &b, n))?;
    Ok(2.0 * n as f64 / (ms * 1e-3) / 1e9)
}

/// Device read-only bandwidth in GB/s (`fk_read` over 1 GiB, queued behind GPU work): what a
/// decode kernel, which reads K and V and writes almost nothing, can reach at best.
pub fn read_bandwidth(dev: &Arc<Device>, reps: usize) -> Result<f64> {
    let n = 1usize << 30;
    let (src, sink) = (dev.alloc(n)?, dev.alloc(16)?);
    dev.memset(&src, 0, n, 1)?;
    let f = helpers(dev)?.function("fk_read")?;
    let (mut p, mut n16, mut s) = (src.ptr(), (n / 16) as u64, sink.ptr());
    let mut params: [*mut c_void; 3] = [
        (&mut p as *mut u64).cast(),
        (&mut n16 as *mut u64).cast(),
        (&mut s as *mut u64).cast(),
    ];
    let blocks = (dev.props.sms * 4) as u32;
    let ms = time_ms_queued(dev, 3, reps, || {
        dev.bind()?;
        // SAFETY: fk_read(const uint4*, u64, u32*) reads n16 words of `src` and may write one
        // word of `sink`.
        unsafe { launch_kernel(f, (blocks, 1, 1), (512, 1, 1), 0, dev.stream(), &mut params) }
            .map_err(|e| driver("cuLaunchKernel", e))
    })?;
    Ok(n as f64 / (ms * 1e-3) / 1e9)
}
