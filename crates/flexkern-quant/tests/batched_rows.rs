//! Batched GEMV (m activation rows in one call, each weight block decoded once for several of
//! them) gives, for every row, exactly the bits of a call with that row alone: every format,
//! file and repacked layouts, SIMD and portable kernels, m = 1..=9 (whole batches of the
//! kernels' four activation rows and every remainder), and matrices sharing an activation
//! (`gemv_many`, whose second matrix starts inside an 8-row group).

mod common;

use common::*;
use flexkern_quant::{cpu, gemv_many, quantize, Activation, QuantMatrix};
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Five whole 8-row groups and a tail of three rows.
const N: usize = 43;

fn per_row(q: &QuantMatrix, x: &[f32], m: usize) -> Vec<f32> {
    let (n, k) = (q.n(), q.k());
    let mut y = vec![f32::NAN; m * n];
    for j in 0..m {
        q.gemv(Activation::F32(&x[j * k..][..k]), &mut y[j * n..][..n])
            .unwrap();
    }
    y
}

fn same_bits(got: &[f32], want: &[f32], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits(),
            "{what}: element {i} (row {}, out {}): batched {g} vs per row {w}",
            i / N,
            i % N
        );
    }
}

fn check(q: &QuantMatrix, x: &[f32], what: &str) {
    let k = q.k();
    for m in 1..=9 {
        let want = per_row(q, x, m);
        let mut y = vec![f32::NAN; m * N];
        q.gemv_batch(Activation::F32(&x[..m * k]), m, &mut y)
            .unwrap();
        same_bits(&y, &want, &format!("{what} gemv_batch m={m}"));
        // Two matrices as one row range: the second one's rows start at row 43.
        let (mut a, mut b) = (vec![f32::NAN; m * N], vec![f32::NAN; m * N]);
        gemv_many(
            &[q, q],
            Activation::F32(&x[..m * k]),
            m,
            &mut [&mut a, &mut b],
        )
        .unwrap();
        let (mut a1, mut b1) = (vec![f32::NAN; m * N], vec![f32::NAN; m * N]);
        for j in 0..m {
            let (aj, bj) = (&mut a1[j * N..][..N], &mut b1[j * N..][..N]);
            gemv_many(&[q, q], Activation::F32(&x[j * k..][..k]), 1, &mut [aj, bj]).unwrap();
        }
        same_bits(&a, &a1, &format!("{what} gemv_many first m={m}"));
        same_bits(&b, &b1, &format!("{what} gemv_many second m={m}"));
    }
}

#[test]
fn batched_rows_are_bit_identical_to_single_rows() {
    let seed = fresh_seed();
    eprintln!("seed {seed} (FLEXKERN_SEED={seed} repeats it)");
    let mut rng = StdRng::seed_from_u64(seed);
    for scalar in [false, true] {
        cpu::set_force_scalar(scalar);
        for f in weight_formats() {
            // Two super-blocks of the K-quants, several groups of every MLX group size.
            let k = 512usize.next_multiple_of(f.block_elems());
            let w = randn(&mut rng, N * k);
            let bytes = quantize(f, &w, N, k).unwrap();
            let x = randn(&mut rng, 9 * k);
            let q = QuantMatrix::new(f, N, k, &bytes).unwrap();
            let what = format!("{f} scalar={scalar}");
            check(&q, &x, &format!("{what} file layout"));
            if let Some(r) = q.repacked() {
                check(&r, &x, &format!("{what} repacked"));
            }
        }
    }
    cpu::set_force_scalar(false);
}
