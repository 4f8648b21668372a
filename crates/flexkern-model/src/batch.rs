//! Continuous batching: a queue of prompts, up to `parallel` of them active at once. Each step
//! is one `Model::forward_batch` over the active sequences: a prompt chunk (at most `chunk`
//! tokens, so a long prompt does not stall the others' decode tokens) or the last sampled
//! token of each. A sequence that finishes frees its pages, and the next prompt joins at the
//! next step.
//!
//! A prompt joins only when the pool has free pages, not promised to the active sequences, for
//! all it can grow to (prompt plus `max_new`, at most the cache's `max_len`), so a running step
//! never runs out of pages. Each prompt has
//! its own sampler seeded with `seed + prompt index`, and its chunks do not depend on the
//! other prompts, so what a prompt generates does not depend on `parallel`.

use crate::error::{ModelError, Result};
use crate::forward::{Logits, Model, SeqTokens};
use crate::generate::Flow;
use crate::kv::KvCache;
use crate::sampler::{Sampler, SamplerConfig};
use flexkern::backend::tensor_ops::TensorOps;
use flexkern::kv_cache::SeqId;
use std::collections::VecDeque;
use std::time::Instant;

/// Scheduling of a batched generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchConfig {
    /// Sequences active at once (at least 1).
    pub parallel: usize,
    /// Most prompt tokens one sequence feeds in one step (at least 1).
    pub chunk: usize,
    /// Tokens to generate per prompt.
    pub max_new: usize,
}

impl BatchConfig {
    pub fn new(parallel: usize, max_new: usize) -> BatchConfig {
        BatchConfig {
            parallel,
            chunk: 512,
            max_new,
        }
    }
}

/// Why a sequence left the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The callback returned `Flow::Stop` (end of generation token).
    Stopped,
    /// `max_new` tokens generated.
    Length,
    /// The sequence reached the cache's `max_len` positions.
    ContextFull,
}

/// What one prompt generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqOutput {
    pub tokens: Vec<u32>,
    pub finish: Finish,
}

/// Token counts and wall time of a batched generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchStats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub steps: usize,
    /// Most sequences active in one step.
    pub max_active: usize,
    pub secs: f64,
}

impl BatchStats {
    /// Generated tokens per second over the whole run (prompt processing included).
    pub fn gen_tok_s(&self) -> f64 {
        self.generated_tokens as f64 / self.secs.max(1e-9)
    }
    /// Prompt and generated tokens per second.
    pub fn total_tok_s(&self) -> f64 {
        (self.prompt_tokens + self.generated_tokens) as f64 / self.secs.max(1e-9)
    }
}

/// A prompt in the batch.
struct Active {
    idx: usize,
    seq: SeqId,
    /// Prompt tokens already run.
    fed: usize,
    /// The last sampled token, run at the next step.
    next: u32,
    out: Vec<u32>,
    sampler: Sampler,
    /// Pages promised to this sequence: all it can grow to.
    pages: usize,
}

/// Generates up to `cfg.max_new` tokens for each of `prompts` over the shared `cache` (see
/// `Model::new_shared_cache`), calling `on_token(prompt index, token)` with each token as it
/// is sampled; `Flow::Stop` ends that prompt. Returns each prompt's tokens in prompt order.
/// Every prompt is checked before anything runs; a prompt that needs more pages than the
/// whole pool is `OutOfPages`.
pub fn generate_batch<B: TensorOps>(
    model: &Model<'_, B>,
    cache: &mut KvCache<B>,
    prompts: &[Vec<u32>],
    cfg: BatchConfig,
    sampling: &SamplerConfig,
    mut on_token: impl FnMut(usize, u32) -> Flow,
) -> Result<(Vec<SeqOutput>, BatchStats)> {
    check(model, cache, prompts, cfg)?;
    let mut samplers = Vec::with_capacity(prompts.len());
    for i in 0..prompts.len() {
        let seed = sampling.seed.wrapping_add(i as u64);
        samplers.push(Some(Sampler::new(SamplerConfig {
            seed,
            ..sampling.clone()
        })?));
    }
    let mut stats = BatchStats {
        prompt_tokens: prompts.iter().map(Vec::len).sum(),
        ..BatchStats::default()
    };
    let mut outputs: Vec<Option<SeqOutput>> = vec![None; prompts.len()];
    if cfg.max_new == 0 {
        let empty = SeqOutput {
            tokens: Vec::new(),
            finish: Finish::Length,
        };
        return Ok((vec![empty; prompts.len()], BatchStats::default()));
    }
    let t0 = Instant::now();
    let mut queue: VecDeque<usize> = (0..prompts.len()).collect();
    let mut active: Vec<Active> = Vec::with_capacity(cfg.parallel);
    let r = (|| {
        while !queue.is_empty() || !active.is_empty() {
            // Join in prompt order while a slot and the pages are free.
            while let Some(&idx) = queue.front() {
                let pages = pages_needed(cache, prompts[idx].len(), cfg.max_new);
                // Free pages not already promised to an active sequence.
                let mut promised = 0;
                for a in &active {
                    let held = KvCache::<B>::pages_for(cache.seq_len(a.seq)?);
                    promised += a.pages.saturating_sub(held);
                }
                let free = cache.num_free_pages().saturating_sub(promised);
                if active.len() >= cfg.parallel || pages > free {
                    if active.is_empty() {
                        // Nothing will leave to make room (other sequences hold the pages).
                        return Err(flexkern::Error::OutOfPages {
                            needed: pages,
                            free,
                        }
                        .into());
                    }
                    break;
                }
                queue.pop_front();
                active.push(Active {
                    idx,
                    seq: cache.add_seq(),
                    fed: 0,
                    next: 0,
                    out: Vec::new(),
                    sampler: samplers[idx].take().expect("each prompt joins once"),
                    pages,
                });
            }
            stats.max_active = stats.max_active.max(active.len());
            let feeds: Vec<&[u32]> = active
                .iter()
                .map(|a| {
                    let p = &prompts[a.idx];
                    if a.fed < p.len() {
                        &p[a.fed..(a.fed + cfg.chunk).min(p.len())]
                    } else {
                        std::slice::from_ref(&a.next)
                    }
                })
                .collect();
            let batch: Vec<SeqTokens> = active
                .iter()
                .zip(&feeds)
                .map(|(a, &tokens)| SeqTokens { seq: a.seq, tokens })
                .collect();
            let logits = model.forward_batch(cache, &batch, Logits::Last)?;
            stats.steps += 1;
            let vocab = model.config.vocab;
            let fed: Vec<usize> = feeds.iter().map(|f| f.len()).collect();
            let mut left = Vec::new();
            for (r, (a, n)) in active.iter_mut().zip(fed).enumerate() {
                let plen = prompts[a.idx].len();
                if a.fed < plen {
                    a.fed += n;
                    if a.fed < plen {
                        continue;
                    }
                }
                let t = a.sampler.sample(&logits[r * vocab..(r + 1) * vocab])?;
                a.out.push(t);
                stats.generated_tokens += 1;
                let finish = if on_token(a.idx, t) == Flow::Stop {
                    Some(Finish::Stopped)
                } else if a.out.len() >= cfg.max_new {
                    Some(Finish::Length)
                } else if cache.seq_len(a.seq)? >= cache.max_len() {
                    Some(Finish::ContextFull)
                } else {
                    None
                };
                match finish {
                    Some(f) => left.push((r, f)),
                    None => a.next = t,
                }
            }
            // Leave in reverse so the indices stay valid; the batch keeps its order.
            for &(r, finish) in left.iter().rev() {
                let a = active.remove(r);
                cache.free_seq(a.seq)?;
                outputs[a.idx] = Some(SeqOutput {
                    tokens: a.out,
                    finish,
                });
            }
        }
        Ok::<_, ModelError>(())
    })();
    // On error the sequences still active give their pages back.
    for a in &active {
        let _ = cache.free_seq(a.seq);
    }
    r?;
    stats.secs = t0.elapsed().as_secs_f64();
    let outputs = outputs
        .into_iter()
        .map(|o| o.expect("every prompt ran"))
        .collect();
    Ok((outputs, stats))
}

/// Pages for all a prompt of `len` tokens can grow to: the prompt, then every generated token
/// but the last (it is sampled, never run).
fn pages_needed<B: TensorOps>(cache: &KvCache<B>, len: usize, max_new: usize) -> usize {
    let positions = (len + max_new.saturating_sub(1)).min(cache.max_len());
    KvCache::<B>::pages_for(positions)
}

/// Typed errors before any work: bad configuration, an empty or too long prompt, a token
/// out of range, a prompt the whole pool cannot hold.
fn check<B: TensorOps>(
    model: &Model<'_, B>,
    cache: &KvCache<B>,
    prompts: &[Vec<u32>],
    cfg: BatchConfig,
) -> Result<()> {
    let bad = |arg, msg: String| Err(ModelError::InvalidArgument { arg, msg });
    if cfg.parallel == 0 {
        return bad("parallel", "must be at least 1".into());
    }
    if cfg.chunk == 0 {
        return bad("chunk", "must be at least 1".into());
    }
    let vocab = model.config.vocab;
    for (i, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            return bad("prompts", format!("prompt {i} has no tokens"));
        }
        if let Some(&id) = p.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::TokenOutOfRange { id, vocab });
        }
        if p.len() > cache.max_len() {
            return Err(ModelError::ContextFull {
                needed: p.len(),
                max: cache.max_len(),
            });
        }
        let needed = pages_needed(cache, p.len(), cfg.max_new);
        if needed > cache.num_pages() {
            return Err(flexkern::Error::OutOfPages {
                needed,
                free: cache.num_pages(),
            }
            .into());
        }
    }
    Ok(())
}
