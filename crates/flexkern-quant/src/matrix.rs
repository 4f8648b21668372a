//! `QuantMatrix`: a borrowed `[N, K]` weight matrix in any format, with GEMV, batched GEMV,
//! fused SwiGLU and embedding lookup.

use crate::dispatch::{with_block, with_interleaved};
use crate::error::{invalid, Result};
use crate::format::{Format, QuantBlock};
use crate::gemv::{self, silu, BlockRows, MlxRows, Segments};
use crate::interleave::{self, Interleave, Rows8, View};
use crate::mlx::{self, MlxView};
use crate::precise::{F32Rows, PreciseDot, Precision};
use crate::rows::{Acts, Rows};
use crate::storage::{blocks, Storage};
use half::{bf16, f16};
use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

/// An activation vector or `[M, K]` matrix in f32, f16 or bf16 (widened to f32 on entry).
#[derive(Clone, Copy, Debug)]
pub enum Activation<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
}

impl<'a> Activation<'a> {
    pub fn len(&self) -> usize {
        match self {
            Activation::F32(x) => x.len(),
            Activation::F16(x) => x.len(),
            Activation::BF16(x) => x.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn to_f32(&self) -> Cow<'a, [f32]> {
        match *self {
            Activation::F32(x) => Cow::Borrowed(x),
            Activation::F16(x) => Cow::Owned(x.iter().map(|v| v.to_f32()).collect()),
            Activation::BF16(x) => Cow::Owned(x.iter().map(|v| v.to_f32()).collect()),
        }
    }
}

impl<'a> From<&'a [f32]> for Activation<'a> {
    fn from(x: &'a [f32]) -> Self {
        Activation::F32(x)
    }
}

#[derive(Clone, Debug)]
enum Data<'a> {
    Blocks(Storage<'a>),
    /// The 8-row interleaved layout (`crate::interleave`), always owned.
    Rows8(Storage<'a>),
    Mlx {
        w: Storage<'a>,
        s: &'a [u8],
        b: &'a [u8],
    },
}

/// A borrowed weight matrix `W[N, K]`: row r holds the weights producing output r.
///
/// Thread-safe (`Sync`); GEMV runs on rayon's current pool (nested use is fine) unless made
/// sequential with [`QuantMatrix::sequential`].
#[derive(Clone, Debug)]
pub struct QuantMatrix<'a> {
    format: Format,
    n: usize,
    k: usize,
    data: Data<'a>,
    parallel: bool,
    precision: Precision,
}

fn check_len(arg: &'static str, got: usize, want: usize, what: &str) -> Result<()> {
    if got != want {
        return Err(invalid(arg, format!("expected {want} {what}, got {got}")));
    }
    Ok(())
}

fn checked_mul(arg: &'static str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| invalid(arg, format!("{a} x {b} overflows")))
}

/// An activation of `m` rows of `k`.
fn check_x(len: usize, m: usize, k: usize) -> Result<()> {
    check_len(
        "x",
        len,
        checked_mul("m", m, k)?,
        "activation elements (m * k)",
    )
}

/// An output of `m` rows of `n`, passed as argument `arg`.
fn check_y(arg: &'static str, len: usize, m: usize, n: usize) -> Result<()> {
    check_len(arg, len, checked_mul("m", m, n)?, "output elements (m * n)")
}

impl<'a> QuantMatrix<'a> {
    /// `bytes` is exactly what a GGUF tensor of this format holds (`format.tensor_bytes(n, k)`);
    /// for MLX, the single-buffer form documented in `crate::mlx` (weights, scales, biases).
    /// A buffer not 8-byte aligned is copied once.
    pub fn new(format: Format, n: usize, k: usize, bytes: &'a [u8]) -> Result<Self> {
        let want = format.tensor_bytes(n, k)?;
        check_len(
            "bytes",
            bytes.len(),
            want,
            &format!("bytes for {format} [{n}, {k}]"),
        )?;
        let data = match format {
            Format::MlxAffine {
                bits, group_size, ..
            } => {
                let (wb, sb) = mlx::array_bytes(bits, group_size as usize, n, k);
                let (w, rest) = bytes.split_at(wb);
                let (s, b) = rest.split_at(sb);
                Data::Mlx {
                    w: Storage::new(w),
                    s,
                    b,
                }
            }
            _ => Data::Blocks(Storage::new(bytes)),
        };
        Ok(QuantMatrix {
            format,
            n,
            k,
            data,
            parallel: true,
            precision: Precision::Default,
        })
    }

    /// MLX affine from its three arrays: packed weights (`[N, K*bits/32]` u32 as bytes), scales
    /// and biases (`[N, K/group]` f16 or bf16, as bytes; the type is `format`'s).
    pub fn from_mlx_parts(
        format: Format,
        n: usize,
        k: usize,
        weights: &'a [u8],
        scales: &'a [u8],
        biases: &'a [u8],
    ) -> Result<Self> {
        let Format::MlxAffine {
            bits, group_size, ..
        } = format
        else {
            return Err(invalid(
                "format",
                format!("{format} is not an MLX affine format"),
            ));
        };
        format.tensor_bytes(n, k)?;
        let (wb, sb) = mlx::array_bytes(bits, group_size as usize, n, k);
        check_len("weights", weights.len(), wb, "bytes")?;
        check_len("scales", scales.len(), sb, "bytes")?;
        check_len("biases", biases.len(), sb, "bytes")?;
        let data = Data::Mlx {
            w: Storage::new(weights),
            s: scales,
            b: biases,
        };
        Ok(QuantMatrix {
            format,
            n,
            k,
            data,
            parallel: true,
            precision: Precision::Default,
        })
    }

    /// The same matrix, run on the calling thread only.
    pub fn sequential(mut self) -> Self {
        self.parallel = false;
        self
    }

    /// The same matrix with its activation rounded to the format's dot type (`Default`, as
    /// llama.cpp does) or kept in f32 (`Precise`: only f32 rounding, several times slower).
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The same matrix, threaded (`true`, the default) or not.
    pub fn with_parallel(mut self, parallel: bool) -> Self {
        self.parallel = parallel;
        self
    }

    pub fn format(&self) -> Format {
        self.format
    }
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }

    fn mlx_view(&self) -> Option<MlxView<'_>> {
        match (&self.data, self.format) {
            (
                Data::Mlx { w, s, b },
                Format::MlxAffine {
                    bits,
                    group_size,
                    scales,
                },
            ) => Some(MlxView {
                bits,
                group: group_size as usize,
                scale_type: scales,
                k: self.k,
                w: w.bytes(),
                s,
                b,
            }),
            _ => None,
        }
    }

    fn block_bytes(&self) -> &[u8] {
        match &self.data {
            Data::Blocks(s) | Data::Rows8(s) => s.bytes(),
            Data::Mlx { w, .. } => w.bytes(),
        }
    }

    /// An owned copy in the 8-row interleaved layout (llama.cpp's CPU "repack"; see
    /// `crate::interleave`), for formats that have one (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K): GEMV reads
    /// the same bytes, grouped so eight rows share each activation load, which is faster on CPUs
    /// whose integer multiply pipe is the bottleneck. Results equal the plain layout's within the GEMV
    /// tolerance (the summation order differs); `embedding` and `dequantize` are unchanged.
    /// `None` for other formats and for a matrix already repacked.
    pub fn repacked(&self) -> Option<QuantMatrix<'static>> {
        let Data::Blocks(st) = &self.data else {
            return None;
        };
        fn pack<B: Interleave>(q: &QuantMatrix<'_>, bytes: &[u8]) -> Vec<u8> {
            let nb = q.k / B::ELEMS;
            interleave::interleave(blocks::<B>(bytes), q.n, nb)
        }
        let bytes =
            with_interleaved!(self.format, |B| pack::<B>(self, st.bytes()), else => return None);
        // Streamed at every call: on huge pages (a TLB miss every 4 KiB otherwise).
        let mut words = crate::mem::huge_vec(bytes.len().div_ceil(8), |_| 0u64);
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(&bytes);
        Some(QuantMatrix {
            format: self.format,
            n: self.n,
            k: self.k,
            data: Data::Rows8(Storage::Owned(words, bytes.len())),
            parallel: self.parallel,
            precision: self.precision,
        })
    }

    /// The tensor's bytes in the file's layout (for MLX the single-buffer form: weights,
    /// scales, biases), what a GPU uploads; `None` for a repacked matrix.
    pub fn file_bytes(&self) -> Option<Cow<'_, [u8]>> {
        match &self.data {
            Data::Blocks(st) => Some(Cow::Borrowed(st.bytes())),
            Data::Rows8(_) => None,
            Data::Mlx { w, s, b } => Some(Cow::Owned([w.bytes(), s, b].concat())),
        }
    }

    /// True for a matrix from [`QuantMatrix::repacked`].
    pub fn is_repacked(&self) -> bool {
        matches!(self.data, Data::Rows8(_))
    }

    /// Interleaved rows joined with activation rows quantized for block type `B` (the same type
    /// as the matrix's: `with_block!` and `with_interleaved!` name it separately).
    fn rows8<B: QuantBlock>(&self, acts: Acts<B>) -> Box<dyn Rows + '_> {
        fn make<'s, I: Interleave>(
            q: &'s QuantMatrix<'_>,
            acts: Arc<dyn Any + Send + Sync>,
        ) -> Box<dyn Rows + 's> {
            let acts: Acts<I> = acts.downcast().expect("activation type of the format");
            let view = View::<I>::new(q.block_bytes(), q.n, q.k / I::ELEMS);
            Box::new(Rows8::new(view, acts))
        }
        with_interleaved!(self.format, |I| make::<I>(self, acts), else => unreachable!("repacked {}", self.format))
    }

    /// Interleaved rows joined with f32 activation rows (precise mode).
    fn rows8_f32(&self, x: Arc<Vec<f32>>) -> Box<dyn Rows + '_> {
        fn make<'s, I: Interleave + PreciseDot>(
            q: &'s QuantMatrix<'_>,
            x: Arc<Vec<f32>>,
        ) -> Box<dyn Rows + 's> {
            let view = View::<I>::new(q.block_bytes(), q.n, q.k / I::ELEMS);
            Box::new(F32Rows::rows8(view, q.k, x))
        }
        with_interleaved!(self.format, |I| make::<I>(self, x), else => unreachable!("repacked {}", self.format))
    }

    /// The matrix joined with `m` prepared activation rows (`x` is `[m, k]` f32).
    fn prepare(&self, x: &[f32], m: usize) -> Result<Box<dyn Rows + '_>> {
        Ok(prepare_many(&[self], x, m)?.pop().expect("one matrix"))
    }

    /// `y = W x`: `x` has `k` elements, `y` has `n`.
    pub fn gemv(&self, x: Activation, y: &mut [f32]) -> Result<()> {
        self.gemv_batch(x, 1, y)
    }

    /// `y[j] = W x[j]` for `m` activation rows: `x` is `[m, k]`, `y` is `[m, n]`, row-major.
    /// Each weight row is streamed once for all `m` rows (best for m <= 16).
    pub fn gemv_batch(&self, x: Activation, m: usize, y: &mut [f32]) -> Result<()> {
        check_x(x.len(), m, self.k)?;
        check_y("y", y.len(), m, self.n)?;
        if m == 0 {
            return Ok(());
        }
        let xf = x.to_f32();
        let rows = self.prepare(&xf, m)?;
        gemv::run(rows.as_ref(), self.n, self.parallel, y);
        for j in non_finite_rows(&xf, self.k) {
            self.exact_row(&xf[j * self.k..][..self.k], &mut y[j * self.n..][..self.n])?;
        }
        Ok(())
    }

    /// `y[r] = W[r] . x` in f32 from the dequantized rows: IEEE semantics, so a NaN or an
    /// infinity in `x` reaches `y` as it does on the float formats. The quantized activation
    /// types cannot carry them (an Inf scale zeroes or NaNs its whole block, an int8 code
    /// clamps), so rows of `x` holding one take this path: bad input only, never the fast path.
    fn exact_row(&self, x: &[f32], y: &mut [f32]) -> Result<()> {
        let mut w = vec![0.0f32; self.k];
        for (r, out) in y.iter_mut().enumerate() {
            self.embedding(&[r as u32], &mut w)?;
            *out = w.iter().zip(x).map(|(a, b)| a * b).sum();
        }
        Ok(())
    }

    /// Gathers rows `rows[i]` of the matrix, dequantized, into `out` (`[rows.len(), k]`).
    pub fn embedding(&self, rows: &[u32], out: &mut [f32]) -> Result<()> {
        check_len(
            "out",
            out.len(),
            checked_mul("rows", rows.len(), self.k)?,
            "elements (rows * k)",
        )?;
        if let Some(i) = rows.iter().position(|&r| r as usize >= self.n) {
            return Err(invalid(
                "rows",
                format!(
                    "index {} at position {i} is out of range for N = {}",
                    rows[i], self.n
                ),
            ));
        }
        if self.k == 0 {
            return Ok(());
        }
        fn gather<B: QuantBlock>(q: &QuantMatrix<'_>, rows: &[u32], out: &mut [f32]) -> Result<()> {
            if q.is_repacked() {
                return with_interleaved!(q.format, |I| gather_rows8::<I>(q, rows, out), else => unreachable!());
            }
            let w = blocks::<B>(q.block_bytes());
            let nb = q.k / B::ELEMS;
            for (&r, o) in rows.iter().zip(out.chunks_exact_mut(q.k)) {
                let r = r as usize;
                B::dequantize(&w[r * nb..(r + 1) * nb], o);
            }
            Ok(())
        }
        fn gather_rows8<I: Interleave>(
            q: &QuantMatrix<'_>,
            rows: &[u32],
            out: &mut [f32],
        ) -> Result<()> {
            let view = View::<I>::new(q.block_bytes(), q.n, q.k / I::ELEMS);
            let mut row = Vec::new();
            for (&r, o) in rows.iter().zip(out.chunks_exact_mut(q.k)) {
                view.row(r as usize, &mut row);
                I::dequantize(&row, o);
            }
            Ok(())
        }
        with_block!(self.format, |B| gather::<B>(self, rows, out), mlx => {
            let view = self.mlx_view().ok_or_else(|| invalid("format", "MLX matrix without MLX arrays"))?;
            for (&r, o) in rows.iter().zip(out.chunks_exact_mut(self.k)) {
                view.dequantize_row(r as usize, o);
            }
            Ok(())
        })
    }

    /// The whole matrix dequantized, `[n, k]`.
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        let idx: Vec<u32> = (0..self.n)
            .map(|r| u32::try_from(r).map_err(|_| invalid("n", "more than u32::MAX rows")))
            .collect::<Result<_>>()?;
        let mut out = vec![0.0; checked_mul("n", self.n, self.k)?];
        self.embedding(&idx, &mut out)?;
        Ok(out)
    }
}

/// Indices of the rows of `x` (`[m, k]`) holding a NaN or an infinity.
fn non_finite_rows(x: &[f32], k: usize) -> Vec<usize> {
    if k == 0 {
        return Vec::new();
    }
    x.chunks_exact(k)
        .enumerate()
        .filter(|(_, r)| r.iter().any(|v| !v.is_finite()))
        .map(|(j, _)| j)
        .collect()
}

/// Every matrix joined with `m` prepared activation rows (`x` is `[m, k]` f32, the same `k` for
/// all): matrices of one format share one quantized copy of the activation.
fn prepare_many<'s>(
    mats: &[&'s QuantMatrix<'_>],
    x: &[f32],
    m: usize,
) -> Result<Vec<Box<dyn Rows + 's>>> {
    fn block_rows<'s, B: PreciseDot>(
        mats: &[&'s QuantMatrix<'_>],
        idx: &[usize],
        x: &[f32],
        m: usize,
        out: &mut [Option<Box<dyn Rows + 's>>],
    ) -> Result<()> {
        let k = mats[idx[0]].k;
        if mats[idx[0]].precision == Precision::Precise {
            // One f32 copy of the activation, shared; no rounding.
            let xs = Arc::new(x[..m * k].to_vec());
            for &j in idx {
                out[j] = Some(if mats[j].is_repacked() {
                    mats[j].rows8_f32(xs.clone())
                } else {
                    let w = blocks::<B>(mats[j].block_bytes());
                    Box::new(F32Rows::<B>::plain(w, k, xs.clone()))
                });
            }
            return Ok(());
        }
        let dot_elems = <B::Dot as QuantBlock>::ELEMS;
        if !k.is_multiple_of(dot_elems) {
            return Err(invalid(
                "k",
                format!("must be a multiple of the activation block size {dot_elems}"),
            ));
        }
        let acts = crate::rows::quantize_acts::<B>(x, k, m);
        for &j in idx {
            out[j] = Some(if mats[j].is_repacked() {
                mats[j].rows8::<B>(acts.clone())
            } else {
                let w = blocks::<B>(mats[j].block_bytes());
                Box::new(BlockRows::<B>::new(w, k, acts.clone()))
            });
        }
        Ok(())
    }
    let mut out: Vec<Option<Box<dyn Rows + 's>>> = (0..mats.len()).map(|_| None).collect();
    for i in 0..mats.len() {
        if out[i].is_some() {
            continue;
        }
        let idx: Vec<usize> = (i..mats.len())
            .filter(|&j| {
                out[j].is_none()
                    && mats[j].format == mats[i].format
                    && mats[j].precision == mats[i].precision
            })
            .collect();
        with_block!(mats[i].format, |B| block_rows::<B>(mats, &idx, x, m, &mut out)?, mlx => {
            for &j in &idx {
                let view = mats[j]
                    .mlx_view()
                    .ok_or_else(|| invalid("format", "MLX matrix without MLX arrays"))?;
                let precise = mats[j].precision == Precision::Precise;
                out[j] = Some(Box::new(MlxRows::new(view, x, m, precise)));
            }
        });
    }
    Ok(out
        .into_iter()
        .map(|r| r.expect("every matrix prepared"))
        .collect())
}

/// `ys[i] = mats[i] x` for matrices sharing `k` (Q, K and V projections): the activation is
/// quantized once per format and all rows run as one parallel pass, so small matrices share
/// one scheduling round. `x` is `[m, k]`, `ys[i]` is `[m, mats[i].n()]`.
pub fn gemv_many(
    mats: &[&QuantMatrix],
    x: Activation,
    m: usize,
    ys: &mut [&mut [f32]],
) -> Result<()> {
    if mats.len() != ys.len() {
        return Err(invalid(
            "ys",
            format!("{} outputs for {} matrices", ys.len(), mats.len()),
        ));
    }
    let Some(first) = mats.first() else {
        return Ok(());
    };
    let k = first.k;
    if let Some(q) = mats.iter().find(|q| q.k != k) {
        return Err(invalid(
            "mats",
            format!("k = {} differs from the first matrix's k = {k}", q.k),
        ));
    }
    check_x(x.len(), m, k)?;
    for (q, y) in mats.iter().zip(ys.iter()) {
        check_y("ys", y.len(), m, q.n)?;
    }
    if m == 0 {
        return Ok(());
    }
    let xf = x.to_f32();
    let parts = prepare_many(mats, &xf, m)?;
    let seg = Segments::new(parts.into_iter().zip(mats.iter().map(|q| q.n)).collect());
    let n = seg.n();
    let mut yt = vec![0.0f32; n * m];
    let rb = seg.row_bytes();
    gemv::for_row_chunks(n, m, first.parallel, rb, &mut yt, |r0, o| seg.rows(r0, o));
    for (i, y) in ys.iter_mut().enumerate() {
        let (s, e) = (seg.starts[i], seg.starts[i + 1]);
        gemv::transpose_into(&yt[s * m..e * m], e - s, m, y);
    }
    for j in non_finite_rows(&xf, k) {
        for (q, y) in mats.iter().zip(ys.iter_mut()) {
            q.exact_row(&xf[j * k..][..k], &mut y[j * q.n..][..q.n])?;
        }
    }
    Ok(())
}

/// `out[j, r] = silu(gate[r] . x_j) * (up[r] . x_j)`: one pass over both matrices (each row
/// chunk reads its gate rows and its up rows back to back). `x` is `[m, k]`, `out` `[m, n]`.
pub fn swiglu_gate_up(
    gate: &QuantMatrix,
    up: &QuantMatrix,
    x: Activation,
    m: usize,
    out: &mut [f32],
) -> Result<()> {
    if gate.n != up.n || gate.k != up.k {
        return Err(invalid(
            "up",
            format!(
                "shape [{}, {}] differs from gate's [{}, {}]",
                up.n, up.k, gate.n, gate.k
            ),
        ));
    }
    let (n, k) = (gate.n, gate.k);
    check_x(x.len(), m, k)?;
    check_y("out", out.len(), m, n)?;
    if m == 0 {
        return Ok(());
    }
    let xf = x.to_f32();
    let mut prepared = prepare_many(&[gate, up], &xf, m)?;
    let (u, g) = (prepared.pop().expect("up"), prepared.pop().expect("gate"));
    let rb = g.row_bytes() + u.row_bytes();
    let body = |r0: usize, o: &mut [f32]| {
        let mut ub = vec![0.0f32; o.len()];
        g.rows(r0, o);
        u.rows(r0, &mut ub);
        for (a, b) in o.iter_mut().zip(&ub) {
            *a = silu(*a) * b;
        }
    };
    if m == 1 {
        gemv::for_row_chunks(n, 1, gate.parallel, rb, out, body);
    } else {
        let mut yt = vec![0.0f32; n * m];
        gemv::for_row_chunks(n, m, gate.parallel, rb, &mut yt, body);
        gemv::transpose_into(&yt, n, m, out);
    }
    for j in non_finite_rows(&xf, k) {
        let (x, o) = (&xf[j * k..][..k], &mut out[j * n..][..n]);
        let mut ub = vec![0.0f32; n];
        gate.exact_row(x, o)?;
        up.exact_row(x, &mut ub)?;
        for (a, b) in o.iter_mut().zip(&ub) {
            *a = silu(*a) * b;
        }
    }
    Ok(())
}

/// Akunu's fused down projection: `y[j] = W_down (silu(gate_act[j]) * up_act[j])`.
/// `gate_act` and `up_act` are `[m, down.k]`, `y` is `[m, down.n]`.
///
/// The SwiGLU product is formed inside the call (no intermediate for the caller to allocate or
/// pass), once per activation element, and then quantized to the format's activation type; on a
/// CPU the integer dot needs the whole quantized activation row, so the product is formed in one
/// O(K) pass before the O(N*K) stream over W_down rather than per weight row as on a GPU.
pub fn down_with_swiglu(
    down: &QuantMatrix,
    gate_act: &[f32],
    up_act: &[f32],
    m: usize,
    y: &mut [f32],
) -> Result<()> {
    let want = checked_mul("m", m, down.k)?;
    check_len("gate_act", gate_act.len(), want, "elements (m * k)")?;
    check_len("up_act", up_act.len(), want, "elements (m * k)")?;
    let h: Vec<f32> = gate_act
        .iter()
        .zip(up_act)
        .map(|(&g, &u)| silu(g) * u)
        .collect();
    down.gemv_batch(Activation::F32(&h), m, y)
}

#[allow(dead_code)]
fn assert_sync() {
    fn is_sync<T: Sync + Send>() {}
    is_sync::<QuantMatrix<'static>>();
}

#[cfg(test)]
mod file_bytes_tests {
    use super::*;
    use crate::format::MlxScale;

    /// What a GPU uploads is the file's bytes: blocks as given, MLX's three arrays joined in
    /// the single-buffer order, nothing for a repacked copy.
    #[test]
    fn file_bytes_are_the_given_bytes() {
        let (n, k) = (8, 64);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        for f in [
            Format::Q4_0,
            Format::Q8_0,
            Format::mlx(4, 32, MlxScale::F16).unwrap(),
        ] {
            let bytes = crate::quantize(f, &w, n, k).unwrap();
            let q = QuantMatrix::new(f, n, k, &bytes).unwrap();
            assert_eq!(q.file_bytes().unwrap().as_ref(), &bytes[..], "{f}");
        }
        let bytes = crate::quantize(Format::Q4_0, &w, n, k).unwrap();
        let q = QuantMatrix::new(Format::Q4_0, n, k, &bytes).unwrap();
        assert!(q.repacked().unwrap().file_bytes().is_none());
    }
}
