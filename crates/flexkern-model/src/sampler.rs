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

    /// Picks the next token from `logits`.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        if logits.is_empty() {
            return Err(bad("logits", "empty"));
        }
        if logits.iter().any(|x| x.is_nan()) {
            return Err(bad("logits", "contain NaN"));
        }
        if self.cfg.temperature <= 0.0 {
            return Ok(argmax(logits) as u32);
        }
        let mut cand: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &x)| (i as u32, x / self.cfg.temperature))
            .collect();
        cand.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        if self.cfg.top_k > 0 {
            cand.truncate(self.cfg.top_k);
        }
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
    }
}
