//! The built-in mods, each a few lines of IR: exactly what a user could write by hand.

use super::expr::{h, int, kv_len, kv_pos, q_len, q_pos, q_token, score, Expr, Tensor};

/// Keeps `kv_pos <= q_pos`.
pub fn causal() -> Expr {
    kv_pos().le(q_pos())
}

/// Offsets are clamped to +-2^62, beyond any position: `q_pos - w` never overflows i64, so
/// `i64::MAX` means "unbounded", not a wrapped negative window.
const OFFSET_LIMIT: i64 = 1 << 62;

fn offset(x: i64) -> i64 {
    x.clamp(-OFFSET_LIMIT, OFFSET_LIMIT)
}

/// Keeps `kv_pos > q_pos - w` (AND with `causal` for Mistral-style windows). `w <= 0` keeps
/// nothing (the CLI refuses it).
pub fn sliding_window(w: i64) -> Expr {
    kv_pos().gt(q_pos() - offset(w))
}

/// Keeps `q_pos - left <= kv_pos <= q_pos + right`.
pub fn local(left: i64, right: i64) -> Expr {
    kv_pos()
        .ge(q_pos() - offset(left))
        .and(kv_pos().le(q_pos() + offset(right)))
}

/// Chunked attention (Llama 4): query and key in the same chunk of `size` positions, chunks
/// counted by floor division. Key positions are never negative; a query at a negative position
/// (q longer than KV) lies in a chunk before every key, so it keeps nothing, where truncating
/// division would have put it in chunk 0. A `size` below 1 compiles to a division by the
/// constant 0, which `Variant::compile` refuses with a typed error.
pub fn chunked(size: i64) -> Expr {
    let size = if size >= 1 { size } else { 0 };
    q_pos().ge(int(0)).and((q_pos() / size).eq(kv_pos() / size))
}

/// Document masking for packed sequences: `ids[q_pos] == ids[kv_pos]` (ids indexed by position).
pub fn document(ids: Vec<i64>) -> Expr {
    let t = Tensor::int("document_ids", ids);
    t.at(q_pos()).eq(t.at(kv_pos()))
}

/// Prefix-LM: bidirectional over the first `n` positions, causal after.
pub fn prefix_lm(n: i64) -> Expr {
    kv_pos().le(q_pos()).or(kv_pos().lt(int(n)))
}

/// Tree mask for speculative decoding (Akunu): the last `q_len` KV positions are the draft tree,
/// which is also the query. Bit `j` of `bits[q_token]` says whether the query may see draft
/// token `j` (its ancestors and itself); all earlier positions are visible. Trees hold at most 64 tokens.
pub fn tree(bits: Vec<i64>) -> Expr {
    let t = Tensor::int("tree_bits", bits);
    let start = kv_len() - q_len();
    let j = kv_pos() - start.clone();
    kv_pos()
        .lt(start)
        .or(((t.at(q_token()) >> j) & 1).eq(int(1)))
}

/// vLLM's block-sparse pattern: causal, plus the `local_blocks` nearest key blocks and every
/// `vert_stride`-th block (offset by the head index when `head_sliding`).
pub fn block_sparse(block: i64, local_blocks: i64, vert_stride: i64, head_sliding: bool) -> Expr {
    let (qb, kb) = (q_pos() / block, kv_pos() / block);
    let offset = if head_sliding { h() } else { int(0) };
    let vertical = ((kb.clone() + offset + 1) % vert_stride).eq(int(0));
    causal().and((qb - kb).lt(int(local_blocks)).or(vertical))
}

/// Gemma's logit soft-capping: `cap * tanh(score / cap)`. `cap` must be finite and > 0: 0 divides
/// by the constant 0 and a non-finite cap is a non-finite constant, both refused by
/// `Variant::compile` with a typed error. A negative cap is the same curve as `-cap`, so it is
/// taken by magnitude.
pub fn softcap(cap: f64) -> Expr {
    let cap = cap.abs();
    (score() / cap).tanh() * cap
}

/// ALiBi: `score + slope[h] * (kv_pos - q_pos)`.
pub fn alibi(slopes: Vec<f32>) -> Expr {
    let t = Tensor::float("alibi_slopes", slopes);
    score() + t.at(h()) * (kv_pos() - q_pos()).to_float()
}

/// The standard ALiBi slopes for `n` heads (geometric, as in the paper and its reference code).
pub fn alibi_slopes(n: usize) -> Vec<f32> {
    let p = n.next_power_of_two();
    let closest = if p == n { n } else { p / 2 };
    let base = |k: usize| 2f64.powf(-8.0 / k as f64);
    let mut out: Vec<f32> = (1..=closest)
        .map(|i| base(closest).powi(i as i32) as f32)
        .collect();
    let extra = base(2 * closest);
    out.extend((0..n - closest).map(|i| extra.powi((2 * i + 1) as i32) as f32));
    out
}

/// Relative-position bias from a per-head table of `2 * max_distance + 1` entries
/// (`table[h * (2M+1) + clamp(kv_pos - q_pos, -M, M) + M]`).
pub fn relative_bias(table: Vec<f32>, max_distance: i64) -> Expr {
    let t = Tensor::float("relative_bias", table);
    let width = 2 * max_distance + 1;
    let d = (kv_pos() - q_pos()).clamp(int(-max_distance), int(max_distance)) + max_distance;
    score() + t.at(h() * width + d)
}
