//! Every format: quantize round-trip error (ggml's thresholds), GEMV against
//! dequantize-then-f64-matmul, batched and fused variants, odd N, tails, both SIMD paths,
//! and malformed arguments. K-quant formats are skipped while their blocks are absent.

mod common;

use common::*;
use flexkern_quant::{
    dequantize, down_with_swiglu, gemv_many, quantize, quantize_activation, swiglu_gate_up,
    Activation, Format, QuantError, QuantMatrix,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::SeedableRng;

#[test]
fn round_trip_error_within_ggml_thresholds() {
    // ggml's synthetic data: 0.1 + 2 cos(i + offset), 4096 values.
    let n = 4096;
    let src: Vec<f32> = (0..n)
        .map(|i| 0.1 + 2.0 * ((i as f32) + 0.1).cos())
        .collect();
    for f in formats() {
        let k = 512;
        let q = quantize(f, &src, n / k, k).unwrap();
        assert_eq!(q.len(), f.tensor_bytes(n / k, k).unwrap(), "{f}");
        let d = dequantize(f, &q, n / k, k).unwrap();
        let sq: f64 = src
            .iter()
            .zip(&d)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum();
        let err = sq.sqrt() / n as f64;
        assert!(err < ggml_threshold(f), "{f}: total error {err}");
        assert!(d.iter().all(|v| v.is_finite()), "{f}");
    }
}

#[test]
fn float_formats_round_exactly() {
    let mut rng = StdRng::seed_from_u64(1);
    let src = randn(&mut rng, 3 * 37);
    let back = dequantize(
        Format::F32,
        &quantize(Format::F32, &src, 3, 37).unwrap(),
        3,
        37,
    )
    .unwrap();
    assert_eq!(back, src);
    let h = dequantize(
        Format::F16,
        &quantize(Format::F16, &src, 3, 37).unwrap(),
        3,
        37,
    )
    .unwrap();
    let b = dequantize(
        Format::BF16,
        &quantize(Format::BF16, &src, 3, 37).unwrap(),
        3,
        37,
    )
    .unwrap();
    for i in 0..src.len() {
        assert_eq!(h[i], f16::from_f32(src[i]).to_f32());
        assert_eq!(b[i], bf16::from_f32(src[i]).to_f32());
    }
}

#[test]
fn gemv_matches_f64_oracle_all_formats() {
    gemv_oracle_sweep("simd");
}

#[test]
fn precise_gemv_matches_f64_oracle_all_formats() {
    precise_oracle_sweep("simd");
}

#[test]
fn integer_dot_error_is_small_against_exact_activation() {
    // The Q8 activation rounding ggml's integer dots add: documented as < 1% relative.
    let mut rng = StdRng::seed_from_u64(11);
    let (n, k) = (64, 1024);
    for f in weight_formats() {
        if f.dot_format().is_none() {
            continue;
        }
        let w = randn(&mut rng, n * k);
        let bytes = quantize(f, &w, n, k).unwrap();
        let wd = dequantize(f, &bytes, n, k).unwrap();
        let x = randn(&mut rng, k);
        let mut y = vec![f32::NAN; n];
        QuantMatrix::new(f, n, k, &bytes)
            .unwrap()
            .gemv(Activation::F32(&x), &mut y)
            .unwrap();
        let (mut num, mut den) = (0f64, 0f64);
        for r in 0..n {
            let exact: f64 = wd[r * k..(r + 1) * k]
                .iter()
                .zip(&x)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum();
            num += (y[r] as f64 - exact).powi(2);
            den += exact.powi(2);
        }
        let rel = (num / den).sqrt();
        assert!(rel < 1e-2, "{f}: relative error from Q8 activation {rel}");
    }
}

#[test]
fn batched_and_fused_match_single_row() {
    let mut rng = StdRng::seed_from_u64(3);
    for f in weight_formats() {
        let k = *ks(f).last().unwrap();
        let n = 37;
        let wg = quantize(f, &randn(&mut rng, n * k), n, k).unwrap();
        let wu = quantize(f, &randn(&mut rng, n * k), n, k).unwrap();
        let (g, u) = (
            QuantMatrix::new(f, n, k, &wg).unwrap(),
            QuantMatrix::new(f, n, k, &wu).unwrap(),
        );
        let repacked = g.repacked().zip(u.repacked());
        let layouts = [(&g, &u)]
            .into_iter()
            .chain(repacked.as_ref().map(|(g, u)| (g, u)));
        for ((g, u), m) in layouts.flat_map(|l| [1usize, 3, 16].map(|m| (l, m))) {
            let x = randn(&mut rng, m * k);
            let mut yb = vec![f32::NAN; m * n];
            g.gemv_batch(Activation::F32(&x), m, &mut yb).unwrap();
            let mut yu = vec![f32::NAN; m * n];
            u.gemv_batch(Activation::F32(&x), m, &mut yu).unwrap();
            for j in 0..m {
                let mut y1 = vec![f32::NAN; n];
                g.gemv(Activation::F32(&x[j * k..(j + 1) * k]), &mut y1)
                    .unwrap();
                assert_eq!(&yb[j * n..(j + 1) * n], &y1[..], "{f} batch m={m} row {j}");
            }
            let mut sw = vec![f32::NAN; m * n];
            swiglu_gate_up(g, u, Activation::F32(&x), m, &mut sw).unwrap();
            for i in 0..m * n {
                let want = yb[i] / (1.0 + (-yb[i]).exp()) * yu[i];
                assert!(
                    (sw[i] - want).abs() <= 1e-6 * want.abs().max(1.0),
                    "{f} swiglu m={m}"
                );
            }
            // Akunu form: W_down (silu(gate) * up), with down = g viewed as [n, k].
            let ga = randn(&mut rng, m * k);
            let ua = randn(&mut rng, m * k);
            let h: Vec<f32> = ga
                .iter()
                .zip(&ua)
                .map(|(&a, &b)| a / (1.0 + (-a).exp()) * b)
                .collect();
            let mut yd = vec![f32::NAN; m * n];
            down_with_swiglu(g, &ga, &ua, m, &mut yd).unwrap();
            let mut yh = vec![f32::NAN; m * n];
            g.gemv_batch(Activation::F32(&h), m, &mut yh).unwrap();
            assert_eq!(yd, yh, "{f} down_with_swiglu m={m}");
        }
    }
}

/// Matrices of mixed formats and odd row counts through one `gemv_many` call equal their
/// separate GEMVs (up to f32 summation order: rows may fall in different 4-row groups).
#[test]
fn gemv_many_matches_separate_gemvs() {
    let mut rng = StdRng::seed_from_u64(5);
    let k = 256;
    let specs = [
        (Format::Q4_1, 37usize),
        (Format::Q8_0, 8),
        (Format::Q4_1, 61),
        (Format::Q4K, 5),
        (Format::F16, 3),
        (Format::from_name("mlx:4:64").unwrap(), 9),
    ];
    let bytes: Vec<Vec<u8>> = specs
        .iter()
        .map(|&(f, n)| quantize(f, &randn(&mut rng, n * k), n, k).unwrap())
        .collect();
    // The second Q4_1 matrix repacked: its segment starts at row 45, inside an 8-row group.
    let mats: Vec<QuantMatrix> = specs
        .iter()
        .zip(&bytes)
        .enumerate()
        .map(|(i, (&(f, n), b))| {
            let q = QuantMatrix::new(f, n, k, b).unwrap();
            match i {
                2 => q.repacked().unwrap(),
                _ => q,
            }
        })
        .collect();
    assert!(mats[2].is_repacked());
    let refs: Vec<&QuantMatrix> = mats.iter().collect();
    for m in [1usize, 3] {
        let x = randn(&mut rng, m * k);
        let mut outs: Vec<Vec<f32>> = specs.iter().map(|&(_, n)| vec![f32::NAN; m * n]).collect();
        let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|v| v.as_mut_slice()).collect();
        gemv_many(&refs, Activation::F32(&x), m, &mut views).unwrap();
        for (q, got) in mats.iter().zip(&outs) {
            let mut want = vec![f32::NAN; m * q.n()];
            q.gemv_batch(Activation::F32(&x), m, &mut want).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{} m={m}: {g} vs {w}",
                    q.format()
                );
            }
        }
    }
    // Bad input: mismatched k, output count, output length.
    let other = quantize(Format::Q8_0, &randn(&mut rng, 4 * 64), 4, 64).unwrap();
    let odd = QuantMatrix::new(Format::Q8_0, 4, 64, &other).unwrap();
    let x = randn(&mut rng, k);
    let mut a = vec![0.0; mats[0].n()];
    let mut b = vec![0.0; 4];
    let e = gemv_many(
        &[&mats[0], &odd],
        Activation::F32(&x),
        1,
        &mut [&mut a, &mut b],
    );
    assert!(
        matches!(e, Err(QuantError::InvalidArgument { arg: "mats", .. })),
        "{e:?}"
    );
    let e = gemv_many(&[&mats[0]], Activation::F32(&x), 1, &mut []);
    assert!(
        matches!(e, Err(QuantError::InvalidArgument { arg: "ys", .. })),
        "{e:?}"
    );
    let mut short = vec![0.0; 2];
    let e = gemv_many(&[&mats[0]], Activation::F32(&x), 1, &mut [&mut short]);
    assert!(
        matches!(e, Err(QuantError::InvalidArgument { arg: "ys", .. })),
        "{e:?}"
    );
}

#[test]
fn half_activations_equal_widened_f32() {
    let mut rng = StdRng::seed_from_u64(5);
    for f in weight_formats() {
        let (n, k) = (9, ks(f)[1]);
        let bytes = quantize(f, &randn(&mut rng, n * k), n, k).unwrap();
        let q = QuantMatrix::new(f, n, k, &bytes).unwrap();
        let x = randn(&mut rng, k);
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        for (act, wide) in [
            (
                Activation::F16(&xh),
                xh.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            ),
            (
                Activation::BF16(&xb),
                xb.iter().map(|v| v.to_f32()).collect(),
            ),
        ] {
            let (mut a, mut b) = (vec![f32::NAN; n], vec![f32::NAN; n]);
            q.gemv(act, &mut a).unwrap();
            q.gemv(Activation::F32(&wide), &mut b).unwrap();
            assert_eq!(a, b, "{f}");
        }
    }
}

#[test]
fn embedding_gathers_dequantized_rows() {
    let mut rng = StdRng::seed_from_u64(9);
    for f in formats() {
        let (n, k) = (11, ks(f)[1]);
        let bytes = quantize(f, &randn(&mut rng, n * k), n, k).unwrap();
        let all = dequantize(f, &bytes, n, k).unwrap();
        let plain = QuantMatrix::new(f, n, k, &bytes).unwrap();
        let repacked = plain.repacked();
        for q in [&plain].into_iter().chain(repacked.as_ref()) {
            let rows = [10u32, 0, 3, 3, 8];
            let mut out = vec![f32::NAN; rows.len() * k];
            q.embedding(&rows, &mut out).unwrap();
            for (i, &r) in rows.iter().enumerate() {
                assert_eq!(
                    &out[i * k..(i + 1) * k],
                    &all[r as usize * k..(r as usize + 1) * k],
                    "{f} repacked={}",
                    q.is_repacked()
                );
            }
            assert_eq!(q.dequantize().unwrap(), all, "{f}");
            assert!(
                q.embedding(&[11], &mut vec![0.0; k]).is_err(),
                "{f}: row out of range"
            );
        }
    }
}

#[test]
fn misaligned_buffers_are_copied_not_rejected() {
    let mut rng = StdRng::seed_from_u64(13);
    let (n, k) = (5, 64);
    let w = randn(&mut rng, n * k);
    let x = randn(&mut rng, k);
    for f in [Format::F16, Format::Q4_0, Format::Q8_0] {
        let bytes = quantize(f, &w, n, k).unwrap();
        let mut shifted = vec![0u8; bytes.len() + 1];
        shifted[1..].copy_from_slice(&bytes);
        let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
        QuantMatrix::new(f, n, k, &bytes)
            .unwrap()
            .gemv(Activation::F32(&x), &mut a)
            .unwrap();
        QuantMatrix::new(f, n, k, &shifted[1..])
            .unwrap()
            .gemv(Activation::F32(&x), &mut b)
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(
            dequantize(f, &shifted[1..], n, k).unwrap(),
            dequantize(f, &bytes, n, k).unwrap()
        );
    }
}

#[test]
fn mlx_three_slice_constructor_matches_single_buffer() {
    let mut rng = StdRng::seed_from_u64(17);
    let (n, k) = (6, 128);
    let f = Format::from_name("mlx:4:64").unwrap();
    let bytes = quantize(f, &randn(&mut rng, n * k), n, k).unwrap();
    let (wb, sb) = (n * k / 2, n * (k / 64) * 2);
    let q1 = QuantMatrix::new(f, n, k, &bytes).unwrap();
    let q3 = QuantMatrix::from_mlx_parts(
        f,
        n,
        k,
        &bytes[..wb],
        &bytes[wb..wb + sb],
        &bytes[wb + sb..],
    )
    .unwrap();
    let x = randn(&mut rng, k);
    let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
    q1.gemv(Activation::F32(&x), &mut a).unwrap();
    q3.gemv(Activation::F32(&x), &mut b).unwrap();
    assert_eq!(a, b);
    assert!(QuantMatrix::from_mlx_parts(
        f,
        n,
        k,
        &bytes[..wb - 4],
        &bytes[wb..wb + sb],
        &bytes[wb + sb..]
    )
    .is_err());
    assert!(QuantMatrix::from_mlx_parts(Format::Q4_0, n, k, &bytes, &[], &[]).is_err());
}

#[test]
fn malformed_arguments_are_typed_errors() {
    let f = Format::Q4_0;
    let src = vec![0.25f32; 2 * 64];
    // The activation quantizer validates as `quantize` does, and refuses MLX (f32 dots).
    assert!(matches!(
        quantize_activation(Format::Q8_1, &src, 3, 64),
        Err(QuantError::InvalidArgument { arg: "src", .. })
    ));
    let mut nan = src.clone();
    nan[5] = f32::NAN;
    assert!(matches!(
        quantize_activation(Format::Q8_0, &nan, 2, 64),
        Err(QuantError::NonFinite { index: 5, .. })
    ));
    assert!(matches!(
        quantize_activation(Format::from_name("mlx:4:64").unwrap(), &src, 2, 64),
        Err(QuantError::InvalidArgument { arg: "format", .. })
    ));
    // K not a multiple of the block size, wrong lengths, non-finite input.
    assert!(matches!(
        quantize(f, &src, 4, 32 + 1),
        Err(QuantError::InvalidArgument { arg: "k", .. })
    ));
    assert!(matches!(
        quantize(f, &src, 3, 64),
        Err(QuantError::InvalidArgument { arg: "src", .. })
    ));
    assert!(matches!(
        quantize(f, &src, usize::MAX, 64),
        Err(QuantError::InvalidArgument { .. })
    ));
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut s = src.clone();
        s[70] = bad;
        for fmt in [
            Format::F32,
            Format::F16,
            Format::Q4_0,
            Format::from_name("mlx:4:32").unwrap(),
        ] {
            assert!(
                matches!(
                    quantize(fmt, &s, 2, 64),
                    Err(QuantError::NonFinite { index: 70, .. })
                ),
                "{fmt} {bad}"
            );
        }
    }
    let bytes = quantize(f, &src, 2, 64).unwrap();
    assert!(dequantize(f, &bytes[1..], 2, 64).is_err());
    assert!(dequantize(f, &bytes, 2, 96).is_err());
    assert!(QuantMatrix::new(f, 2, 64, &bytes[..bytes.len() - 1]).is_err());
    assert!(QuantMatrix::new(f, 3, 64, &bytes).is_err());
    assert!(QuantMatrix::new(f, 2, 63, &bytes).is_err());
    let q = QuantMatrix::new(f, 2, 64, &bytes).unwrap();
    let x = vec![1.0f32; 64];
    assert!(q.gemv(Activation::F32(&x[..63]), &mut [0.0; 2]).is_err());
    assert!(q.gemv(Activation::F32(&x), &mut [0.0; 3]).is_err());
    assert!(q.gemv_batch(Activation::F32(&x), 2, &mut [0.0; 4]).is_err());
    assert!(q.embedding(&[2], &mut [0.0; 64]).is_err());
    assert!(q.embedding(&[1], &mut [0.0; 63]).is_err());
    let other = QuantMatrix::new(Format::F32, 2, 64, bytemuck_bytes(&src)).unwrap();
    assert!(swiglu_gate_up(
        &q,
        &QuantMatrix::new(Format::F32, 1, 64, bytemuck_bytes(&src[..64])).unwrap(),
        Activation::F32(&x),
        1,
        &mut [0.0; 2]
    )
    .is_err());
    assert!(swiglu_gate_up(&q, &other, Activation::F32(&x), 1, &mut [0.0; 1]).is_err());
    assert!(down_with_swiglu(&q, &x, &x[..32], 1, &mut [0.0; 2]).is_err());
    assert!(matches!(
        Format::from_name("q4_9"),
        Err(QuantError::UnknownFormat(_))
    ));
    assert!(matches!(
        Format::from_name("mlx:7:64"),
        Err(QuantError::InvalidArgument { arg: "bits", .. })
    ));
}

fn bytemuck_bytes(x: &[f32]) -> &[u8] {
    bytemuck::cast_slice(x)
}

#[test]
fn format_table_matches_block_structs() {
    use flexkern_quant::k_quants::*;
    use std::mem::size_of;
    let sizes = [
        (Format::Q2K, size_of::<BlockQ2K>()),
        (Format::Q3K, size_of::<BlockQ3K>()),
        (Format::Q4K, size_of::<BlockQ4K>()),
        (Format::Q5K, size_of::<BlockQ5K>()),
        (Format::Q6K, size_of::<BlockQ6K>()),
        (Format::Q8K, size_of::<BlockQ8K>()),
    ];
    for (f, s) in sizes {
        assert_eq!(f.block_bytes(), s, "{f}");
    }
}
