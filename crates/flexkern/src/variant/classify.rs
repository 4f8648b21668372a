//! The one tile classifier: interval analysis first (`interval.rs`, no element touched), the
//! mask program on the tile only where that cannot decide. The BlockMask builder, the paged
//! eviction proof and the CPU kernels' partial-tile masks all classify through it, so a tile is
//! judged the same way everywhere.

use super::interval::{classify as interval, Domain, Tri};
use super::program::{Program, Scratch, TileCtx};

/// How a kernel treats one (q-block, kv-block) tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockKind {
    /// Every element masked: never visited.
    Empty = 0,
    /// Some elements masked: the mask runs on this tile.
    Partial = 1,
    /// No element masked: visited without the mask.
    Full = 2,
}

/// Side of the sub-blocks of `Classifier::sub_blocks` (their kept bits fill a `u64`).
pub const SUB: usize = 8;

/// The ranges of the free variables over tile `t` (which must hold an element).
#[inline]
pub fn domain(t: &TileCtx) -> Domain {
    let (r, c) = (t.rows as i64, t.cols as i64);
    Domain {
        batch: (t.batch, t.batch),
        head: (t.head, t.head),
        q_pos: (t.q_pos0, t.q_pos0 + r - 1),
        kv_pos: (t.kv_pos0, t.kv_pos0 + c - 1),
        q_len: (t.q_len, t.q_len),
        kv_len: (t.kv_len, t.kv_len),
        q_token: (t.q_token0, t.q_token0 + r - 1),
    }
}

/// Interval analysis alone: `True` when every element of `t` is kept, `False` when none is.
#[inline]
pub fn bound(m: &Program, t: &TileCtx) -> Tri {
    if t.rows == 0 || t.cols == 0 {
        return Tri::False;
    }
    interval(m.expr(), &domain(t))
}

/// A tile's mask, decided by intervals or by evaluation.
#[derive(Debug, PartialEq)]
pub enum TileClass<'a> {
    /// Every element kept.
    Full,
    /// No element kept (or no element).
    Empty,
    /// Some kept: the flags, `[row * cols + col]`.
    Mixed(&'a [bool]),
}

impl TileClass<'_> {
    #[inline]
    pub fn kind(&self) -> BlockKind {
        match self {
            TileClass::Full => BlockKind::Full,
            TileClass::Empty => BlockKind::Empty,
            TileClass::Mixed(_) => BlockKind::Partial,
        }
    }
}

/// A partial tile at sub-block granularity: `[row group][col group]` kinds (`BlockKind` as u8)
/// and, for partial sub-blocks, the kept bits (bit `i * SUB + k` for row `i`, column `k`).
#[derive(Default, Debug)]
pub struct SubBlocks {
    pub rows: usize,
    pub cols: usize,
    pub kinds: Vec<u8>,
    pub bits: Vec<u64>,
}

impl SubBlocks {
    /// Column groups per row group.
    pub fn col_groups(&self) -> usize {
        self.cols.div_ceil(SUB)
    }
}

/// Reusable buffers for exact evaluation.
#[derive(Default)]
pub struct Classifier {
    scratch: Scratch<f32>,
    keep: Vec<bool>,
}

const EMPTY: u8 = BlockKind::Empty as u8;
const PARTIAL: u8 = BlockKind::Partial as u8;
const FULL: u8 = BlockKind::Full as u8;

impl Classifier {
    /// Classifies tile `t` of mask `m`: interval analysis, then the program when it is unknown.
    #[inline]
    pub fn classify(&mut self, m: &Program, t: &TileCtx) -> TileClass<'_> {
        match bound(m, t) {
            Tri::True => TileClass::Full,
            Tri::False => TileClass::Empty,
            Tri::Unknown => self.evaluate(m, t),
        }
    }

    /// The program over the whole tile.
    fn evaluate(&mut self, m: &Program, t: &TileCtx) -> TileClass<'_> {
        let n = t.rows * t.cols;
        self.keep.resize(n, false);
        m.eval_mask(t, &mut self.scratch, &mut self.keep);
        let kept = self.keep[..n].iter().filter(|&&x| x).count();
        if kept == n {
            TileClass::Full
        } else if kept == 0 {
            TileClass::Empty
        } else {
            TileClass::Mixed(&self.keep[..n])
        }
    }

    /// Classifies tile `t` into `SUB` x `SUB` sub-blocks: interval analysis on halves of the
    /// tile down to single sub-blocks (a band's edges cross only a few), then the program on
    /// those still unknown, at once over the whole tile when they are most of it.
    pub fn sub_blocks(&mut self, m: &Program, t: &TileCtx, out: &mut SubBlocks) {
        let (rgs, cgs) = (t.rows.div_ceil(SUB), t.cols.div_ceil(SUB));
        (out.rows, out.cols) = (t.rows, t.cols);
        out.kinds.clear();
        out.kinds.resize(rgs * cgs, PARTIAL);
        out.bits.clear();
        out.bits.resize(rgs * cgs, 0);
        split(m, t, out, (0, rgs), (0, cgs));
        // Mostly undecided (a mask interval analysis cannot follow): one evaluation of the whole
        // tile costs less than one per sub-block.
        let whole = out.kinds.iter().filter(|&&k| k == PARTIAL).count() * 2 > rgs * cgs;
        if whole {
            self.keep.resize(t.rows * t.cols, false);
            m.eval_mask(t, &mut self.scratch, &mut self.keep);
        }
        for rg in 0..rgs {
            for cg in 0..cgs {
                let at = rg * cgs + cg;
                if out.kinds[at] != PARTIAL {
                    continue;
                }
                let (r0, c0) = (rg * SUB, cg * SUB);
                let (nr, nc) = ((t.rows - r0).min(SUB), (t.cols - c0).min(SUB));
                // Kept flags of this sub-block: `keep[k0 + i * ld + k]`.
                let (k0, ld) = if whole {
                    (r0 * t.cols + c0, t.cols)
                } else {
                    let sub = TileCtx {
                        q_pos0: t.q_pos0 + r0 as i64,
                        q_token0: t.q_token0 + r0 as i64,
                        rows: nr,
                        kv_pos0: t.kv_pos0 + c0 as i64,
                        cols: nc,
                        ..*t
                    };
                    self.keep.resize(nr * nc, false);
                    m.eval_mask(&sub, &mut self.scratch, &mut self.keep);
                    (0, nc)
                };
                let (mut b, mut n) = (0u64, 0);
                for i in 0..nr {
                    for k in 0..nc {
                        let kept = self.keep[k0 + i * ld + k];
                        b |= (kept as u64) << (i * SUB + k);
                        n += kept as usize;
                    }
                }
                out.bits[at] = b;
                if n == 0 {
                    out.kinds[at] = EMPTY;
                } else if n == nr * nc {
                    out.kinds[at] = FULL;
                }
            }
        }
    }
}

/// Interval analysis of sub-block rows `rg` by columns `cg` (half-open), halving while unknown;
/// undecided single sub-blocks stay `PARTIAL`.
fn split(m: &Program, t: &TileCtx, out: &mut SubBlocks, rg: (usize, usize), cg: (usize, usize)) {
    let (r0, r1) = (rg.0 * SUB, (rg.1 * SUB).min(t.rows));
    let (c0, c1) = (cg.0 * SUB, (cg.1 * SUB).min(t.cols));
    let part = TileCtx {
        q_pos0: t.q_pos0 + r0 as i64,
        q_token0: t.q_token0 + r0 as i64,
        rows: r1 - r0,
        kv_pos0: t.kv_pos0 + c0 as i64,
        cols: c1 - c0,
        ..*t
    };
    let kind = match bound(m, &part) {
        Tri::True => FULL,
        Tri::False => EMPTY,
        Tri::Unknown => {
            let (nr, nc) = (rg.1 - rg.0, cg.1 - cg.0);
            if nr >= nc && nr > 1 {
                let mid = rg.0 + nr / 2;
                split(m, t, out, (rg.0, mid), cg);
                split(m, t, out, (mid, rg.1), cg);
            } else if nc > 1 {
                let mid = cg.0 + nc / 2;
                split(m, t, out, rg, (cg.0, mid));
                split(m, t, out, rg, (mid, cg.1));
            }
            return;
        }
    };
    let cgs = out.col_groups();
    for r in rg.0..rg.1 {
        out.kinds[r * cgs + cg.0..r * cgs + cg.1].fill(kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variant::builtins::{causal, chunked, sliding_window};
    use crate::variant::expr::{int, kv_pos, q_pos, Expr, Ty};

    fn tile(q0: i64, rows: usize, k0: i64, cols: usize) -> TileCtx {
        TileCtx {
            batch: 0,
            head: 0,
            q_len: 200,
            kv_len: 200,
            q_pos0: q0,
            q_token0: q0,
            rows,
            kv_pos0: k0,
            cols,
        }
    }

    fn exact(m: &Program, t: &TileCtx) -> Vec<bool> {
        let mut want = vec![false; t.rows * t.cols];
        m.eval_mask(t, &mut Scratch::<f64>::default(), &mut want);
        want
    }

    fn masks() -> Vec<Expr> {
        vec![
            causal().and(sliding_window(13)),
            chunked(7),
            causal().and(sliding_window(20).not()),
            // Beyond interval analysis: every tile is evaluated.
            ((q_pos() + kv_pos()) % 3).ne(int(1)),
            kv_pos().lt(int(0)),
        ]
    }

    /// Whole tiles: the class is the exact one, and intervals alone decide the easy tiles.
    #[test]
    fn classify_equals_elementwise_mask() {
        let mut c = Classifier::default();
        for e in masks() {
            let m = Program::compile(&e, Ty::Bool).unwrap();
            for (q0, rows, k0, cols) in [
                (40, 21, 17, 30),
                (64, 64, 0, 64),
                (9, 5, 8, 3),
                (0, 1, 0, 1),
            ] {
                let t = tile(q0, rows, k0, cols);
                let want = exact(&m, &t);
                let got = c.classify(&m, &t);
                match got {
                    TileClass::Full => assert!(want.iter().all(|&x| x), "{e} {t:?}"),
                    TileClass::Empty => assert!(want.iter().all(|&x| !x), "{e} {t:?}"),
                    TileClass::Mixed(k) => {
                        assert_eq!(k, &want[..], "{e} {t:?}");
                        assert!(want.iter().any(|&x| x) && want.iter().any(|&x| !x));
                    }
                }
            }
        }
        // Decided without evaluating: a tile below the diagonal, one above it, and no element.
        let m = Program::compile(&causal(), Ty::Bool).unwrap();
        assert_eq!(bound(&m, &tile(100, 10, 0, 50)), Tri::True);
        assert_eq!(bound(&m, &tile(0, 10, 50, 50)), Tri::False);
        assert_eq!(bound(&m, &tile(0, 0, 0, 50)), Tri::False);
        assert_eq!(c.classify(&m, &tile(0, 10, 0, 0)), TileClass::Empty);
        assert_eq!(
            c.classify(&m, &tile(5, 10, 0, 50)).kind(),
            BlockKind::Partial
        );
    }

    /// Sub-blocks: kinds exact, kept bits exact where partial, on odd tile shapes.
    #[test]
    fn sub_blocks_equal_elementwise_mask() {
        let mut c = Classifier::default();
        let mut sb = SubBlocks::default();
        for e in masks() {
            let m = Program::compile(&e, Ty::Bool).unwrap();
            for (q0, rows, k0, cols) in [(40, 21, 17, 30), (64, 64, 0, 64), (9, 5, 8, 3)] {
                let t = tile(q0, rows, k0, cols);
                let want = exact(&m, &t);
                c.sub_blocks(&m, &t, &mut sb);
                let cgs = sb.col_groups();
                assert_eq!((sb.rows, sb.cols, cgs), (rows, cols, cols.div_ceil(SUB)));
                for i in 0..rows {
                    for k in 0..cols {
                        let at = i / SUB * cgs + k / SUB;
                        let kept = want[i * cols + k];
                        let ok = match sb.kinds[at] {
                            FULL => kept,
                            EMPTY => !kept,
                            _ => (sb.bits[at] >> (i % SUB * SUB + k % SUB) & 1 == 1) == kept,
                        };
                        assert!(ok, "{e} {t:?} ({i}, {k})");
                    }
                }
                // A sub-block left partial really is mixed.
                for (at, &kind) in sb.kinds.iter().enumerate() {
                    if kind == PARTIAL {
                        assert_ne!(sb.bits[at], 0, "{e} {t:?}");
                    }
                }
            }
        }
    }
}
