//! `flexkern attn`'s expression options: `--mask-expr`, `--score-expr`, `--capture` and
//! `--tree`, turned into the variant IR (`flexkern::variant::parse`, `builtins::tree`).

use anyhow::{bail, Context, Result};
use clap::Args;
use flexkern::builtins;
use flexkern::expr::Tensor;
use flexkern::npy::{self, NpyData};
use flexkern::variant::parse::{parse_mask, parse_score};
use flexkern::Variant;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Default)]
pub struct ExprArgs {
    /// Mask expression, repeatable (ANDed with each other and with --mask), e.g.
    /// "kv_pos <= q_pos || kv_pos < 16". Grammar: README, "Expressions".
    #[arg(long = "mask-expr")]
    pub mask_exprs: Vec<String>,
    /// Score expression over `score`, repeatable (chained in order, after --softcap/--alibi),
    /// e.g. "score + bias[h] * float(kv_pos - q_pos)".
    #[arg(long = "score-expr")]
    pub score_exprs: Vec<String>,
    /// A tensor the expressions index by name: NAME=FILE.npy (int32/int64 -> Int, f32/f16 ->
    /// Float; flattened to 1-D), repeatable.
    #[arg(long = "capture")]
    pub captures: Vec<String>,
    /// Speculative-decoding tree mask: PARENTS.npy (int) holds each query token's parent among
    /// its sequence's queries (-1 for a root); the queries are the last q_len KV positions, and
    /// each sees the earlier context, its ancestors and itself.
    #[arg(long)]
    pub tree: Option<PathBuf>,
}

/// Reads `NAME=FILE.npy`.
fn capture(spec: &str) -> Result<Tensor> {
    let (name, path) = spec
        .split_once('=')
        .with_context(|| format!("--capture {spec}: expected NAME=FILE.npy"))?;
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !valid {
        bail!("--capture {spec}: `{name}` is not a name (letters, digits, _)");
    }
    // Variables, functions and literals take precedence in the parser: such a capture would
    // never be read.
    const RESERVED: [&str; 20] = [
        "score", "b", "h", "q_pos", "kv_pos", "q_len", "kv_len", "q_token", "true", "false",
        "select", "min", "max", "clamp", "abs", "tanh", "exp", "log", "sqrt", "float",
    ];
    if RESERVED.contains(&name) {
        bail!("--capture {spec}: `{name}` is a variable, function or literal of the expression language");
    }
    let a = npy::read(Path::new(path)).with_context(|| format!("--capture {name}"))?;
    Ok(match a.data {
        NpyData::I32(_) | NpyData::I64(_) => Tensor::int(name, a.to_i64(path)?),
        NpyData::F32(_) | NpyData::F16(_) => Tensor::float(name, a.to_f32()),
    })
}

/// Ancestor bitmasks (bit `j`: the query may see draft token `j` of its sequence) from parent
/// indices, one per query token of the packed batch.
pub fn tree_bits(parents: &[i64], cu_q_lens: &[u64]) -> Result<Vec<i64>> {
    let total = *cu_q_lens.last().unwrap_or(&0) as usize;
    if parents.len() != total {
        bail!("--tree: {} parents for {total} query tokens", parents.len());
    }
    let mut bits = vec![0i64; total];
    for w in cu_q_lens.windows(2) {
        let (start, end) = (w[0] as usize, w[1] as usize);
        if end - start > 64 {
            bail!(
                "--tree: a tree holds at most 64 tokens, this sequence has {}",
                end - start
            );
        }
        for i in 0..end - start {
            let p = parents[start + i];
            if p < -1 || p >= i as i64 {
                bail!(
                    "--tree: token {i} of the sequence at query row {start} has parent {p}; \
                     parents must be -1 or an earlier token of the same sequence"
                );
            }
            let up = if p < 0 { 0 } else { bits[start + p as usize] };
            bits[start + i] = up | (1i64 << i);
        }
    }
    Ok(bits)
}

/// Adds the expression options to `v`. `q_tokens` is the packed query count; `cu_q_lens` the
/// ragged query offsets (one sequence when absent).
pub fn apply(
    a: &ExprArgs,
    mut v: Variant,
    q_tokens: usize,
    cu_q_lens: Option<&[u64]>,
) -> Result<Variant> {
    let caps = a
        .captures
        .iter()
        .map(|s| capture(s))
        .collect::<Result<Vec<_>>>()?;
    for (i, c) in caps.iter().enumerate() {
        if caps[..i].iter().any(|d| d.0.name == c.0.name) {
            bail!("--capture: `{}` given twice", c.0.name);
        }
    }
    for src in &a.mask_exprs {
        let e = parse_mask(src, &caps).with_context(|| format!("--mask-expr {src:?}"))?;
        v = v.mask(e);
    }
    for src in &a.score_exprs {
        let e = parse_score(src, &caps).with_context(|| format!("--score-expr {src:?}"))?;
        v = v.score(e);
    }
    if let Some(path) = &a.tree {
        let parents = npy::read(path)?.to_i64(&path.display().to_string())?;
        let one = [0, q_tokens as u64];
        v = v.mask(builtins::tree(tree_bits(
            &parents,
            cu_q_lens.unwrap_or(&one),
        )?));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_bits_are_ancestors_and_self() {
        // Two sequences: a root with two children, the second child with a child; then a chain.
        let parents = [-1, 0, 0, 2, -1, 0, 1];
        let bits = tree_bits(&parents, &[0, 4, 7]).unwrap();
        assert_eq!(bits, vec![0b1, 0b11, 0b101, 0b1101, 0b1, 0b11, 0b111]);
    }

    #[test]
    fn bad_trees_are_errors() {
        assert!(tree_bits(&[-1, 1], &[0, 2]).is_err()); // own parent
        assert!(tree_bits(&[-1, 2, 0], &[0, 3]).is_err()); // a later parent
        assert!(tree_bits(&[-1, -2], &[0, 2]).is_err());
        assert!(tree_bits(&[-1, 0], &[0, 3]).is_err()); // count
        assert!(tree_bits(&[-1, 0, -1, 1], &[0, 2, 4]).is_err()); // parent in another sequence
        assert!(tree_bits(&vec![-1; 65], &[0, 65]).is_err());
        assert_eq!(tree_bits(&vec![-1; 64], &[0, 64]).unwrap()[63], i64::MIN);
    }

    #[test]
    fn capture_specs_are_checked() {
        for bad in [
            "noequals",
            "=x.npy",
            "1a=x.npy",
            "a b=x.npy",
            "ok=/nonexistent.npy",
        ] {
            assert!(capture(bad).is_err(), "{bad}");
        }
    }
}
