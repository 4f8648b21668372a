//! Runs a plan: workers pull items from a shared counter (the plan lists them largest first,
//! decode and prefill items of a mixed batch interleaved in one pass), then split items'
//! partial states are merged, with sinks added once at the end.

use super::simd::Isa;
use super::tile::{run_item, Ctx, Scratch, Shared};
use crate::attention::kv::KvSource;
use crate::attention::merge::merge_into;
use crate::attention::plan::Plan;
use crate::attention::problem::Problem;
use crate::error::{invalid, mismatch, Result};
use crate::tensor::HostData;
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

pub(crate) fn attention(
    isa: Isa,
    p: &Problem,
    q: HostData<'_>,
    kv: &dyn KvSource,
    plan: &Plan,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    check(p, kv, plan)?;
    crate::attention::check_outputs(p, out.len(), lse.as_ref().map(|l| l.len()))?;
    let dv = p.head_dim_v;
    let mut part_o = vec![0f32; plan.partial_rows * dv];
    let mut part_lse = vec![f32::NEG_INFINITY; plan.partial_rows];
    let ctx = Ctx {
        p,
        q,
        kv,
        plan,
        isa,
        out: Shared::new(out),
        lse: lse.map(Shared::new),
        part_o: Shared::new(&mut part_o),
        part_lse: Shared::new(&mut part_lse),
    };
    let next = AtomicUsize::new(0);
    let workers = rayon::current_num_threads().min(plan.items.len());
    (0..workers).into_par_iter().for_each(|_| {
        let mut sc = Scratch::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(it) = plan.items.get(i) else { break };
            run_item(&ctx, it, &mut sc);
        }
    });
    plan.merges.par_iter().for_each(|mg| {
        let (hq, g) = (p.num_q_heads, p.group_size());
        // Rows are stacked (kv head, head in group, query).
        let nq = mg.rows / (g * mg.kv_heads);
        let i0 = mg.q_block * plan.tiles(mg.seq).0;
        let zeros = vec![0f32; dv];
        let mut o = vec![0f32; dv];
        for r in 0..mg.rows {
            let (h, i) = (mg.kv_head * g + r / nq, r % nq);
            o.fill(0.0);
            let mut l = f32::NEG_INFINITY;
            for part in 0..mg.parts {
                let row = mg.slot + part * mg.rows + r;
                merge_into(&mut o, &mut l, &part_o[row * dv..][..dv], part_lse[row]);
            }
            if let Some(s) = p.variant.sinks.as_deref() {
                // A sink is a key with logit sink[h] and a zero value.
                merge_into(&mut o, &mut l, &zeros, s[h]);
            }
            let t = p.lens.q_start(mg.seq) + i0 + i;
            // SAFETY: this merge group alone owns these output rows.
            unsafe { ctx.out.slice((t * hq + h) * dv, dv).copy_from_slice(&o) };
            if let Some(ls) = &ctx.lse {
                unsafe { ls.slice(t * hq + h, 1)[0] = l };
            }
        }
    });
    Ok(())
}

/// The KV source and the plan must describe the same problem the kernel is given.
fn check(p: &Problem, kv: &dyn KvSource, plan: &Plan) -> Result<()> {
    if kv.num_kv_heads() != p.num_kv_heads {
        return Err(mismatch("kv", "problem", "kv head counts differ"));
    }
    if kv.head_dim() != p.head_dim || kv.head_dim_v() != p.head_dim_v {
        return Err(mismatch("kv", "problem", "head sizes differ"));
    }
    for s in 0..p.lens.num_seqs() {
        if kv.kv_len(s) != p.lens.kv_len(s) {
            return Err(mismatch(
                "kv",
                "problem",
                format!(
                    "sequence {s}: kv length {} vs {}",
                    kv.kv_len(s),
                    p.lens.kv_len(s)
                ),
            ));
        }
        // The kernels read whole rows: a source with other row lengths is refused up front.
        if kv.kv_len(s) > 0
            && (kv.k_row(s, 0, 0).len() != p.head_dim || kv.v_row(s, 0, 0).len() != p.head_dim_v)
        {
            return Err(mismatch(
                "kv",
                "problem",
                "row lengths differ from the head sizes",
            ));
        }
    }
    if !plan.block_mask.matches(&p.lens, p.num_q_heads) {
        return Err(invalid("plan", "block mask built for another problem"));
    }
    Ok(())
}
