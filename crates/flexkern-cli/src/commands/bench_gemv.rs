//! `flexkern bench gemv`: quantized GEMV throughput as a ratio to this machine's memory read
//! bandwidth, measured in the same run.
//!
//! Bandwidth: a rayon streaming sum over a buffer far larger than the last-level cache, each
//! 4 MiB chunk read as 4 interleaved streams as the 4-row GEMV kernels read (median of passes).
//! GEMV: weights are tiled into enough distinct copies that the working set also far exceeds the
//! cache, and the copies are visited round-robin, so every call streams its
//! weights from DRAM as a real decode step does. Reported: median time per call, weight bytes
//! read per second, and that rate over the measured bandwidth. Beside it, the same kernel on a
//! matrix that stays in the last-level cache (about 2 MiB, two copies): the compute ceiling, which tells a
//! bandwidth-bound format (DRAM rate near the bandwidth) from a compute-bound one (DRAM rate
//! near the in-cache rate).

use super::limits::{median, read_bandwidth_gbs_with};
use anyhow::{Context, Result};
use clap::Args;
use flexkern_quant::{Activation, Format, QuantMatrix};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchGemvArgs {
    /// Comma-separated formats.
    #[arg(
        long,
        default_value = "q4_0,q4_1,q8_0,q4_k,q6_k,f16,q5_0,q5_1,q2_k,q3_k,q5_k,bf16,f32,mlx:4:64,mlx:8:64"
    )]
    pub formats: String,
    /// Comma-separated output sizes N.
    #[arg(long, default_value = "4096,14336")]
    pub n: String,
    /// Input size K.
    #[arg(long, default_value_t = 4096)]
    pub k: usize,
    /// Activation rows M (1 = decode GEMV).
    #[arg(long, default_value_t = 1)]
    pub m: usize,
    /// Timed repetitions per case (median reported).
    #[arg(long, default_value_t = 30)]
    pub reps: usize,
    /// Threads (default: rayon's, i.e. all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Bytes of distinct weight copies cycled through, in MiB (defeats the cache).
    #[arg(long, default_value_t = 512)]
    pub working_set_mib: usize,
    /// Small shapes and few repetitions: a smoke test of the benchmark itself.
    #[arg(long)]
    pub quick: bool,
}

fn parse_list(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<usize>()
                .with_context(|| format!("bad number `{t}`"))
        })
        .collect()
}

/// Random-ish f32 values, deterministic, never zero in bulk.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0
        })
        .collect()
}

struct Case {
    ms: f64,
    gbs: f64,
}

fn bench_one(
    format: Format,
    n: usize,
    k: usize,
    m: usize,
    reps: usize,
    ws_bytes: usize,
    repack: bool,
) -> Result<Case> {
    // Quantize a slab of rows once and tile it: quantizing 14336 x 4096 with the reference
    // K-quant search would dominate the run; the values do not change the memory traffic.
    let slab_rows = n.min(64);
    let slab = flexkern_quant::quantize(format, &values(slab_rows * k, 7), slab_rows, k)?;
    let bytes = format.tensor_bytes(n, k)?;
    let copies = ws_bytes.div_ceil(bytes).clamp(2, 64);
    let mut bufs: Vec<Vec<u8>> = Vec::with_capacity(copies);
    for _ in 0..copies {
        let b = match format {
            // MLX's single buffer is three arrays; tiling rows would misplace scales.
            Format::MlxAffine { .. } => flexkern_quant::quantize(format, &values(n * k, 9), n, k)?,
            _ => {
                // On huge pages, as the bandwidth probe's buffer is.
                let row = format.row_bytes(k)?;
                flexkern::mem::huge_vec(bytes, |i| slab[(i / row % slab_rows) * row + i % row])
            }
        };
        bufs.push(b);
        if matches!(format, Format::MlxAffine { .. }) {
            // One MLX copy quantized at full size is enough work; clone the rest.
            while bufs.len() < copies {
                bufs.push(bufs[0].clone());
            }
            break;
        }
    }
    let plain: Vec<QuantMatrix> = bufs
        .iter()
        .map(|b| QuantMatrix::new(format, n, k, b))
        .collect::<Result<_, _>>()?;
    let repacked: Vec<QuantMatrix> = match repack {
        true => plain
            .iter()
            .map(|q| q.repacked().context("format has no repacked layout"))
            .collect::<Result<_>>()?,
        false => Vec::new(),
    };
    let mats = if repack { &repacked } else { &plain };
    let x = values(m * k, 11);
    let mut y = vec![0f32; m * n];
    let mut times = Vec::with_capacity(reps);
    for i in 0..reps + copies {
        let t = Instant::now();
        mats[i % copies].gemv_batch(Activation::F32(&x), m, &mut y)?;
        if i >= copies {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    std::hint::black_box(&y);
    let t = median(times);
    Ok(Case {
        ms: t * 1e3,
        gbs: bytes as f64 / t / 1e9,
    })
}

pub fn run_bench_gemv(args: &BenchGemvArgs) -> Result<()> {
    let pool = match args.threads {
        Some(t) => rayon::ThreadPoolBuilder::new().num_threads(t).build()?,
        None => rayon::ThreadPoolBuilder::new().build()?,
    };
    pool.install(|| run_inner(args))
}

fn run_inner(args: &BenchGemvArgs) -> Result<()> {
    let formats: Vec<Format> = args
        .formats
        .split(',')
        .map(|f| Format::from_name(f.trim()))
        .collect::<Result<_, _>>()?;
    let (ns, k, reps, ws, bw_mib) = if args.quick {
        (vec![512usize, 1024], 1024, 5, 32 << 20, 256)
    } else {
        (
            parse_list(&args.n)?,
            args.k,
            args.reps,
            args.working_set_mib << 20,
            1024,
        )
    };
    let threads = rayon::current_num_threads();
    let passes = if args.quick { 3 } else { 7 };
    let bw_before = read_bandwidth_gbs_with(bw_mib, passes);
    let mut cases = Vec::new();
    for &f in &formats {
        // Formats with an 8-row interleaved layout run in both layouts.
        let probe = vec![0u8; f.tensor_bytes(8, f.block_elems()).unwrap_or(0)];
        let has_repack = QuantMatrix::new(f, 8, f.block_elems(), &probe)
            .ok()
            .and_then(|q| q.repacked())
            .is_some();
        for repack in [false, true].into_iter().filter(|&r| !r || has_repack) {
            // In cache: rows for ~2 MiB (large enough that per-call overhead is small), a
            // multiple of 16 so every thread gets whole 8-row groups.
            let cached = f
                .row_bytes(k)
                .ok()
                .map(|rb| ((2usize << 20) / rb.max(1)).clamp(16, 16384) / 16 * 16)
                .and_then(|nc| bench_one(f, nc, k, args.m, reps * 10, 0, repack).ok())
                .map(|c| c.gbs);
            let layout = if repack { " repacked" } else { "" };
            for &n in &ns {
                cases.push((
                    format!("{f} N={n} K={k} M={}{layout}", args.m),
                    bench_one(f, n, k, args.m, reps, ws, repack),
                    cached,
                ));
            }
        }
    }
    // A shared or frequency-scaling machine drifts: probe again after the cases and take the
    // higher figure as the limit, so ratios are never flattered by a slow probe.
    let bw_after = read_bandwidth_gbs_with(bw_mib, passes);
    let bw = bw_before.max(bw_after);
    println!(
        "threads: {threads}   read bandwidth ({bw_mib} MiB 4-stream sum, median of {passes}): \
         {bw_before:.2} GB/s before, {bw_after:.2} GB/s after; limit = {bw:.2} GB/s"
    );
    println!(
        "{:<45} {:>10} {:>10} {:>8} {:>15}",
        "case", "median ms", "GB/s", "of bw", "in-cache GB/s"
    );
    for (name, c, cached) in cases {
        let cached = cached.map_or("-".to_string(), |g| format!("{g:.2}"));
        match c {
            Ok(c) => println!(
                "{name:<45} {:>10.3} {:>10.2} {:>7.1}% {cached:>15}",
                c.ms,
                c.gbs,
                100.0 * c.gbs / bw
            ),
            Err(e) => println!("{name:<45} skipped: {e}"),
        }
    }
    Ok(())
}
