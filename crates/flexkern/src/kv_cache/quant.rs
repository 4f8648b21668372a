//! KV quantization: scales (one per tensor or one per kv head) and the encoders that run on
//! `append`. A stored code `c` means `decode(c) * scale`; the kernels decode through `KvRow`.

use crate::dtype::{f32_to_fp8_e4m3, f32_to_fp8_e5m2, DType};
use crate::error::{invalid, Result};

/// Dequantization scales of one quantized tensor (K or V).
#[derive(Clone, Debug, PartialEq)]
pub enum Scales {
    PerTensor(f32),
    /// One scale per kv head.
    PerHead(Vec<f32>),
}

impl Scales {
    #[inline]
    pub fn get(&self, head: usize) -> f32 {
        match self {
            Scales::PerTensor(s) => *s,
            Scales::PerHead(v) => v[head],
        }
    }

    /// Every scale finite and positive, one per head when per-head.
    pub(crate) fn check(&self, arg: &'static str, heads: usize) -> Result<()> {
        let all: &[f32] = match self {
            Scales::PerTensor(s) => std::slice::from_ref(s),
            Scales::PerHead(v) => {
                if v.len() != heads {
                    return Err(invalid(
                        arg,
                        format!("{} per-head scales for {heads} kv heads", v.len()),
                    ));
                }
                v
            }
        };
        if let Some(s) = all.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(invalid(
                arg,
                format!("scales must be finite and > 0, got {s}"),
            ));
        }
        Ok(())
    }

    /// Scales mapping the largest |x| of `data` (`[tokens, heads, dim]`, contiguous) onto the
    /// format's largest code, so nothing saturates. All-zero data gets scale 1.
    pub fn calibrate(
        dtype: DType,
        data: &[f32],
        heads: usize,
        dim: usize,
        per_head: bool,
    ) -> Result<Scales> {
        let qmax = max_code(dtype).ok_or_else(|| {
            invalid(
                "kv_dtype",
                format!("{} is not a quantized type", dtype.name()),
            )
        })?;
        if heads == 0 || dim == 0 || !data.len().is_multiple_of(heads * dim) {
            return Err(invalid("data", "length is not a multiple of heads * dim"));
        }
        let mut amax = vec![0f32; heads];
        for (i, x) in data.iter().enumerate() {
            let h = (i / dim) % heads;
            if x.is_finite() {
                amax[h] = amax[h].max(x.abs());
            }
        }
        let to_scale = |a: f32| if a > 0.0 { a / qmax } else { 1.0 };
        Ok(if per_head {
            Scales::PerHead(amax.into_iter().map(to_scale).collect())
        } else {
            Scales::PerTensor(to_scale(amax.into_iter().fold(0.0, f32::max)))
        })
    }
}

/// Largest finite code magnitude of a quantized type; `None` for the float types.
pub fn max_code(dtype: DType) -> Option<f32> {
    match dtype {
        DType::Fp8E4M3 => Some(448.0),
        DType::Fp8E5M2 => Some(57344.0),
        DType::I8 => Some(127.0),
        _ => None,
    }
}

pub fn is_quantized(dtype: DType) -> bool {
    max_code(dtype).is_some()
}

/// Symmetric int8: round to nearest even, clamp to ±127 (-128 unused so the range is symmetric).
#[inline]
pub(crate) fn encode_i8(src: &[f32], scale: f32, dst: &mut [i8]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = (x / scale).round_ties_even().clamp(-127.0, 127.0) as i8;
    }
}

/// fp8 (e4m3fn or e5m2) with a scale; the conversions saturate and round to nearest even.
#[inline]
pub(crate) fn encode_fp8(e4m3: bool, src: &[f32], scale: f32, dst: &mut [u8]) {
    let f = if e4m3 {
        f32_to_fp8_e4m3
    } else {
        f32_to_fp8_e5m2
    };
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = f(x / scale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{fp8_e4m3_to_f32, fp8_e5m2_to_f32};

    #[test]
    fn calibrated_scales_round_trip_within_format_precision() {
        let data: Vec<f32> = (0..64)
            .map(|i| ((i * 37) % 23) as f32 * 0.3 - 3.0)
            .collect();
        for dt in [DType::I8, DType::Fp8E4M3, DType::Fp8E5M2] {
            let s = Scales::calibrate(dt, &data, 2, 8, true).unwrap();
            s.check("s", 2).unwrap();
            for h in 0..2 {
                let row: Vec<f32> = (0..4)
                    .flat_map(|t| data[(t * 2 + h) * 8..][..8].to_vec())
                    .collect();
                let sc = s.get(h);
                let back: Vec<f32> = match dt {
                    DType::I8 => {
                        let mut c = vec![0i8; row.len()];
                        encode_i8(&row, sc, &mut c);
                        c.iter().map(|&x| x as f32 * sc).collect()
                    }
                    _ => {
                        let e4 = dt == DType::Fp8E4M3;
                        let mut c = vec![0u8; row.len()];
                        encode_fp8(e4, &row, sc, &mut c);
                        let dec = if e4 { fp8_e4m3_to_f32 } else { fp8_e5m2_to_f32 };
                        c.iter().map(|&x| dec(x) * sc).collect()
                    }
                };
                let amax = row.iter().fold(0f32, |a, x| a.max(x.abs()));
                // int8 step is amax/127; fp8 relative step 2^-3 (e4m3) or 2^-2 (e5m2).
                let tol = amax * if dt == DType::Fp8E5M2 { 0.13 } else { 0.07 };
                for (a, b) in row.iter().zip(&back) {
                    assert!((a - b).abs() <= tol, "{dt:?}: {a} -> {b}");
                }
            }
        }
    }

    #[test]
    fn bad_scales_are_rejected() {
        assert!(Scales::PerTensor(0.0).check("k_scale", 2).is_err());
        assert!(Scales::PerTensor(f32::NAN).check("k_scale", 2).is_err());
        assert!(Scales::PerHead(vec![1.0]).check("k_scale", 2).is_err());
        assert!(Scales::calibrate(DType::F16, &[1.0], 1, 1, false).is_err());
        assert_eq!(
            Scales::calibrate(DType::I8, &[0.0; 4], 1, 4, false).unwrap(),
            Scales::PerTensor(1.0)
        );
    }
}
