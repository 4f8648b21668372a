//! MLX affine quantization (`mx.quantize(w, group_size, bits)`, mode "affine"), at every width
//! MLX accepts (2, 3, 4, 5, 6, 8 bits; groups 32, 64, 128): bytes identical to `mx.quantize` of
//! the PyPI `mlx` package (0.32.4, checked by `tests/gguf_crosscheck.py`).
//!
//! Storage, per row of K weights: the packed weights as a little-endian bit stream (element j at
//! bit `j * bits`; for 2/4/8 bits that is exactly MLX's u32 words, for 3, 5 and 6 bits MLX's
//! 3-bytes-per-8 / 5-bytes-per-8 / 3-bytes-per-4 packing), then one scale and one bias per group, f16 or bf16.
//! Dequantized value: `scale * q + bias`.
//!
//! Single-buffer form (what `quantize` returns and `QuantMatrix::new` takes for MLX): all packed
//! weights `[N, K*bits/8]`, then all scales `[N, K/group]`, then all biases `[N, K/group]`,
//! each contiguous, little-endian: the three MLX arrays concatenated.

pub(crate) mod q8;

use crate::cpu::has_avx2;
use crate::float::f32_to_bf16;
use crate::format::MlxScale;
use half::{bf16, f16};

/// A validated MLX matrix: three borrowed arrays.
#[derive(Clone, Copy, Debug)]
pub struct MlxView<'a> {
    pub bits: u8,
    pub group: usize,
    pub scale_type: MlxScale,
    pub k: usize,
    pub w: &'a [u8],
    pub s: &'a [u8],
    pub b: &'a [u8],
}

/// Byte sizes of the three arrays for an `[n, k]` matrix: (weights, scales, biases).
pub fn array_bytes(bits: u8, group: usize, n: usize, k: usize) -> (usize, usize) {
    (n * (k * bits as usize / 8), n * (k / group) * 2)
}

fn load_scale(t: MlxScale, bytes: &[u8], i: usize) -> f32 {
    let h = u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
    match t {
        MlxScale::F16 => f16::from_bits(h).to_f32(),
        MlxScale::BF16 => bf16::from_bits(h).to_f32(),
    }
}

/// The values `bytes` holds (f16 or bf16) as f32, appended to `out`: a scalar f16 conversion
/// costs more than the 32-64 products its group scales, so rows convert whole with F16C.
fn widen_scales(t: MlxScale, bytes: &[u8], out: &mut Vec<f32>) {
    let n = bytes.len() / 2;
    let start = out.len();
    out.resize(start + n, 0.0);
    let dst = &mut out[start..];
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if t == MlxScale::F16 && has_avx2() {
        // SAFETY: F16C checked at run time.
        i = unsafe { widen_f16_x8(bytes, dst) };
    }
    for (j, o) in dst.iter_mut().enumerate().skip(i) {
        *o = load_scale(t, bytes, j);
    }
}

/// `widen_scales` for f16 in steps of 8; returns how many values it wrote.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn widen_f16_x8(bytes: &[u8], dst: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let n = (bytes.len() / 2).min(dst.len()) / 8 * 8;
    for i in (0..n).step_by(8) {
        let h = _mm_loadu_si128(bytes.as_ptr().add(2 * i) as *const __m128i);
        _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
    }
    n
}

fn store_scale(t: MlxScale, v: f32) -> [u8; 2] {
    match t {
        MlxScale::F16 => f16::from_f32(v).to_le_bytes(),
        MlxScale::BF16 => f32_to_bf16(v).to_le_bytes(),
    }
}

/// MLX's affine rule: the larger-magnitude extreme ("edge") is hit exactly, the scale is
/// `max((max - min) / (2^bits - 1), 1e-7)` signed towards the edge, then refit to `edge / q0`;
/// `q = clamp(rint((w - bias) / scale), 0, 2^bits - 1)`, with the f32 scale and bias (MLX rounds
/// them to the stored type only afterwards).
fn quantize_group(x: &[f32], bits: u8, q: &mut [u8]) -> (f32, f32) {
    let n_bins = ((1u32 << bits) - 1) as f32;
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for &v in x {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    let edge_is_min = lo.abs() > hi.abs();
    let mut scale = ((hi - lo) / n_bins).max(1e-7);
    if !edge_is_min {
        scale = -scale;
    }
    let edge = if edge_is_min { lo } else { hi };
    let q0 = (edge / scale).round_ties_even();
    let mut bias = 0.0;
    if q0 != 0.0 {
        scale = edge / q0;
        bias = edge;
    }
    for (o, &v) in q.iter_mut().zip(x) {
        *o = ((v - bias) / scale).round_ties_even().clamp(0.0, n_bins) as u8;
    }
    (scale, bias)
}

/// Writes values `q` (each < 2^bits) as a little-endian bit stream.
fn pack(q: &[u8], bits: u8, out: &mut [u8]) {
    out.fill(0);
    for (j, &v) in q.iter().enumerate() {
        let bit = j * bits as usize;
        let word = (v as u16) << (bit % 8);
        out[bit / 8] |= word as u8;
        if bit % 8 + bits as usize > 8 {
            out[bit / 8 + 1] |= (word >> 8) as u8;
        }
    }
}

/// Element `j` of a packed bit stream.
#[inline]
fn unpack_one(w: &[u8], bits: u8, j: usize) -> u8 {
    let bit = j * bits as usize;
    let lo = w[bit / 8] as u16;
    let hi = if bit % 8 + bits as usize > 8 {
        (w[bit / 8 + 1] as u16) << 8
    } else {
        0
    };
    (((lo | hi) >> (bit % 8)) & ((1u16 << bits) - 1)) as u8
}

/// Quantize `[n, k]` into the single-buffer form. `k` is a multiple of `group` (checked by caller).
pub fn quantize(src: &[f32], n: usize, k: usize, bits: u8, group: usize, t: MlxScale) -> Vec<u8> {
    let (wb, sb) = array_bytes(bits, group, n, k);
    let mut out = vec![0u8; wb + 2 * sb];
    let (w, rest) = out.split_at_mut(wb);
    let (s, b) = rest.split_at_mut(sb);
    let gbytes = group * bits as usize / 8;
    let mut q = vec![0u8; group];
    for (g, x) in src.chunks_exact(group).enumerate() {
        let (scale, bias) = quantize_group(x, bits, &mut q);
        pack(&q, bits, &mut w[g * gbytes..(g + 1) * gbytes]);
        s[2 * g..2 * g + 2].copy_from_slice(&store_scale(t, scale));
        b[2 * g..2 * g + 2].copy_from_slice(&store_scale(t, bias));
    }
    out
}

impl<'a> MlxView<'a> {
    fn row_w(&self, r: usize) -> &'a [u8] {
        let rb = self.k * self.bits as usize / 8;
        &self.w[r * rb..(r + 1) * rb]
    }

    /// Dequantize row `r` into `out` (`k` values).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let w = self.row_w(r);
        let gpr = self.k / self.group;
        for (g, o) in out.chunks_exact_mut(self.group).enumerate() {
            let scale = load_scale(self.scale_type, self.s, r * gpr + g);
            let bias = load_scale(self.scale_type, self.b, r * gpr + g);
            for (j, v) in o.iter_mut().enumerate() {
                *v = scale * unpack_one(w, self.bits, g * self.group + j) as f32 + bias;
            }
        }
    }

    /// Row `r`'s group scales and biases as f32, into `sb` (cleared first).
    pub(crate) fn row_scales(&self, r: usize, sb: &mut (Vec<f32>, Vec<f32>)) {
        let gpr = self.k / self.group;
        let span = 2 * r * gpr..2 * (r + 1) * gpr;
        sb.0.clear();
        sb.1.clear();
        widen_scales(self.scale_type, &self.s[span.clone()], &mut sb.0);
        widen_scales(self.scale_type, &self.b[span], &mut sb.1);
    }

    /// Dot of row `r` with `x`, given the per-group sums of `x` (the bias term's factor);
    /// `sb` is scratch. Crate-internal: the kernels trust `x` to hold `k` values.
    pub(crate) fn row_dot(
        &self,
        r: usize,
        x: &[f32],
        xsum: &[f32],
        sb: &mut (Vec<f32>, Vec<f32>),
    ) -> f32 {
        let w = self.row_w(r);
        self.row_scales(r, sb);
        let (scales, biases) = (&sb.0, &sb.1);
        let bias_term: f32 = biases.iter().zip(xsum).map(|(b, xs)| b * xs).sum();
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            let scales = |g: usize| scales[g];
            // SAFETY: features checked at run time; `w` holds k*bits/8 bytes, x holds k values.
            let qx = unsafe {
                match self.bits {
                    2 => avx2::dot::<2>(w, x, self.group, &scales),
                    3 => avx2::dot::<3>(w, x, self.group, &scales),
                    4 => avx2::dot::<4>(w, x, self.group, &scales),
                    5 => avx2::dot::<5>(w, x, self.group, &scales),
                    6 => avx2::dot::<6>(w, x, self.group, &scales),
                    _ => avx2::dot::<8>(w, x, self.group, &scales),
                }
            };
            return qx + bias_term;
        }
        let mut total = 0.0f32;
        for (g, xg) in x.chunks_exact(self.group).enumerate() {
            let mut s = 0.0f32;
            for (j, &xv) in xg.iter().enumerate() {
                s += unpack_one(w, self.bits, g * self.group + j) as f32 * xv;
            }
            total += scales[g] * s;
        }
        total + bias_term
    }
}

/// Per-group sums of an activation row.
pub fn group_sums(x: &[f32], group: usize) -> Vec<f32> {
    x.chunks_exact(group).map(|g| g.iter().sum()).collect()
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use crate::simd::hsum_ps;
    use std::arch::x86_64::*;

    /// 8 consecutive BITS-bit values starting at `p` (which holds `BITS` bytes), as f32.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn decode8<const BITS: u32>(p: *const u8) -> __m256 {
        let v = match BITS {
            8 => _mm256_cvtepu8_epi32(_mm_loadl_epi64(p as *const __m128i)),
            5 | 6 => {
                // 8 values span 40 or 48 bits: values 0..4 from the low half, 4..8 the high.
                let mut bits = 0u64;
                for i in 0..BITS as usize {
                    bits |= (*p.add(i) as u64) << (8 * i);
                }
                let half = 4 * BITS;
                let lo = (bits & ((1u64 << half) - 1)) as i32;
                let hi = (bits >> half) as i32;
                let words = _mm256_set_epi32(hi, hi, hi, hi, lo, lo, lo, lo);
                let b = BITS as i32;
                let sh = _mm256_set_epi32(3 * b, 2 * b, b, 0, 3 * b, 2 * b, b, 0);
                _mm256_and_si256(
                    _mm256_srlv_epi32(words, sh),
                    _mm256_set1_epi32((1 << BITS) - 1),
                )
            }
            _ => {
                // 2, 3 or 4 bits: the 8 values fit in one 32-bit word.
                let mut word = 0i32;
                for i in 0..BITS as usize {
                    word |= (*p.add(i) as i32) << (8 * i);
                }
                let b = BITS as i32;
                let sh = _mm256_set_epi32(7 * b, 6 * b, 5 * b, 4 * b, 3 * b, 2 * b, b, 0);
                let m = _mm256_set1_epi32((1 << BITS) - 1);
                _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), sh), m)
            }
        };
        _mm256_cvtepi32_ps(v)
    }

    /// Sum over groups of `scale(g) * sum_j q_j x_j` (the bias term is added by the caller).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot<const BITS: u32>(
        w: &[u8],
        x: &[f32],
        group: usize,
        scale: &dyn Fn(usize) -> f32,
    ) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let (wp, xp) = (w.as_ptr(), x.as_ptr());
        let groups = x.len() / group;
        for g in 0..groups {
            let mut s0 = _mm256_setzero_ps();
            let mut s1 = _mm256_setzero_ps();
            let mut j = g * group;
            while j < (g + 1) * group {
                let q0 = decode8::<BITS>(wp.add(j * BITS as usize / 8));
                let q1 = decode8::<BITS>(wp.add((j + 8) * BITS as usize / 8));
                s0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(xp.add(j)), s0);
                s1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(xp.add(j + 8)), s1);
                j += 16;
            }
            acc = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_set1_ps(scale(g)), acc);
        }
        hsum_ps(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_all_widths() {
        for bits in [2u8, 3, 4, 5, 6, 8] {
            let q: Vec<u8> = (0..64).map(|i| ((i * 7 + 3) % (1 << bits)) as u8).collect();
            let mut out = vec![0u8; 64 * bits as usize / 8];
            pack(&q, bits, &mut out);
            for (j, &v) in q.iter().enumerate() {
                assert_eq!(unpack_one(&out, bits, j), v, "bits {bits} j {j}");
            }
        }
        // 4 bits: element j is nibble j of the little-endian u32 word, as MLX packs it.
        let mut out = [0u8; 4];
        pack(&[1, 2, 3, 4, 5, 6, 7, 8], 4, &mut out);
        assert_eq!(u32::from_le_bytes(out), 0x8765_4321);
    }

    #[test]
    fn edge_is_exact() {
        let x: Vec<f32> = (0..32).map(|i| (i as f32 - 20.0) * 0.1).collect();
        let mut q = vec![0u8; 32];
        let (s, b) = quantize_group(&x, 4, &mut q);
        // min (-2.0) has the larger magnitude: it maps to q = 0 exactly.
        assert_eq!(b, -2.0);
        assert_eq!(q[0], 0);
        assert!(s > 0.0);
    }
}
