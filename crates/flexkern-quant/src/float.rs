//! Plain float weights (F32, F16, BF16) as one-element "blocks", so the generic driver serves them.
//! The activation is f32 (`Dot = f32`); any K works because a block holds one element.

use crate::cpu::has_avx2;
use crate::format::{Format, QuantBlock};
use half::{bf16, f16};

/// ggml's `ggml_compute_fp32_to_bf16`: round to nearest even, NaN kept quiet.
#[inline]
pub fn f32_to_bf16(x: f32) -> bf16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return bf16::from_bits(((u >> 16) | 64) as u16);
    }
    let r = (u as u64 + 0x7fff + ((u as u64 >> 16) & 1)) >> 16;
    bf16::from_bits(r as u16)
}

impl QuantBlock for f32 {
    const FORMAT: Format = Format::F32;
    const ELEMS: usize = 1;
    type Dot = f32;
    fn quantize_ref(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn dequantize(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn vec_dot(w: &[f32], a: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: AVX2/FMA presence checked at run time; lengths checked inside.
            return unsafe { avx2::dot_f32(w, a) };
        }
        w.iter().zip(a).map(|(x, y)| x * y).sum()
    }

    fn vec_dot_rows(w: &[f32], a: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        let k4 = has_avx2().then_some(avx2::dot_f32_rows4 as Rows4<f32>);
        #[cfg(not(target_arch = "x86_64"))]
        let k4 = None;
        rows_by4(w, a, out, k4);
    }
}

impl QuantBlock for f16 {
    const FORMAT: Format = Format::F16;
    const ELEMS: usize = 1;
    type Dot = f32;
    fn quantize_ref(src: &[f32], dst: &mut [f16]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f16::from_f32(s);
        }
    }
    fn dequantize(src: &[f16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
    fn vec_dot(w: &[f16], a: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: AVX2/FMA/F16C presence checked at run time.
            return unsafe { avx2::dot_f16(w, a) };
        }
        w.iter().zip(a).map(|(x, y)| x.to_f32() * y).sum()
    }

    fn vec_dot_rows(w: &[f16], a: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        let k4 = has_avx2().then_some(avx2::dot_f16_rows4 as Rows4<f16>);
        #[cfg(not(target_arch = "x86_64"))]
        let k4 = None;
        rows_by4(w, a, out, k4);
    }
}

impl QuantBlock for bf16 {
    const FORMAT: Format = Format::BF16;
    const ELEMS: usize = 1;
    type Dot = f32;
    fn quantize_ref(src: &[f32], dst: &mut [bf16]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f32_to_bf16(s);
        }
    }
    fn dequantize(src: &[bf16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
    fn vec_dot(w: &[bf16], a: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: AVX2/FMA presence checked at run time.
            return unsafe { avx2::dot_bf16(w, a) };
        }
        w.iter().zip(a).map(|(x, y)| x.to_f32() * y).sum()
    }

    fn vec_dot_rows(w: &[bf16], a: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        let k4 = has_avx2().then_some(avx2::dot_bf16_rows4 as Rows4<bf16>);
        #[cfg(not(target_arch = "x86_64"))]
        let k4 = None;
        rows_by4(w, a, out, k4);
    }
}

/// A 4-row kernel: four rows of `a.len()` weights back to back, the group to prefetch (see
/// `simd::prefetch_target`), one activation.
type Rows4<T> = unsafe fn(&[T], *const T, &[f32]) -> [f32; 4];

/// Groups of 4 rows through `k4` (when given), the rest through the 1-row `vec_dot`.
fn rows_by4<T: QuantBlock<Dot = f32>>(w: &[T], a: &[f32], out: &mut [f32], k4: Option<Rows4<T>>) {
    let k = a.len();
    let mut r = 0;
    #[cfg(not(target_arch = "x86_64"))]
    let _ = k4;
    #[cfg(target_arch = "x86_64")]
    if let Some(k4) = k4 {
        let full = out.len() / 4;
        while r + 4 <= out.len() {
            let next = crate::simd::prefetch_target(w, r / 4, full, 4 * k);
            // SAFETY: `k4` is only offered after its CPU features were checked; the slice holds
            // exactly 4 rows of `k`.
            let v = unsafe { k4(&w[r * k..(r + 4) * k], next, a) };
            out[r..r + 4].copy_from_slice(&v);
            r += 4;
        }
    }
    while r < out.len() {
        out[r] = T::vec_dot(&w[r * k..(r + 1) * k], a);
        r += 1;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use crate::simd::{hsum_ps, prefetch_span};
    use half::{bf16, f16};
    use std::arch::x86_64::*;

    /// Four independent accumulators of 8 lanes hide the FMA latency; 32 elements per step.
    macro_rules! dot_loop {
        ($w:expr, $a:expr, $load:expr, $tail:expr) => {{
            let n = $w.len().min($a.len());
            let (wp, ap) = ($w.as_ptr(), $a.as_ptr());
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 32 <= n {
                for (j, s) in acc.iter_mut().enumerate() {
                    let wv = $load(wp.add(i + 8 * j));
                    *s = _mm256_fmadd_ps(wv, _mm256_loadu_ps(ap.add(i + 8 * j)), *s);
                }
                i += 32;
            }
            while i + 8 <= n {
                acc[0] = _mm256_fmadd_ps($load(wp.add(i)), _mm256_loadu_ps(ap.add(i)), acc[0]);
                i += 8;
            }
            let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            let mut total = hsum_ps(s);
            while i < n {
                total += $tail(*wp.add(i)) * *ap.add(i);
                i += 1;
            }
            total
        }};
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_f32(w: &[f32], a: &[f32]) -> f32 {
        dot_loop!(w, a, |p: *const f32| _mm256_loadu_ps(p), |x: f32| x)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_f16(w: &[f16], a: &[f32]) -> f32 {
        dot_loop!(
            w,
            a,
            |p: *const f16| _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
            |x: f16| x.to_f32()
        )
    }

    /// Four rows against one activation: four independent read streams and FMA chains, each
    /// activation vector loaded once for the four rows.
    /// While a group is computed the group `next` is prefetched at the same relative position.
    macro_rules! rows4_loop {
        ($w:expr, $next:expr, $a:expr, $load:expr, $tail:expr) => {{
            let k = $a.len();
            let (wp, ap) = ($w.as_ptr(), $a.as_ptr());
            let next = $next as *const i8;
            let esz = std::mem::size_of_val(&*wp);
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut acc2 = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 16 <= k {
                prefetch_span(next.wrapping_add(4 * i * esz), 64 * esz);
                let x0 = _mm256_loadu_ps(ap.add(i));
                let x1 = _mm256_loadu_ps(ap.add(i + 8));
                for r in 0..4 {
                    acc[r] = _mm256_fmadd_ps($load(wp.add(r * k + i)), x0, acc[r]);
                    acc2[r] = _mm256_fmadd_ps($load(wp.add(r * k + i + 8)), x1, acc2[r]);
                }
                i += 16;
            }
            let mut out = [0.0f32; 4];
            for r in 0..4 {
                out[r] = hsum_ps(_mm256_add_ps(acc[r], acc2[r]));
                for j in i..k {
                    out[r] += $tail(*wp.add(r * k + j)) * *ap.add(j);
                }
            }
            out
        }};
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_f16_rows4(w: &[f16], next: *const f16, a: &[f32]) -> [f32; 4] {
        rows4_loop!(
            w,
            next,
            a,
            |p: *const f16| _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
            |x: f16| x.to_f32()
        )
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_bf16_rows4(w: &[bf16], next: *const bf16, a: &[f32]) -> [f32; 4] {
        rows4_loop!(
            w,
            next,
            a,
            |p: *const bf16| _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i)),
                16
            )),
            |x: bf16| x.to_f32()
        )
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_f32_rows4(w: &[f32], next: *const f32, a: &[f32]) -> [f32; 4] {
        rows4_loop!(w, next, a, |p: *const f32| _mm256_loadu_ps(p), |x: f32| x)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_bf16(w: &[bf16], a: &[f32]) -> f32 {
        dot_loop!(
            w,
            a,
            |p: *const bf16| _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i)),
                16
            )),
            |x: bf16| x.to_f32()
        )
    }
}
