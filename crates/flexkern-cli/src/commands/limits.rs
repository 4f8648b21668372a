//! Hardware limits measured in the same run as a benchmark: the FMA rate and memory read
//! bandwidth with every thread busy. Figures are reported as ratios to these.

use rayon::prelude::*;
use std::time::Instant;

/// Peak f32 FMA throughput over all threads, GFLOP/s (2 flops per FMA lane).
pub fn fma_peak_gflops() -> f64 {
    let threads = rayon::current_num_threads();
    let iters = 20_000_000u64;
    let mut best = 0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let flops: f64 = (0..threads).into_par_iter().map(|_| fma_loop(iters)).sum();
        best = best.max(flops / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Runs `iters` rounds of independent FMAs; returns the flops done.
fn fma_loop(iters: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the features were detected above.
        return unsafe { fma_loop_avx2(iters) };
    }
    let mut acc = [1.0f32; 32];
    for _ in 0..iters / 8 {
        for a in acc.iter_mut() {
            *a = a.mul_add(0.999_999, 1e-7);
        }
    }
    std::hint::black_box(&acc);
    (iters / 8) as f64 * 64.0
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop_avx2(iters: u64) -> f64 {
    use std::arch::x86_64::*;
    // 12 independent accumulators hide the FMA latency on two FMA ports.
    let m = _mm256_set1_ps(0.999_999);
    let c = _mm256_set1_ps(1e-7);
    let mut a = [_mm256_set1_ps(1.0); 12];
    for _ in 0..iters / 12 {
        for x in a.iter_mut() {
            *x = _mm256_fmadd_ps(*x, m, c);
        }
    }
    let mut s = _mm256_setzero_ps();
    for x in a {
        s = _mm256_add_ps(s, x);
    }
    std::hint::black_box(s);
    (iters / 12) as f64 * 12.0 * 16.0
}

/// Memory read bandwidth (GB/s): 1 GiB read by every thread, median of 5 passes.
pub fn read_bandwidth_gbs() -> f64 {
    read_bandwidth_gbs_with(1024, 5)
}

/// Median of samples.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Sum of a chunk read as 4 interleaved sequential streams (as the multi-row GEMV reads its
/// weight rows): one stream per core leaves DRAM bandwidth unused on many CPUs. AVX2 when
/// present, so the sum itself never limits the rate.
fn stream_sum(c: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 checked above.
        return unsafe { stream_sum_avx2(c) };
    }
    let len = c.len() / 4;
    let (a, rest) = c.split_at(len);
    let (b, rest) = rest.split_at(len);
    let (d, e) = rest.split_at(len);
    let mut acc = [0u64; 4];
    for (((x, y), z), w) in a.iter().zip(b).zip(d).zip(e) {
        acc[0] = acc[0].wrapping_add(*x);
        acc[1] = acc[1].wrapping_add(*y);
        acc[2] = acc[2].wrapping_add(*z);
        acc[3] = acc[3].wrapping_add(*w);
    }
    acc.iter().fold(0u64, |s, &v| s.wrapping_add(v))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn stream_sum_avx2(c: &[u64]) -> u64 {
    use std::arch::x86_64::*;
    let len = c.len() / 4 / 8 * 8; // words per stream, a multiple of two vectors
    let p = c.as_ptr();
    let mut acc = [_mm256_setzero_si256(); 8];
    let mut i = 0;
    while i < len {
        for s in 0..4 {
            let q = p.add(s * (c.len() / 4) + i) as *const __m256i;
            acc[2 * s] = _mm256_add_epi64(acc[2 * s], _mm256_loadu_si256(q));
            acc[2 * s + 1] = _mm256_add_epi64(acc[2 * s + 1], _mm256_loadu_si256(q.add(1)));
        }
        i += 8;
    }
    let mut t = _mm256_setzero_si256();
    for a in acc {
        t = _mm256_add_epi64(t, a);
    }
    let mut lanes = [0u64; 4];
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, t);
    lanes.iter().fold(0u64, |s, &v| s.wrapping_add(v))
}

/// Read bandwidth in GB/s: parallel multi-stream sum of a `mib`-MiB buffer (4 MiB chunks, each
/// read as 4 streams), median of `passes`.
pub fn read_bandwidth_gbs_with(mib: usize, passes: usize) -> f64 {
    let probe = BandwidthProbe::new(mib);
    median((0..passes).map(|_| probe.pass()).collect())
}

/// A buffer far larger than the last-level cache, kept for repeated bandwidth passes.
pub struct BandwidthProbe {
    buf: Vec<u64>,
}

impl BandwidthProbe {
    pub fn new(mib: usize) -> BandwidthProbe {
        let words = mib * (1 << 20) / 8;
        // On huge pages, as the benchmarks' inputs are: the limit is the machine's best.
        let probe = BandwidthProbe {
            buf: flexkern::mem::huge_vec(words, |i| i as u64),
        };
        probe.pass(); // warms the pages
        probe
    }

    /// One read of the whole buffer, GB/s.
    pub fn pass(&self) -> f64 {
        let t = Instant::now();
        let s = self
            .buf
            .par_chunks(1 << 19)
            .map(stream_sum)
            .reduce(|| 0, u64::wrapping_add);
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(s);
        (self.buf.len() * 8) as f64 / secs / 1e9
    }
}

/// Median wall time of `f` over `iters` runs after `warmup` runs, seconds.
pub fn median_secs(warmup: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    let mut t: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}
