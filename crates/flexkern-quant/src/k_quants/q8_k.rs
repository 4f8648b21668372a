//! Q8_K: the activation format of the K-quant dot products. 256 int8 values, one f32 scale and
//! the sums of each 16-value group (`bsums`), which the weight formats use for their offsets.

use super::search::nearest_int;
use super::{combine, DotPath, QK_K};
use crate::format::{Format, QuantBlock};
use bytemuck::{Pod, Zeroable};

/// ggml's `block_q8_K`: `x[i] = d * qs[i]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    /// Sum of `qs[16 * j .. 16 * j + 16]`.
    pub bsums: [i16; QK_K / 16],
}

const _: () = assert!(std::mem::size_of::<BlockQ8K>() == 292);

impl BlockQ8K {
    /// `quantize_row_q8_K_ref` for one block.
    fn quantize_block(x: &[f32]) -> Self {
        let mut y = Self::zeroed();
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in x {
            let ax = v.abs();
            if ax > amax {
                amax = ax;
                max = v;
            }
        }
        if amax == 0.0 {
            // ggml leaves bsums untouched here; zero is what a zeroed buffer holds.
            return y;
        }
        let iscale = -127.0f32 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, g) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = g.iter().map(|&q| q as i16).sum();
        }
        y.d = 1.0 / iscale;
        y
    }

    fn dot_block_scalar(w: &Self, a: &Self) -> f32 {
        let isum: i32 =
            w.qs.iter()
                .zip(&a.qs)
                .map(|(&x, &y)| x as i32 * y as i32)
                .sum();
        combine(w.d, 0.0, a.d, isum, 0)
    }

    /// The dot on the given path (AVX2 falls back to scalar when the CPU lacks it).
    pub(crate) fn vec_dot_with(path: DotPath, w: &[Self], a: &[Self]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if path == DotPath::Avx2 && super::avx2_available() {
            // SAFETY: AVX2, FMA and F16C are present.
            return unsafe { avx2::vec_dot(w, a) };
        }
        let _ = path;
        w.iter()
            .zip(a)
            .map(|(x, y)| Self::dot_block_scalar(x, y))
            .fold(0.0, |s, v| s + v)
    }
}

impl QuantBlock for BlockQ8K {
    const FORMAT: Format = Format::Q8K;
    const ELEMS: usize = QK_K;
    type Dot = BlockQ8K;

    fn quantize_ref(src: &[f32], dst: &mut [Self]) {
        for (y, x) in dst.iter_mut().zip(src.chunks_exact(QK_K)) {
            *y = Self::quantize_block(x);
        }
    }

    fn dequantize(src: &[Self], dst: &mut [f32]) {
        for (b, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
            for (o, &q) in y.iter_mut().zip(&b.qs) {
                *o = b.d * q as f32;
            }
        }
    }

    fn vec_dot(w: &[Self], a: &[Self]) -> f32 {
        Self::vec_dot_with(super::dot_path(), w, a)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::simd::{hsum_i32, load16};
    use super::{combine, BlockQ8K};
    use std::arch::x86_64::*;

    /// Widens to i16 before multiplying, so every int8 value (also -128) is exact.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn vec_dot(w: &[BlockQ8K], a: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let mut acc = _mm256_setzero_si256();
            for k in 0..16 {
                let xv = _mm256_cvtepi8_epi16(load16(&x.qs[16 * k..]));
                let yv = _mm256_cvtepi8_epi16(load16(&y.qs[16 * k..]));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(xv, yv));
            }
            sumf += combine(x.d, 0.0, y.d, hsum_i32(acc), 0);
        }
        sumf
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::super::{dot_error_bound, DotPath};
    use super::*;

    #[test]
    fn size_and_layout() {
        assert_eq!(std::mem::size_of::<BlockQ8K>(), 292);
        assert_eq!(std::mem::offset_of!(BlockQ8K, qs), 4);
        assert_eq!(std::mem::offset_of!(BlockQ8K, bsums), 260);
    }

    #[test]
    fn quantize_known_answer() {
        // Largest magnitude -127/64 at index 3: iscale = -127 / max = 64 exactly, d = 1/64.
        let mut x = vec![0.0f32; QK_K];
        x[0] = 50.0 / 64.0;
        x[1] = -25.0 / 64.0;
        x[3] = -127.0 / 64.0;
        x[17] = 0.5 / 64.0; // 0.5 -> 0 (ties to even)
        x[18] = 1.5 / 64.0; // 1.5 -> 2
        let mut b = [BlockQ8K::zeroed()];
        BlockQ8K::quantize_ref(&x, &mut b);
        let b = b[0];
        assert_eq!(b.d, 1.0 / 64.0);
        assert_eq!(&b.qs[..4], &[50, -25, 0, -127]);
        assert_eq!(&b.qs[16..20], &[0, 0, 2, 0]);
        assert_eq!(b.bsums[0], 50 - 25 - 127);
        assert_eq!(b.bsums[1], 2);
        assert!(b.bsums[2..].iter().all(|&s| s == 0));
        let y = deq(&[b]);
        assert_eq!(y[0], 50.0 / 64.0);
        assert_eq!(y[3], -127.0 / 64.0);
    }

    #[test]
    fn zero_block_and_round_trip() {
        let mut b = [BlockQ8K::zeroed()];
        BlockQ8K::quantize_ref(&[0.0; QK_K], &mut b);
        assert_eq!(b[0].d, 0.0);
        assert!(deq(&b).iter().all(|&v| v == 0.0));
        for (i, dist) in [Dist::Normal, Dist::Uniform].into_iter().enumerate() {
            for scale in [1e-3f32, 1.0, 1e3] {
                let x = random_data(dist, 16 * QK_K, scale, 50 + i as u64);
                let e = rel_rms_error(&x, &deq(&q8k(&x)));
                assert!(
                    e < if matches!(dist, Dist::Normal) {
                        0.012
                    } else {
                        0.005
                    },
                    "{e}"
                );
            }
        }
        let x = ggml_test_data(0.0, 4096, 2.0);
        assert!(ggml_total_error(&x, &deq(&q8k(&x))) < 0.002);
    }

    #[test]
    fn vec_dot_both_paths_match_oracle() {
        let w = random_blocks::<BlockQ8K>(9, &[], 3);
        let mut w = w;
        for b in &mut w {
            b.d = 0.013;
        }
        let a = q8k(&random_data(Dist::Normal, 9 * QK_K, 1.0, 4));
        let (wd, ad) = (deq(&w), deq(&a));
        let oracle = dot_f64(&wd, &ad);
        let mag: f64 = wd
            .iter()
            .zip(&ad)
            .map(|(&x, &y)| (x as f64 * y as f64).abs())
            .sum();
        let s = BlockQ8K::vec_dot_with(DotPath::Scalar, &w, &a);
        let v = BlockQ8K::vec_dot_with(DotPath::Avx2, &w, &a);
        assert_eq!(s.to_bits(), v.to_bits());
        assert!(
            (s as f64 - oracle).abs() <= dot_error_bound(w.len(), mag),
            "{s} vs {oracle}"
        );
    }

    #[test]
    fn kquants_export() {
        let x = crosscheck_inputs();
        export("q8_k_quant", &q8k(&x), Some(&x));
    }
}
