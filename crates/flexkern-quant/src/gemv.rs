//! The generic GEMV driver: formats supply per-row dots (`Rows`), the driver supplies
//! threading over row blocks and the batch layout.
//!
//! Threading: rayon tasks over chunks of output rows (about 8 tasks per thread, at least 8 rows
//! each); each weight row is read once and dotted with all M activation rows while it sits in L1.

use crate::format::QuantBlock;
use crate::mlx::{group_sums, MlxView};
use rayon::prelude::*;

/// A weight matrix joined with its prepared activation rows.
pub(crate) trait Rows: Sync {
    /// Activation rows prepared.
    fn m(&self) -> usize;
    /// For rows `r0 .. r0 + out.len() / m`: `out[(r - r0) * m + j] = dot(W[r], x_j)`.
    fn rows(&self, r0: usize, out: &mut [f32]);
}

/// Weight rows per multi-row dot group in the batched path.
const ROWS: usize = 4;

/// A block-format matrix and its activation rows quantized to the format's `Dot` type.
pub(crate) struct BlockRows<'a, B: QuantBlock> {
    pub w: &'a [B],
    pub blocks_per_row: usize,
    pub acts: Vec<Vec<B::Dot>>,
}

impl<'a, B: QuantBlock> BlockRows<'a, B> {
    /// `x` is `[m, k]` f32; `k` must be a multiple of both `B::ELEMS` and `B::Dot::ELEMS`.
    pub fn new(w: &'a [B], k: usize, x: &[f32], m: usize) -> Self {
        let nb_dot = k / <B::Dot as QuantBlock>::ELEMS;
        let acts = (0..m)
            .map(|j| {
                let mut a = vec![<B::Dot as bytemuck::Zeroable>::zeroed(); nb_dot];
                <B::Dot as QuantBlock>::quantize_ref(&x[j * k..(j + 1) * k], &mut a);
                a
            })
            .collect();
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
        let mut tmp = [0.0f32; ROWS];
        for (g, wg) in w.chunks(ROWS * nb).enumerate() {
            let gr = wg.len() / nb;
            for (j, a) in self.acts.iter().enumerate() {
                B::vec_dot_rows(wg, a, &mut tmp[..gr]);
                for (i, &v) in tmp[..gr].iter().enumerate() {
                    out[(g * ROWS + i) * m + j] = v;
                }
            }
        }
    }
}

/// An MLX matrix with f32 activation rows and their per-group sums.
pub(crate) struct MlxRows<'a> {
    pub view: MlxView<'a>,
    pub acts: Vec<(Vec<f32>, Vec<f32>)>,
}

impl<'a> MlxRows<'a> {
    pub fn new(view: MlxView<'a>, x: &[f32], m: usize) -> Self {
        let k = view.k;
        let acts = (0..m)
            .map(|j| {
                let row = x[j * k..(j + 1) * k].to_vec();
                let sums = group_sums(&row, view.group);
                (row, sums)
            })
            .collect();
        MlxRows { view, acts }
    }
}

impl Rows for MlxRows<'_> {
    fn m(&self) -> usize {
        self.acts.len()
    }
    fn rows(&self, r0: usize, out: &mut [f32]) {
        for (i, o) in out.chunks_exact_mut(self.acts.len()).enumerate() {
            for (y, (x, s)) in o.iter_mut().zip(&self.acts) {
                *y = self.view.row_dot(r0 + i, x, s);
            }
        }
    }
}

/// Rows per task: about 8 tasks per thread so uneven cores still balance, never below 8 rows.
fn chunk_rows(n: usize, parallel: bool) -> usize {
    if !parallel {
        return n.max(1);
    }
    // A multiple of ROWS, so multi-row groups start at the same rows threaded or not and the
    // results are bit-identical either way.
    let tasks = rayon::current_num_threads() * 8;
    n.div_ceil(tasks).max(8).next_multiple_of(ROWS)
}

/// Calls `f(r0, out)` over chunks of rows of a row-major `[n, m]` output `yt`.
pub(crate) fn for_row_chunks(
    n: usize,
    m: usize,
    parallel: bool,
    yt: &mut [f32],
    f: impl Fn(usize, &mut [f32]) + Sync,
) {
    if n == 0 || m == 0 {
        return;
    }
    let ch = chunk_rows(n, parallel);
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
    if m == 1 {
        for_row_chunks(n, 1, parallel, y, |r0, o| rows.rows(r0, o));
        return;
    }
    let mut yt = vec![0.0f32; n * m];
    for_row_chunks(n, m, parallel, &mut yt, |r0, o| rows.rows(r0, o));
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
