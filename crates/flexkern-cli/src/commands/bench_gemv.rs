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

use super::limits::{median, BandwidthProbe};
use anyhow::{bail, Context, Result};
use clap::Args;
use flexkern_quant::{Activation, Format, Precision, QuantMatrix};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchGemvArgs {
    /// Comma-separated formats.
    #[arg(
        long,
        default_value = "q4_0,q4_1,q8_0,q4_k,q6_k,f16,q5_0,q5_1,q2_k,q3_k,q5_k,bf16,f32,mlx:4:64,mlx:8:64"
    )]
    pub formats: String,
    /// Comma-separated output sizes N [default: 4096,14336; --quick: 512,1024].
    #[arg(long)]
    pub n: Option<String>,
    /// Input size K [default: 4096; --quick: 1024].
    #[arg(long)]
    pub k: Option<usize>,
    /// Activation rows M (1 = decode GEMV).
    #[arg(long, default_value_t = 1)]
    pub m: usize,
    /// Timed repetitions per case, median reported [default: 30; --quick: 5].
    #[arg(long)]
    pub reps: Option<usize>,
    /// Threads (default: rayon's, i.e. all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Bytes of distinct weight copies cycled through, in MiB (defeats the cache).
    #[arg(long, default_value_t = 512)]
    pub working_set_mib: usize,
    /// Small shapes and few repetitions: a smoke test of the benchmark itself (only the
    /// sizes not given on the command line).
    #[arg(long)]
    pub quick: bool,
    /// cuda: GPU 0, CUDA events, against the copy bandwidth (N defaults to 14336,4096).
    #[arg(long, value_enum, default_value_t)]
    pub device: super::device::Device,
    /// Precise mode: f32 activations, weights widened to f32 (file layout only).
    #[arg(long)]
    pub precise: bool,
    /// cuda: each pass over the weight copies replayed as one CUDA graph, as a decode step
    /// runs (no host work between launches).
    #[arg(long)]
    pub graph: bool,
    /// cuda: one weight copy launched 32 times a pass, so it stays in L2: the kernel's
    /// ceiling set by its instructions and launches, not by HBM (a study's reference).
    #[arg(long)]
    pub in_l2: bool,
}

/// The sizes a run uses: the user's, else the defaults of the mode; each checked (>= 1, and
/// every buffer it sizes within the memory guard) before anything is allocated.
struct Sizes {
    ns: Vec<usize>,
    k: usize,
    reps: usize,
}

fn sizes(a: &BenchGemvArgs) -> Result<Sizes> {
    let (dn, dk, dr) = if a.quick {
        ("512,1024", 1024, 5)
    } else {
        ("4096,14336", 4096, 30)
    };
    let s = Sizes {
        ns: parse_list(a.n.as_deref().unwrap_or(dn)).context("--n")?,
        k: a.k.unwrap_or(dk),
        reps: a.reps.unwrap_or(dr),
    };
    for (flag, x) in [("--k", s.k), ("--reps", s.reps), ("--m", a.m)] {
        if x == 0 {
            bail!("{flag} 0: must be at least 1");
        }
    }
    if let Some(&n) = s.ns.iter().find(|&&n| n == 0) {
        bail!("--n {n}: every N must be at least 1");
    }
    // The f32 buffers the cases allocate: x [m, k], y [m, n], the quantized slab [64, k]
    // and one full [n, k] for MLX.
    let mk = a.m.checked_mul(s.k);
    let mk = mk.with_context(|| format!("--k {} x --m {} overflows", s.k, a.m))?;
    flexkern::mem::check_alloc::<f32>("--k", mk)?;
    for &n in &s.ns {
        let nk = n.checked_mul(s.k);
        let nk = nk.with_context(|| format!("--n {n} x --k {} overflows", s.k))?;
        flexkern::mem::check_alloc::<f32>("--n", nk)?;
        flexkern::mem::check_alloc::<f32>("--n", n.saturating_mul(a.m))?;
    }
    Ok(s)
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

/// One timed case: its weight copies (visited round-robin) and the activation.
struct Case {
    name: String,
    format: Format,
    n: usize,
    k: usize,
    m: usize,
    bytes: usize,
    /// Weight copies in the file layout (empty when `repacked` holds them).
    plain: Vec<Vec<u8>>,
    repacked: Vec<QuantMatrix<'static>>,
    x: Vec<f32>,
    y: Vec<f32>,
    precision: Precision,
    /// Calls made so far: the next copy to read.
    calls: usize,
    times: Vec<f64>,
}

impl Case {
    fn new(
        format: Format,
        n: usize,
        k: usize,
        m: usize,
        ws_bytes: usize,
        repack: bool,
        precision: Precision,
    ) -> Result<Case> {
        // Quantize a slab of rows once and tile it: quantizing 14336 x 4096 with the reference
        // K-quant search would dominate the run; the values do not change the memory traffic.
        let slab_rows = n.min(64);
        let slab = flexkern_quant::quantize(format, &values(slab_rows * k, 7), slab_rows, k)?;
        let bytes = format.tensor_bytes(n, k)?;
        let copies = ws_bytes.div_ceil(bytes).clamp(2, 64);
        let mut plain: Vec<Vec<u8>> = Vec::with_capacity(copies);
        for _ in 0..copies {
            let b = match format {
                // MLX's single buffer is three arrays; tiling rows would misplace scales.
                Format::MlxAffine { .. } => match plain.first() {
                    // One MLX copy quantized at full size is enough work; clone the rest.
                    Some(b) => b.clone(),
                    None => flexkern_quant::quantize(format, &values(n * k, 9), n, k)?,
                },
                _ => {
                    // On huge pages, as the bandwidth probe's buffer is.
                    let row = format.row_bytes(k)?;
                    flexkern::mem::try_huge_vec("--n", bytes, |i| {
                        slab[(i / row % slab_rows) * row + i % row]
                    })?
                }
            };
            plain.push(b);
        }
        let repacked = match repack {
            true => plain
                .iter()
                .map(|b| {
                    QuantMatrix::new(format, n, k, b)?
                        .repacked()
                        .context("format has no repacked layout")
                })
                .collect::<Result<_>>()?,
            false => Vec::new(),
        };
        if repack {
            plain.clear();
        }
        let mut layout = if repack { " repacked" } else { "" }.to_string();
        if precision == Precision::Precise {
            layout += " precise";
        }
        let mut case = Case {
            name: format!("{format} N={n} K={k} M={m}{layout}"),
            format,
            n,
            k,
            m,
            bytes,
            plain,
            repacked,
            x: values(m * k, 11),
            y: vec![0f32; m * n],
            precision,
            calls: 0,
            times: Vec::new(),
        };
        // Every copy once untimed: pages faulted in, code warm.
        case.time(copies)?;
        case.times.clear();
        Ok(case)
    }

    fn copies(&self) -> usize {
        self.plain.len().max(self.repacked.len())
    }

    /// Times `reps` calls, each on the next copy.
    fn time(&mut self, reps: usize) -> Result<()> {
        for _ in 0..reps {
            let i = self.calls % self.copies();
            self.calls += 1;
            let t = Instant::now();
            match self.repacked.get(i) {
                Some(q) => q.gemv_batch(Activation::F32(&self.x), self.m, &mut self.y)?,
                None => QuantMatrix::new(self.format, self.n, self.k, &self.plain[i])?
                    .with_precision(self.precision)
                    .gemv_batch(Activation::F32(&self.x), self.m, &mut self.y)?,
            }
            self.times.push(t.elapsed().as_secs_f64());
        }
        std::hint::black_box(&self.y);
        Ok(())
    }

    /// Median seconds per call and weight bytes per second.
    fn result(&self) -> (f64, f64) {
        let t = median(self.times.clone());
        (t, self.bytes as f64 / t / 1e9)
    }
}

pub fn run_bench_gemv(args: &BenchGemvArgs) -> Result<()> {
    if args.graph || args.in_l2 {
        anyhow::bail!("--graph and --in-l2 need --device cuda");
    }
    let pool = match args.threads {
        Some(t) => rayon::ThreadPoolBuilder::new()
            .num_threads(super::threads::check_threads(t)?)
            .build()?,
        None => rayon::ThreadPoolBuilder::new().build()?,
    };
    pool.install(|| run_inner(args))
}

/// Timing rounds per format: each round times every case of the format and probes the
/// bandwidth once, so a neighbour's burst on a shared machine lands on cases and limit alike
/// instead of on one case.
const ROUNDS: usize = 5;

fn run_inner(args: &BenchGemvArgs) -> Result<()> {
    let formats: Vec<Format> = args
        .formats
        .split(',')
        .map(|f| Format::from_name(f.trim()))
        .collect::<Result<_, _>>()
        .context("--formats")?;
    let Sizes { ns, k, reps } = sizes(args)?;
    let (ws, bw_mib) = if args.quick {
        (32 << 20, 128)
    } else {
        (args.working_set_mib.saturating_mul(1 << 20), 512)
    };
    let threads = rayon::current_num_threads();
    let per_round = reps.div_ceil(ROUNDS);
    let bw_probe = BandwidthProbe::new(bw_mib);
    println!(
        "threads: {threads}   {ROUNDS} rounds of {per_round} calls per case; limit = median over \
         the same rounds of the best of 3 read-bandwidth passes ({bw_mib} MiB 4-stream sum)"
    );
    println!(
        "{:<45} {:>10} {:>10} {:>10} {:>8} {:>15}",
        "case", "median ms", "GB/s", "limit GB/s", "of bw", "in-cache GB/s"
    );
    for &f in &formats {
        // Formats with an 8-row interleaved layout run in both layouts.
        let probe = vec![0u8; f.tensor_bytes(8, f.block_elems()).unwrap_or(0)];
        let has_repack = QuantMatrix::new(f, 8, f.block_elems(), &probe)
            .ok()
            .and_then(|q| q.repacked())
            .is_some()
            && !args.precise;
        let precision = match args.precise {
            true => Precision::Precise,
            false => Precision::Default,
        };
        // (case, its in-cache twin): the twin has rows for ~2 MiB (large enough that per-call
        // overhead is small), a multiple of 16 so every thread gets whole 8-row groups.
        let mut cases: Vec<(Result<Case>, Option<Case>)> = Vec::new();
        for repack in [false, true].into_iter().filter(|&r| !r || has_repack) {
            let cached_n = f
                .row_bytes(k)
                .ok()
                .map(|rb| ((2usize << 20) / rb.max(1)).clamp(16, 16384) / 16 * 16);
            for (i, &n) in ns.iter().enumerate() {
                let twin = match (i, cached_n) {
                    (0, Some(nc)) => Case::new(f, nc, k, args.m, 0, repack, precision).ok(),
                    _ => None,
                };
                cases.push((Case::new(f, n, k, args.m, ws, repack, precision), twin));
            }
        }
        let mut bw = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            // The best of a few passes: the limit is what the machine could do at that time.
            bw.push((0..3).map(|_| bw_probe.pass()).fold(0.0, f64::max));
            for (c, twin) in cases.iter_mut() {
                if let Ok(c) = c {
                    c.time(per_round)?;
                }
                if let Some(t) = twin {
                    t.time(per_round * 10)?;
                }
            }
        }
        let limit = median(bw);
        // The twin belongs to the first N of its layout; later rows repeat its figure.
        let mut cached = None;
        for (c, twin) in &cases {
            if let Some(t) = twin {
                cached = Some(t.result().1);
            }
            let cached = cached.map_or("-".to_string(), |g| format!("{g:.2}"));
            match c {
                Ok(c) => {
                    let (t, gbs) = c.result();
                    println!(
                        "{:<45} {:>10.3} {:>10.2} {limit:>10.2} {:>7.1}% {cached:>15}",
                        c.name,
                        t * 1e3,
                        gbs,
                        100.0 * gbs / limit
                    )
                }
                Err(e) => println!("{f} skipped: {e}"),
            }
        }
    }
    Ok(())
}
