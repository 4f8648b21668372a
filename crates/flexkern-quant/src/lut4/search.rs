//! The IQ4 scale search (ggml's `quantize_row_iq4_nl_impl`, without an importance matrix),
//! shared by IQ4_NL (one 32-weight block) and IQ4_XS (eight 32-weight sub-blocks whose scales
//! are then quantized to 6 bits against one super-scale). f32 throughout, operations in ggml's
//! order and never fused, so the chosen codes and scales are ggml's.

use super::KVALUES_IQ4NL as V;
use crate::k_quants::nearest_int;

/// Scale candidates tried on each side of the plain `max / -127` scale (ggml's `ntry`).
const NTRY: i32 = 7;
/// Blocks whose largest magnitude is below this get scale 0 (ggml's `GROUP_MAX_EPS`).
const GROUP_MAX_EPS: f32 = 1e-15;

/// The table index nearest to `x` (ties go up), by bisection: ggml's `best_index_int8`.
#[inline]
pub(crate) fn best_index(table: &[i8; 16], x: f32) -> u8 {
    if x <= table[0] as f32 {
        return 0;
    }
    if x >= table[15] as f32 {
        return 15;
    }
    let (mut lo, mut hi) = (0usize, 15usize);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if x < table[mid] as f32 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    if x - (table[hi - 1] as f32) < (table[hi] as f32) - x {
        (hi - 1) as u8
    } else {
        hi as u8
    }
}

/// `(sum w q x, sum w q^2)` over the block for inverse scale `id`, with `w = x^2`; writes the
/// codes into `l` when given.
#[inline]
fn fit(x: &[f32], id: f32, mut l: Option<&mut [u8]>) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for j in 0..x.len() {
        let code = best_index(&V, id * x[j]);
        if let Some(l) = l.as_deref_mut() {
            l[j] = code;
        }
        let q = V[code as usize] as f32;
        let w = x[j] * x[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The least-squares scale of one 32-weight block: the plain scale first, then 15 candidates
/// `(itry - 127) / max`, keeping the one with the largest `sumqx^2 / sumq2`.
fn block_scale(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let d = -max / V[0] as f32;
    let (sumqx, sumq2) = fit(x, 1.0 / d, None);
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -NTRY..=NTRY {
        let id = (itry + V[0] as i32) as f32 / max;
        let (sumqx, sumq2) = fit(x, id, None);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// IQ4_NL: one block of 32. Returns the scale (f32, stored as f16 by the caller) and the codes.
pub(crate) fn quantize_nl(x: &[f32], l: &mut [u8; 32]) -> f32 {
    let d = block_scale(x);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for j in 0..32 {
        l[j] = best_index(&V, id * x[j]);
    }
    d
}

/// IQ4_XS: a super-block of 256. Returns the super-scale and writes the 6-bit sub-block scales
/// (offset by 32) and the codes.
pub(crate) fn quantize_xs(x: &[f32], ls: &mut [u8; 8], l: &mut [u8; 256]) -> f32 {
    let mut scales = [0.0f32; 8];
    let (mut amax_scale, mut max_scale) = (0.0f32, 0.0f32);
    for ib in 0..8 {
        let d = block_scale(&x[32 * ib..32 * ib + 32]);
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }
    let d = -max_scale / 32.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for ib in 0..8 {
        let li = nearest_int(id * scales[ib]).clamp(-32, 31);
        let dl = d * li as f32;
        let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
        for j in 0..32 {
            l[32 * ib + j] = best_index(&V, idl * x[32 * ib + j]);
        }
        ls[ib] = (li + 32) as u8;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_is_nearest_with_ties_up() {
        for i in -1300..=1300 {
            let x = i as f32 * 0.1;
            let got = best_index(&V, x) as usize;
            let err = |k: usize| (V[k] as f32 - x).abs();
            let best = (0..16).map(err).fold(f32::INFINITY, f32::min);
            assert_eq!(err(got), best, "x = {x}");
        }
        // Midway between 1 and 13 (index 8 and 9): ties go to the upper value.
        assert_eq!(best_index(&V, 7.0), 9);
        assert_eq!(best_index(&V, -1000.0), 0);
        assert_eq!(best_index(&V, 1000.0), 15);
    }

    #[test]
    fn block_scale_hits_the_extreme() {
        // One large weight: the fit puts it on a table end.
        let mut x = [0.01f32; 32];
        x[5] = -2.0;
        let mut l = [0u8; 32];
        let d = quantize_nl(&x, &mut l);
        let y = d * V[l[5] as usize] as f32;
        assert!((y + 2.0).abs() < 0.05, "{y}");
        // All zero: scale 0, every code the one nearest 0.
        let d = quantize_nl(&[0.0; 32], &mut l);
        assert_eq!(d, 0.0);
        assert!(l.iter().all(|&c| V[c as usize] == 1));
    }
}
