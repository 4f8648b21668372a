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

/// Memory read bandwidth (GB/s) summing a buffer far larger than the caches with every thread.
pub fn read_bandwidth_gbs() -> f64 {
    let n = 256 << 20; // 1 GiB of f32
    let buf: Vec<f32> = vec![1.0; n];
    let threads = rayon::current_num_threads();
    let chunk = n.div_ceil(threads * 64);
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let s: f32 = buf.par_chunks(chunk).map(sum_chunk).sum();
        times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(s);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    (n * 4) as f64 / times[times.len() / 2] / 1e9
}

fn sum_chunk(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the feature was detected above.
        return unsafe { sum_avx2(x) };
    }
    x.iter().sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_avx2(x: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); 4];
    let blocks = x.chunks_exact(32);
    let tail = blocks.remainder();
    for b in blocks {
        for (j, a) in acc.iter_mut().enumerate() {
            *a = _mm256_add_ps(*a, _mm256_loadu_ps(b.as_ptr().add(j * 8)));
        }
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), s);
    lanes.iter().sum::<f32>() + tail.iter().sum::<f32>()
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
