//! Two or three consumer warpgroups for the Hopper prefill at D 64 (128- or 192-row tiles),
//! priced on the BlockMask: a taller tile runs whole tiles faster, but where a mask's edges
//! run across the rows (windows, documents) it cuts more key tiles, and a cut tile runs the
//! mask hook on every score. The planner prices both work lists and keeps the cheaper.

use super::{
    classify_items, forced_groups, forced_overlap, plan_work, two_groups, MmaShape, WorkPlan,
    MASK_TRUE,
};
use flexkern::attention::problem::SeqLens;
use flexkern::expr::Expr;

/// Time of one key tile for a block of two / three consumer warpgroups, relative to two
/// warpgroups' tile the mask keeps whole: (whole, cut). Fitted to one call's runs of issue
/// 15's D 64 cases (H200, B4 H16 S4096, session 25 call e, both forced): non-causal 385
/// against 466 TFLOP/s (a 192-row tile costs 1.2 of a 128-row one); the causal diagonal's and
/// a 1024-key window's cut tiles 2.3-2.7 whole tiles at two warpgroups, 2.5-2.8 at three.
const TILE_COST: [(f64, f64); 2] = [(1.0, 2.5), (1.2, 2.6)];
/// How much cheaper three warpgroups must price to be taken: the fit's own spread. A 1024-key
/// window prices within 0.2 % either way and measured the same (248 against 248 TFLOP/s).
const THREE_MARGIN: f64 = 1.02;

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

/// Whether three warpgroups (192-row tiles) cost less than two (128), by `THREE_MARGIN`, for
/// this call's work under `mask`: both work lists are planned and classified as `prepare`
/// would (`wave` blocks at once). Always where there is no mask: every tile is whole.
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
    cost(192, 3) * THREE_MARGIN < cost(128, 2)
}

/// What `choose_groups` prices a call's work by: its lengths, heads, mask and whether it has
/// hooks, the blocks the card runs at once (the Hopper kernel runs one a SM).
pub struct GroupsCall<'a> {
    pub lens: &'a SeqLens,
    pub group: usize,
    pub num_kv_heads: usize,
    pub num_q_heads: usize,
    pub mask: Option<&'a Expr>,
    pub hooks: bool,
    pub wave: usize,
    pub deterministic: bool,
}

/// The shape for a call that `m` (three warpgroups) may serve: two warpgroups where three do
/// not pay (`FLEXKERN_CUDA_WG_GROUPS` forces either); with hooks, three without the overlap,
/// since a P kept live through the softmax beside them spilled every one of issue 15's
/// variants (48 to 672 bytes) at 160 registers: that compile is skipped
/// (`FLEXKERN_CUDA_WG_OVERLAP` forces it).
pub fn choose_groups(m: MmaShape, dk: usize, c: &GroupsCall) -> MmaShape {
    let (lens, group, hkv, hq) = (c.lens, c.group, c.num_kv_heads, c.num_q_heads);
    if forced_groups().is_none()
        && !three_groups_pay(
            lens,
            group,
            hkv,
            hq,
            c.mask,
            m.tile,
            c.wave,
            c.deterministic,
        )
    {
        return two_groups(&m, dk);
    }
    if forced_overlap().is_none() && c.hooks {
        return MmaShape {
            wg_overlap: false,
            ..m
        };
    }
    m
}
