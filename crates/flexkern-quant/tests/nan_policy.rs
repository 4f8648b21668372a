//! Issue 16, the NaN policy on the quantized paths: a NaN or an infinity in the activation
//! reaches the output (IEEE: as W x computed in f32 from the dequantized weights) on every
//! format, plain and repacked, on the SIMD and the scalar kernels, through `gemv`,
//! `gemv_batch`, `gemv_many`, `swiglu_gate_up` and `down_with_swiglu`; rows without one are
//! untouched. Quantizing weights too large for a format's scales is a typed error, never
//! inf / NaN / zero blocks.

mod common;

use common::*;
use flexkern_quant::{
    cpu, dequantize, down_with_swiglu, gemv_many, quantize, swiglu_gate_up, Activation, Precision,
    QuantError, QuantMatrix,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

const N: usize = 16;
const K: usize = 256;

/// `W x` in f32 from the dequantized weights: what the policy promises.
fn exact(w: &[f32], x: &[f32]) -> Vec<f32> {
    w.chunks_exact(K)
        .map(|r| r.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

/// Same non-finite class as `want` (NaN, or the same infinity); finite values close.
fn same_class(got: &[f32], want: &[f32], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_finite() {
            g.is_finite() && (g - w).abs() <= 1e-3 * w.abs().max(1.0)
        } else {
            g.is_nan() == w.is_nan() && (w.is_nan() || g == w)
        };
        assert!(ok, "{what}: y[{i}] = {g}, want {w}");
    }
}

/// Three activation rows: clean, one NaN, one +Inf.
fn activations(rng: &mut StdRng) -> Vec<f32> {
    let mut x = randn(rng, 3 * K);
    x[K + 5] = f32::NAN;
    x[2 * K + 7] = f32::INFINITY;
    x
}

fn check_matrix(q: &QuantMatrix, w: &[f32], x: &[f32], what: &str) {
    let mut y = vec![0.0f32; 3 * N];
    q.gemv_batch(Activation::F32(x), 3, &mut y).unwrap();
    let mut clean = vec![0.0f32; N];
    q.gemv(Activation::F32(&x[..K]), &mut clean).unwrap();
    if q.precision() == Precision::Default {
        assert_eq!(&y[..N], &clean[..], "{what}: the clean row changed");
    } else {
        // Precise batches widen each row once and sum in another order than single rows.
        for (a, b) in y[..N].iter().zip(&clean) {
            assert!(
                (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                "{what}: {a} vs {b}"
            );
        }
    }
    assert!(y[N..2 * N].iter().all(|v| v.is_nan()), "{what}: NaN row");
    same_class(
        &y[2 * N..],
        &exact(w, &x[2 * K..]),
        &format!("{what} Inf row"),
    );
    // m = 1 takes its own path.
    let mut y1 = vec![0.0f32; N];
    q.gemv(Activation::F32(&x[K..2 * K]), &mut y1).unwrap();
    assert!(y1.iter().all(|v| v.is_nan()), "{what}: gemv NaN");
    // Q, K, V sharing one activation.
    let (mut a, mut b) = (vec![0.0f32; 3 * N], vec![0.0f32; 3 * N]);
    gemv_many(&[q, q], Activation::F32(x), 3, &mut [&mut a, &mut b]).unwrap();
    assert!(
        a[N..2 * N].iter().chain(&b[N..2 * N]).all(|v| v.is_nan()),
        "{what}: many"
    );
    same_class(
        &b[2 * N..],
        &exact(w, &x[2 * K..]),
        &format!("{what} many Inf row"),
    );
    // Fused SwiGLU: gate = up = q.
    let mut s = vec![0.0f32; 3 * N];
    swiglu_gate_up(q, q, Activation::F32(x), 3, &mut s).unwrap();
    assert!(s[N..2 * N].iter().all(|v| v.is_nan()), "{what}: swiglu NaN");
    let mut d = vec![0.0f32; N];
    let nan_h = [&[f32::NAN][..], &x[..K - 1]].concat();
    down_with_swiglu(q, &nan_h, &x[..K], 1, &mut d).unwrap();
    assert!(d.iter().all(|v| v.is_nan()), "{what}: down_with_swiglu");
}

#[test]
fn non_finite_activations_reach_the_output_on_every_format_and_path() {
    let mut rng = StdRng::seed_from_u64(16);
    let x = activations(&mut rng);
    for scalar in [false, true] {
        cpu::set_force_scalar(scalar);
        for f in weight_formats() {
            let wsrc = randn(&mut rng, N * K);
            let bytes = quantize(f, &wsrc, N, K).unwrap();
            let w = dequantize(f, &bytes, N, K).unwrap();
            let q = QuantMatrix::new(f, N, K, &bytes).unwrap();
            let what = format!("{f} scalar={scalar}");
            check_matrix(&q, &w, &x, &what);
            let p = q.clone().with_precision(Precision::Precise);
            check_matrix(&p, &w, &x, &format!("{what} precise"));
            if let Some(r) = q.repacked() {
                check_matrix(&r, &w, &x, &format!("{what} repacked"));
            }
        }
    }
    cpu::set_force_scalar(false);
}

/// The largest |w| each format stores faithfully, and quantizing just past it.
#[test]
fn weights_beyond_a_formats_range_are_a_typed_error() {
    let mut rng = StdRng::seed_from_u64(6);
    for f in weight_formats() {
        let Some(limit) = f.max_abs_weight() else {
            continue;
        };
        for big in [limit * 1.01, 1e6, 3e38, f32::MAX] {
            if big <= limit || !big.is_finite() {
                continue;
            }
            let mut src = randn(&mut rng, N * K);
            src[3] = big;
            match quantize(f, &src, N, K) {
                Err(QuantError::OutOfRange { arg, index, .. }) => {
                    assert_eq!((arg, index), ("src", 3), "{f}")
                }
                other => panic!("{f} at {big}: expected OutOfRange, got {other:?}"),
            }
        }
    }
}

/// At the limit every format still writes finite blocks that decode close to the input
/// (MLX 4-bit at 7e4, Q4_0 at 1e6, Q3_K and Q6_K at 3e38 once wrote inf, NaN or zeros).
#[test]
fn weights_at_a_formats_limit_quantize_faithfully() {
    let mut rng = StdRng::seed_from_u64(7);
    for f in weight_formats() {
        let limit = f.max_abs_weight().unwrap_or(3e38);
        for sign in [1.0f32, -1.0] {
            let mut src: Vec<f32> = randn(&mut rng, N * K)
                .iter()
                .map(|v| (v * (limit / 4.0)).clamp(-limit, limit))
                .collect();
            src[3] = sign * limit;
            src[K + 9] = -sign * limit * 0.5;
            let bytes = quantize(f, &src, N, K).unwrap();
            let d = dequantize(f, &bytes, N, K).unwrap();
            assert!(
                d.iter().all(|v| v.is_finite()),
                "{f} at {limit}: non-finite decode"
            );
            // Each row's error is a fraction of its largest value (16 levels at 2 bits).
            for (r, (a, b)) in src.chunks(K).zip(d.chunks(K)).enumerate() {
                let amax = a.iter().fold(0f32, |m, v| m.max(v.abs()));
                let err = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
                assert!(err <= 0.6 * amax, "{f} row {r}: error {err} of max {amax}");
            }
            assert!(
                (d[3] - src[3]).abs() <= 0.3 * limit,
                "{f}: {} -> {}",
                src[3],
                d[3]
            );
        }
    }
}
