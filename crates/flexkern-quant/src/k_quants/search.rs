//! The K-quant scale searches of ggml's reference quantizers (`nearest_int`, `make_qx_quants`,
//! `make_q3_quants`, `make_qkx2_quants`). Every f32 operation keeps ggml's order and rounding
//! (int operands are converted to f32 where C converts them; no fused multiply-add), because the
//! chosen scales, and so the bytes, depend on the last bit.

/// ggml's threshold below which a group counts as all zero.
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round to nearest, ties to even, by adding 1.5 * 2^23 and reading the
/// mantissa. Valid for |x| <= 2^22 - 1; outside that it returns what ggml's release build returns.
#[inline(always)]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    ((v.to_bits() & 0x007f_ffff) as i32) - 0x0040_0000
}

/// `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL)`: symmetric quantization to
/// `[-nmax, nmax)` with an x^2-weighted scale search over 18 candidate inverse scales.
/// Writes `L[i] = q + nmax` and returns the scale.
pub(crate) fn make_qx_quants_rmse1(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out.iter_mut().for_each(|l| *l = 0);
        return 0.0;
    }
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    let mut iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (&v, lo) in x.iter().zip(l_out.iter_mut()) {
        let l = clamp(nearest_int(iscale * v));
        *lo = (l + nmax) as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for &v in x {
            let l = clamp(nearest_int(iscale * v));
            let w = v * v;
            sumlx += w * v * l as f32;
            suml2 += w * l as f32 * l as f32;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (&v, lo) in x.iter().zip(l_out.iter_mut()) {
                *lo = (nmax + clamp(nearest_int(iscale * v))) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants(n, nmax, x, L, do_rmse = true)`: symmetric quantization to `[-nmax, nmax)`,
/// then up to five passes of per-element coordinate descent on the x^2-weighted error.
/// Writes `L[i] = q + nmax` and returns the scale.
pub(crate) fn make_q3_quants_rmse(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out.iter_mut().for_each(|l| *l = 0);
        return 0.0;
    }
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    let iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (&v, lo) in x.iter().zip(l_out.iter_mut()) {
        let l = clamp(nearest_int(iscale * v));
        *lo = l as i8;
        let w = v * v;
        sumlx += w * v * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for (&v, lo) in x.iter().zip(l_out.iter_mut()) {
            let w = v * v;
            let li = *lo as f32;
            let mut slx = sumlx - w * v * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = clamp(nearest_int(v * sl2 / slx));
                if new_l != *lo as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *lo = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for lo in l_out.iter_mut() {
        *lo += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Parameters of `make_qkx2_quants`' search over inverse scales
/// `(rmin + rdelta * is + nmax) / (max - min)`, `is = 0..=nstep`.
pub(crate) struct Qkx2Search {
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    /// Weighted absolute error (true) or weighted squared error (false).
    pub use_mad: bool,
}

/// `make_qkx2_quants`: asymmetric quantization `x ~ scale * L - the_min`, `L` in `[0, nmax]`,
/// searching the scale and the (non-positive) offset for the least weighted error.
/// Returns `(scale, the_min)`.
pub(crate) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l_out: &mut [u8],
    search: &Qkx2Search,
) -> (f32, f32) {
    let n = x.len();
    let mut laux = [0u8; 32];
    let laux = &mut laux[..n];
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out.iter_mut().for_each(|l| *l = 0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        let diff = if search.use_mad {
            diff.abs()
        } else {
            diff * diff
        };
        best_error += weights[i] * diff;
    }
    if search.nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=search.nstep {
        iscale = (search.rmin + search.rdelta * is as f32 + nmaxf) / (max - min);
        let mut sum_l = 0.0f32;
        let mut sum_l2 = 0.0f32;
        let mut sum_xl = 0.0f32;
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                let diff = if search.use_mad {
                    diff.abs()
                } else {
                    diff * diff
                };
                cur_error += weights[i] * diff;
            }
            if cur_error < best_error {
                l_out[..n].copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-2.49), -2);
        assert_eq!(nearest_int(3.51), 4);
        assert_eq!(nearest_int(-127.0), -127);
        assert_eq!(nearest_int(4_194_303.0), 4_194_303);
    }

    #[test]
    fn all_zero_groups_give_zero_scale() {
        let x = [0.0f32; 16];
        let mut l = [5i8; 16];
        assert_eq!(make_qx_quants_rmse1(32, &x, &mut l), 0.0);
        assert!(l.iter().all(|&v| v == 0));
        let mut l = [5i8; 16];
        assert_eq!(make_q3_quants_rmse(4, &x, &mut l), 0.0);
        assert!(l.iter().all(|&v| v == 0));
        let mut lu = [5u8; 16];
        let s = Qkx2Search {
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        assert_eq!(make_qkx2_quants(3, &x, &x, &mut lu, &s), (0.0, -0.0));
        assert!(lu.iter().all(|&v| v == 0));
    }
}
