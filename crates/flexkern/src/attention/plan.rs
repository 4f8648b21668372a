//! The planner: picks the kernel and its tiling from the problem, builds the BlockMask, and
//! lays out the work list. Pure data, so the choice is testable without running anything.

use super::kv::KvSource;
use super::problem::Problem;
use crate::backend::Caps;
use crate::error::Result;
use crate::variant::BlockMask;
use std::borrow::Cow;

/// A planned attention call.
#[derive(Clone, Debug)]
pub struct Plan<'m> {
    pub q_block: usize,
    pub kv_block: usize,
    pub block_mask: Cow<'m, BlockMask>,
}

/// Plans `p` for a device with `caps`; uses `user_mask` when it matches the problem.
pub fn plan<'m>(
    p: &Problem,
    _kv: &dyn KvSource,
    _caps: &Caps,
    user_mask: Option<&'m BlockMask>,
) -> Result<Plan<'m>> {
    let (q_block, kv_block) = match user_mask {
        Some(m) => (m.q_block, m.kv_block),
        None => (64, 64),
    };
    let block_mask = match user_mask {
        Some(m) if m.matches(&p.lens, p.num_q_heads) => Cow::Borrowed(m),
        Some(_) => {
            return Err(crate::error::invalid(
                "block_mask",
                "built for other lengths or head count",
            ))
        }
        None => Cow::Owned(BlockMask::build(
            p.variant.mask.as_ref(),
            &p.lens,
            p.num_q_heads,
            q_block,
            kv_block,
        )?),
    };
    Ok(Plan {
        q_block,
        kv_block,
        block_mask,
    })
}
