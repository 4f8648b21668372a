//! Perplexity as llama.cpp's `llama-perplexity` defines it: the tokenized text is cut into
//! non-overlapping windows of `ctx` tokens (a trailing partial window is dropped); each window
//! runs from an empty cache, its first token replaced by BOS when the model adds one; only the
//! second half is scored (the logits at positions `ctx/2 .. ctx-1` predict the next token), so
//! every scored token has at least `ctx/2` tokens of context. `PPL = exp(mean NLL)`, and the
//! error estimate is llama.cpp's: `PPL * sqrt(var(NLL) / (n - 1))`.

use crate::error::{ModelError, Result};
use crate::forward::{Logits, Model};
use crate::kv::KvCache;
use flexkern::backend::tensor_ops::TensorOps;
use flexkern::Backend;

/// Sums of the per-token negative log-likelihoods (natural log), in f64.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Nll {
    pub sum: f64,
    pub sum_sq: f64,
    pub count: usize,
}

impl Nll {
    pub fn add(&mut self, nll: f64) {
        self.sum += nll;
        self.sum_sq += nll * nll;
        self.count += 1;
    }

    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }

    pub fn ppl(&self) -> f64 {
        self.mean().exp()
    }

    /// llama.cpp's uncertainty of the PPL: `PPL * sqrt((E[nll^2] - E[nll]^2) / (n - 1))`
    /// (0 when the variance is not positive or there is one token).
    pub fn ppl_error(&self) -> f64 {
        let n = self.count as f64;
        let var = self.sum_sq / n - self.mean() * self.mean();
        if var > 0.0 && self.count > 1 {
            (var / (n - 1.0)).sqrt() * self.ppl()
        } else {
            0.0
        }
    }
}

/// `-log softmax(logits)[target]`, in f64 (max-shifted).
pub fn token_nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    sum.ln() + max - logits[target as usize] as f64
}

/// The tokens window `i` runs (BOS in place of its first token when given).
pub fn window(tokens: &[u32], ctx: usize, i: usize, bos: Option<u32>) -> Vec<u32> {
    let mut w = tokens[i * ctx..(i + 1) * ctx].to_vec();
    if let Some(b) = bos {
        w[0] = b;
    }
    w
}

/// Adds the scored half of one window: `logits` is `[ctx, vocab]` for `w`.
pub fn score_window(logits: &[f32], vocab: usize, w: &[u32], nll: &mut Nll) {
    let ctx = w.len();
    for j in ctx / 2..ctx - 1 {
        nll.add(token_nll(&logits[j * vocab..(j + 1) * vocab], w[j + 1]));
    }
}

/// Checks the arguments and returns the number of windows. llama.cpp asks for at least two.
pub fn windows(n_tokens: usize, ctx: usize) -> Result<usize> {
    if ctx < 4 {
        return Err(ModelError::InvalidArgument {
            arg: "ctx",
            msg: format!("the window must hold at least 4 tokens, got {ctx}"),
        });
    }
    if n_tokens < 2 * ctx {
        return Err(ModelError::InvalidArgument {
            arg: "tokens",
            msg: format!(
                "{n_tokens} tokens: perplexity with a window of {ctx} needs at least {}",
                2 * ctx
            ),
        });
    }
    Ok(n_tokens / ctx)
}

/// Runs every window through `model` (the cache must hold `ctx` positions; it is cleared before
/// each window) and returns the NLL sums; `progress(done, total, &nll)` after each window.
pub fn perplexity<B: Backend + TensorOps>(
    model: &Model<'_, B>,
    cache: &mut KvCache<B>,
    tokens: &[u32],
    ctx: usize,
    bos: Option<u32>,
    mut progress: impl FnMut(usize, usize, &Nll),
) -> Result<Nll> {
    let n = windows(tokens.len(), ctx)?;
    if cache.max_len() < ctx {
        return Err(ModelError::InvalidArgument {
            arg: "ctx",
            msg: format!(
                "window {ctx} exceeds the cache's {} positions",
                cache.max_len()
            ),
        });
    }
    let vocab = model.config.vocab;
    let mut nll = Nll::default();
    for i in 0..n {
        let w = window(tokens, ctx, i, bos);
        cache.clear()?;
        let logits = model.forward(cache, &w, Logits::All)?;
        score_window(&logits, vocab, &w, &mut nll);
        progress(i + 1, n, &nll);
    }
    Ok(nll)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_follow_llama_cpp() {
        let mut s = Nll::default();
        for v in [1.0, 2.0, 3.0, 4.0] {
            s.add(v);
        }
        assert_eq!(s.mean(), 2.5);
        assert!((s.ppl() - 2.5f64.exp()).abs() < 1e-12);
        // var = 7.5 - 6.25 = 1.25; error = ppl * sqrt(1.25 / 3)
        assert!((s.ppl_error() - 2.5f64.exp() * (1.25f64 / 3.0).sqrt()).abs() < 1e-12);
        let mut one = Nll::default();
        one.add(0.7);
        assert_eq!(one.ppl_error(), 0.0);
    }

    #[test]
    fn token_nll_is_log_softmax() {
        // Uniform logits: -log(1/V).
        assert!((token_nll(&[3.0; 10], 4) - 10f64.ln()).abs() < 1e-12);
        let l = [1.0f32, 2.0, 0.5, 1000.0];
        let want = -((0.5f64).exp() / l[..3].iter().map(|&v| (v as f64).exp()).sum::<f64>()).ln();
        assert!((token_nll(&l[..3], 2) - want).abs() < 1e-12);
        assert!(token_nll(&l, 3) < 1e-12 && token_nll(&l, 0).is_finite());
    }

    #[test]
    fn windows_and_scored_positions() {
        assert!(windows(15, 8).is_err());
        assert!(windows(100, 2).is_err());
        assert_eq!(windows(17, 8).unwrap(), 2);
        let toks: Vec<u32> = (0..20).collect();
        assert_eq!(
            window(&toks, 8, 1, Some(99)),
            vec![99, 9, 10, 11, 12, 13, 14, 15]
        );
        assert_eq!(window(&toks, 8, 1, None)[0], 8);
        // Logits that put all mass on the true next token at even positions: the scored
        // positions are 4, 5, 6 (predicting tokens 5, 6, 7), so two of three are ~0.
        let vocab = 20;
        let w = window(&toks, 8, 0, None);
        let mut logits = vec![0.0f32; 8 * vocab];
        for j in 0..7 {
            if j % 2 == 0 {
                logits[j * vocab + w[j + 1] as usize] = 100.0;
            }
        }
        let mut s = Nll::default();
        score_window(&logits, vocab, &w, &mut s);
        assert_eq!(s.count, 3);
        let uniform = (vocab as f64).ln();
        assert!((s.sum - uniform).abs() < 1e-9, "{}", s.sum);
    }
}
