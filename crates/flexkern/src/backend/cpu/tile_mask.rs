//! The mask of one partial tile at sub-block granularity, from the shared tile classifier
//! (`variant/classify.rs`: interval analysis settles most 8x8 sub-blocks without touching their
//! elements, the mask program runs on the rest). Each row's kept key range then lets the kernels
//! skip the keys outside it, so a partial tile costs about what it keeps.

use crate::variant::block_mask::BlockKind;
use crate::variant::classify::{Classifier, SubBlocks, SUB as SB};
use crate::variant::program::{Program, TileCtx};

const EMPTY: u8 = BlockKind::Empty as u8;
const FULL: u8 = BlockKind::Full as u8;

/// A partial tile's mask for one head: its sub-blocks and every row's kept key range.
#[derive(Default)]
pub(crate) struct TileMask {
    grid: SubBlocks,
    /// Kept key range of every row.
    ranges: Vec<(u32, u32)>,
    classifier: Classifier,
}

/// The partial tiles' masks of the current (sequence, q block), kept for the work items of its
/// other kv heads (which run the same mask when it ignores the head).
#[derive(Default)]
pub(crate) struct MaskCache {
    at: Option<(usize, usize)>,
    /// `(head, kv block, mask)`.
    tiles: Vec<(usize, usize, TileMask)>,
    spare: Vec<TileMask>,
}

/// Tiles kept per (sequence, q block); a band needs a few.
const CACHED: usize = 32;

impl MaskCache {
    /// The mask of head `head`'s tile at kv block `kb` of q block `qb`, built from `t` unless
    /// kept (`head` 0 for a mask that ignores the head).
    pub(crate) fn get(
        &mut self,
        (seq, qb, head, kb): (usize, usize, usize, usize),
        m: &Program,
        t: &TileCtx,
    ) -> &TileMask {
        if self.at != Some((seq, qb)) {
            self.spare.extend(self.tiles.drain(..).map(|x| x.2));
            self.at = Some((seq, qb));
        }
        if let Some(i) = self.tiles.iter().position(|x| x.0 == head && x.1 == kb) {
            return &self.tiles[i].2;
        }
        if self.tiles.len() >= CACHED {
            self.spare.push(self.tiles.remove(0).2);
        }
        let mut tm = self.spare.pop().unwrap_or_default();
        tm.build(m, t);
        self.tiles.push((head, kb, tm));
        &self.tiles[self.tiles.len() - 1].2
    }
}

impl TileMask {
    /// Classifies the tile `t` of mask `m` exactly.
    pub(crate) fn build(&mut self, m: &Program, t: &TileCtx) {
        self.classifier.sub_blocks(m, t, &mut self.grid);
        self.ranges.clear();
        for i in 0..t.rows {
            let r = self.row_range(i);
            self.ranges.push(r);
        }
    }

    /// The kept key range of every row (`lo >= hi`: none).
    pub(crate) fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// The kept keys of row `i` lie in `[lo, hi)` (`lo >= hi`: none).
    fn row_range(&self, i: usize) -> (u32, u32) {
        let (rg, ri) = (i / SB, i % SB);
        let g = &self.grid;
        let cgs = g.col_groups();
        let row = |cg: usize| {
            let at = rg * cgs + cg;
            match g.kinds[at] {
                FULL => ((1u64 << SB) - 1) << (ri * SB),
                EMPTY => 0,
                _ => g.bits[at] & (((1u64 << SB) - 1) << (ri * SB)),
            }
        };
        let Some(first) = (0..cgs).find(|&cg| row(cg) != 0) else {
            return (0, 0);
        };
        let last = (first..cgs).rev().find(|&cg| row(cg) != 0).unwrap_or(first);
        let lo = first * SB + (row(first) >> (ri * SB)).trailing_zeros() as usize;
        let hi = last * SB + SB - (row(last) << ((7 - ri) * SB)).leading_zeros() as usize;
        (lo as u32, hi.min(g.cols) as u32)
    }

    /// Sets every masked score of this head's columns `col..col + rows` of `st` (`st[k * ld + q]`)
    /// to -inf.
    pub(crate) fn apply(&self, st: &mut [f32], ld: usize, col: usize) {
        let g = &self.grid;
        let cgs = g.col_groups();
        for rg in 0..g.rows.div_ceil(SB) {
            let (r0, nr) = (rg * SB, (g.rows - rg * SB).min(SB));
            for cg in 0..cgs {
                let (c0, nc) = (cg * SB, (g.cols - cg * SB).min(SB));
                let at = rg * cgs + cg;
                let bits = match g.kinds[at] {
                    FULL => continue,
                    EMPTY => {
                        for k in 0..nc {
                            st[(c0 + k) * ld + col + r0..][..nr].fill(f32::NEG_INFINITY);
                        }
                        continue;
                    }
                    _ => g.bits[at],
                };
                for k in 0..nc {
                    let dst = &mut st[(c0 + k) * ld + col + r0..][..nr];
                    for (i, x) in dst.iter_mut().enumerate() {
                        if bits >> (i * SB + k) & 1 == 0 {
                            *x = f32::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant::builtins::{causal, chunked, sliding_window};
    use crate::variant::expr::Ty;
    use crate::variant::program::Scratch;

    /// Sub-block classification, ranges and applied scores equal the mask evaluated per element,
    /// on odd tile shapes and masks interval analysis settles or cannot.
    #[test]
    fn matches_elementwise_mask() {
        use crate::variant::expr::{kv_pos, q_pos};
        let masks = [
            causal().and(sliding_window(13)),
            chunked(7),
            causal().and(sliding_window(20).not()),
            // Undecidable by intervals: the whole tile is evaluated at once.
            ((q_pos() + kv_pos()) % 3).ne(crate::variant::expr::int(1)),
        ];
        for e in &masks {
            let m = Program::compile(e, Ty::Bool).unwrap();
            for (rows, cols, q0, k0) in [(21, 30, 40, 17), (64, 64, 64, 0), (5, 3, 9, 8)] {
                let t = TileCtx {
                    batch: 0,
                    head: 0,
                    q_len: 200,
                    kv_len: 200,
                    q_pos0: q0,
                    q_token0: q0,
                    rows,
                    kv_pos0: k0,
                    cols,
                };
                let mut want = vec![false; rows * cols];
                m.eval_mask(&t, &mut Scratch::<f64>::default(), &mut want);
                let mut tm = TileMask::default();
                tm.build(&m, &t);
                let ld = rows + 3;
                let mut st = vec![1f32; cols * ld];
                tm.apply(&mut st, ld, 2);
                for i in 0..rows {
                    let (lo, hi) = tm.ranges()[i];
                    for k in 0..cols {
                        let kept = want[i * cols + k];
                        assert_eq!(st[k * ld + 2 + i] == 1.0, kept, "{e} {i} {k}");
                        assert!(!kept || (lo..hi).contains(&(k as u32)), "{e} {i} {k}");
                    }
                    let first = (0..cols).find(|&k| want[i * cols + k]);
                    let last = (0..cols).rev().find(|&k| want[i * cols + k]);
                    match (first, last) {
                        (Some(a), Some(b)) => assert_eq!((lo, hi), (a as u32, b as u32 + 1)),
                        _ => assert!(lo >= hi),
                    }
                }
                assert!(st.iter().all(|x| !x.is_nan()));
            }
        }
    }
}
