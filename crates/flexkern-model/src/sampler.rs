//! Token sampling: greedy, or temperature then top-k then top-p over a softmax, with a seeded
//! RNG so runs are reproducible.

use crate::error::{ModelError, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// 0 (or less) is greedy.
    pub temperature: f32,
    /// 0 keeps every token.
    pub top_k: usize,
    /// 1 keeps every token.
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            seed: 0,
        }
    }
}

pub struct Sampler {
    cfg: SamplerConfig,
    rng: StdRng,
}

/// Index of the largest logit (the first one on ties, as llama.cpp's greedy sampler).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        if x > logits[best] {
            best = i;
        }
    }
    best
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Result<Sampler> {
        if !cfg.temperature.is_finite() {
            return Err(bad("temperature", "must be finite"));
        }
        if !(cfg.top_p > 0.0 && cfg.top_p <= 1.0) {
            return Err(bad("top_p", "must be in (0, 1]"));
        }
        let rng = StdRng::seed_from_u64(cfg.seed);
        Ok(Sampler { cfg, rng })
    }

    /// How many of the largest logits `sample_from` needs (0: every one): 1 for greedy,
    /// `top_k` otherwise. A device backend finds them where the logits are, and only they
    /// come back.
    pub fn candidates(&self) -> usize {
        if self.cfg.temperature <= 0.0 {
            1
        } else {
            self.cfg.top_k
        }
    }

    /// Picks the next token from `logits`.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        if logits.is_empty() {
            return Err(bad("logits", "empty"));
        }
        if logits.iter().any(|x| x.is_nan()) {
            return Err(bad("logits", "contain NaN"));
        }
        let cand = largest(logits, self.candidates());
        self.sample_from(&cand)
    }

    /// Picks the next token from `cand`: `(id, logit)` of the `candidates()` largest logits
    /// (or all of them), largest first, equal logits by lower id, as `largest` orders them.
    pub fn sample_from(&mut self, cand: &[(u32, f32)]) -> Result<u32> {
        let Some(&(best, _)) = cand.first() else {
            return Err(bad("logits", "empty"));
        };
        if cand.iter().any(|c| c.1.is_nan()) {
            return Err(bad("logits", "contain NaN"));
        }
        if self.cfg.temperature <= 0.0 {
            return Ok(best);
        }
        let keep = match self.cfg.top_k {
            0 => cand.len(),
            k => k.min(cand.len()),
        };
        let mut cand: Vec<(u32, f32)> = cand[..keep]
            .iter()
            .map(|&(i, x)| (i, x / self.cfg.temperature))
            .collect();
        let max = cand[0].1;
        let mut sum = 0.0f64;
        for c in cand.iter_mut() {
            c.1 = (c.1 - max).exp();
            sum += c.1 as f64;
        }
        // Keep the smallest prefix whose mass reaches top_p (at least one token).
        let mut acc = 0.0f64;
        let mut keep = cand.len();
        for (i, c) in cand.iter().enumerate() {
            acc += c.1 as f64 / sum;
            if acc >= self.cfg.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
        cand.truncate(keep);
        let total: f64 = cand.iter().map(|c| c.1 as f64).sum();
        let mut r = self.rng.gen::<f64>() * total;
        for c in &cand {
            r -= c.1 as f64;
            if r <= 0.0 {
                return Ok(c.0);
            }
        }
        Ok(cand[cand.len() - 1].0)
    }
}

/// The `k` largest of `logits` (every one for 0) as `(id, logit)`, largest first, equal logits
/// (-0 equal to +0) by lower id: greedy's pick is the first maximum. No NaN (callers check).
pub fn largest(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let order = |a: &(u32, f32), b: &(u32, f32)| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.cmp(&b.0))
    };
    let mut c: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &x)| (i as u32, x))
        .collect();
    let k = if k == 0 { c.len() } else { k.min(c.len()) };
    if k > 0 && k < c.len() {
        c.select_nth_unstable_by(k - 1, order);
        c.truncate(k);
    }
    c.sort_unstable_by(order);
    c
}

fn bad(arg: &'static str, msg: &str) -> ModelError {
    ModelError::InvalidArgument {
        arg,
        msg: msg.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_max_and_sampling_is_seeded() {
        let logits = [0.1, 2.0, -1.0, 1.9];
        let mut g = Sampler::new(SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(g.sample(&logits).unwrap(), 1);
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
            seed: 7,
        };
        let run = |cfg: &SamplerConfig| {
            let mut s = Sampler::new(cfg.clone()).unwrap();
            (0..50)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        let a = run(&cfg);
        assert_eq!(a, run(&cfg));
        assert!(
            a.iter().all(|&t| t == 1 || t == 3),
            "top-k 2 keeps tokens 1 and 3"
        );
        let p = SamplerConfig { top_p: 0.01, ..cfg };
        assert!(
            run(&p).iter().all(|&t| t == 1),
            "tiny top-p keeps only the best"
        );
    }

    #[test]
    fn bad_arguments_are_typed_errors() {
        assert!(Sampler::new(SamplerConfig {
            top_p: 0.0,
            ..Default::default()
        })
        .is_err());
        assert!(Sampler::new(SamplerConfig {
            temperature: f32::NAN,
            ..Default::default()
        })
        .is_err());
        let mut s = Sampler::new(SamplerConfig::default()).unwrap();
        assert!(s.sample(&[]).is_err());
        assert!(s.sample(&[f32::NAN, 1.0]).is_err());
        assert!(s.sample_from(&[]).is_err());
        assert!(s.sample_from(&[(3, f32::NAN)]).is_err());
    }

    #[test]
    fn largest_orders_by_logit_then_id_and_sampling_from_them_matches() {
        let logits = [0.5, 2.0, -0.0, 2.0, 0.0, -1.0, 0.5];
        assert_eq!(
            largest(&logits, 4),
            vec![(1, 2.0), (3, 2.0), (0, 0.5), (6, 0.5)]
        );
        assert_eq!(largest(&logits, 0).len(), logits.len());
        // -0 and +0 tie: the lower id first.
        assert_eq!(largest(&logits, 6)[4], (2, -0.0));
        assert_eq!(argmax(&logits), largest(&logits, 1)[0].0 as usize);
        // Sampling from the candidates a device would return draws what sampling from the
        // whole vector draws, for the same seed.
        for (t, k, p) in [(0.0, 40, 1.0), (0.8, 3, 0.95), (1.3, 5, 0.5), (1.0, 0, 1.0)] {
            let cfg = SamplerConfig {
                temperature: t,
                top_k: k,
                top_p: p,
                seed: 11,
            };
            let (mut a, mut b) = (
                Sampler::new(cfg.clone()).unwrap(),
                Sampler::new(cfg).unwrap(),
            );
            for _ in 0..40 {
                let cand = largest(&logits, b.candidates());
                assert_eq!(a.sample(&logits).unwrap(), b.sample_from(&cand).unwrap());
            }
        }
    }
}
