//! The 8-row interleaved layout (llama.cpp's CPU "repack" idea): block `i` of eight consecutive
//! rows is stored as one group, its bytes arranged so one SIMD register holds the same four
//! weights of all eight rows. A kernel then keeps one 16-bit lane pair per row, so it needs no
//! horizontal reductions and shares every activation load among eight rows. On cores with one
//! vector integer-multiply pipe (Zen 1) that leaves the products as the only busy pipe.
//!
//! A matrix is `[n / 8 * nb groups][(n % 8) * nb plain blocks]`: whole groups of rows first, the
//! rows left over after them in the file's own layout. `QuantMatrix::repacked` builds it.

use crate::format::QuantBlock;
use crate::rows::{Acts, Rows};
use bytemuck::Pod;

/// Rows per group.
pub const ROWS: usize = 8;

/// A block format with an 8-row interleaved layout.
pub trait Interleave: QuantBlock {
    /// Block `i` of eight rows.
    type Group: Pod + Send + Sync;
    /// What the kernel needs of one activation block beyond its bytes, computed once per call
    /// and shared by every row (its scale as f32, its sum).
    type Prep: Copy + Send + Sync;
    /// Runs of groups one single-row GEMV task reads side by side (2 or 3).
    const STREAMS: usize = 2;

    fn pack(rows: &[Self; ROWS]) -> Self::Group;
    fn unpack(g: &Self::Group, r: usize) -> Self;
    fn prep(a: &Self::Dot) -> Self::Prep;
    /// `out[j][s]`: dots of the eight rows of `w[s]` (a run of groups covering the activation)
    /// with activation row `a[j]`. Several runs (`S`, one activation row) are several memory
    /// streams, which keeps more DRAM reads in flight; several activation rows (`R`, one run)
    /// share each decoded weight register (batched GEMV). Every (j, s) pair sees the same
    /// integer dots and f32 accumulation order whatever `S` and `R` are, so results are
    /// bit-identical across shapes. `next[s]` is the run read after `w[s]` (or `w[s]` itself),
    /// which the kernel prefetches as it nears the end of `w[s]`.
    fn dot8<const S: usize, const R: usize>(
        w: [&[Self::Group]; S],
        next: [&[Self::Group]; S],
        a: [&[Self::Dot]; R],
        p: [&[Self::Prep]; R],
    ) -> Dots<S, R>;
}

/// `dot8`'s result: `[j][s]` = the eight rows of run `s` against activation row `j`.
pub type Dots<const S: usize, const R: usize> = [[[f32; ROWS]; S]; R];

/// Activation rows per batched `dot8` call: four keeps each activation row's i16 and f32
/// accumulators and the decoded weights in the 16 AVX2 registers (the K-quants spill a few).
pub(crate) const ACT_ROWS: usize = 4;
// `Rows8::group_all` names the smaller calls 1..=3.
const _: () = assert!(ACT_ROWS == 4);

/// The portable `dot8`: each row unpacked and dotted on its own.
pub(crate) fn dot8_each<B: Interleave, const S: usize, const R: usize>(
    w: [&[B::Group]; S],
    a: [&[B::Dot]; R],
) -> Dots<S, R> {
    let mut out = [[[0.0; ROWS]; S]; R];
    let mut row = Vec::with_capacity(w[0].len());
    for (s, ws) in w.iter().enumerate() {
        for r in 0..ROWS {
            row.clear();
            row.extend(ws.iter().map(|g| B::unpack(g, r)));
            for (o, a) in out.iter_mut().zip(a) {
                o[s][r] = B::vec_dot(&row, a);
            }
        }
    }
    out
}

/// Bytes of an interleaved `[n, k]` matrix: the same as the file's, in a different order.
pub(crate) fn interleave<B: Interleave>(w: &[B], n: usize, nb: usize) -> Vec<u8> {
    let full = n / ROWS;
    let mut out: Vec<u8> = Vec::with_capacity(size_of_val(w));
    for g in 0..full {
        for i in 0..nb {
            let rows: [B; ROWS] = std::array::from_fn(|r| w[(g * ROWS + r) * nb + i]);
            out.extend_from_slice(bytemuck::bytes_of(&B::pack(&rows)));
        }
    }
    out.extend_from_slice(bytemuck::cast_slice(&w[full * ROWS * nb..]));
    debug_assert_eq!(out.len(), size_of_val(w));
    out
}

/// An interleaved matrix viewed as its groups and its plain tail rows.
pub(crate) struct View<'a, B: Interleave> {
    pub groups: &'a [B::Group],
    pub tail: &'a [B],
    pub nb: usize,
}

impl<'a, B: Interleave> View<'a, B> {
    /// `bytes` from `interleave` (aligned for both block types), `n` rows of `nb` blocks.
    pub fn new(bytes: &'a [u8], n: usize, nb: usize) -> Self {
        let split = n / ROWS * nb * size_of::<B::Group>();
        let (g, t) = bytes.split_at(split);
        View {
            groups: bytemuck::cast_slice(g),
            tail: bytemuck::cast_slice(t),
            nb,
        }
    }

    /// Rows in whole groups.
    fn grouped(&self) -> usize {
        self.groups.len() / self.nb.max(1) * ROWS
    }

    fn group(&self, g: usize) -> &'a [B::Group] {
        &self.groups[g * self.nb..(g + 1) * self.nb]
    }

    /// Row `r` in the file's layout, into `out` (`nb` blocks).
    pub fn row(&self, r: usize, out: &mut Vec<B>) {
        out.clear();
        if r < self.grouped() {
            out.extend(self.group(r / ROWS).iter().map(|g| B::unpack(g, r % ROWS)));
        } else {
            let t = r - self.grouped();
            out.extend_from_slice(&self.tail[t * self.nb..(t + 1) * self.nb]);
        }
    }
}

/// An interleaved matrix joined with its prepared activation rows.
pub(crate) struct Rows8<'a, B: Interleave> {
    view: View<'a, B>,
    acts: Acts<B>,
    preps: Vec<Vec<B::Prep>>,
}

impl<'a, B: Interleave> Rows8<'a, B> {
    pub fn new(view: View<'a, B>, acts: Acts<B>) -> Self {
        let preps = acts
            .iter()
            .map(|a| a.iter().map(|b| B::prep(b)).collect())
            .collect();
        Rows8 { view, acts, preps }
    }

    /// All eight rows of group `g` for activation rows `j0 .. j0 + R`.
    fn group_dots<const R: usize>(&self, g: usize, j0: usize) -> [[f32; ROWS]; R] {
        let next = self.view.group(if (g + 1) * ROWS < self.view.grouped() {
            g + 1
        } else {
            g
        });
        let a = std::array::from_fn(|j| &self.acts[j0 + j][..]);
        let p = std::array::from_fn(|j| &self.preps[j0 + j][..]);
        B::dot8([self.view.group(g)], [next], a, p).map(|o| o[0])
    }

    /// Group `g` against every activation row, `ACT_ROWS` at a time (the rest in one smaller
    /// call): `put(i, j, dot)` for its eight rows `i`.
    fn group_all(&self, g: usize, mut put: impl FnMut(usize, usize, f32)) {
        let m = self.acts.len();
        let mut j0 = 0;
        while j0 < m {
            let (r, v): (usize, [[f32; ROWS]; ACT_ROWS]) = match m - j0 {
                1 => (1, pad(self.group_dots::<1>(g, j0))),
                2 => (2, pad(self.group_dots::<2>(g, j0))),
                3 => (3, pad(self.group_dots::<3>(g, j0))),
                _ => (ACT_ROWS, self.group_dots::<ACT_ROWS>(g, j0)),
            };
            for (j, row) in v[..r].iter().enumerate() {
                for (i, &x) in row.iter().enumerate() {
                    put(i, j0 + j, x);
                }
            }
            j0 += r;
        }
    }

    /// Dots of the whole groups `whole` for one activation row, `S` runs at a time, into
    /// `out[r - base]`.
    fn stream_runs<const S: usize>(&self, whole: &[usize], base: usize, out: &mut [f32]) {
        let mut put = |g: usize, v: [f32; ROWS]| {
            out[g * ROWS - base..][..ROWS].copy_from_slice(&v);
        };
        let part = whole.len().div_ceil(S);
        for t in 0..part {
            let gs: [Option<usize>; S] = std::array::from_fn(|s| whole.get(s * part + t).copied());
            if gs.iter().all(Option::is_some) {
                let gs = gs.map(Option::unwrap);
                // The run each stream reads next: its part's following group.
                let next = std::array::from_fn(|s| {
                    let last = whole[((s + 1) * part).min(whole.len()) - 1];
                    self.view
                        .group(if gs[s] < last { gs[s] + 1 } else { gs[s] })
                });
                let [v] = B::dot8(
                    gs.map(|g| self.view.group(g)),
                    next,
                    [&self.acts[0][..]],
                    [&self.preps[0][..]],
                );
                for (g, vs) in gs.into_iter().zip(v) {
                    put(g, vs);
                }
            } else {
                for g in gs.into_iter().flatten() {
                    put(g, self.group_dots::<1>(g, 0)[0]);
                }
            }
        }
    }
}

impl<B: Interleave> Rows for Rows8<'_, B> {
    fn m(&self) -> usize {
        self.acts.len()
    }

    fn rows(&self, r0: usize, out: &mut [f32]) {
        let m = self.acts.len();
        let r1 = r0 + out.len() / m;
        let grouped = self.view.grouped();
        let at = |r: usize, j: usize| (r - r0) * m + j;
        // Groups the range touches; a range that cuts a group (segments of `gemv_many` need not
        // start on a multiple of 8) computes the whole group and keeps its part.
        let gr1 = r1.min(grouped);
        let touched = if r0 < gr1 {
            r0 / ROWS..gr1.div_ceil(ROWS)
        } else {
            0..0
        };
        let whole = |g: usize| g * ROWS >= r0 && (g + 1) * ROWS <= gr1;
        for g in touched.clone().filter(|&g| !whole(g)) {
            self.group_all(g, |i, j, x| {
                if (r0..r1).contains(&(g * ROWS + i)) {
                    out[at(g * ROWS + i, j)] = x;
                }
            });
        }
        let whole: Vec<usize> = touched.filter(|&g| whole(g)).collect();
        if m == 1 {
            // One activation row: the groups cut into runs read side by side (more DRAM reads
            // in flight); formats with more bytes per product want more runs.
            match B::STREAMS {
                3 => self.stream_runs::<3>(&whole, r0, out),
                _ => self.stream_runs::<2>(&whole, r0, out),
            }
        } else {
            // Several activation rows: each group's weights decoded once for `ACT_ROWS` of them.
            for &g in &whole {
                self.group_all(g, |i, j, x| out[at(g * ROWS + i, j)] = x);
            }
        }
        // Rows after the last whole group, in the file's layout.
        let (t0, t1) = (r0.max(grouped), r1);
        if t0 < t1 {
            let nb = self.view.nb;
            let w = &self.view.tail[(t0 - grouped) * nb..(t1 - grouped) * nb];
            let mut tmp = vec![0.0f32; t1 - t0];
            for j in 0..m {
                B::vec_dot_rows(w, &self.acts[j], &mut tmp);
                for (i, &x) in tmp.iter().enumerate() {
                    out[at(t0 + i, j)] = x;
                }
            }
        }
    }

    fn row_bytes(&self) -> usize {
        self.view.nb * size_of::<B>()
    }
}

/// `v` in the first rows of an `ACT_ROWS` array.
fn pad<const R: usize>(v: [[f32; ROWS]; R]) -> [[f32; ROWS]; ACT_ROWS] {
    std::array::from_fn(|j| if j < R { v[j] } else { [0.0; ROWS] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legacy::BlockQ4_0;
    use crate::rows::quantize_acts;
    use crate::QuantBlock;

    /// Any row range, aligned to the groups or not, gives the rows of the whole-matrix call.
    #[test]
    fn row_ranges_cutting_groups_match_the_whole() {
        let (n, k) = (29usize, 96usize);
        let nb = k / 32;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let w: Vec<f32> = (0..n * k).map(|_| rnd()).collect();
        let mut blocks = vec![<BlockQ4_0 as bytemuck::Zeroable>::zeroed(); n * nb];
        BlockQ4_0::quantize_ref(&w, &mut blocks);
        let bytes = interleave(&blocks, n, nb);
        for m in [1usize, 2] {
            let x: Vec<f32> = (0..m * k).map(|_| rnd()).collect();
            let rows = Rows8::<BlockQ4_0>::new(
                View::new(&bytes, n, nb),
                quantize_acts::<BlockQ4_0>(&x, k, m),
            );
            let mut all = vec![f32::NAN; n * m];
            rows.rows(0, &mut all);
            for (r, v) in all.chunks(m).enumerate() {
                let mut row = Vec::new();
                rows.view.row(r, &mut row);
                for (j, &y) in v.iter().enumerate() {
                    let want = BlockQ4_0::vec_dot(&row, &rows.acts[j]);
                    assert!(
                        (y - want).abs() <= 1e-5 * want.abs().max(1.0),
                        "row {r}: {y} vs {want}"
                    );
                }
            }
            for (r0, r1) in [
                (0, 5),
                (3, 13),
                (5, 29),
                (8, 16),
                (17, 29),
                (24, 29),
                (26, 28),
                (7, 9),
            ] {
                let mut part = vec![f32::NAN; (r1 - r0) * m];
                rows.rows(r0, &mut part);
                // Grouped rows bit for bit; tail rows may meet a different multi-row kernel.
                for (i, (&a, &b)) in part.iter().zip(&all[r0 * m..r1 * m]).enumerate() {
                    let exact = r0 + i / m < n / ROWS * ROWS;
                    assert!(
                        a == b || (!exact && (a - b).abs() <= 1e-5 * b.abs().max(1.0)),
                        "rows {r0}..{r1} m={m}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
