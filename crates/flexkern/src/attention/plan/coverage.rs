//! Checks a plan against its problem: every output row (sequence, q head, query) is written
//! exactly once (by one unsplit item or one merge group), and the items of each (sequence, kv
//! head, q block) visit exactly the kv blocks the BlockMask keeps for the group, each once. Any
//! backend's planner output can be held to it.

use super::{Plan, WorkItem};
use crate::attention::problem::Problem;

/// `Err` names the first violation found.
pub fn check(plan: &Plan, p: &Problem) -> std::result::Result<(), String> {
    let bm = &plan.block_mask;
    let n = p.lens.num_seqs();
    if !bm.matches(&p.lens, p.num_q_heads) {
        return Err("block mask built for another problem".into());
    }
    let (hq, hkv, g) = (p.num_q_heads, p.num_kv_heads, p.group_size());
    let mut writers = vec![0u32; p.lens.total_q() * hq];
    // One write per row of a (sequence, kv heads, q block) task.
    let mut write = |s: usize, kvh: usize, nh: usize, qb: usize| -> Result<(), String> {
        let bad = || format!("task (seq {s}, kv head {kvh}+{nh}, q block {qb}) out of range");
        if s >= n || kvh + nh > hkv || nh == 0 {
            return Err(bad());
        }
        let q_block = bm.tiles(s).0;
        let (q_len, i0) = (p.lens.q_len(s), qb * q_block);
        if i0 >= q_len {
            return Err(bad());
        }
        for h in kvh * g..(kvh + nh) * g {
            for i in i0..(i0 + q_block).min(q_len) {
                writers[(p.lens.q_start(s) + i) * hq + h] += 1;
            }
        }
        Ok(())
    };
    let mut by_group: Vec<Vec<&WorkItem>> = vec![Vec::new(); plan.merges.len()];
    for it in &plan.items {
        if it.blocks.0 > it.blocks.1 || it.blocks.1 > plan.kv_blocks.len() {
            return Err(format!("{it:?}: block range outside the list"));
        }
        match it.merge {
            None => {
                write(it.seq, it.kv_head, it.kv_heads, it.q_block)?;
                let got = &plan.kv_blocks[it.blocks.0..it.blocks.1];
                expect_blocks(plan, g, it, got)?;
            }
            Some(m) => by_group
                .get_mut(m)
                .ok_or_else(|| format!("{it:?}: no merge group {m}"))?
                .push(it),
        }
    }
    let mut slots = Vec::new();
    for (m, (mg, parts)) in plan.merges.iter().zip(&mut by_group).enumerate() {
        write(mg.seq, mg.kv_head, mg.kv_heads, mg.q_block)?;
        parts.sort_by_key(|it| it.part);
        let same = |it: &&WorkItem| {
            (it.seq, it.kv_head, it.kv_heads, it.q_block)
                == (mg.seq, mg.kv_head, mg.kv_heads, mg.q_block)
        };
        if parts.is_empty()
            || parts.len() != mg.parts
            || !parts.iter().enumerate().all(|(i, it)| it.part == i)
            || !parts.iter().all(same)
        {
            return Err(format!("merge group {m}: parts are not 0..{}", mg.parts));
        }
        let q_block = bm.tiles(mg.seq).0;
        let nq = (p.lens.q_len(mg.seq) - mg.q_block * q_block).min(q_block);
        if mg.rows != nq * g * mg.kv_heads {
            return Err(format!(
                "merge group {m}: {} rows, not {}",
                mg.rows,
                nq * g * mg.kv_heads
            ));
        }
        slots.push((mg.slot, mg.slot + mg.parts * mg.rows));
        // The partitions together visit the group's blocks once, in order.
        let all: Vec<u32> = parts
            .iter()
            .flat_map(|it| plan.kv_blocks[it.blocks.0..it.blocks.1].iter().copied())
            .collect();
        expect_blocks(plan, g, parts[0], &all)?;
    }
    slots.sort();
    if slots.windows(2).any(|w| w[0].1 > w[1].0)
        || slots.last().is_some_and(|l| l.1 > plan.partial_rows)
    {
        return Err("partial-state slots overlap or exceed partial_rows".into());
    }
    if let Some(r) = writers.iter().position(|&w| w != 1) {
        let (t, h) = (r / hq, r % hq);
        return Err(format!(
            "output row (token {t}, head {h}) written {} times",
            writers[r]
        ));
    }
    Ok(())
}

/// `got` must be the kv blocks any q head of the item's kv heads visits, ascending (head 0
/// for a broadcast mask: `g` is the group size).
fn expect_blocks(plan: &Plan, g: usize, it: &WorkItem, got: &[u32]) -> Result<(), String> {
    let bm = &plan.block_mask;
    let heads = if bm.heads == 1 {
        0..1
    } else {
        it.kv_head * g..(it.kv_head + it.kv_heads) * g
    };
    let want: Vec<u32> = (0..bm.kv_blocks(it.seq))
        .filter(|&kb| {
            heads
                .clone()
                .any(|h| bm.kinds(it.seq, h, it.q_block)[kb] != 0)
        })
        .map(|kb| kb as u32)
        .collect();
    if got != want {
        return Err(format!("{it:?}: visits {got:?}, the mask keeps {want:?}"));
    }
    Ok(())
}
