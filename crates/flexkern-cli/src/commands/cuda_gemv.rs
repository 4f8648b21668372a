//! `flexkern bench gemv --device cuda`: each format at each N (K fixed) timed with CUDA events
//! on GPU 0, as weight bytes per second and as a fraction of the device-to-device copy
//! bandwidth measured in the same run (read + write bytes per second), and as TFLOP/s (2 M N K
//! per call: the prompt GEMM's measure; `bench/gemm_peers_cuda.py` measures the card's dense
//! f16 peak and cuBLAS beside it).

use super::bench_gemv::BenchGemvArgs;
use super::cuda::{module_report, open};
use anyhow::{Context, Result};
use flexkern_quant::Format;

pub fn bench_gemv(a: &BenchGemvArgs) -> Result<()> {
    let formats: Vec<Format> = a
        .formats
        .split(',')
        .map(|f| Format::from_name(f.trim()))
        .collect::<Result<_, _>>()
        .context("--formats")?;
    let ns: Vec<usize> =
        a.n.as_deref()
            .unwrap_or(if a.quick { "4096" } else { "14336,4096" })
            .split(',')
            .map(|s| s.trim().parse::<usize>().context("--n"))
            .collect::<Result<_>>()?;
    let k = a.k.unwrap_or(4096);
    let reps = a.reps.unwrap_or(if a.quick { 5 } else { 30 });
    if ns.contains(&0) || k == 0 || reps == 0 || a.m == 0 {
        anyhow::bail!("--n, --k, --reps and --m must be at least 1");
    }
    let dev = open("bench gemv")?;
    println!(
        "flexkern bench gemv --device cuda: {} ({} SMs, {} MiB L2), M {}, CUDA events{}, median of {reps}",
        dev.props.name,
        dev.props.sms,
        dev.props.l2_bytes >> 20,
        a.m,
        if a.graph { " around graph replays" } else { "" }
    );
    if a.in_l2 {
        println!("--in-l2: one weight copy, its bytes served from L2 where they fit");
    }
    let how = flexkern_cuda::bench::GemvHow {
        quantized_acts: !a.precise,
        graph: a.graph,
        in_l2: a.in_l2,
    };
    let copy = flexkern_cuda::bench::copy_bandwidth(&dev, reps)?;
    println!("copy bandwidth (device to device, read + write): {copy:.0} GB/s");
    println!(
        "{:<14} {:>6} {:>6} {:>10} {:>9} {:>8} {:>8}  kernel",
        "format", "N", "K", "us/call", "GB/s", "of copy", "TFLOP/s"
    );
    for f in formats {
        for &n in &ns {
            match flexkern_cuda::bench::gemv(&dev, f, n, k, a.m, reps, how) {
                Ok(r) => {
                    let gbs = r.weight_bytes as f64 / (r.ms * 1e-3) / 1e9;
                    let tflops = 2.0 * (a.m * n * k) as f64 / (r.ms * 1e-3) / 1e12;
                    println!(
                        "{:<14} {n:>6} {k:>6} {:>10.2} {gbs:>9.0} {:>7.1}% {tflops:>8.1}  {}",
                        f.name(),
                        r.ms * 1e3,
                        100.0 * gbs / copy,
                        r.kernel
                    );
                }
                Err(e) => println!("{:<14} {n:>6} {k:>6}  error: {e}", f.name()),
            }
        }
    }
    println!("{}", module_report(&dev));
    Ok(())
}
