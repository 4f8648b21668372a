//! The llama-family forward pass, generic over the backend: every kernel goes through
//! `TensorOps` and `Backend::attention`, on buffers the backend owns. A step sends one upload
//! (token ids, positions, KV slots and page tables packed together) and brings back one
//! download (the logits). A call with many tokens is a batched prefill; one token, a decode
//! step.

use crate::config::Config;
use crate::error::{ModelError, Result};
use crate::kv::KvCache;
use crate::prepared::{Prepared, PreparedLayer};
use crate::weights::Weights;
use flexkern::attention::paged::{paged_bufs, prepare_buffers};
use flexkern::attention::plan::{plan, Plan};
use flexkern::attention::problem::{KvLayout, Problem};
use flexkern::backend::tensor_ops::{Rope, TensorOps};
use flexkern::backend::{to_device, to_host, AttnIo, Buffer, Slice};
use flexkern::kv_cache::PageTables;
use flexkern::{builtins, DType, Variant};
use flexkern_gguf::GgufFile;
use flexkern_quant::Precision;

/// Which positions get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token's (generation).
    Last,
    /// Every token's (tests, scoring).
    All,
}

pub struct Model<'a, B: TensorOps + 'a> {
    pub config: Config,
    /// The file's tensors (the f64 reference reads these).
    pub weights: Weights<'a>,
    prepared: Prepared<'a, B>,
    backend: B,
    rope: Rope,
    inv_freq: B::Buffer,
    causal: Variant,
}

/// Activation buffers of one forward call (`m` rows each).
struct Scratch<Buf> {
    x: Buf,
    h: Buf,
    q: Buf,
    k: Buf,
    v: Buf,
    att: Buf,
    proj: Buf,
    ff: Buf,
}

/// The packed step upload: where each array sits.
struct Step {
    m: usize,
    tokens: usize,
    positions: usize,
    slots: usize,
    tables: usize,
}

impl<'a, B: TensorOps + 'a> Model<'a, B> {
    /// Reads the configuration and the tensors of `f` and prepares them on `backend`;
    /// `progress(done, total)` reports loading.
    pub fn load(f: &'a GgufFile, backend: B, progress: impl FnMut(usize, usize)) -> Result<Self> {
        Self::load_with(f, backend, Precision::Default, progress)
    }

    /// As `load`, with every matrix product in `precision` (`Precise`: f32 activations and,
    /// through `new_cache_with`, only an f32 KV cache).
    pub fn load_with(
        f: &'a GgufFile,
        backend: B,
        precision: Precision,
        progress: impl FnMut(usize, usize),
    ) -> Result<Self> {
        let config = Config::from_gguf(f)?;
        let weights = Weights::load(f, &config, |_, _| {})?;
        Self::with_progress(config, weights, backend, precision, progress)
    }

    /// Fails when the weights' RoPE frequency factors do not fit the configuration.
    pub fn new(config: Config, weights: Weights<'a>, backend: B) -> Result<Self> {
        Self::new_with(config, weights, backend, Precision::Default)
    }

    /// As `new`, in `precision`.
    pub fn new_with(
        config: Config,
        weights: Weights<'a>,
        backend: B,
        precision: Precision,
    ) -> Result<Self> {
        Self::with_progress(config, weights, backend, precision, |_, _| {})
    }

    fn with_progress(
        config: Config,
        weights: Weights<'a>,
        backend: B,
        precision: Precision,
        progress: impl FnMut(usize, usize),
    ) -> Result<Self> {
        let mut rope = config.rope()?;
        if let Some(ff) = &weights.rope_freqs {
            rope = rope.with_freq_factors(ff)?;
        }
        let prepared = Prepared::new(&backend, &weights, precision, progress)?;
        let inv_freq = to_device(&backend, &rope.inv_freq)?;
        Ok(Model {
            config,
            weights,
            prepared,
            backend,
            rope,
            inv_freq,
            causal: Variant::full().mask(builtins::causal()),
        })
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn precision(&self) -> Precision {
        self.prepared.precision
    }

    /// An empty f32 KV cache holding up to `max_len` positions (at most the context length).
    pub fn new_cache(&self, max_len: usize) -> Result<KvCache<B>> {
        self.new_cache_with(max_len, DType::F32)
    }

    /// As `new_cache`, storing K and V as `dtype` (f32, f16 or bf16). A precise model keeps
    /// its cache in f32: any other `dtype` is an error.
    pub fn new_cache_with(&self, max_len: usize, dtype: DType) -> Result<KvCache<B>> {
        if self.precision() == Precision::Precise && dtype != DType::F32 {
            return Err(ModelError::InvalidArgument {
                arg: "dtype",
                msg: format!("a precise model keeps an f32 KV cache, not {dtype:?}"),
            });
        }
        KvCache::new(
            &self.backend,
            &self.config,
            max_len.min(self.config.context_length),
            dtype,
        )
    }

    /// Runs `tokens` after the positions already in `cache`, appends their K/V, and returns
    /// logits (`[vocab]` for `Logits::Last`, `[tokens, vocab]` for `Logits::All`). On error
    /// the cache is left as it was.
    pub fn forward(
        &self,
        cache: &mut KvCache<B>,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Vec<f32>> {
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
        let old = cache.len();
        let (writes, tables) = cache.begin(tokens.len())?;
        let calibrating = cache.needs_scales();
        let r = (|| {
            // Copy-on-write of a shared partial page (a forked sequence), in every layer.
            for &(src, dst, n) in &writes.copies {
                for i in 0..self.config.n_layer {
                    cache.store_mut(i).copy_slots(&self.backend, src, dst, n)?;
                }
            }
            self.run(cache, tokens, old, &writes.slots, &tables, which)
        })();
        match &r {
            Ok(_) if calibrating => cache.calibrated(),
            Ok(_) => {}
            Err(_) => cache.abort(old),
        }
        r
    }

    /// The step's one upload: `tokens ++ positions ++ slots ++ packed page tables`.
    fn upload_step(
        &self,
        tokens: &[u32],
        pos0: usize,
        slots: &[u32],
        tables: &PageTables,
    ) -> Result<(B::Buffer, Step)> {
        let m = tokens.len();
        let mut words = Vec::with_capacity(3 * m + tables.offsets().len);
        words.extend_from_slice(tokens);
        words.extend((pos0..pos0 + m).map(|p| p as u32));
        words.extend_from_slice(slots);
        words.extend_from_slice(&tables.packed());
        let step = Step {
            m,
            tokens: 0,
            positions: m,
            slots: 2 * m,
            tables: 3 * m,
        };
        Ok((to_device(&self.backend, &words)?, step))
    }

    fn run(
        &self,
        cache: &mut KvCache<B>,
        tokens: &[u32],
        pos0: usize,
        slots: &[u32],
        tables: &PageTables,
        which: Logits,
    ) -> Result<Vec<f32>> {
        let (c, b, w) = (&self.config, &self.backend, &self.prepared);
        let m = tokens.len();
        if c.n_layer == 0 || pos0 > u32::MAX as usize - m {
            return Err(ModelError::InvalidArgument {
                arg: "tokens",
                msg: "positions overflow 32 bits".into(),
            });
        }
        let (d, qd, kvd) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim);
        let (words, st) = self.upload_step(tokens, pos0, slots, tables)?;
        let f32s = |n: usize| b.alloc(DType::F32, n);
        let mut s = Scratch {
            x: f32s(m * d)?,
            h: f32s(m * d)?,
            q: f32s(m * qd)?,
            k: f32s(m * kvd)?,
            v: f32s(m * kvd)?,
            att: f32s(m * qd)?,
            proj: f32s(m * d)?,
            ff: f32s(m * c.n_ff)?,
        };
        b.embedding(&w.tok_embd, slice(&words, st.tokens, m), &mut s.x)?;
        // Every layer's cache has the same layout and tables: one problem, one plan per step.
        let layout = cache.store(0).layout.clone();
        let cu_q = [0, m as u64];
        let p = prepare_buffers(
            DType::F32,
            c.n_head,
            &cu_q,
            &layout,
            tables,
            None,
            &self.causal,
        )?;
        let pl = plan(&p, &b.caps(), None)?;
        for (i, layer) in w.layers.iter().enumerate() {
            self.attention_block(i, layer, cache, &words, &st, tables, (&p, &pl), &mut s)?;
            self.ffn_block(layer, m, &mut s)?;
        }
        let (rows, at) = match which {
            Logits::Last => (1, (m - 1) * d),
            Logits::All => (m, 0),
        };
        b.copy(&s.x, at, &mut s.h, 0, rows * d)?;
        b.rms_norm(&s.h, rows, &w.output_norm, c.rms_eps, &mut s.proj)?;
        let mut logits = f32s(rows * c.vocab)?;
        b.matmul(w.output(), &s.proj, rows, &mut logits)?;
        let mut out = vec![0f32; rows * c.vocab];
        b.download(&logits, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn attention_block(
        &self,
        i: usize,
        l: &PreparedLayer<'a, B>,
        cache: &mut KvCache<B>,
        words: &B::Buffer,
        st: &Step,
        tables: &PageTables,
        (p, pl): (&Problem, &Plan),
        s: &mut Scratch<B::Buffer>,
    ) -> Result<()> {
        let (c, b) = (&self.config, &self.backend);
        let m = st.m;
        b.rms_norm(&s.x, m, &l.attn_norm, c.rms_eps, &mut s.h)?;
        b.matmul_many(
            &[&l.wq, &l.wk, &l.wv],
            &s.h,
            m,
            &mut [&mut s.q, &mut s.k, &mut s.v],
        )?;
        for (y, bias) in [(&mut s.q, &l.bq), (&mut s.k, &l.bk), (&mut s.v, &l.bv)] {
            if let Some(bias) = bias {
                b.add_bias(y, m, bias)?;
            }
        }
        let positions = slice(words, st.positions, m);
        b.rope(
            &mut s.q,
            c.n_head,
            c.head_dim,
            positions,
            &self.rope,
            &self.inv_freq,
        )?;
        b.rope(
            &mut s.k,
            c.n_head_kv,
            c.head_dim,
            positions,
            &self.rope,
            &self.inv_freq,
        )?;
        if cache.needs_scales() {
            let (k, v) = (to_host::<B, f32>(b, &s.k)?, to_host::<B, f32>(b, &s.v)?);
            let n = m * c.n_head_kv * c.head_dim;
            cache.calibrate(i, &k[..n], &v[..n])?;
        }
        b.kv_write(
            cache.store_mut(i).pages(),
            slice(words, st.slots, m),
            &s.k,
            &s.v,
        )?;
        let store = cache.store(i);
        // Quantized caches carry each layer's own scales.
        let own;
        let p = match &p.kv {
            KvLayout::Paged(l) if *l != store.layout => {
                let mut q = p.clone();
                q.kv = KvLayout::Paged(store.layout.clone());
                own = q;
                &own
            }
            _ => p,
        };
        let io = AttnIo {
            q: &s.q,
            kv: paged_bufs(tables, &store.k, &store.v, words, st.tables),
            out: &mut s.att,
            lse: None,
        };
        b.attention(p, pl, io)?;
        b.matmul(&l.wo, &s.att, m, &mut s.proj)?;
        b.add(&mut s.x, &s.proj, m * c.n_embd)?;
        Ok(())
    }

    fn ffn_block(
        &self,
        l: &PreparedLayer<'a, B>,
        m: usize,
        s: &mut Scratch<B::Buffer>,
    ) -> Result<()> {
        let (c, b) = (&self.config, &self.backend);
        b.rms_norm(&s.x, m, &l.ffn_norm, c.rms_eps, &mut s.h)?;
        b.swiglu(&l.gate, &l.up, &s.h, m, &mut s.ff)?;
        b.matmul(&l.down, &s.ff, m, &mut s.proj)?;
        b.add(&mut s.x, &s.proj, m * c.n_embd)?;
        Ok(())
    }
}

fn slice<Buf: Buffer>(buf: &Buf, start: usize, len: usize) -> Slice<'_, Buf> {
    Slice { buf, start, len }
}
