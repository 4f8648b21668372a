//! Attention: the problem description, KV sources, the planner, state merging, and the entry
//! points that validate arguments, plan, and hand the work to a backend.

pub mod cascade;
pub mod kv;
pub mod merge;
pub mod paged;
pub mod plan;
pub mod problem;

use crate::backend::{to_device, AttnIo, Backend, Buffer, KvBufs};
use crate::dtype::DType;
use crate::error::{invalid, mismatch, Result};
use crate::tensor::{HostData, TensorView};
use crate::variant::{BlockMask, Variant};
use problem::{layout, KvLayout, Problem, SeqLens};

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

    /// Validates every argument and returns the problem (shapes and layouts, no data).
    pub fn prepare(&self) -> Result<Problem> {
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
        let n = lens.num_seqs();
        // Rank 3: KV of sequence s starts at cu_kv_lens[s].
        let kv_start: Vec<usize> = match self.cu_kv_lens {
            Some(ck) => ck.iter().map(|&x| x as usize).collect(),
            None => vec![0; n + 1],
        };
        let q = layout("q", &self.q, n, &|s| lens.q_start(s), &|s| lens.q_len(s))?;
        let k = layout("k", &self.k, n, &|s| kv_start[s], &|s| lens.kv_len(s))?;
        let v = layout("v", &self.v, n, &|s| kv_start[s], &|s| lens.kv_len(s))?;
        Problem::build(
            lens,
            q,
            KvLayout::Strided { k, v },
            self.scale,
            &self.variant,
        )
    }
}

/// Checks output sizes (in elements) against the problem.
pub(crate) fn check_outputs(p: &Problem, out: usize, lse: Option<usize>) -> Result<()> {
    let rows = p
        .total_q()
        .checked_mul(p.num_q_heads)
        .ok_or_else(|| invalid("out", "size overflows"))?;
    let n = rows
        .checked_mul(p.head_dim_v)
        .ok_or_else(|| invalid("out", "size overflows"))?;
    if out != n {
        return Err(invalid(
            "out",
            format!(
                "length {out} but [tokens={}, Hq={}, Dv={}] needs {n}",
                p.total_q(),
                p.num_q_heads,
                p.head_dim_v
            ),
        ));
    }
    if let Some(l) = lse {
        if l != rows {
            return Err(invalid(
                "lse",
                format!("length {l} but [tokens, Hq] needs {rows}"),
            ));
        }
    }
    Ok(())
}

/// Checks the buffers of a call against the problem's layouts before any kernel reads them.
pub fn check_io<B: Buffer>(p: &Problem, io: &AttnIo<'_, B>) -> Result<()> {
    check_buffer("q", io.q, p.q.dtype, p.q.extent)?;
    check_buffer("out", io.out, DType::F32, io.out.len())?;
    check_outputs(p, io.out.len(), io.lse.as_ref().map(|l| l.len()))?;
    if let Some(l) = &io.lse {
        check_buffer("lse", *l, DType::F32, l.len())?;
    }
    match (&p.kv, &io.kv) {
        (KvLayout::Strided { k, v }, KvBufs::Strided { k: kb, v: vb }) => {
            check_buffer("k", *kb, k.dtype, k.extent)?;
            check_buffer("v", *vb, v.dtype, v.extent)
        }
        (KvLayout::Paged(l), KvBufs::Paged { k, v, .. }) => {
            let rows = l.num_pages * l.page_size * l.num_kv_heads;
            check_buffer("k_pages", *k, l.k_dtype, rows * l.head_dim)?;
            if k.len() != rows * l.head_dim {
                return Err(invalid("k_pages", "length differs from the paged layout"));
            }
            check_buffer("v_pages", *v, l.v_dtype, rows * l.head_dim_v)
        }
        _ => Err(mismatch(
            "kv",
            "problem",
            "paged buffers for a strided layout or the reverse",
        )),
    }
}

fn check_buffer<B: Buffer>(arg: &'static str, b: &B, dtype: DType, need: usize) -> Result<()> {
    if b.dtype() != dtype {
        return Err(invalid(
            arg,
            format!(
                "a {} buffer where {} is needed",
                b.dtype().name(),
                dtype.name()
            ),
        ));
    }
    if b.len() < need {
        return Err(invalid(
            arg,
            format!("buffer of {} elements, the layout reaches {need}", b.len()),
        ));
    }
    Ok(())
}

/// Uploads a host operand into a new buffer of the backend.
pub fn upload_data<B: Backend + ?Sized>(b: &B, d: &HostData<'_>) -> Result<B::Buffer> {
    match d {
        HostData::F32(s) => to_device(b, s),
        HostData::F16(s) => to_device(b, s),
        HostData::BF16(s) => to_device(b, s),
    }
}

/// Runs attention over host data on any backend: validates, plans (building the BlockMask
/// unless one is given), uploads Q/K/V, runs, and downloads O (and LSE). `out` is
/// `[tokens, Hq, Dv]` f32; `lse` (natural log) is `[tokens, Hq]`. For repeated calls keep the
/// operands in backend buffers and call `Backend::attention` with a plan instead.
pub fn attention<B: Backend + ?Sized>(
    backend: &B,
    args: &AttentionArgs,
    block_mask: Option<&BlockMask>,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    let p = args.prepare()?;
    check_outputs(&p, out.len(), lse.as_ref().map(|l| l.len()))?;
    let plan = plan::plan(&p, &backend.caps(), block_mask)?;
    let q = upload_data(backend, &args.q.data)?;
    let k = upload_data(backend, &args.k.data)?;
    let v = upload_data(backend, &args.v.data)?;
    run_and_download(
        backend,
        &p,
        &plan,
        &q,
        KvBufs::Strided { k: &k, v: &v },
        out,
        lse,
    )
}

/// Allocates O (and LSE) holding what `out` and `lse` hold now (callers that poison their
/// outputs poison the device's), runs, and downloads them into host slices.
pub(crate) fn run_and_download<B: Backend + ?Sized>(
    backend: &B,
    p: &Problem,
    plan: &plan::Plan,
    q: &B::Buffer,
    kv: KvBufs<'_, B::Buffer>,
    out: &mut [f32],
    lse: Option<&mut [f32]>,
) -> Result<()> {
    let mut o = backend.alloc(DType::F32, out.len())?;
    backend.upload(&mut o, 0, bytemuck::cast_slice(out))?;
    let mut l = match &lse {
        Some(l) => {
            let mut b = backend.alloc(DType::F32, l.len())?;
            backend.upload(&mut b, 0, bytemuck::cast_slice(l))?;
            Some(b)
        }
        None => None,
    };
    let io = AttnIo {
        q,
        kv,
        out: &mut o,
        lse: l.as_mut(),
    };
    backend.attention(p, plan, io)?;
    backend.download(&o, 0, bytemuck::cast_slice_mut(out))?;
    if let (Some(dst), Some(src)) = (lse, &l) {
        backend.download(src, 0, bytemuck::cast_slice_mut(dst))?;
    }
    Ok(())
}
