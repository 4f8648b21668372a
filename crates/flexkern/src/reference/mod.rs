//! The f64 oracle: materialized scores and a two-pass softmax, exactly the documented semantics.
//! Used by tests and `flexkern verify` only; it never imports a backend. Variants are evaluated
//! element by element by its own tree-walking interpreter (`interp.rs`), never by the register
//! program the kernels run.

pub mod interp;

use crate::attention::kv::KvSource;
use crate::attention::problem::Problem;
use crate::tensor::HostData;
use crate::variant::expr::Ty;
use interp::{Interp, Point};
use rayon::prelude::*;

/// Reference output: `o` `[total_q, Hq, Dv]` and natural-log `lse` `[total_q, Hq]`.
pub struct Reference {
    pub o: Vec<f64>,
    pub lse: Vec<f64>,
}

/// Computes attention in f64 from the same (already rounded) inputs the kernel reads: `q` laid
/// out as `p.q` says, K/V through `kv`. A kept score that is NaN (from the inputs or the score
/// mod) makes its row's O and LSE NaN; masked positions are never looked at.
pub fn attention(p: &Problem, q: HostData<'_>, kv: &dyn KvSource) -> Reference {
    let (hq, dk, dv) = (p.num_q_heads, p.head_dim, p.head_dim_v);
    // The variant compiled, so it type-checks.
    let interp = |prog: &crate::variant::program::Program, ty| {
        Interp::new(prog.expr(), ty).expect("a compiled variant type-checks")
    };
    let mask = p.variant.mask.as_ref().map(|m| interp(m, Ty::Bool));
    let score = p.variant.score.as_ref().map(|s| interp(s, Ty::Float));
    let total = p.total_q();
    let mut o = vec![0f64; total * hq * dv];
    let mut lse = vec![f64::NEG_INFINITY; total * hq];
    let rows: Vec<(usize, usize)> = (0..p.lens.num_seqs())
        .flat_map(|s| (0..p.lens.q_len(s)).map(move |i| (s, i)))
        .collect();
    let results: Vec<(Vec<f64>, Vec<f64>)> = rows
        .par_iter()
        .map_init(
            || vec![0f32; dk.max(dv)],
            |rowbuf, &(s, i)| {
                let kl = p.lens.kv_len(s);
                let mut out_o = vec![0f64; hq * dv];
                let mut out_l = vec![f64::NEG_INFINITY; hq];
                for h in 0..hq {
                    let kh = h / p.group_size();
                    let qo = p.q.offset(s, i, h);
                    let q: Vec<f64> = (0..dk).map(|d| q.get_f32(qo + d) as f64).collect();
                    let mut at = Point {
                        score: 0.0,
                        batch: s as i64,
                        head: h as i64,
                        q_pos: p.lens.q_pos0(s) + i as i64,
                        kv_pos: 0,
                        q_len: p.lens.q_len(s) as i64,
                        kv_len: kl as i64,
                        q_token: (p.lens.q_start(s) + i) as i64,
                    };
                    let mut sc = vec![0f64; kl];
                    let mut keep = vec![true; kl];
                    for j in 0..kl {
                        at.kv_pos = j as i64;
                        keep[j] = mask.as_ref().is_none_or(|m| m.mask(&at));
                        if !keep[j] {
                            continue;
                        }
                        kv.k_row(s, kh, j).to_f32(&mut rowbuf[..dk]);
                        at.score = q
                            .iter()
                            .zip(&rowbuf[..dk])
                            .map(|(a, &b)| a * b as f64)
                            .sum::<f64>()
                            * p.scale as f64;
                        sc[j] = score.as_ref().map_or(at.score, |f| f.score(&at));
                    }
                    if sc.iter().zip(&keep).any(|(x, &k)| k && x.is_nan()) {
                        out_o[h * dv..][..dv].fill(f64::NAN);
                        out_l[h] = f64::NAN;
                        continue;
                    }
                    let sink = p.variant.sinks.as_ref().map(|v| v[h] as f64);
                    let m = sc
                        .iter()
                        .zip(&keep)
                        .filter(|(_, &k)| k)
                        .map(|(&x, _)| x)
                        .chain(sink)
                        .fold(f64::NEG_INFINITY, f64::max);
                    if m == f64::NEG_INFINITY {
                        continue; // fully masked (and no sink): O = 0, LSE = -inf
                    }
                    let mut denom = sink.map_or(0.0, |x| (x - m).exp());
                    let acc = &mut out_o[h * dv..][..dv];
                    for j in 0..kl {
                        if !keep[j] {
                            continue;
                        }
                        let w = (sc[j] - m).exp();
                        denom += w;
                        kv.v_row(s, kh, j).to_f32(&mut rowbuf[..dv]);
                        for (a, &x) in acc.iter_mut().zip(&rowbuf[..dv]) {
                            *a += w * x as f64;
                        }
                    }
                    for a in acc.iter_mut() {
                        *a /= denom;
                    }
                    out_l[h] = m + denom.ln();
                }
                (out_o, out_l)
            },
        )
        .collect();
    for (&(s, i), (ro, rl)) in rows.iter().zip(results) {
        let t = p.lens.q_start(s) + i;
        o[t * hq * dv..][..hq * dv].copy_from_slice(&ro);
        lse[t * hq..][..hq].copy_from_slice(&rl);
    }
    Reference { o, lse }
}

/// The oracle of an attention call over host data: validates `args` as `attention` does and
/// returns the problem with the f64 result.
pub fn of_args(
    args: &crate::attention::AttentionArgs,
) -> crate::error::Result<(Problem, Reference)> {
    use crate::attention::kv::{Bound, StridedKv};
    use crate::attention::problem::KvLayout;
    let p = args.prepare()?;
    let KvLayout::Strided { k, v } = &p.kv else {
        unreachable!("strided arguments give a strided layout")
    };
    let kv = StridedKv {
        k: Bound {
            layout: k,
            data: args.k.data,
        },
        v: Bound {
            layout: v,
            data: args.v.data,
        },
        lens: &p.lens,
    };
    let r = attention(&p, args.q.data, &kv);
    Ok((p, r))
}
