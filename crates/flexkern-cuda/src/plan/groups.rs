//! Two or three consumer warpgroups for the Hopper prefill at D 64 (128- or 192-row tiles),
//! priced on the BlockMask: a taller tile runs whole tiles faster, but where a mask's edges
//! run across the rows (windows, documents) it cuts more key tiles, and a cut tile runs the
//! mask hook on every score. The planner prices both work lists and keeps the cheaper.

use super::{classify_items, plan_work, WorkPlan, MASK_TRUE};
use flexkern::attention::problem::SeqLens;
use flexkern::expr::Expr;

/// Time of one key tile for a block of two / three consumer warpgroups, relative to two
/// warpgroups' tile the mask keeps whole: (whole, cut). H200, D 64, B4 H16 S4096 (session 25):
/// 192 rows run whole tiles at 1.22x the rate of 128 (non-causal 470 against 381 TFLOP/s, so a
/// tile costs 1.5 / 1.22 as much); a cut tile costs about 2.4 whole ones (a 1024-key window:
/// 226 TFLOP/s at two warpgroups, 7 whole tiles and 2 cut per row tile).
const TILE_COST: [(f64, f64); 2] = [(1.0, 2.4), (1.23, 2.95)];

/// The work list's time in units of `TILE_COST`: every item's `tile`-key tiles, whole where
/// the mask keeps them entirely (the kernel skips the hook there), cut elsewhere.
pub fn work_cost(plan: &WorkPlan, tile: usize, groups: usize) -> f64 {
    let (whole, cut) = TILE_COST[usize::from(groups == 3)];
    let tile = tile as u32;
    plan.items
        .iter()
        .zip(&plan.full)
        .map(|(it, f)| {
            let n = (it[3] - it[2]).div_ceil(tile);
            let kept = if it[1] & MASK_TRUE != 0 {
                n
            } else {
                (f[1].saturating_sub(f[0]) / tile).min(n)
            };
            f64::from(kept) * whole + f64::from(n - kept) * cut
        })
        .sum()
}

/// Whether three warpgroups (192-row tiles) cost no more than two (128) for this call's work
/// under `mask`: both work lists are planned and classified as `prepare` would (`wave` blocks
/// at once). Always where there is no mask: every tile is whole.
#[allow(clippy::too_many_arguments)]
pub fn three_groups_pay(
    lens: &SeqLens,
    group: usize,
    num_kv_heads: usize,
    num_q_heads: usize,
    mask: Option<&Expr>,
    tile: usize,
    wave: usize,
    deterministic: bool,
) -> bool {
    let Some(m) = mask else {
        return true;
    };
    let cost = |rows: usize, groups: usize| {
        let mut p = plan_work(lens, group, num_kv_heads, rows, wave, deterministic);
        classify_items(&mut p, lens, group, num_q_heads, Some(m), tile);
        work_cost(&p, tile, groups)
    };
    cost(192, 3) <= cost(128, 2)
}
