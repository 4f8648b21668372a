//! The `--device cuda` branches of `verify`, `attn` and `bench attn`: thin wrappers over
//! flexkern-cuda. Without a driver they print why and fail with `CudaError::NoDevice`
//! (exit code 3, which CI's script accepts as "skipped").

use anyhow::Result;
use flexkern::verify::{paged_cases, standard_cases, Outcome};
use flexkern_cuda::runtime::compile::Origin;
use flexkern_cuda::{CudaError, Device};
use std::sync::Arc;

/// Opens GPU 0, or prints the SKIPPED line of `what` and returns the typed error.
pub fn open(what: &str) -> Result<Arc<Device>> {
    match Device::open(0) {
        Ok(d) => Ok(d),
        Err(e @ (CudaError::NoDevice(_) | CudaError::NoNvrtc(_))) => {
            println!("{what} --device cuda: SKIPPED ({e})");
            Err(e.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether `e` says there is no GPU (the CLI exits with 3 then).
pub fn is_no_device(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<CudaError>(),
        Some(CudaError::NoDevice(_) | CudaError::NoNvrtc(_))
    )
}

/// One line on module loads: first-use NVRTC compiles and disk-cache loads, with times.
pub fn module_report(dev: &Device) -> String {
    let st = dev.load_stats();
    let pick =
        |o: Origin| -> Vec<f64> { st.iter().filter(|s| s.origin == o).map(|s| s.ms).collect() };
    let (c, d) = (pick(Origin::Compiled), pick(Origin::Disk));
    let stat = |v: &[f64]| -> String {
        if v.is_empty() {
            return "0".into();
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        format!(
            "{} (median {:.0} ms, max {:.0} ms)",
            s.len(),
            s[s.len() / 2],
            s[s.len() - 1]
        )
    };
    format!(
        "modules: {} compiled by NVRTC, {} loaded from the disk cache {:?}",
        stat(&c),
        stat(&d),
        flexkern_cuda::runtime::compile::cache_dir().unwrap_or_default()
    )
}

pub fn verify(quick: bool, seed: u64, report: &mut dyn FnMut(Outcome)) -> Result<()> {
    let dev = open("verify")?;
    println!(
        "device: {} ({} SMs, sm_{}{}, driver {})",
        dev.props.name,
        dev.props.sms,
        dev.props.compute_capability.0,
        dev.props.compute_capability.1,
        dev.props.driver_version
    );
    // The CPU's matrix through the `Backend` trait (flexkern::verify, the same oracle and
    // poisoning); cases run on a few threads sharing the device's one stream, so first-use
    // NVRTC compiles (CPU-bound, thread-safe) overlap. Rows print in case order.
    let backend = flexkern_cuda::backend::CudaBackend::on(dev.clone());
    let (mut std_cases, mut paged) = (standard_cases(quick), paged_cases(quick));
    let (more, more_paged) = flexkern_cuda::verify::wave_cases();
    std_cases.extend(more);
    paged.extend(more_paged);
    let n = std_cases.len() + paged.len();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<Outcome>>> = std::sync::Mutex::new(vec![None; n]);
    let workers = std::thread::available_parallelism()
        .map_or(4, |p| p.get())
        .min(12);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let o = if i < std_cases.len() {
                    flexkern::verify::run_case(&backend, &std_cases[i], seed.wrapping_add(i as u64))
                } else {
                    let j = i - std_cases.len();
                    flexkern::verify::run_paged_case(
                        &backend,
                        &paged[j],
                        seed.wrapping_add(1000 + j as u64),
                    )
                };
                done.lock().expect("results lock")[i] = Some(o);
            });
        }
    });
    for o in done
        .into_inner()
        .expect("results lock")
        .into_iter()
        .flatten()
    {
        report(o);
    }
    for o in flexkern_cuda::verify::extra_checks(&dev) {
        report(o);
    }
    println!("{}", module_report(&dev));
    Ok(())
}

/// `flexkern bench attn --device cuda`: copy and read-only bandwidth first, then each decode
/// shape as a fraction of the read rate (KV bytes read per second; the copy rate's ratio, bytes
/// read + written per second, in its line), timed on an idle GPU and queued behind GPU work, then
/// the prefill cases in effective GFLOP/s (visible pairs only; the peers script measures the
/// bf16 matmul rate they are rated against in the same device call).
pub fn bench_attn(a: &super::bench_common::AttnBenchArgs) -> Result<()> {
    use flexkern_cuda::bench::{
        copy_bandwidth, decode, read_bandwidth, short_shapes, standard_shapes,
    };
    let dev = open("bench attn")?;
    let reps = if a.quick { 5 } else { 30 };
    println!(
        "flexkern bench attn --device cuda: {} ({} SMs), CUDA events around the whole call, median of {reps}; decode: a layer's call, its plan reused (validation, plan lookup, attention, merge), as the layers of a model's step share one plan; the table rates decode against the read-only bandwidth",
        dev.props.name, dev.props.sms
    );
    let copy = copy_bandwidth(&dev, reps)?;
    let read = read_bandwidth(&dev, reps)?;
    println!(
        "copy bandwidth (device to device, read + write): {copy:.0} GB/s; read bandwidth (read only, queued behind GPU work): {read:.0} GB/s"
    );
    let mut rows = Vec::new();
    let short = a.only == "short";
    let shapes = if short {
        short_shapes()
    } else {
        standard_shapes(a.quick)
    };
    for s in shapes {
        if !short && !a.only.is_empty() && !s.name().contains(&a.only) {
            continue;
        }
        let r = decode(&dev, &s, reps, a.deterministic)?;
        let ms = r.ms;
        let gbs = s.kv_bytes() as f64 / (ms * 1e-3) / 1e9;
        let pct = |ms: f64| 100.0 * s.kv_bytes() as f64 / (ms * 1e-3) / 1e9 / copy;
        println!(
            "  {}: {} ({} blocks, partitions of {} keys, {} registers, {} B local); planned afresh in the call {:.4} ms, {:.1} % of copy (host planning {:.1} us); kernels of the prepared call alone {:.4} ms, {:.1} %; the call queued behind GPU work {:.4} ms, {:.1} % of copy, {:.1} % of read",
            s.name(),
            r.kernel,
            r.blocks,
            r.chunk,
            r.regs,
            r.local_bytes,
            r.fresh_ms,
            pct(r.fresh_ms),
            r.plan_us,
            r.launch_ms,
            pct(r.launch_ms),
            r.queued_ms,
            pct(r.queued_ms),
            pct(r.queued_ms) * copy / read
        );
        if let Some(t) = &r.trace {
            println!("    {t}");
        }
        // Rated against the read-only rate (issue 13's limit: a decode call reads K and V and
        // writes almost nothing); the line above gives the copy rate's ratios too.
        rows.push(super::bench_common::Row {
            case: s.name(),
            ms,
            gflops: 0.0,
            gbs,
            ratio: gbs / read,
            limit: format!("read {read:.0} GB/s"),
        });
    }
    for c in flexkern_cuda::bench::prefill::prefill_cases(a.quick) {
        if !a.only.is_empty() && !c.name().contains(&a.only) {
            continue;
        }
        let r = flexkern_cuda::bench::prefill::prefill(&dev, &c, reps)?;
        println!(
            "  {}: {} ({} blocks, {} registers, {} B local), planned in {:.2} ms",
            c.name(),
            r.kernel,
            r.blocks,
            r.regs,
            r.local_bytes,
            r.plan_ms
        );
        if let Some(t) = &r.trace {
            println!("    {t}");
        }
        rows.push(super::bench_common::Row {
            case: c.name(),
            ms: r.ms,
            gflops: c.flops() / (r.ms * 1e-3) / 1e9,
            gbs: 0.0,
            ratio: 0.0,
            limit: "bf16 matmul: bench/prefill_peers_cuda.py".into(),
        });
    }
    super::bench_common::print_rows(&rows, a.csv.as_deref())?;
    println!("{}", module_report(&dev));
    Ok(())
}

/// `flexkern attn --device cuda`: the same arguments, run on GPU 0.
pub fn attention(
    args: &flexkern::AttentionArgs,
    paged: Option<(usize, flexkern::DType, u64)>,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let dev = open("attn")?;
    Ok(flexkern_cuda::host::attention_host(&dev, args, paged)?)
}
