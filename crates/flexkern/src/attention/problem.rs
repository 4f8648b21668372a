//! The validated description of one attention call: ragged lengths, head geometry, Q access.

use crate::dtype::DType;
use crate::error::{invalid, mismatch, Error, Result};
use crate::tensor::TensorView;
use crate::variant::expr::Expr;
use crate::variant::interval::{check_bounds, Domain};
use crate::variant::CompiledVariant;

/// Per-sequence query and KV lengths of a ragged batch. Query `i` of sequence `s` sits at
/// position `kv_len(s) - q_len(s) + i` (queries are the last tokens of their KV).
#[derive(Clone, Debug, PartialEq)]
pub struct SeqLens {
    q_start: Vec<usize>,
    kv_lens: Vec<usize>,
}

impl SeqLens {
    /// From `cu_q_lens` (n+1 cumulative offsets starting at 0) and per-sequence KV lengths.
    pub fn new(cu_q_lens: &[u64], kv_lens: &[u64]) -> Result<SeqLens> {
        let q_start = check_cumulative("cu_q_lens", cu_q_lens)?;
        if kv_lens.len() + 1 != cu_q_lens.len() {
            return Err(mismatch(
                "cu_q_lens",
                "kv_lens",
                format!("{} sequences vs {}", cu_q_lens.len() - 1, kv_lens.len()),
            ));
        }
        let kv_lens = kv_lens
            .iter()
            .map(|&x| {
                usize::try_from(x).map_err(|_| invalid("kv_lens", "length does not fit in usize"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SeqLens { q_start, kv_lens })
    }

    /// From cumulative offsets of both Q and KV (SGLang-JAX's `cu_q_lens` / `cu_kv_lens`).
    pub fn from_cu(cu_q_lens: &[u64], cu_kv_lens: &[u64]) -> Result<SeqLens> {
        let kv = check_cumulative("cu_kv_lens", cu_kv_lens)?;
        let kv_lens: Vec<u64> = kv.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
        SeqLens::new(cu_q_lens, &kv_lens)
    }

    /// One sequence.
    pub fn single(q_len: usize, kv_len: usize) -> SeqLens {
        SeqLens {
            q_start: vec![0, q_len],
            kv_lens: vec![kv_len],
        }
    }

    /// `batch` sequences of equal lengths.
    pub fn uniform(batch: usize, q_len: usize, kv_len: usize) -> SeqLens {
        SeqLens {
            q_start: (0..=batch).map(|b| b * q_len).collect(),
            kv_lens: vec![kv_len; batch],
        }
    }

    pub fn num_seqs(&self) -> usize {
        self.kv_lens.len()
    }
    pub fn q_len(&self, s: usize) -> usize {
        self.q_start[s + 1] - self.q_start[s]
    }
    pub fn kv_len(&self, s: usize) -> usize {
        self.kv_lens[s]
    }
    /// Row of this sequence's first query in the packed Q / O tensors.
    pub fn q_start(&self, s: usize) -> usize {
        self.q_start[s]
    }
    pub fn total_q(&self) -> usize {
        *self.q_start.last().unwrap()
    }
    /// Position of query 0 (may be negative when q is longer than KV: those rows see nothing
    /// under causal masks).
    pub fn q_pos0(&self, s: usize) -> i64 {
        self.kv_lens[s] as i64 - self.q_len(s) as i64
    }
    /// The interval-analysis domain of sequence s's query rows `rows` (indices within the
    /// sequence, inclusive) against its keys `keys` (inclusive), over `num_q_heads` heads.
    pub fn domain(
        &self,
        s: usize,
        num_q_heads: usize,
        rows: (i64, i64),
        keys: (i64, i64),
    ) -> Domain {
        let (ql, kl) = (self.q_len(s) as i64, self.kv_len(s) as i64);
        let (p0, t0) = (self.q_pos0(s), self.q_start(s) as i64);
        Domain {
            batch: (s as i64, s as i64),
            head: (0, num_q_heads as i64 - 1),
            q_pos: (p0 + rows.0, p0 + rows.1),
            kv_pos: keys,
            q_len: (ql, ql),
            kv_len: (kl, kl),
            q_token: (t0 + rows.0, t0 + rows.1),
        }
    }
}

fn check_cumulative(arg: &'static str, cu: &[u64]) -> Result<Vec<usize>> {
    if cu.is_empty() {
        return Err(invalid(arg, "needs at least one entry (0)"));
    }
    if cu[0] != 0 {
        return Err(invalid(
            arg,
            format!("must start at 0, starts at {}", cu[0]),
        ));
    }
    if let Some(i) = cu.windows(2).position(|w| w[1] < w[0]) {
        return Err(invalid(
            arg,
            format!(
                "not monotonic at index {}: {} then {}",
                i + 1,
                cu[i],
                cu[i + 1]
            ),
        ));
    }
    cu.iter()
        .map(|&x| usize::try_from(x).map_err(|_| invalid(arg, "offset does not fit in usize")))
        .collect()
}

/// Where one strided operand's elements live (elements, not bytes): element (seq, token i,
/// head, d) sits at `seq_base[seq] + i * tok_stride + head * head_stride + d`.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub dtype: DType,
    pub seq_base: Vec<usize>,
    pub tok_stride: usize,
    pub head_stride: usize,
    pub heads: usize,
    pub dim: usize,
    /// Elements the buffer must hold (the largest reachable offset plus one).
    pub extent: usize,
}

impl Layout {
    /// Offset of the first element of (seq, token, head).
    #[inline(always)]
    pub fn offset(&self, seq: usize, tok: usize, head: usize) -> usize {
        self.seq_base[seq] + tok * self.tok_stride + head * self.head_stride
    }

    /// Whether head `h + 1`'s row directly follows head `h`'s (a token-major layout).
    pub fn heads_adjacent(&self) -> bool {
        self.heads < 2 || self.head_stride == self.dim
    }
}

/// Paged K/V: pages `[num_pages, page_size, Hkv, D]` of each store, per-kv-head scales
/// (1.0 for float types). The page tables themselves are data bindings (`KvBufs::Paged`).
#[derive(Clone, Debug, PartialEq)]
pub struct PagedLayout {
    pub page_size: usize,
    pub num_pages: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    pub k_dtype: DType,
    pub v_dtype: DType,
    pub k_scales: Vec<f32>,
    pub v_scales: Vec<f32>,
}

/// How K and V are laid out: the descriptor kernels and the planner read instead of probing
/// addresses.
#[derive(Clone, Debug, PartialEq)]
pub enum KvLayout {
    Strided { k: Layout, v: Layout },
    Paged(PagedLayout),
}

impl KvLayout {
    /// Whether one token's rows of every kv head sit side by side (decode can stream them as
    /// one run).
    pub fn token_major(&self) -> bool {
        match self {
            KvLayout::Strided { k, v } => k.heads_adjacent() && v.heads_adjacent(),
            KvLayout::Paged(_) => true,
        }
    }
    pub fn dtypes(&self) -> (DType, DType) {
        match self {
            KvLayout::Strided { k, v } => (k.dtype, v.dtype),
            KvLayout::Paged(l) => (l.k_dtype, l.v_dtype),
        }
    }
}

/// Builds the layout of a rank-3 view (ragged: `starts` per sequence) or a rank-4 view
/// (`[batch, seq, heads, dim]`: one sequence per batch entry). `lens(s)` is the token count the
/// view must hold for sequence `s`.
pub(crate) fn layout(
    arg: &'static str,
    v: &TensorView<'_>,
    num_seqs: usize,
    starts: &dyn Fn(usize) -> usize,
    lens: &dyn Fn(usize) -> usize,
) -> Result<Layout> {
    v.validate(arg)?;
    let r = v.rank();
    let (heads, dim) = (v.shape[r - 2], v.shape[r - 1]);
    let (tok_stride, head_stride) = (v.strides[r - 3], v.strides[r - 2]);
    let mut seq_base = Vec::with_capacity(num_seqs);
    if r == 3 {
        let end = if num_seqs == 0 {
            0
        } else {
            starts(num_seqs - 1) + lens(num_seqs - 1)
        };
        if end > v.shape[0] {
            return Err(invalid(
                arg,
                format!(
                    "the lengths need {end} tokens but the tensor holds {}",
                    v.shape[0]
                ),
            ));
        }
        for s in 0..num_seqs {
            seq_base.push(starts(s) * tok_stride);
        }
    } else {
        if v.shape[0] != num_seqs {
            return Err(invalid(
                arg,
                format!("batch dimension {} but {num_seqs} sequences", v.shape[0]),
            ));
        }
        for s in 0..num_seqs {
            if lens(s) > v.shape[1] {
                return Err(invalid(
                    arg,
                    format!(
                        "sequence {s} needs {} tokens but the tensor holds {}",
                        lens(s),
                        v.shape[1]
                    ),
                ));
            }
            seq_base.push(s * v.strides[0]);
        }
    }
    Ok(Layout {
        dtype: v.dtype(),
        seq_base,
        tok_stride,
        head_stride,
        heads,
        dim,
        extent: v.data.len(),
    })
}

/// Largest head size supported (DeepSeek MLA decode uses 576).
pub const MAX_HEAD_DIM: usize = 576;

/// The shape of one attention call, host data only (no buffers): lengths, heads, scale, the
/// variant, and the layouts of Q and K/V. The buffers are bound when it runs
/// (`Backend::attention`).
#[derive(Clone, Debug)]
pub struct Problem {
    pub lens: SeqLens,
    pub q: Layout,
    pub kv: KvLayout,
    pub num_q_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// Multiplies q . k (natural-log units).
    pub scale: f32,
    pub variant: CompiledVariant,
}

impl Problem {
    /// The one problem builder of every entry point: checks head geometry against the K/V
    /// layout, the scale (default 1/sqrt(Dk)), compiles the variant and proves its capture
    /// loads in bounds.
    pub fn build(
        lens: SeqLens,
        q: Layout,
        kv: KvLayout,
        scale: Option<f32>,
        variant: &crate::variant::Variant,
    ) -> Result<Problem> {
        let (hkv, dk, dv) = match &kv {
            KvLayout::Strided { k, v } => {
                if k.heads != v.heads {
                    return Err(mismatch(
                        "k",
                        "v",
                        format!("{} vs {} heads", k.heads, v.heads),
                    ));
                }
                (k.heads, k.dim, v.dim)
            }
            KvLayout::Paged(l) => (l.num_kv_heads, l.head_dim, l.head_dim_v),
        };
        let hq = q.heads;
        let scale = scale.unwrap_or(1.0 / (dk.max(1) as f32).sqrt());
        check_geometry(hq, hkv, dk, dv, q.dim, scale)?;
        let (kd, vd) = kv.dtypes();
        if q.dtype != kd && !matches!(kv, KvLayout::Paged(_)) {
            return Err(mismatch(
                "q",
                "k",
                format!("dtypes {:?} and {:?}", q.dtype, kd),
            ));
        }
        if matches!(kv, KvLayout::Strided { .. }) && kd != vd {
            return Err(mismatch("k", "v", format!("dtypes {kd:?} and {vd:?}")));
        }
        let variant = variant.compile()?;
        check_captures(&variant, &lens, hq)?;
        Ok(Problem {
            lens,
            q,
            kv,
            num_q_heads: hq,
            num_kv_heads: hkv,
            head_dim: dk,
            head_dim_v: dv,
            scale,
            variant,
        })
    }

    /// q heads per kv head.
    pub fn group_size(&self) -> usize {
        self.num_q_heads / self.num_kv_heads
    }
    /// Rows of the output O `[total_q, Hq, Dv]`.
    pub fn total_q(&self) -> usize {
        self.lens.total_q()
    }
}

/// Checks head geometry, scale, and every capture index of the variant over each sequence's domain.
pub(crate) fn check_geometry(
    hq: usize,
    hkv: usize,
    dk: usize,
    dv: usize,
    q_dim: usize,
    scale: f32,
) -> Result<()> {
    if hq == 0 {
        return Err(invalid("q", "head count must be positive"));
    }
    if hkv == 0 {
        return Err(invalid("k", "head count must be positive"));
    }
    if !hq.is_multiple_of(hkv) {
        return Err(mismatch(
            "q",
            "k",
            format!("{hq} query heads are not a multiple of {hkv} kv heads"),
        ));
    }
    if q_dim != dk {
        return Err(mismatch("q", "k", format!("head size {q_dim} vs {dk}")));
    }
    for (arg, d) in [("k", dk), ("v", dv)] {
        if d == 0 || d > MAX_HEAD_DIM {
            return Err(Error::InvalidArgument {
                arg,
                msg: format!("head size {d} is outside 1..={MAX_HEAD_DIM}"),
            });
        }
    }
    if !scale.is_finite() {
        return Err(invalid("scale", format!("must be finite, got {scale}")));
    }
    Ok(())
}

/// Proves every capture load of the variant in bounds for every element of the problem.
pub(crate) fn check_captures(v: &CompiledVariant, lens: &SeqLens, hq: usize) -> Result<()> {
    let exprs: Vec<&Expr> = v
        .mask
        .iter()
        .chain(v.score.iter())
        .map(|p| p.expr())
        .collect();
    if let Some(s) = &v.sinks {
        if s.len() != hq {
            return Err(invalid(
                "sinks",
                format!("{} sink logits for {hq} query heads", s.len()),
            ));
        }
    }
    for e in exprs {
        // `builtins::alibi` holds one slope per query head: more (or fewer) is a bad argument
        // even where the loads stay in bounds.
        if let Some(c) = e.captures().iter().find(|c| c.name == "alibi_slopes") {
            if c.len() != hq {
                return Err(invalid(
                    "alibi",
                    format!("{} slopes for {hq} query heads", c.len()),
                ));
            }
        }
        if e.captures().is_empty() {
            continue;
        }
        for s in 0..lens.num_seqs() {
            let (ql, kl) = (lens.q_len(s) as i64, lens.kv_len(s) as i64);
            if ql == 0 || kl == 0 {
                continue;
            }
            let d = lens.domain(s, hq, (0, ql - 1), (0, kl - 1));
            if let Some(o) = check_bounds(e, &d).first() {
                return Err(Error::InvalidArgument {
                    arg: "variant",
                    msg: format!(
                        "capture `{}` has {} elements but sequence {s} may index it at {}..={} (expression `{e}`)",
                        o.capture, o.len, o.index.0, o.index.1
                    ),
                });
            }
        }
    }
    Ok(())
}
