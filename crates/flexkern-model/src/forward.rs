//! The llama-family forward pass, generic over the backend: every kernel goes through
//! `TensorOps` (and attention through `TensorOps::causal_attention`). A call with many tokens is
//! a batched prefill; a call with one token is a decode step.

use crate::config::Config;
use crate::error::{ModelError, Result};
use crate::kv::KvCache;
use crate::weights::{Layer, Weights};
use flexkern::attention::paged::paged_attention;
use flexkern::backend::tensor_ops::{Rope, TensorOps};
use flexkern::{builtins, Backend, TensorView, Variant};
use flexkern_gguf::GgufFile;

/// Which positions get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token's (generation).
    Last,
    /// Every token's (tests, scoring).
    All,
}

pub struct Model<'a, B> {
    pub config: Config,
    pub weights: Weights<'a>,
    backend: B,
    rope: Rope,
    causal: Variant,
}

/// Scratch buffers of one forward call.
struct Scratch {
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    proj: Vec<f32>,
    ff: Vec<f32>,
}

impl<'a, B: Backend + TensorOps> Model<'a, B> {
    /// Reads the configuration and wraps every tensor of `f`; `progress(done, total)` reports
    /// loading.
    pub fn load(f: &'a GgufFile, backend: B, progress: impl FnMut(usize, usize)) -> Result<Self> {
        let config = Config::from_gguf(f)?;
        let weights = Weights::load(f, &config, progress)?;
        Self::new(config, weights, backend)
    }

    /// Fails when the weights' RoPE frequency factors do not fit the configuration.
    pub fn new(config: Config, weights: Weights<'a>, backend: B) -> Result<Self> {
        let mut rope = config.rope()?;
        if let Some(ff) = &weights.rope_freqs {
            rope = rope.with_freq_factors(ff)?;
        }
        Ok(Model {
            config,
            weights,
            backend,
            rope,
            causal: Variant::full().mask(builtins::causal()),
        })
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// An empty KV cache holding up to `max_len` positions (at most the context length).
    pub fn new_cache(&self, max_len: usize) -> Result<KvCache> {
        KvCache::new(&self.config, max_len.min(self.config.context_length))
    }

    /// As `new_cache`, storing K and V as `dtype` (f32, f16 or bf16).
    pub fn new_cache_with(&self, max_len: usize, dtype: flexkern::DType) -> Result<KvCache> {
        KvCache::with_dtype(&self.config, max_len.min(self.config.context_length), dtype)
    }

    /// Runs `tokens` after the positions already in `cache`, appends their K/V, and returns
    /// logits (`[vocab]` for `Logits::Last`, `[tokens, vocab]` for `Logits::All`). On error
    /// the cache is left as it was.
    pub fn forward(&self, cache: &mut KvCache, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        let c = &self.config;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(ModelError::TokenOutOfRange { id, vocab: c.vocab });
        }
        let needed = cache.len() + tokens.len();
        if needed > cache.max_len() {
            return Err(ModelError::ContextFull {
                needed,
                max: cache.max_len(),
            });
        }
        if tokens.is_empty() {
            return Err(ModelError::InvalidArgument {
                arg: "tokens",
                msg: "no tokens to run".into(),
            });
        }
        cache.begin()?;
        let r = self.run(cache, tokens, which);
        match r {
            Ok(_) => cache.commit(tokens.len()),
            Err(_) => cache.abort(),
        }
        r
    }

    fn run(&self, cache: &mut KvCache, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        let (c, b, w) = (&self.config, &self.backend, &self.weights);
        let m = tokens.len();
        let (d, qd, kvd) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim);
        let positions: Vec<usize> = (cache.len()..cache.len() + m).collect();
        let mut x = vec![0.0f32; m * d];
        b.embedding(&w.tok_embd, tokens, &mut x)?;
        let mut s = Scratch {
            h: vec![0.0; m * d],
            q: vec![0.0; m * qd],
            k: vec![0.0; m * kvd],
            v: vec![0.0; m * kvd],
            att: vec![0.0; m * qd],
            proj: vec![0.0; m * d],
            ff: vec![0.0; m * c.n_ff],
        };
        for (i, layer) in w.layers.iter().enumerate() {
            self.attention_block(i, layer, cache, &positions, &mut x, &mut s)?;
            self.ffn_block(layer, &mut x, &mut s)?;
        }
        let rows = match which {
            Logits::Last => &x[(m - 1) * d..],
            Logits::All => &x[..],
        };
        let n = rows.len() / d;
        let mut h = vec![0.0f32; rows.len()];
        b.rms_norm(rows, &w.output_norm, c.rms_eps, &mut h)?;
        let mut logits = vec![0.0f32; n * c.vocab];
        b.matmul(&w.output, &h, n, &mut logits)?;
        Ok(logits)
    }

    fn attention_block(
        &self,
        i: usize,
        l: &Layer,
        cache: &mut KvCache,
        positions: &[usize],
        x: &mut [f32],
        s: &mut Scratch,
    ) -> Result<()> {
        let (c, b) = (&self.config, &self.backend);
        let m = positions.len();
        b.rms_norm(x, &l.attn_norm, c.rms_eps, &mut s.h)?;
        b.matmul_many(
            &[&l.wq, &l.wk, &l.wv],
            &s.h,
            m,
            &mut [&mut s.q, &mut s.k, &mut s.v],
        )?;
        for (y, bias) in [(&mut s.q, &l.bq), (&mut s.k, &l.bk), (&mut s.v, &l.bv)] {
            if let Some(bias) = bias {
                b.add_bias(y, bias)?;
            }
        }
        b.rope(&mut s.q, c.n_head, c.head_dim, positions, &self.rope)?;
        b.rope(&mut s.k, c.n_head_kv, c.head_dim, positions, &self.rope)?;
        let kv = cache.append(i, &s.k, &s.v)?;
        let q = TensorView::contiguous(&s.q[..], &[m, c.n_head, c.head_dim]);
        let cu_q = [0, m as u64];
        paged_attention(
            b,
            &q,
            &cu_q,
            &kv,
            None,
            &self.causal,
            None,
            &mut s.att,
            None,
        )?;
        b.matmul(&l.wo, &s.att, m, &mut s.proj)?;
        b.add(x, &s.proj)?;
        Ok(())
    }

    fn ffn_block(&self, l: &Layer, x: &mut [f32], s: &mut Scratch) -> Result<()> {
        let (c, b) = (&self.config, &self.backend);
        let m = x.len() / c.n_embd;
        b.rms_norm(x, &l.ffn_norm, c.rms_eps, &mut s.h)?;
        b.swiglu(&l.gate, &l.up, &s.h, m, &mut s.ff)?;
        b.matmul(&l.down, &s.ff, m, &mut s.proj)?;
        b.add(x, &s.proj)?;
        Ok(())
    }
}
