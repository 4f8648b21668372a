//! The mask of one tile at sub-block granularity. Interval analysis settles most 8x8 sub-blocks
//! of a partial tile without touching their elements (a band's edges cross only a few); the mask
//! program runs on the rest. Each row's kept key range then lets the kernels skip the keys
//! outside it, so a partial tile costs about what it keeps.

use crate::variant::block_mask::BlockKind;
use crate::variant::interval::{classify, Domain, Tri};
use crate::variant::program::{Program, Scratch, TileCtx};

/// Sub-block side.
const SB: usize = 8;
const EMPTY: u8 = BlockKind::Empty as u8;
const PARTIAL: u8 = BlockKind::Partial as u8;
const FULL: u8 = BlockKind::Full as u8;

/// A partial tile's mask for one head: sub-block kinds and the kept bits of partial sub-blocks.
#[derive(Default)]
pub(crate) struct TileMask {
    /// `[row group][col group]` kinds.
    kinds: Vec<u8>,
    /// Kept bits of partial sub-blocks (same index), bit `i * SB + k`.
    bits: Vec<u64>,
    rows: usize,
    cols: usize,
    /// Kept key range of every row.
    ranges: Vec<(u32, u32)>,
    prog: Scratch<f32>,
    keep: Vec<bool>,
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
    fn cgs(&self) -> usize {
        self.cols.div_ceil(SB)
    }

    /// Classifies the tile `t` of mask `m` exactly.
    pub(crate) fn build(&mut self, m: &Program, t: &TileCtx) {
        let (rgs, cgs) = (t.rows.div_ceil(SB), t.cols.div_ceil(SB));
        (self.rows, self.cols) = (t.rows, t.cols);
        self.kinds.clear();
        self.kinds.resize(rgs * cgs, PARTIAL);
        self.bits.clear();
        self.bits.resize(rgs * cgs, 0);
        self.split(m, t, (0, rgs), (0, cgs));
        // Mostly undecided (a mask interval analysis cannot follow): one evaluation of the whole
        // tile costs less than one per sub-block.
        let whole = self.kinds.iter().filter(|&&k| k == PARTIAL).count() * 2 > rgs * cgs;
        if whole {
            self.keep.resize(t.rows * t.cols, false);
            m.eval_mask(t, &mut self.prog, &mut self.keep);
        }
        for rg in 0..rgs {
            for cg in 0..cgs {
                if self.kinds[rg * cgs + cg] != PARTIAL {
                    continue;
                }
                let (r0, c0) = (rg * SB, cg * SB);
                let (nr, nc) = ((t.rows - r0).min(SB), (t.cols - c0).min(SB));
                let sub = TileCtx {
                    q_pos0: t.q_pos0 + r0 as i64,
                    q_token0: t.q_token0 + r0 as i64,
                    rows: nr,
                    kv_pos0: t.kv_pos0 + c0 as i64,
                    cols: nc,
                    ..*t
                };
                // Kept flags of this sub-block: `keep[at + i * ld + k]`.
                let (at, ld) = if whole {
                    (r0 * t.cols + c0, t.cols)
                } else {
                    self.keep.resize(nr * nc, false);
                    m.eval_mask(&sub, &mut self.prog, &mut self.keep);
                    (0, nc)
                };
                let mut b = 0u64;
                for i in 0..nr {
                    for k in 0..nc {
                        b |= (self.keep[at + i * ld + k] as u64) << (i * SB + k);
                    }
                }
                self.bits[rg * cgs + cg] = b;
            }
        }
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

    /// Classifies sub-block rows `rg` by columns `cg` (half-open), halving while unknown.
    fn split(&mut self, m: &Program, t: &TileCtx, rg: (usize, usize), cg: (usize, usize)) {
        let (r0, r1) = (rg.0 * SB, (rg.1 * SB).min(t.rows));
        let (c0, c1) = (cg.0 * SB, (cg.1 * SB).min(t.cols));
        let d = Domain {
            batch: (t.batch, t.batch),
            head: (t.head, t.head),
            q_pos: (t.q_pos0 + r0 as i64, t.q_pos0 + r1 as i64 - 1),
            kv_pos: (t.kv_pos0 + c0 as i64, t.kv_pos0 + c1 as i64 - 1),
            q_len: (t.q_len, t.q_len),
            kv_len: (t.kv_len, t.kv_len),
            q_token: (t.q_token0 + r0 as i64, t.q_token0 + r1 as i64 - 1),
        };
        let kind = match classify(m.expr(), &d) {
            Tri::True => FULL,
            Tri::False => EMPTY,
            Tri::Unknown => {
                let (nr, nc) = (rg.1 - rg.0, cg.1 - cg.0);
                if nr >= nc && nr > 1 {
                    let mid = rg.0 + nr / 2;
                    self.split(m, t, (rg.0, mid), cg);
                    self.split(m, t, (mid, rg.1), cg);
                } else if nc > 1 {
                    let mid = cg.0 + nc / 2;
                    self.split(m, t, rg, (cg.0, mid));
                    self.split(m, t, rg, (mid, cg.1));
                }
                return;
            }
        };
        let cgs = self.cgs();
        for r in rg.0..rg.1 {
            self.kinds[r * cgs + cg.0..r * cgs + cg.1].fill(kind);
        }
    }

    /// The kept keys of row `i` lie in `[lo, hi)` (`lo >= hi`: none).
    fn row_range(&self, i: usize) -> (u32, u32) {
        let (rg, ri) = (i / SB, i % SB);
        let cgs = self.cgs();
        let row = |cg: usize| {
            let at = rg * cgs + cg;
            match self.kinds[at] {
                FULL => ((1u64 << SB) - 1) << (ri * SB),
                EMPTY => 0,
                _ => self.bits[at] & (((1u64 << SB) - 1) << (ri * SB)),
            }
        };
        let Some(first) = (0..cgs).find(|&cg| row(cg) != 0) else {
            return (0, 0);
        };
        let last = (first..cgs).rev().find(|&cg| row(cg) != 0).unwrap_or(first);
        let lo = first * SB + (row(first) >> (ri * SB)).trailing_zeros() as usize;
        let hi = last * SB + SB - (row(last) << ((7 - ri) * SB)).leading_zeros() as usize;
        (lo as u32, hi.min(self.cols) as u32)
    }

    /// Sets every masked score of this head's columns `col..col + rows` of `st` (`st[k * ld + q]`)
    /// to -inf.
    pub(crate) fn apply(&self, st: &mut [f32], ld: usize, col: usize) {
        let cgs = self.cgs();
        for rg in 0..self.rows.div_ceil(SB) {
            let (r0, nr) = (rg * SB, (self.rows - rg * SB).min(SB));
            for cg in 0..cgs {
                let (c0, nc) = (cg * SB, (self.cols - cg * SB).min(SB));
                let at = rg * cgs + cg;
                let bits = match self.kinds[at] {
                    FULL => continue,
                    EMPTY => {
                        for k in 0..nc {
                            st[(c0 + k) * ld + col + r0..][..nr].fill(f32::NEG_INFINITY);
                        }
                        continue;
                    }
                    _ => self.bits[at],
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
