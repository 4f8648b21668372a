//! The BlockMask: which (rows x keys) boxes of the work list a variant's mask keeps whole,
//! hides or leaves partial, by interval analysis of its expression.

use super::WorkPlan;
use flexkern::attention::problem::SeqLens;
use flexkern::expr::Expr;
use flexkern::variant::interval::{classify, Domain, Tri};

/// Bit set in an item's row-tile word when interval analysis proved the mask true over the
/// whole item: the kernel skips the mask hook there.
pub const MASK_TRUE: u32 = 1 << 31;
/// Bit set in an item's row-tile word when it is its row tile's only partition: the
/// tensor-core kernel then writes the rows' final O and LSE itself (when there are no sinks)
/// and the merge leaves them alone.
pub const SOLE: u32 = 1 << 30;
/// The row-tile index under the two flags.
pub const ROW_TILE_BITS: u32 = SOLE - 1;

/// Classifies each item's (rows x keys) box under `mask`: all-true items get `MASK_TRUE`,
/// all-false items get an empty key range (nothing is read, the row tile's partial is -inf),
/// and with `trim > 0` the others lose the whole `trim`-key tiles at either end that the mask
/// hides and get the run of whole tiles the mask keeps entirely (`full`: the kernel skips the
/// mask there). This is the BlockMask, built from the expression by interval analysis.
pub fn classify_items(
    plan: &mut WorkPlan,
    lens: &SeqLens,
    group: usize,
    num_q_heads: usize,
    mask: Option<&Expr>,
    trim: usize,
) {
    // A sequence whose whole (rows x keys) box the mask keeps makes every item of it true: one
    // interval evaluation a sequence instead of one an item (decode under causal masks: host
    // planning of 640 items took 26 us on the H100's host).
    let seq_true: Vec<bool> = (0..lens.num_seqs())
        .map(|s| {
            let (ql, kl) = (lens.q_len(s) as i64, lens.kv_len(s) as i64);
            mask.is_some_and(|m| {
                ql > 0
                    && kl > 0
                    && classify(m, &lens.domain(s, num_q_heads, (0, ql - 1), (0, kl - 1)))
                        == Tri::True
            })
        })
        .collect();
    for (it, full) in plan.items.iter_mut().zip(plan.full.iter_mut()) {
        let (s, rt, k0, k1) = (
            it[0] as usize,
            (it[1] & ROW_TILE_BITS) as usize,
            it[2] as i64,
            it[3] as i64,
        );
        let Some(m) = mask else {
            it[1] |= MASK_TRUE;
            *full = [it[2], it[3]];
            continue;
        };
        let ql = lens.q_len(s) as i64;
        if k1 <= k0 || ql == 0 {
            continue;
        }
        if seq_true[s] {
            it[1] |= MASK_TRUE;
            *full = [it[2], it[3]];
            continue;
        }
        let qi0 = (rt * plan.rows / group) as i64;
        let qi1 = (((rt + 1) * plan.rows - 1) / group).min(ql as usize - 1) as i64;
        let d = lens.domain(s, num_q_heads, (qi0, qi1), (k0, k1 - 1));
        let at = |k0: i64, k1: i64| {
            classify(
                m,
                &Domain {
                    kv_pos: (k0, k1 - 1),
                    ..d
                },
            )
        };
        match at(k0, k1) {
            Tri::True => {
                it[1] |= MASK_TRUE;
                *full = [it[2], it[3]];
            }
            Tri::False => it[3] = it[2],
            // Trim whole hidden tiles off both ends (causal: the keys past the diagonal; a
            // window: the keys before it), so prefill blocks do not compute them.
            Tri::Unknown if k1 - k0 > trim as i64 && trim > 0 => {
                let g = trim as i64;
                let lo = first_visible(&at, k0, k1, g, false).unwrap_or(k1);
                let hi = first_visible(&at, lo, k1, g, true).unwrap_or(lo);
                (it[2], it[3]) = (lo as u32, hi as u32);
                if hi > lo && at(lo, hi) == Tri::True {
                    it[1] |= MASK_TRUE;
                    *full = [it[2], it[3]];
                } else if hi > lo {
                    let (a, b) = full_tiles(&at, lo, hi, g, qi1 - qi0 + 1);
                    *full = [a as u32, b as u32];
                }
            }
            Tri::Unknown => {}
        }
    }
}

/// A run `[a, b)` of whole `g`-key tiles of `[lo, hi)` (tile-aligned from `lo`) that the mask
/// keeps entirely, starting within the first `span / g + 2` tiles, `span` being the row tile's
/// queries (a causal row tile's run starts at its first tile; a window's once its last query
/// has entered it, up to the queries' span later: 192 rows under a 1024-key window start it at
/// the third tile). `at` proving `[a, b)` true is monotone in `b`, so `b` is found by
/// bisection. Empty when none of those tiles starts one.
fn full_tiles(at: &impl Fn(i64, i64) -> Tri, lo: i64, hi: i64, g: i64, span: i64) -> (i64, i64) {
    let end = |t: i64, a: i64| (a + t * g).min(hi);
    for a in (0..span / g + 2).map(|t| lo + t * g) {
        if a >= hi || at(a, end(1, a)) != Tri::True {
            continue;
        }
        let (mut good, mut bad) = (1, (hi - a + g - 1) / g + 1);
        while bad - good > 1 {
            let mid = (good + bad) / 2;
            if at(a, end(mid, a)) == Tri::True {
                good = mid;
            } else {
                bad = mid;
            }
        }
        return (a, end(good, a));
    }
    (0, 0)
}

/// The start (or, `from_end`, the end) of the first (last) `g`-key tile of `[k0, k1)` that
/// `at` does not prove hidden, by bisection: a handful of interval evaluations for masks whose
/// visible keys are one run (causal, windows), never more than one per tile.
fn first_visible(
    at: &impl Fn(i64, i64) -> Tri,
    k0: i64,
    k1: i64,
    g: i64,
    from_end: bool,
) -> Option<i64> {
    if k1 <= k0 || at(k0, k1) == Tri::False {
        return None;
    }
    if k1 - k0 <= g {
        return Some(if from_end { k1 } else { k0 });
    }
    // Split on a tile boundary (relative to k0, so trimmed ranges stay tile-aligned).
    let mid = k0 + (k1 - k0 + 2 * g - 1) / (2 * g) * g;
    let (a, b) = ((k0, mid), (mid, k1));
    let (first, second) = if from_end { (b, a) } else { (a, b) };
    first_visible(at, first.0, first.1, g, from_end)
        .or_else(|| first_visible(at, second.0, second.1, g, from_end))
}
