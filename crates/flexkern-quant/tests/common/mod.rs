//! Shared helpers for the integration tests: format lists, random data, the f64 oracle.
#![allow(dead_code)]

use flexkern_quant::{
    dequantize, quantize, quantize_activation, Activation, Format, MlxScale, QuantError,
    QuantMatrix,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub fn all_formats() -> Vec<Format> {
    let mut v: Vec<Format> = Format::all_fixed().collect();
    for bits in [2, 3, 4, 5, 6, 8] {
        for g in [32, 64, 128] {
            v.push(Format::mlx(bits, g, MlxScale::F16).unwrap());
        }
        v.push(Format::mlx(bits, 64, MlxScale::BF16).unwrap());
    }
    v
}

/// Formats whose kernels are present in this build (K-quants arrive separately).
pub fn formats() -> Vec<Format> {
    all_formats()
        .into_iter()
        .filter(
            |&f| match quantize(f, &vec![0.5; f.block_elems()], 1, f.block_elems()) {
                Err(QuantError::Unsupported { .. }) => {
                    eprintln!("skipping {f}: not in this build");
                    false
                }
                _ => true,
            },
        )
        .collect()
}

/// Q8_K is an activation format: ggml has no weight kernels that read it as weights.
pub fn weight_formats() -> Vec<Format> {
    formats()
        .into_iter()
        .filter(|&f| f != Format::Q8K)
        .collect()
}

pub fn randn(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            // Sum of uniforms: cheap, roughly Gaussian, never exactly zero in bulk.
            let s: f32 = (0..4).map(|_| rng.gen::<f32>() - 0.5).sum();
            s * 1.7
        })
        .collect()
}

/// ggml test-quantize-fns' total error bound for `sqrt(sum d^2) / n`.
pub fn ggml_threshold(f: Format) -> f64 {
    match f {
        Format::Q2K => 0.0075,
        Format::Q3K => 0.0040,
        Format::MlxAffine { bits: 2, .. } => 0.0075,
        Format::MlxAffine { bits: 3, .. } => 0.0040,
        _ => 0.002,
    }
}

/// The activation the kernel actually multiplies: Q8-rounded where the format dots against Q8.
pub fn effective_x(f: Format, x: &[f32], k: usize) -> Vec<f32> {
    match f.dot_format() {
        Some(d) => {
            let m = x.len() / k;
            dequantize(d, &quantize_activation(d, x, m, k).unwrap(), m, k).unwrap()
        }
        _ => x.to_vec(),
    }
}

/// `(oracle, tolerance)` per output: f64 matmul of dequantized W and the effective activation.
pub fn oracle(f: Format, wd: &[f32], xe: &[f32], n: usize, k: usize) -> Vec<(f64, f64)> {
    let q8_1 = f.dot_format() == Some(Format::Q8_1);
    (0..n)
        .map(|r| {
            let w = &wd[r * k..(r + 1) * k];
            let dot: f64 = w.iter().zip(xe).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mag: f64 = w
                .iter()
                .zip(xe)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            let mut tol = 2e-5 * mag + 1e-6;
            if q8_1 {
                // Q8_1 stores the block sum s in f16: the min term carries that rounding.
                for (wb, xb) in w.chunks(32).zip(xe.chunks(32)) {
                    let wmax = wb.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
                    let s: f64 = xb.iter().map(|&v| v as f64).sum();
                    tol += 1e-3 * wmax * s.abs();
                }
            }
            (dot, tol)
        })
        .collect()
}

pub fn check(f: Format, what: &str, got: &[f32], want: &[(f64, f64)]) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &(w, tol))) in got.iter().zip(want).enumerate() {
        assert!(
            g.is_finite() && (g as f64 - w).abs() <= tol,
            "{f} {what}: y[{i}] = {g}, oracle {w}, tol {tol}"
        );
    }
}

/// K values that exercise tails: a single block, an odd number of blocks, several blocks.
pub fn ks(f: Format) -> Vec<usize> {
    let qk = f
        .block_elems()
        .max(Format::Q8_0.block_elems().min(f.block_elems()));
    match f {
        Format::F32 | Format::F16 | Format::BF16 => vec![1, 7, 37, 256 + 13],
        _ => vec![qk, 3 * qk, 4 * qk.max(64)],
    }
}

/// GEMV of every weight format against the f64 oracle over odd N and tail K, threaded and
/// sequential (which must agree bit for bit).
pub fn gemv_oracle_sweep(path: &str) {
    let seed = fresh_seed();
    eprintln!("gemv_oracle_sweep({path}): seed {seed} (FLEXKERN_SEED={seed} repeats it)");
    let mut rng = StdRng::seed_from_u64(seed);
    for f in weight_formats() {
        for k in ks(f) {
            // 40 and 67 rows: whole 8-row groups of the repacked layout, paired and unpaired,
            // and a tail.
            for n in [1usize, 7, 40, 67] {
                let w = randn(&mut rng, n * k);
                let bytes = quantize(f, &w, n, k).unwrap();
                let wd = dequantize(f, &bytes, n, k).unwrap();
                let x = randn(&mut rng, k);
                let want = oracle(f, &wd, &effective_x(f, &x, k), n, k);
                let q = QuantMatrix::new(f, n, k, &bytes).unwrap();
                let repacked = q.repacked();
                for (q, layout) in [(&q, "plain"), (repacked.as_ref().unwrap_or(&q), "repacked")] {
                    let what = format!("gemv n={n} k={k} path={path} layout={layout}");
                    let mut y = vec![f32::NAN; n];
                    q.gemv(Activation::F32(&x), &mut y).unwrap();
                    check(f, &what, &y, &want);
                    let mut ys = vec![f32::NAN; n];
                    q.clone()
                        .sequential()
                        .gemv(Activation::F32(&x), &mut ys)
                        .unwrap();
                    assert_eq!(y, ys, "{f} {what}: sequential differs");
                }
            }
        }
    }
}

/// A new seed every run (fresh inputs), or `FLEXKERN_SEED` to repeat a failing one.
pub fn fresh_seed() -> u64 {
    std::env::var("FLEXKERN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ (std::process::id() as u64).rotate_left(32)
        })
}

/// Precise mode (`Precision::Precise`) of every weight format, MLX included, against the f64
/// dot of the dequantized weights with the activation as given (never rounded): single rows
/// and batches, plain and repacked layouts, threaded and sequential, outputs poisoned first.
/// The tolerance is f32 summation error only: `1e-5 * sum |w x|`.
pub fn precise_oracle_sweep(path: &str) {
    use flexkern_quant::Precision;
    let seed = fresh_seed();
    eprintln!("precise_oracle_sweep({path}): seed {seed} (FLEXKERN_SEED={seed} repeats it)");
    let mut rng = StdRng::seed_from_u64(seed);
    for f in weight_formats() {
        for k in ks(f) {
            for (n, m) in [(1usize, 1usize), (7, 1), (40, 3), (67, 1)] {
                let w = randn(&mut rng, n * k);
                let bytes = quantize(f, &w, n, k).unwrap();
                let wd = dequantize(f, &bytes, n, k).unwrap();
                let x = randn(&mut rng, m * k);
                let mut want = Vec::with_capacity(m * n);
                for xj in x.chunks(k) {
                    for wr in wd.chunks(k) {
                        let (mut dot, mut mag) = (0f64, 0f64);
                        for (&a, &b) in wr.iter().zip(xj) {
                            dot += a as f64 * b as f64;
                            mag += (a as f64 * b as f64).abs();
                        }
                        want.push((dot, 1e-5 * mag + 1e-9));
                    }
                }
                let q = QuantMatrix::new(f, n, k, &bytes)
                    .unwrap()
                    .with_precision(Precision::Precise);
                let repacked = q.repacked();
                for (q, layout) in [(&q, "plain"), (repacked.as_ref().unwrap_or(&q), "repacked")] {
                    let what =
                        format!("precise gemv n={n} m={m} k={k} path={path} layout={layout}");
                    let mut y = vec![f32::NAN; m * n];
                    q.gemv_batch(Activation::F32(&x), m, &mut y).unwrap();
                    check(f, &what, &y, &want);
                    let mut ys = vec![f32::NAN; m * n];
                    q.clone()
                        .sequential()
                        .gemv_batch(Activation::F32(&x), m, &mut ys)
                        .unwrap();
                    assert_eq!(y, ys, "{f} {what}: sequential differs");
                }
            }
        }
    }
}
