//! Precise mode: GEMV with the activation kept in f32, no 8-bit rounding of it. The weights
//! are widened to f32 block by block as they are read (in registers for the 32-element formats,
//! through a stack buffer for the rest) and multiplied with FMA; nothing is dequantized ahead.
//!
//! Default mode rounds each activation block to the format's `Dot` type (Q8_0, Q8_1, Q8_K) as
//! llama.cpp does; over a 30-layer model that rounding moves the logits by about as much as
//! any two summation orders do. Precise mode trades speed for leaving only f32 rounding.

use crate::format::QuantBlock;
use crate::interleave::{Interleave, View};
use crate::rows::Rows;
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

/// `out[i] = dot_by_blocks(row i, x)`: the portable rows of formats with AVX2 row kernels.
pub(crate) fn rows_each_portable<B: QuantBlock>(w: &[B], x: &[f32], out: &mut [f32]) {
    let nb = w.len() / out.len().max(1);
    for (i, o) in out.iter_mut().enumerate() {
        *o = dot_by_blocks(&w[i * nb..(i + 1) * nb], x);
    }
}

/// A block format's precise-mode dots: `x` in f32, never rounded (`x.len() == w.len() *
/// ELEMS`). The defaults widen blocks into a stack buffer and run an FMA dot; `blocks.rs` and
/// `k_quants.rs` say which formats widen in registers instead.
pub(crate) trait PreciseDot: QuantBlock {
    /// Sum over blocks of dot(dequantize(w), x).
    fn dot_f32(w: &[Self], x: &[f32]) -> f32 {
        dot_by_blocks(w, x)
    }

    /// `out[i] = dot_f32(row i, x)` for `out.len()` consecutive rows of `w`.
    fn dot_f32_rows(w: &[Self], x: &[f32], out: &mut [f32]) {
        rows_each(w, x, out)
    }
}

/// `out[i] = B::dot_f32(row i, x)` for `out.len()` consecutive rows of `w`.
fn rows_each<B: PreciseDot>(w: &[B], x: &[f32], out: &mut [f32]) {
    let nb = w.len() / out.len().max(1);
    for (i, o) in out.iter_mut().enumerate() {
        *o = B::dot_f32(&w[i * nb..(i + 1) * nb], x);
    }
}

/// f32 activation rows (`[m, k]`), shared by the matrices of one call.
pub(crate) type F32Acts = Arc<Vec<f32>>;

/// A matrix in the file's layout (or the 8-row repacked one) joined with f32 activation rows.
pub(crate) struct F32Rows<'a, B: PreciseDot> {
    w: Layout<'a, B>,
    nb: usize,
    k: usize,
    x: F32Acts,
}

/// Gathers row `r` of a repacked matrix, in the file's layout, into the vector.
type RowGather<'a, B> = Box<dyn Fn(usize, &mut Vec<B>) + Send + Sync + 'a>;

enum Layout<'a, B: PreciseDot> {
    Plain(&'a [B]),
    /// A repacked matrix: each row is gathered back into the file's layout before its dot.
    Rows8(RowGather<'a, B>),
}

impl<'a, B: PreciseDot> F32Rows<'a, B> {
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

impl<B: PreciseDot> Rows for F32Rows<'_, B> {
    fn m(&self) -> usize {
        self.x.len() / self.k.max(1)
    }

    fn rows(&self, r0: usize, out: &mut [f32]) {
        let (m, nb, k) = (self.m(), self.nb, self.k);
        let rows = out.len() / m.max(1);
        if let (Layout::Plain(w), 1) = (&self.w, m) {
            return B::dot_f32_rows(&w[r0 * nb..(r0 + rows) * nb], &self.x, out);
        }
        // Several activation rows (prefill) or a repacked matrix: each weight row is widened
        // once into a row buffer (in L1), then dotted with every activation row by the f32
        // kernel, which reads four activation rows per pass over the widened row.
        let mut blocks = Vec::with_capacity(nb);
        let mut wide = vec![0f32; k];
        for (i, o) in out.chunks_exact_mut(m).enumerate() {
            let wr = match &self.w {
                Layout::Plain(w) => &w[(r0 + i) * nb..(r0 + i + 1) * nb],
                Layout::Rows8(row) => {
                    row(r0 + i, &mut blocks);
                    &blocks[..]
                }
            };
            B::dequantize(wr, &mut wide);
            <f32 as QuantBlock>::vec_dot_rows(&self.x, &wide, o);
        }
    }

    fn row_bytes(&self) -> usize {
        self.nb * size_of::<B>()
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
mod blocks;
mod k_quants;

/// A format's `dot_f32` and `dot_f32_rows` through its AVX2 row kernel `$kernel(w, x, out)`
/// when the CPU has it, else the portable stack-buffer path.
/// Expands inside the format's `impl PreciseDot`.
macro_rules! precise_dots {
    ($kernel:path) => {
        fn dot_f32(w: &[Self], x: &[f32]) -> f32 {
            let mut out = [0f32];
            Self::dot_f32_rows(w, x, &mut out);
            out[0]
        }

        fn dot_f32_rows(w: &[Self], x: &[f32], out: &mut [f32]) {
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::has_avx2() {
                let nb = x.len() / <Self as $crate::format::QuantBlock>::ELEMS;
                assert!(w.len() >= out.len() * nb, "rows of {nb} blocks");
                // SAFETY: features checked at run time; the kernel reads `out.len()` rows of
                // `nb` blocks of `w` (checked above) and `nb` blocks' elements of `x`.
                return unsafe { $kernel(w, x, out) };
            }
            $crate::precise::rows_each_portable(w, x, out)
        }
    };
}
pub(crate) use precise_dots;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::{dequantize, quantize, QuantMatrix};

    /// Both the register kernels and the stack-buffer path, on every block format, against the
    /// f64 dot of the exactly dequantized weights with the unrounded activation.
    /// No blocks: an empty dot, on every path (the row kernels index the first block).
    #[test]
    fn empty_rows_are_zero() {
        use crate::legacy::BlockQ4_0;
        let mut out = [f32::NAN; 2];
        BlockQ4_0::dot_f32_rows(&[], &[], &mut out);
        assert_eq!(out, [0.0; 2]);
        assert_eq!(crate::k_quants::BlockQ4K::dot_f32(&[], &[]), 0.0);
        assert_eq!(dot_by_blocks::<BlockQ4_0>(&[], &[]), 0.0);
    }

    /// One `gemv_many` over matrices of one format in both precisions: each keeps its own.
    #[test]
    fn mixed_precisions_in_one_call_keep_their_own() {
        let (n, k) = (9, 64);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0)
            .collect();
        let x: Vec<f32> = (0..k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
            .collect();
        let bytes = quantize(Format::Q4_0, &w, n, k).unwrap();
        let d = QuantMatrix::new(Format::Q4_0, n, k, &bytes).unwrap();
        let p = d.clone().with_precision(Precision::Precise);
        let (mut yd, mut yp) = (vec![f32::NAN; n], vec![f32::NAN; n]);
        crate::gemv_many(&[&d, &p], x.as_slice().into(), 1, &mut [&mut yd, &mut yp]).unwrap();
        for (q, y) in [(&d, &yd), (&p, &yp)] {
            let mut want = vec![f32::NAN; n];
            q.gemv(x.as_slice().into(), &mut want).unwrap();
            assert_eq!(y, &want, "{:?}", q.precision());
        }
        assert_ne!(yd, yp, "the default rounds its activation");
    }

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
