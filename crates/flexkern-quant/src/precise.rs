//! Precise mode: GEMV with the activation kept in f32, no 8-bit rounding of it. The weights
//! are widened to f32 block by block as they are read (in registers for the 32-element formats,
//! through a stack buffer for the rest) and multiplied with FMA; nothing is dequantized ahead.
//!
//! Default mode rounds each activation block to the format's `Dot` type (Q8_0, Q8_1, Q8_K) as
//! llama.cpp does; over a 30-layer model that rounding moves the logits by about as much as
//! any two summation orders do. Precise mode trades speed for leaving only f32 rounding.

use crate::format::QuantBlock;
use crate::gemv::Rows;
use crate::interleave::{Interleave, View};
use std::sync::Arc;

/// How a matrix's GEMV treats its activation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// The activation rounded to the format's integer dot type (llama.cpp's CPU numerics).
    #[default]
    Default,
    /// The activation in f32, weights widened to f32: only f32 rounding remains.
    Precise,
}

/// Elements the stack-buffer path widens at once: one K-quant block or eight 32-element ones.
const CHUNK: usize = 256;

/// `sum over blocks of dot(dequantize(w), x)`: blocks widened `CHUNK` elements at a time into a
/// stack buffer by the format's own `dequantize`, then an FMA dot (AVX2) or eight f32 lanes.
pub(crate) fn dot_by_blocks<B: QuantBlock>(w: &[B], x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::has_avx2() {
        // SAFETY: features checked at run time; lengths checked inside.
        return unsafe { avx2::dot_by_blocks(w, x) };
    }
    let per = (CHUNK / B::ELEMS).max(1);
    let mut buf = [0f32; CHUNK];
    let mut lanes = [0f32; 8];
    for (wc, xc) in w.chunks(per).zip(x.chunks(per * B::ELEMS)) {
        let n = wc.len() * B::ELEMS;
        B::dequantize(wc, &mut buf[..n]);
        for (i, (a, b)) in buf[..n].iter().zip(xc).enumerate() {
            lanes[i % 8] += a * b;
        }
    }
    lanes.iter().sum()
}

/// `out[i] = B::dot_f32(row i, x)` for `out.len()` consecutive rows of `w`.
pub(crate) fn rows_each<B: QuantBlock>(w: &[B], x: &[f32], out: &mut [f32]) {
    let nb = w.len() / out.len().max(1);
    for (i, o) in out.iter_mut().enumerate() {
        *o = B::dot_f32(&w[i * nb..(i + 1) * nb], x);
    }
}

/// f32 activation rows (`[m, k]`), shared by the matrices of one call.
pub(crate) type F32Acts = Arc<Vec<f32>>;

/// A matrix in the file's layout (or the 8-row repacked one) joined with f32 activation rows.
pub(crate) struct F32Rows<'a, B: QuantBlock> {
    w: Layout<'a, B>,
    nb: usize,
    k: usize,
    x: F32Acts,
}

enum Layout<'a, B: QuantBlock> {
    Plain(&'a [B]),
    /// A repacked matrix: each row is gathered back into the file's layout before its dot.
    Rows8(Box<dyn Fn(usize, &mut Vec<B>) + Send + Sync + 'a>),
}

impl<'a, B: QuantBlock> F32Rows<'a, B> {
    /// `w` holds rows of `k / B::ELEMS` blocks; `x` is `[m, k]`.
    pub fn plain(w: &'a [B], k: usize, x: F32Acts) -> Self {
        F32Rows {
            w: Layout::Plain(w),
            nb: k / B::ELEMS,
            k,
            x,
        }
    }

    pub fn rows8(view: View<'a, B>, k: usize, x: F32Acts) -> Self
    where
        B: Interleave,
    {
        F32Rows {
            w: Layout::Rows8(Box::new(move |r, out| view.row(r, out))),
            nb: k / B::ELEMS,
            k,
            x,
        }
    }
}

impl<B: QuantBlock> Rows for F32Rows<'_, B> {
    fn m(&self) -> usize {
        self.x.len() / self.k.max(1)
    }

    fn rows(&self, r0: usize, out: &mut [f32]) {
        let (m, nb, k) = (self.m(), self.nb, self.k);
        let rows = out.len() / m.max(1);
        let xs = |j: usize| &self.x[j * k..(j + 1) * k];
        match &self.w {
            Layout::Plain(w) => {
                let w = &w[r0 * nb..(r0 + rows) * nb];
                if m == 1 {
                    return B::dot_f32_rows(w, xs(0), out);
                }
                for (i, wr) in w.chunks_exact(nb).enumerate() {
                    for j in 0..m {
                        out[i * m + j] = B::dot_f32(wr, xs(j));
                    }
                }
            }
            Layout::Rows8(row) => {
                let mut buf = Vec::with_capacity(nb);
                for i in 0..rows {
                    row(r0 + i, &mut buf);
                    for j in 0..m {
                        out[i * m + j] = B::dot_f32(&buf, xs(j));
                    }
                }
            }
        }
    }

    fn row_bytes(&self) -> usize {
        self.nb * size_of::<B>()
    }
}

/// The 32-element block formats whose codes widen in registers (legacy and table formats).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use crate::format::QuantBlock;
    use crate::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
    use crate::lut4::{e8m0_half, BlockIQ4NL, BlockMXFP4, KVALUES_IQ4NL, KVALUES_MXFP4};
    use crate::simd::{bits_to_bytes, h2f_x8, hsum_ps, nibbles_32};
    use std::arch::x86_64::*;

    /// The stack-buffer path: see `super::dot_by_blocks`. Compiled for AVX2 so the format's
    /// `dequantize`, inlined here, is vectorized too.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_by_blocks<B: QuantBlock>(w: &[B], x: &[f32]) -> f32 {
        let per = (super::CHUNK / B::ELEMS).max(1);
        let mut buf = [0f32; super::CHUNK];
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut tail = 0.0f32;
        for (wc, xc) in w.chunks(per).zip(x.chunks(per * B::ELEMS)) {
            let n = (wc.len() * B::ELEMS).min(xc.len());
            B::dequantize(wc, &mut buf[..wc.len() * B::ELEMS]);
            let (bp, xp) = (buf.as_ptr(), xc.as_ptr());
            let mut i = 0;
            while i + 32 <= n {
                for (j, a) in acc.iter_mut().enumerate() {
                    let o = i + 8 * j;
                    *a =
                        _mm256_fmadd_ps(_mm256_loadu_ps(bp.add(o)), _mm256_loadu_ps(xp.add(o)), *a);
                }
                i += 32;
            }
            while i + 8 <= n {
                acc[0] = _mm256_fmadd_ps(
                    _mm256_loadu_ps(bp.add(i)),
                    _mm256_loadu_ps(xp.add(i)),
                    acc[0],
                );
                i += 8;
            }
            for j in i..n {
                tail += buf[j] * xc[j];
            }
        }
        let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        hsum_ps(s) + tail
    }

    /// `acc[i] += (q * d + m) * x[8i .. 8i + 8]` for one block of 32 codes `q` (i8, in element
    /// order): the weights exist only as f32 registers.
    #[inline(always)]
    unsafe fn fma_block(q: __m256i, d: __m256, m: __m256, x: *const f32, acc: &mut [__m256; 4]) {
        let lo = _mm256_castsi256_si128(q);
        let hi = _mm256_extracti128_si256::<1>(q);
        let parts = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)];
        for (i, (p, a)) in parts.into_iter().zip(acc.iter_mut()).enumerate() {
            let w = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p)), d, m);
            *a = _mm256_fmadd_ps(w, _mm256_loadu_ps(x.add(8 * i)), *a);
        }
    }

    /// One precise dot kernel per 32-element format: `codes` gives a block's 32 codes as i8,
    /// `dm` its scale and offset as 8-lane vectors (`w = code * d + m`).
    macro_rules! kernel32 {
        ($name:ident, $B:ty, |$b:ident| $codes:expr, $dm:expr) => {
            #[target_feature(enable = "avx2,fma,f16c")]
            pub unsafe fn $name(w: &[$B], x: &[f32]) -> f32 {
                let n = w.len().min(x.len() / 32);
                let mut acc = [_mm256_setzero_ps(); 4];
                for i in 0..n {
                    let $b = w.get_unchecked(i);
                    let (d, m): (__m256, __m256) = $dm;
                    fma_block($codes, d, m, x.as_ptr().add(32 * i), &mut acc);
                }
                let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
                hsum_ps(s)
            }
        };
    }

    #[inline(always)]
    unsafe fn sym(d: half::f16) -> (__m256, __m256) {
        (h2f_x8(d), _mm256_setzero_ps())
    }

    /// The 5th bits of a Q5 block as 16 where set.
    #[inline(always)]
    unsafe fn high16(qh: [u8; 4]) -> __m256i {
        _mm256_and_si256(bits_to_bytes(u32::from_le_bytes(qh)), _mm256_set1_epi8(16))
    }

    /// `table[code]` for 32 nibble codes (ggml's layout).
    #[inline(always)]
    unsafe fn lookup(table: &[i8; 16], qs: &[u8; 16]) -> __m256i {
        let t = _mm_loadu_si128(table.as_ptr() as *const __m128i);
        _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nibbles_32(qs.as_ptr()))
    }

    kernel32!(
        q4_0,
        BlockQ4_0,
        |b| _mm256_sub_epi8(nibbles_32(b.qs.as_ptr()), _mm256_set1_epi8(8)),
        sym(b.d)
    );
    kernel32!(
        q4_1,
        BlockQ4_1,
        |b| nibbles_32(b.qs.as_ptr()),
        (h2f_x8(b.d), h2f_x8(b.m))
    );
    kernel32!(
        q5_0,
        BlockQ5_0,
        |b| _mm256_sub_epi8(
            _mm256_or_si256(nibbles_32(b.qs.as_ptr()), high16(b.qh)),
            _mm256_set1_epi8(16)
        ),
        sym(b.d)
    );
    kernel32!(
        q5_1,
        BlockQ5_1,
        |b| _mm256_or_si256(nibbles_32(b.qs.as_ptr()), high16(b.qh)),
        (h2f_x8(b.d), h2f_x8(b.m))
    );
    kernel32!(
        q8_0,
        BlockQ8_0,
        |b| _mm256_loadu_si256(b.qs.as_ptr() as *const __m256i),
        sym(b.d)
    );
    kernel32!(
        q8_1,
        BlockQ8_1,
        |b| _mm256_loadu_si256(b.qs.as_ptr() as *const __m256i),
        sym(b.d)
    );
    kernel32!(
        iq4_nl,
        BlockIQ4NL,
        |b| lookup(&KVALUES_IQ4NL, &b.qs),
        sym(b.d)
    );
    kernel32!(
        mxfp4,
        BlockMXFP4,
        |b| lookup(&KVALUES_MXFP4, &b.qs),
        (_mm256_set1_ps(e8m0_half(b.e)), _mm256_setzero_ps())
    );
}

/// `dot_f32` of a 32-element format through its register kernel when the CPU has AVX2, else
/// the portable stack-buffer path.
macro_rules! dot32 {
    ($kernel:ident, $w:expr, $x:expr) => {{
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_avx2() {
            // SAFETY: features checked at run time; the kernel reads min(w, x / 32) blocks.
            return unsafe { crate::precise::avx2::$kernel($w, $x) };
        }
        crate::precise::dot_by_blocks($w, $x)
    }};
}
pub(crate) use dot32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::{dequantize, quantize, QuantMatrix};

    /// Both the register kernels and the stack-buffer path, on every block format, against the
    /// f64 dot of the exactly dequantized weights with the unrounded activation.
    #[test]
    fn dot_f32_matches_f64_of_dequantized_weights() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for f in Format::all_fixed().filter(|&f| f != Format::Q8K) {
            let (n, k) = (5, 512);
            let w: Vec<f32> = (0..n * k).map(|_| rnd()).collect();
            let x: Vec<f32> = (0..k).map(|_| rnd() * 3.0).collect();
            let bytes = quantize(f, &w, n, k).unwrap();
            let wd = dequantize(f, &bytes, n, k).unwrap();
            let q = QuantMatrix::new(f, n, k, &bytes)
                .unwrap()
                .with_precision(Precision::Precise);
            let mut y = vec![f32::NAN; n];
            q.gemv(x.as_slice().into(), &mut y).unwrap();
            for r in 0..n {
                let row = &wd[r * k..(r + 1) * k];
                let want: f64 = row.iter().zip(&x).map(|(&a, &b)| a as f64 * b as f64).sum();
                let mag: f64 = row
                    .iter()
                    .zip(&x)
                    .map(|(&a, &b)| (a as f64 * b as f64).abs())
                    .sum();
                assert!(
                    (y[r] as f64 - want).abs() <= 1e-6 * mag,
                    "{f} row {r}: {} vs {want} (mag {mag})",
                    y[r]
                );
            }
        }
    }
}
