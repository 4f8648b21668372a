//! Row softmax and logit soft-capping (Akunu ships both beside its attention kernels), on the
//! CPU backend's AVX2 primitives or the portable ones.

use crate::backend::cpu::simd::Isa;
use crate::error::{invalid, Result};
use std::f32::consts::LOG2_E;

/// Softmax over each row of `x` (`cols` wide, row-major), in place. A row that is entirely
/// -inf (fully masked) becomes zeros rather than NaN.
pub fn softmax_rows(x: &mut [f32], cols: usize) -> Result<()> {
    softmax_rows_with(Isa::detect(false), x, cols)
}

/// Gemma's logit soft-capping `x = cap * tanh(x / cap)`, in place; `cap` must be finite and > 0.
pub fn softcap(x: &mut [f32], cap: f32) -> Result<()> {
    softcap_with(Isa::detect(false), x, cap)
}

pub(crate) fn softmax_rows_with(isa: Isa, x: &mut [f32], cols: usize) -> Result<()> {
    if cols == 0 {
        return Err(invalid("cols", "must be positive"));
    }
    if !x.len().is_multiple_of(cols) {
        return Err(invalid(
            "x",
            format!("length {} is not a multiple of cols = {cols}", x.len()),
        ));
    }
    for row in x.chunks_exact_mut(cols) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if m == f32::NEG_INFINITY {
            row.fill(0.0);
            continue;
        }
        // e^(x - m) = 2^((x - m) log2 e): one FMA-friendly pass, then the vector exp2.
        for v in row.iter_mut() {
            *v = (*v - m) * LOG2_E;
        }
        (isa.exp2)(row);
        let inv = 1.0 / row.iter().sum::<f32>();
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
    Ok(())
}

pub(crate) fn softcap_with(isa: Isa, x: &mut [f32], cap: f32) -> Result<()> {
    if !(cap.is_finite() && cap > 0.0) {
        return Err(invalid(
            "cap",
            format!("must be finite and positive, got {cap}"),
        ));
    }
    (isa.softcap)(x, cap);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 2654435761usize) % 10007) as f32 / 10007.0 * 40.0 - 20.0)
            .collect()
    }

    #[test]
    fn softmax_matches_f64() {
        for isa in [Isa::detect(false), Isa::detect(true)] {
            for cols in [1, 7, 8, 33, 256] {
                let mut x = data(cols * 5);
                x[0] = f32::NEG_INFINITY;
                let want: Vec<f64> = x
                    .chunks(cols)
                    .flat_map(|r| {
                        let m = r.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
                        let s: f64 = r.iter().map(|&v| (v as f64 - m).exp()).sum();
                        // A fully masked row (m = -inf) is all zeros.
                        r.iter().map(move |&v| {
                            if m == f64::NEG_INFINITY {
                                0.0
                            } else {
                                (v as f64 - m).exp() / s
                            }
                        })
                    })
                    .collect();
                softmax_rows_with(isa, &mut x, cols).unwrap();
                for (a, b) in x.iter().zip(&want) {
                    assert!((*a as f64 - b).abs() <= 1e-6, "{} {a} {b}", isa.name);
                }
            }
            let mut masked = vec![f32::NEG_INFINITY; 6];
            softmax_rows_with(isa, &mut masked, 3).unwrap();
            assert_eq!(masked, vec![0.0; 6]);
        }
    }

    #[test]
    fn softcap_matches_f64() {
        for isa in [Isa::detect(false), Isa::detect(true)] {
            for cap in [1.0f32, 30.0, 50.0] {
                let mut x = data(1001);
                x.extend([0.0, -0.0, 1e-8, 1e30, -1e30]);
                let want: Vec<f64> = x
                    .iter()
                    .map(|&v| cap as f64 * (v as f64 / cap as f64).tanh())
                    .collect();
                softcap_with(isa, &mut x, cap).unwrap();
                for (a, b) in x.iter().zip(&want) {
                    assert!(
                        (*a as f64 - b).abs() <= 1e-6 * cap as f64,
                        "{} {a} {b}",
                        isa.name
                    );
                }
            }
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(softmax_rows(&mut [1.0; 6], 0).is_err());
        assert!(softmax_rows(&mut [1.0; 6], 4).is_err());
        assert!(softcap(&mut [1.0], 0.0).is_err());
        assert!(softcap(&mut [1.0], f32::NAN).is_err());
        assert!(softmax_rows(&mut [], 3).is_ok());
    }
}
