//! Attention: the problem description, KV sources, the planner, state merging, and the entry
//! points that validate arguments, plan, and hand the work to a backend.

pub mod kv;
pub mod merge;
pub mod paged;
pub mod plan;
pub mod problem;

use crate::backend::Backend;
use crate::error::{invalid, mismatch, Result};
use crate::tensor::TensorView;
use crate::variant::{BlockMask, Variant};
use kv::StridedKv;
use problem::{check_captures, check_geometry, operand, Problem, SeqLens};

/// Arguments of one attention call over strided Q/K/V.
///
/// Q is `[tokens, Hq, Dk]`, K `[tokens, Hkv, Dk]`, V `[tokens, Hkv, Dv]` (ragged through
/// `cu_q_lens` / `cu_kv_lens`; one sequence when both are `None`), or rank 4
/// `[batch, seq, heads, dim]` with any strides (uniform lengths; `cu_*` must be `None`).
#[derive(Clone, Debug)]
pub struct AttentionArgs<'a> {
    pub q: TensorView<'a>,
    pub k: TensorView<'a>,
    pub v: TensorView<'a>,
    pub cu_q_lens: Option<&'a [u64]>,
    pub cu_kv_lens: Option<&'a [u64]>,
    /// Defaults to 1/sqrt(Dk).
    pub scale: Option<f32>,
    pub variant: Variant,
}

impl<'a> AttentionArgs<'a> {
    pub fn new(q: TensorView<'a>, k: TensorView<'a>, v: TensorView<'a>) -> Self {
        AttentionArgs {
            q,
            k,
            v,
            cu_q_lens: None,
            cu_kv_lens: None,
            scale: None,
            variant: Variant::full(),
        }
    }
    pub fn ragged(mut self, cu_q_lens: &'a [u64], cu_kv_lens: &'a [u64]) -> Self {
        self.cu_q_lens = Some(cu_q_lens);
        self.cu_kv_lens = Some(cu_kv_lens);
        self
    }
    pub fn scale(mut self, s: f32) -> Self {
        self.scale = Some(s);
        self
    }
    pub fn variant(mut self, v: Variant) -> Self {
        self.variant = v;
        self
    }

    /// Validates every argument and returns the problem and its KV source.
    pub fn prepare(&self) -> Result<(Problem<'a>, StridedKv<'a>)> {
        for (arg, t) in [("q", &self.q), ("k", &self.k), ("v", &self.v)] {
            t.validate(arg)?;
        }
        if self.q.rank() != self.k.rank() || self.k.rank() != self.v.rank() {
            return Err(mismatch("q", "k", "q, k and v must have the same rank"));
        }
        if self.k.dtype() != self.v.dtype() {
            return Err(mismatch(
                "k",
                "v",
                format!("dtypes {:?} and {:?}", self.k.dtype(), self.v.dtype()),
            ));
        }
        if self.q.dtype() != self.k.dtype() {
            return Err(mismatch(
                "q",
                "k",
                format!("dtypes {:?} and {:?}", self.q.dtype(), self.k.dtype()),
            ));
        }
        let r = self.q.rank();
        let lens = match (r, self.cu_q_lens, self.cu_kv_lens) {
            (3, None, None) => SeqLens::single(self.q.shape[0], self.k.shape[0]),
            (3, Some(cq), Some(ck)) => {
                if cq.len() != ck.len() {
                    return Err(mismatch(
                        "cu_q_lens",
                        "cu_kv_lens",
                        format!("{} vs {} entries", cq.len(), ck.len()),
                    ));
                }
                SeqLens::from_cu(cq, ck)?
            }
            (3, _, _) => {
                return Err(invalid(
                    "cu_kv_lens",
                    "give both cu_q_lens and cu_kv_lens, or neither",
                ))
            }
            (_, None, None) => {
                if self.k.shape[0] != self.q.shape[0] || self.v.shape[0] != self.q.shape[0] {
                    return Err(mismatch("q", "k", "batch dimensions differ"));
                }
                SeqLens::uniform(self.q.shape[0], self.q.shape[1], self.k.shape[1])
            }
            _ => {
                return Err(invalid(
                    "cu_q_lens",
                    "rank-4 inputs hold one sequence per batch entry: no cu_*_lens",
                ))
            }
        };
        if r == 3 && self.k.shape[0] != self.v.shape[0] {
            return Err(mismatch(
                "k",
                "v",
                format!("{} vs {} tokens", self.k.shape[0], self.v.shape[0]),
            ));
        }
        let (hq, dq) = (self.q.shape[r - 2], self.q.shape[r - 1]);
        let (hkv, dk) = (self.k.shape[r - 2], self.k.shape[r - 1]);
        let (hv, dv) = (self.v.shape[r - 2], self.v.shape[r - 1]);
        if hv != hkv {
            return Err(mismatch("k", "v", format!("{hkv} vs {hv} heads")));
        }
        let scale = self.scale.unwrap_or(1.0 / (dk.max(1) as f32).sqrt());
        check_geometry(hq, hkv, dk, dv, dq, scale)?;
        let variant = self.variant.compile()?;
        check_captures(&variant, &lens, hq)?;
        let n = lens.num_seqs();
        // Rank 3: KV of sequence s starts at cu_kv_lens[s].
        let kv_start: Vec<usize> = match self.cu_kv_lens {
            Some(ck) => ck.iter().map(|&x| x as usize).collect(),
            None => vec![0; n + 1],
        };
        let q = operand("q", &self.q, n, &|s| lens.q_start(s), &|s| lens.q_len(s))?;
        let k = operand("k", &self.k, n, &|s| kv_start[s], &|s| lens.kv_len(s))?;
        let v = operand("v", &self.v, n, &|s| kv_start[s], &|s| lens.kv_len(s))?;
        let kv_lens = (0..n).map(|s| lens.kv_len(s)).collect();
        let problem = Problem {
            lens,
            q,
            num_q_heads: hq,
            num_kv_heads: hkv,
            head_dim: dk,
            head_dim_v: dv,
            scale,
            variant,
        };
        Ok((problem, StridedKv { k, v, kv_lens }))
    }
}

/// Checks output buffer sizes against the problem.
pub(crate) fn check_outputs(p: &Problem, out: &[f32], lse: Option<&[f32]>) -> Result<()> {
    let rows = p
        .total_q()
        .checked_mul(p.num_q_heads)
        .ok_or_else(|| invalid("out", "size overflows"))?;
    let n = rows
        .checked_mul(p.head_dim_v)
        .ok_or_else(|| invalid("out", "size overflows"))?;
    if out.len() != n {
        return Err(invalid(
            "out",
            format!(
                "length {} but [tokens={}, Hq={}, Dv={}] needs {n}",
                out.len(),
                p.total_q(),
                p.num_q_heads,
                p.head_dim_v
            ),
        ));
    }
    if let Some(l) = lse {
        if l.len() != rows {
            return Err(invalid(
                "lse",
                format!("length {} but [tokens, Hq] needs {rows}", l.len()),
            ));
        }
    }
    Ok(())
}

/// Runs attention: validates, plans (building the BlockMask unless one is given), and runs the
/// backend. `out` is `[tokens, Hq, Dv]` f32; `lse` (natural log) is `[tokens, Hq]`.
pub fn attention(
    backend: &dyn Backend,
    args: &AttentionArgs,
    block_mask: Option<&BlockMask>,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    let (p, kv) = args.prepare()?;
    check_outputs(&p, out, lse.as_deref())?;
    let plan = plan::plan(&p, &kv, &backend.caps(), block_mask)?;
    backend.attention(&p, &kv, &plan, out, lse)
}
