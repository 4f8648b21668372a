//! The generic GEMV driver: formats supply per-row dots (`Rows`), the driver supplies
//! threading over row blocks and the batch layout.
//!
//! Threading: rayon tasks over chunks of output rows (about 8 tasks per thread, each at least
//! `MIN_TASK_BYTES` of weights so small matrices are not drowned in scheduling); each weight
//! row is read once and dotted with all M activation rows while it sits in L1. Several matrices
//! that share one activation (Q, K and V) run as one row range (`Segments`).

use crate::format::QuantBlock;
use crate::mlx::q8::Q8Act;
use crate::mlx::{group_sums, MlxView};
use crate::rows::{Acts, Rows};
use rayon::prelude::*;

/// Weight rows per multi-row dot group in the batched path, and the multiple every task's row
/// count is rounded to (the interleaved layout's group).
const ROWS: usize = crate::interleave::ROWS;

/// A block-format matrix and its activation rows quantized to the format's `Dot` type.
pub(crate) struct BlockRows<'a, B: QuantBlock> {
    pub w: &'a [B],
    pub blocks_per_row: usize,
    pub acts: Acts<B>,
}

impl<'a, B: QuantBlock> BlockRows<'a, B> {
    /// `k` must be a multiple of `B::ELEMS`; `acts` rows hold `k` elements.
    pub fn new(w: &'a [B], k: usize, acts: Acts<B>) -> Self {
        BlockRows {
            w,
            blocks_per_row: k / B::ELEMS,
            acts,
        }
    }
}

impl<B: QuantBlock> Rows for BlockRows<'_, B> {
    fn m(&self) -> usize {
        self.acts.len()
    }
    fn rows(&self, r0: usize, out: &mut [f32]) {
        let nb = self.blocks_per_row;
        let m = self.acts.len();
        let rows = out.len() / m;
        let w = &self.w[r0 * nb..(r0 + rows) * nb];
        if m == 1 {
            B::vec_dot_rows(w, &self.acts[0], out);
            return;
        }
        // Groups of ROWS weight rows stay in L1 while every activation row passes over them.
        let acts: Vec<&[B::Dot]> = self.acts.iter().map(|a| &a[..]).collect();
        for (wg, o) in w.chunks(ROWS * nb).zip(out.chunks_mut(ROWS * m)) {
            B::vec_dot_rows_batch(wg, &acts, o);
        }
    }
    fn row_bytes(&self) -> usize {
        self.blocks_per_row * size_of::<B>()
    }
}

/// An MLX matrix with its activation rows: int8-quantized for the widths that run in integers
/// (`mlx::q8`), else f32 with their per-group sums.
pub(crate) struct MlxRows<'a> {
    pub view: MlxView<'a>,
    pub acts: MlxActs,
}

pub(crate) enum MlxActs {
    Q8(Vec<Q8Act>),
    F32(Vec<(Vec<f32>, Vec<f32>)>),
}

impl<'a> MlxRows<'a> {
    /// `f32_only`: precise mode, the f32 path at every width.
    pub fn new(view: MlxView<'a>, x: &[f32], m: usize, f32_only: bool) -> Self {
        let k = view.k;
        let rows = (0..m).map(|j| &x[j * k..(j + 1) * k]);
        let acts = if crate::format::mlx_int8_bits(view.bits) && !f32_only {
            MlxActs::Q8(
                rows.map(|row| Q8Act::new(row, view.group, view.bits))
                    .collect(),
            )
        } else {
            MlxActs::F32(
                rows.map(|row| (row.to_vec(), group_sums(row, view.group)))
                    .collect(),
            )
        };
        MlxRows { view, acts }
    }
}

impl Rows for MlxRows<'_> {
    fn m(&self) -> usize {
        match &self.acts {
            MlxActs::Q8(a) => a.len(),
            MlxActs::F32(a) => a.len(),
        }
    }
    fn rows(&self, r0: usize, out: &mut [f32]) {
        let mut scratch = (Vec::new(), Vec::new());
        for (i, o) in out.chunks_exact_mut(self.m()).enumerate() {
            match &self.acts {
                MlxActs::Q8(acts) => {
                    for (y, a) in o.iter_mut().zip(acts) {
                        *y = self.view.row_dot_q8(r0 + i, a, &mut scratch);
                    }
                }
                MlxActs::F32(acts) => {
                    for (y, (x, s)) in o.iter_mut().zip(acts) {
                        *y = self.view.row_dot(r0 + i, x, s, &mut scratch);
                    }
                }
            }
        }
    }
    fn row_bytes(&self) -> usize {
        self.view.k * self.view.bits as usize / 8
    }
}

/// Several matrices with the same activation rows, run as one range of rows: matrix `i` owns
/// rows `starts[i] .. starts[i + 1]`.
pub(crate) struct Segments<'a> {
    pub parts: Vec<Box<dyn Rows + 'a>>,
    pub starts: Vec<usize>,
}

impl<'a> Segments<'a> {
    pub fn new(parts: Vec<(Box<dyn Rows + 'a>, usize)>) -> Self {
        let mut starts = vec![0];
        for (_, n) in &parts {
            starts.push(starts.last().unwrap() + n);
        }
        Segments {
            parts: parts.into_iter().map(|(p, _)| p).collect(),
            starts,
        }
    }
    pub fn n(&self) -> usize {
        *self.starts.last().unwrap()
    }
}

impl Rows for Segments<'_> {
    fn m(&self) -> usize {
        self.parts.first().map_or(1, |p| p.m())
    }
    fn rows(&self, r0: usize, out: &mut [f32]) {
        let m = self.m();
        let r1 = r0 + out.len() / m;
        for (i, p) in self.parts.iter().enumerate() {
            let (s, e) = (self.starts[i].max(r0), self.starts[i + 1].min(r1));
            if s < e {
                p.rows(s - self.starts[i], &mut out[(s - r0) * m..(e - r0) * m]);
            }
        }
    }
    fn row_bytes(&self) -> usize {
        let n = self.n().max(1);
        let total: usize = (0..self.parts.len())
            .map(|i| self.parts[i].row_bytes() * (self.starts[i + 1] - self.starts[i]))
            .sum();
        total / n
    }
}

/// The least weight bytes worth a task of its own: below this, scheduling costs more than the
/// split gains (a 576 x 192 Q4_1 matrix is 69 KB).
const MIN_TASK_BYTES: usize = 16 << 10;

/// Rows per task: about 8 tasks per thread so uneven cores still balance, never below 8 rows
/// or `MIN_TASK_BYTES`.
fn chunk_rows(n: usize, parallel: bool, row_bytes: usize) -> usize {
    if !parallel {
        return n.max(1);
    }
    // A multiple of ROWS, so multi-row groups start at the same rows threaded or not and the
    // results are bit-identical either way.
    let tasks = rayon::current_num_threads() * 8;
    let min_rows = MIN_TASK_BYTES.div_ceil(row_bytes.max(1)).max(8);
    n.div_ceil(tasks).max(min_rows).next_multiple_of(ROWS)
}

/// Calls `f(r0, out)` over chunks of rows of a row-major `[n, m]` output `yt`.
pub(crate) fn for_row_chunks(
    n: usize,
    m: usize,
    parallel: bool,
    row_bytes: usize,
    yt: &mut [f32],
    f: impl Fn(usize, &mut [f32]) + Sync,
) {
    if n == 0 || m == 0 {
        return;
    }
    let ch = chunk_rows(n, parallel, row_bytes);
    if parallel {
        yt.par_chunks_mut(ch * m)
            .enumerate()
            .for_each(|(c, o)| f(c * ch, o));
    } else {
        yt.chunks_mut(ch * m)
            .enumerate()
            .for_each(|(c, o)| f(c * ch, o));
    }
}

/// `y[j, r] = dot(W[r], x_j)` into `y` (`[m, n]`).
pub(crate) fn run(rows: &dyn Rows, n: usize, parallel: bool, y: &mut [f32]) {
    let m = rows.m();
    let rb = rows.row_bytes();
    if m == 1 {
        for_row_chunks(n, 1, parallel, rb, y, |r0, o| rows.rows(r0, o));
        return;
    }
    let mut yt = vec![0.0f32; n * m];
    for_row_chunks(n, m, parallel, rb, &mut yt, |r0, o| rows.rows(r0, o));
    transpose_into(&yt, n, m, y);
}

/// `y[j * n + r] = yt[r * m + j]`.
pub(crate) fn transpose_into(yt: &[f32], n: usize, m: usize, y: &mut [f32]) {
    for (r, row) in yt.chunks_exact(m).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            y[j * n + r] = v;
        }
    }
}

#[inline]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}
