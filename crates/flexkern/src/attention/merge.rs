//! Merging partial attention states `(O, LSE)`: split-KV partitions, shared-prefix (cascade)
//! attention, sinks. A state with LSE = -inf is empty and contributes nothing.

use crate::error::{invalid, Result};

/// Folds state `(o_b, lse_b)` into `(o_a, lse_a)` for one row of `o_a.len()` values.
#[inline]
pub fn merge_into(o_a: &mut [f32], lse_a: &mut f32, o_b: &[f32], lse_b: f32) {
    if lse_b == f32::NEG_INFINITY {
        return;
    }
    if *lse_a == f32::NEG_INFINITY {
        o_a.copy_from_slice(o_b);
        *lse_a = lse_b;
        return;
    }
    let m = lse_a.max(lse_b);
    let (wa, wb) = ((*lse_a - m).exp(), (lse_b - m).exp());
    let inv = 1.0 / (wa + wb);
    for (a, &b) in o_a.iter_mut().zip(o_b) {
        *a = (*a * wa + b * wb) * inv;
    }
    *lse_a = m + (wa + wb).ln();
}

/// Merges `parts` (each `(o [rows * dim], lse [rows])`) into `o` / `lse`.
pub fn merge_states(
    parts: &[(&[f32], &[f32])],
    rows: usize,
    dim: usize,
    o: &mut [f32],
    lse: &mut [f32],
) -> Result<()> {
    let n = rows
        .checked_mul(dim)
        .ok_or_else(|| invalid("rows", "rows * dim overflows"))?;
    if o.len() != n {
        return Err(invalid(
            "o",
            format!("length {} but rows * dim = {n}", o.len()),
        ));
    }
    if lse.len() != rows {
        return Err(invalid(
            "lse",
            format!("length {} but rows = {rows}", lse.len()),
        ));
    }
    for (i, (po, pl)) in parts.iter().enumerate() {
        if po.len() != n || pl.len() != rows {
            return Err(invalid(
                "parts",
                format!(
                    "state {i} has lengths ({}, {}), expected ({n}, {rows})",
                    po.len(),
                    pl.len()
                ),
            ));
        }
        if pl.iter().any(|x| x.is_nan() || *x == f32::INFINITY) {
            return Err(invalid("parts", format!("state {i} has a NaN or +inf LSE")));
        }
    }
    o.fill(0.0);
    lse.fill(f32::NEG_INFINITY);
    for (po, pl) in parts {
        for r in 0..rows {
            merge_into(
                &mut o[r * dim..][..dim],
                &mut lse[r],
                &po[r * dim..][..dim],
                pl[r],
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_halves_equals_whole() {
        // Softmax over 6 scores with values v; split into [0..2) and [2..6).
        let s = [0.3f64, -1.2, 2.0, 0.7, -0.4, 1.1];
        let v = [1.0f64, -2.0, 0.5, 3.0, -1.0, 0.25];
        let part = |r: std::ops::Range<usize>| {
            let m = s[r.clone()].iter().cloned().fold(f64::MIN, f64::max);
            let l: f64 = s[r.clone()].iter().map(|x| (x - m).exp()).sum();
            let o: f64 = r.clone().map(|i| (s[i] - m).exp() * v[i]).sum::<f64>() / l;
            (vec![o as f32], vec![(m + l.ln()) as f32])
        };
        let (a, b, whole) = (part(0..2), part(2..6), part(0..6));
        let mut o = [0f32];
        let mut lse = [0f32];
        merge_states(&[(&a.0, &a.1), (&b.0, &b.1)], 1, 1, &mut o, &mut lse).unwrap();
        assert!((o[0] - whole.0[0]).abs() < 1e-6 && (lse[0] - whole.1[0]).abs() < 1e-6);
        let empty = (vec![7.0f32], vec![f32::NEG_INFINITY]);
        merge_states(&[(&empty.0, &empty.1)], 1, 1, &mut o, &mut lse).unwrap();
        assert_eq!((o[0], lse[0]), (0.0, f32::NEG_INFINITY));
        assert!(merge_states(&[(&a.0, &a.1)], 1, 2, &mut o, &mut lse).is_err());
    }
}
