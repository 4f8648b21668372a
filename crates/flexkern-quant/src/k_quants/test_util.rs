//! Shared test helpers for the K-quant formats: data generators, ggml's error metrics, the f64
//! dot oracle and the crosscheck export (`FLEXKERN_CROSSCHECK_DIR`).

use super::{BlockQ8K, QK_K};
use crate::format::QuantBlock;
use bytemuck::Zeroable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// ggml test-quantize-fns' `generate_data`: `0.1 + amplitude * cos(i + offset)`, computed as
/// there (cosf of the f32 argument, sum in f64, stored as f32).
pub(crate) fn ggml_test_data(offset: f32, n: usize, amplitude: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (0.1f64 + (amplitude * (i as f32 + offset).cos()) as f64) as f32)
        .collect()
}

/// ggml test-quantize-fns' `array_rmse`: `sqrt(sum (a - b)^2) / n`, i.e. the RMS error divided
/// by `sqrt(n)`. The thresholds (0.002, 2-bit 0.0075, 3-bit 0.0040) are for n = 4096 on
/// `ggml_test_data(0.0, 4096, 2.0)`.
pub(crate) fn ggml_total_error(a: &[f32], b: &[f32]) -> f64 {
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    sum.sqrt() / a.len() as f64
}

/// Relative RMS error `rms(a - b) / rms(a)` (scale free, used for random data).
pub(crate) fn rel_rms_error(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    let den: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum();
    (num / den).sqrt()
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Dist {
    Normal,
    Uniform,
}

/// `n` values of the distribution times `scale`, from a fixed seed.
pub(crate) fn random_data(dist: Dist, n: usize, scale: f32, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| match dist {
            Dist::Uniform => rng.gen_range(-1.0f32..1.0) * scale,
            Dist::Normal => {
                // Box-Muller.
                let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                let u2: f64 = rng.gen();
                ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32 * scale
            }
        })
        .collect()
}

/// Random bytes reinterpreted as blocks, with each f16 scale field (at the given byte offsets)
/// replaced by a finite value of moderate size, so dequantized values are finite.
pub(crate) fn random_blocks<B: QuantBlock>(n: usize, f16_offsets: &[usize], seed: u64) -> Vec<B> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut blocks = vec![B::zeroed(); n];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut blocks);
    rng.fill(bytes);
    let size = std::mem::size_of::<B>();
    for b in bytes.chunks_exact_mut(size) {
        for &off in f16_offsets {
            let v = half::f16::from_f32(rng.gen_range(-2.0f32..2.0) * 1e-2);
            b[off..off + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    blocks
}

/// Quantizes `x` to Q8_K activation blocks.
pub(crate) fn q8k(x: &[f32]) -> Vec<BlockQ8K> {
    let mut a = vec![BlockQ8K::zeroed(); x.len() / QK_K];
    BlockQ8K::quantize_ref(x, &mut a);
    a
}

/// Dequantizes blocks to a new vector.
pub(crate) fn deq<B: QuantBlock>(b: &[B]) -> Vec<f32> {
    let mut y = vec![f32::NAN; b.len() * B::ELEMS];
    B::dequantize(b, &mut y);
    y
}

/// f64 dot of two f32 vectors.
pub(crate) fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// Writes `<name>.blocks` (raw block bytes), `<name>.f32` (flexkern's dequantized values) and,
/// given `src`, `<name>.src.f32` (the quantizer input) under `$FLEXKERN_CROSSCHECK_DIR`, for
/// `tests/kquants_crosscheck.py`. Does nothing when the variable is unset.
pub(crate) fn export<B: QuantBlock>(name: &str, blocks: &[B], src: Option<&[f32]>) {
    let Some(dir) = std::env::var_os("FLEXKERN_CROSSCHECK_DIR") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("create crosscheck dir");
    let y = deq(blocks);
    std::fs::write(
        dir.join(format!("{name}.blocks")),
        bytemuck::cast_slice::<B, u8>(blocks),
    )
    .expect("write blocks");
    std::fs::write(
        dir.join(format!("{name}.f32")),
        bytemuck::cast_slice::<f32, u8>(&y),
    )
    .expect("write f32");
    if let Some(src) = src {
        std::fs::write(
            dir.join(format!("{name}.src.f32")),
            bytemuck::cast_slice::<f32, u8>(src),
        )
        .expect("write src");
    }
}

/// The quantizer inputs the crosscheck uses for every format: ggml's test data, normal and
/// uniform data at several scales, with some all-zero, constant, one-hot and tiny blocks.
pub(crate) fn crosscheck_inputs() -> Vec<f32> {
    let mut x = ggml_test_data(0.0, 4096, 2.0);
    for (i, &scale) in [1e-3f32, 0.02, 1.0, 30.0, 1e3].iter().enumerate() {
        x.extend(random_data(Dist::Normal, 8 * QK_K, scale, 100 + i as u64));
        x.extend(random_data(Dist::Uniform, 8 * QK_K, scale, 200 + i as u64));
    }
    // Positive-only and negative-only blocks (the min search and sign handling).
    x.extend(
        random_data(Dist::Uniform, QK_K, 1.0, 7)
            .iter()
            .map(|v| v.abs() + 0.5),
    );
    x.extend(
        random_data(Dist::Uniform, QK_K, 1.0, 8)
            .iter()
            .map(|v| -v.abs() - 0.5),
    );
    x.extend(std::iter::repeat_n(0.0, QK_K));
    x.extend(std::iter::repeat_n(0.75, QK_K));
    let mut one_hot = vec![0.0; QK_K];
    one_hot[37] = -3.0;
    x.extend(one_hot);
    x.extend(random_data(Dist::Normal, QK_K, 1e-20, 9));
    // Heavy tails and outliers, and a different scale in every block (1e-6 .. 1e4; larger
    // blocks overflow the f16 super-block scales to inf in ggml and here alike).
    let heavy = random_data(Dist::Normal, 64 * QK_K, 1.0, 10);
    x.extend(heavy.iter().map(|v| v * v * v));
    let mut spiky = random_data(Dist::Uniform, 64 * QK_K, 0.1, 11);
    for i in (0..spiky.len()).step_by(97) {
        spiky[i] *= 300.0;
    }
    x.extend(spiky);
    for (b, chunk) in random_data(Dist::Normal, 128 * QK_K, 1.0, 12)
        .chunks(QK_K)
        .enumerate()
    {
        let scale = 10f32.powi((b % 11) as i32 - 6);
        x.extend(chunk.iter().map(|v| v * scale));
    }
    x
}

/// Round-trip checks shared by the weight formats: ggml's total error on ggml's test data
/// (`< ggml_tol`), and the relative RMS error on normal / uniform data at scales 1e-3, 1 and 1e3
/// (`< rel_tol`, which must hold at every scale since the formats are scale free, up to f16
/// precision of `d`: at scale 1e-3 Q6_K's `d` is an f16 subnormal). The relative bounds are the
/// measured errors (2026-11-22) plus about 10%, to catch regressions.
pub(crate) fn check_round_trip<B: QuantBlock>(ggml_tol: f64, rel_tol: [f64; 2]) {
    let quant = |x: &[f32]| {
        let mut b = vec![B::zeroed(); x.len() / QK_K];
        B::quantize_ref(x, &mut b);
        deq(&b)
    };
    let x = ggml_test_data(0.0, 4096, 2.0);
    let e = ggml_total_error(&x, &quant(&x));
    eprintln!("{:?}: ggml total error {e:.6}", B::FORMAT);
    assert!(
        e < ggml_tol,
        "{:?}: ggml total error {e} >= {ggml_tol}",
        B::FORMAT
    );
    for (k, dist) in [Dist::Normal, Dist::Uniform].into_iter().enumerate() {
        for (s, scale) in [1e-3f32, 1.0, 1e3].into_iter().enumerate() {
            let x = random_data(dist, 32 * QK_K, scale, 1000 + 10 * k as u64 + s as u64);
            let e = rel_rms_error(&x, &quant(&x));
            eprintln!("{:?} {dist:?} x{scale}: rel rms {e:.5}", B::FORMAT);
            assert!(
                e < rel_tol[k],
                "{:?} {dist:?} x{scale}: rel rms {e} >= {}",
                B::FORMAT,
                rel_tol[k]
            );
        }
    }
    // All-zero input quantizes to all-zero output.
    let z = quant(&[0.0; QK_K]);
    assert!(z.iter().all(|&v| v == 0.0), "{:?}: zero block", B::FORMAT);
}

/// `vec_dot` checks shared by the weight formats, on `w` (quantized data and random bytes):
/// scalar and AVX2 both lie within `dot_error_bound` of the f64 dot of the dequantized operands
/// (and so of each other). `mins(b)` gives each element's subtracted offset (zero for
/// symmetric formats), used to bound the error without cancellation.
pub(crate) fn check_vec_dot<B: QuantBlock>(
    w: &[B],
    mins: impl Fn(&B) -> Vec<f32>,
    dot: fn(super::DotPath, &[B], &[BlockQ8K]) -> f32,
) {
    use super::{dot_error_bound, DotPath};
    let a = q8k(&random_data(Dist::Normal, w.len() * QK_K, 1.0, 77));
    let (wd, ad) = (deq(w), deq(&a));
    let m: Vec<f32> = w.iter().flat_map(&mins).collect();
    let mag: f64 = (0..wd.len())
        .map(|i| (ad[i] as f64).abs() * ((wd[i] as f64 + m[i] as f64).abs() + (m[i] as f64).abs()))
        .sum();
    let oracle = dot_f64(&wd, &ad);
    let s = dot(DotPath::Scalar, w, &a);
    let v = dot(DotPath::Avx2, w, &a);
    let bound = dot_error_bound(w.len(), mag);
    for (path, got) in [("scalar", s), ("avx2", v)] {
        let err = (got as f64 - oracle).abs();
        assert!(
            err <= bound,
            "{:?} {path}: dot {got} vs f64 {oracle} (bound {bound})",
            B::FORMAT
        );
    }
    // The paths differ only in f32 summation order (integer sums are exact in both).
    assert!(
        (s as f64 - v as f64).abs() <= bound,
        "{:?}: scalar {s} vs avx2 {v}",
        B::FORMAT
    );
    // Prefixes, so small block counts (and the empty dot) go through both paths.
    for n in 0..w.len().min(3) {
        let s = dot(DotPath::Scalar, &w[..n], &a[..n]) as f64;
        let v = dot(DotPath::Avx2, &w[..n], &a[..n]) as f64;
        assert!(
            (s - v).abs() <= dot_error_bound(n, mag),
            "{:?}: {n} blocks",
            B::FORMAT
        );
    }
}

/// ggml test-quantize-fns' dot test: quantize ggml's data 0 (weights) and 1 (activation to
/// Q8_K), dot, compare with the f64 dot of the unquantized data, divided by n.
pub(crate) fn check_ggml_dot_error<B: QuantBlock<Dot = BlockQ8K>>(tol: f64) {
    let x = ggml_test_data(0.0, 4096, 2.0);
    let y = ggml_test_data(1.0, 4096, 2.0);
    let mut w = vec![B::zeroed(); x.len() / QK_K];
    B::quantize_ref(&x, &mut w);
    let got = B::vec_dot(&w, &q8k(&y)) as f64;
    let e = (got - dot_f64(&x, &y)).abs() / x.len() as f64;
    assert!(e < tol, "{:?}: ggml dot error {e} >= {tol}", B::FORMAT);
}
