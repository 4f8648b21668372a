//! The generation loop: one batched prefill over the prompt, then one decode step per token,
//! handing each new token to a callback as soon as it is sampled.

use crate::error::Result;
use crate::forward::Model;
use crate::kv::KvCache;
use crate::sampler::Sampler;
use flexkern::backend::tensor_ops::TensorOps;
use std::time::Instant;

/// Token counts and wall times of one generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenStats {
    pub prefill_tokens: usize,
    pub prefill_secs: f64,
    pub decode_tokens: usize,
    pub decode_secs: f64,
}

impl GenStats {
    pub fn prefill_tok_s(&self) -> f64 {
        self.prefill_tokens as f64 / self.prefill_secs.max(1e-9)
    }
    pub fn decode_tok_s(&self) -> f64 {
        self.decode_tokens as f64 / self.decode_secs.max(1e-9)
    }
}

/// What the callback wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Runs `prompt` after what `cache` holds, then samples up to `max_new` tokens, calling
/// `on_token` with each (generation stops when it returns `Flow::Stop` or the context is
/// full). Returns the generated tokens and timings. Decode time counts the forward steps that
/// produced the generated tokens after the first (the first comes from the prefill's logits).
pub fn generate<B: TensorOps>(
    model: &Model<'_, B>,
    cache: &mut KvCache<B>,
    prompt: &[u32],
    max_new: usize,
    sampler: &mut Sampler,
    mut on_token: impl FnMut(u32) -> Flow,
) -> Result<(Vec<u32>, GenStats)> {
    let mut stats = GenStats::default();
    let mut out = Vec::new();
    if max_new == 0 {
        return Ok((out, stats));
    }
    let t0 = Instant::now();
    // Only the sampler's candidates come back (on a GPU: found there, not the whole vocab).
    let k = sampler.candidates();
    let cand = model.forward_largest(cache, prompt, k)?;
    stats.prefill_secs = t0.elapsed().as_secs_f64();
    stats.prefill_tokens = prompt.len();
    let mut next = sampler.sample_from(&cand)?;
    let t1 = Instant::now();
    loop {
        out.push(next);
        if on_token(next) == Flow::Stop || out.len() >= max_new || cache.len() >= cache.max_len() {
            break;
        }
        let cand = model.forward_largest(cache, &[next], k)?;
        stats.decode_tokens += 1;
        next = sampler.sample_from(&cand)?;
    }
    stats.decode_secs = t1.elapsed().as_secs_f64();
    Ok((out, stats))
}
