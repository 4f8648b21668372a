//! The llama-family forward pass, generic over the backend: every kernel goes through
//! `TensorOps` and `Backend::attention`, on buffers the backend owns. A step sends one upload
//! (token ids, positions, KV slots and page tables packed together) and brings back one
//! download (the logits). A step runs one or more sequences of the cache (`forward_batch`):
//! each a prompt chunk or a decode token, all through the same GEMVs and one ragged paged
//! attention call; `forward` is the one-sequence case.

use crate::buffers::{DecodeGraph, Scratch};
use crate::config::Config;
use crate::error::{ModelError, Result};
use crate::kv::KvCache;
use crate::prepared::{Prepared, PreparedLayer};
use crate::weights::Weights;
use flexkern::attention::paged::{paged_bufs, prepare_buffers};
use flexkern::attention::plan::{plan, Plan};
use flexkern::attention::problem::{KvLayout, Problem};
use flexkern::backend::tensor_ops::{Norm, Rope, RopeKv, TensorOps};
use flexkern::backend::{to_device, to_host, AttnIo, Buffer, Slice};
use flexkern::kv_cache::{PageTables, SeqId};
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
    /// The recorded decode step (`decode_graph.rs`).
    pub(crate) graph: std::sync::Mutex<Option<DecodeGraph<B::Buffer>>>,
}

/// One sequence's part of a batched step: the tokens it appends.
#[derive(Clone, Copy, Debug)]
pub struct SeqTokens<'t> {
    pub seq: SeqId,
    pub tokens: &'t [u32],
}

/// The packed step upload: where each array sits.
pub(crate) struct Step {
    pub(crate) m: usize,
    pub(crate) tokens: usize,
    pub(crate) positions: usize,
    pub(crate) slots: usize,
    pub(crate) tables: usize,
}

/// What every layer of one step reads besides its weights: the uploaded words and where each
/// array sits in them, the page tables, and the attention's problem and plan.
pub(crate) struct StepInputs<'s, Buf> {
    pub(crate) words: &'s Buf,
    pub(crate) st: &'s Step,
    pub(crate) tables: &'s PageTables,
    pub(crate) problem: &'s Problem,
    pub(crate) plan: &'s Plan<'s>,
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
            graph: Default::default(),
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

    /// A KV cache of `num_pages` pages shared by many sequences (`KvCache::add_seq`), each
    /// holding up to `max_len` positions (at most the context length), stored as `dtype`.
    pub fn new_shared_cache(
        &self,
        max_len: usize,
        num_pages: usize,
        dtype: DType,
    ) -> Result<KvCache<B>> {
        KvCache::with_pages(
            &self.backend,
            &self.config,
            max_len.min(self.config.context_length),
            num_pages,
            dtype,
        )
    }

    /// Runs `tokens` after the positions already in `cache` (its default sequence), appends
    /// their K/V, and returns logits (`[vocab]` for `Logits::Last`, `[tokens, vocab]` for
    /// `Logits::All`). The one-sequence case of `forward_batch`. On error the cache is left as
    /// it was.
    pub fn forward(
        &self,
        cache: &mut KvCache<B>,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Vec<f32>> {
        let seq = cache.default_seq();
        self.forward_batch(cache, &[SeqTokens { seq, tokens }], which)
    }

    /// As `forward` with `Logits::Last`, returning only the `k` largest logits (0: all) as
    /// `(token id, logit)`, largest first, equal logits by lower id (`sampler::largest`): on
    /// a device backend they are found there and only they come back (sampling on the device;
    /// `Sampler::sample_from` takes them). NaN logits are an error.
    pub fn forward_largest(
        &self,
        cache: &mut KvCache<B>,
        tokens: &[u32],
        k: usize,
    ) -> Result<Vec<(u32, f32)>> {
        let seq = cache.default_seq();
        let batch = [SeqTokens { seq, tokens }];
        match self.step(cache, &batch, Logits::Last, Readback::Largest(k))? {
            StepOut::Largest(c) => Ok(c),
            StepOut::Logits(l) => Ok(largest_checked(&l, k)?),
        }
    }

    /// One step over several sequences of `cache`: each contributes its new tokens (a prompt
    /// chunk or one decode token); all of them go through the batched GEMVs and one ragged
    /// paged attention call. Returns logits of each sequence's last token (`[seqs, vocab]`,
    /// batch order) for `Logits::Last`, of every token (`[tokens, vocab]`) for `Logits::All`.
    /// Every argument is checked before anything runs; on error (pool exhaustion included)
    /// every sequence is left as it was.
    pub fn forward_batch(
        &self,
        cache: &mut KvCache<B>,
        batch: &[SeqTokens<'_>],
        which: Logits,
    ) -> Result<Vec<f32>> {
        match self.step(cache, batch, which, Readback::Logits)? {
            StepOut::Logits(l) => Ok(l),
            StepOut::Largest(_) => Err(ModelError::InvalidArgument {
                arg: "which",
                msg: "a logits step returned candidates".into(),
            }),
        }
    }

    fn step(
        &self,
        cache: &mut KvCache<B>,
        batch: &[SeqTokens<'_>],
        which: Logits,
        rb: Readback,
    ) -> Result<StepOut> {
        let c = &self.config;
        if batch.is_empty() {
            return Err(ModelError::InvalidArgument {
                arg: "batch",
                msg: "no sequences to run".into(),
            });
        }
        let mut olds = Vec::with_capacity(batch.len());
        for (i, st) in batch.iter().enumerate() {
            if batch[..i].iter().any(|o| o.seq == st.seq) {
                return Err(ModelError::InvalidArgument {
                    arg: "batch",
                    msg: format!("sequence {} appears twice in one step", st.seq.0),
                });
            }
            if let Some(&id) = st.tokens.iter().find(|&&t| t as usize >= c.vocab) {
                return Err(ModelError::TokenOutOfRange { id, vocab: c.vocab });
            }
            let old = cache.seq_len(st.seq)?;
            let needed = old + st.tokens.len();
            if needed > cache.max_len() {
                return Err(ModelError::ContextFull {
                    needed,
                    max: cache.max_len(),
                });
            }
            if st.tokens.is_empty() {
                return Err(ModelError::InvalidArgument {
                    arg: "tokens",
                    msg: "no tokens to run".into(),
                });
            }
            if c.n_layer == 0 || old > u32::MAX as usize - st.tokens.len() {
                return Err(ModelError::InvalidArgument {
                    arg: "tokens",
                    msg: "positions overflow 32 bits".into(),
                });
            }
            olds.push((st.seq, old));
        }
        let sizes: Vec<_> = batch.iter().map(|s| (s.seq, s.tokens.len())).collect();
        let (writes, tables) = cache.begin(&sizes)?;
        let calibrating = cache.needs_scales();
        let r = (|| {
            // Copy-on-write of a shared partial page (a forked sequence), in every layer.
            for &(src, dst, n) in &writes.copies {
                for i in 0..self.config.n_layer {
                    cache.store_mut(i).copy_slots(&self.backend, src, dst, n)?;
                }
            }
            let slots = &writes.slots;
            match self.decode_graph_step(cache, batch, &olds, slots, &tables, rb)? {
                Some(out) => Ok(out),
                None => self.run(cache, batch, &olds, slots, &tables, (which, rb)),
            }
        })();
        match &r {
            Ok(_) if calibrating => cache.calibrated(),
            Ok(_) => {}
            Err(_) => cache.abort(&olds),
        }
        r
    }

    /// The step's one upload: `tokens ++ positions ++ slots ++ packed page tables`.
    pub(crate) fn step_words(
        batch: &[SeqTokens<'_>],
        olds: &[(SeqId, usize)],
        slots: &[u32],
        tables: &PageTables,
    ) -> (Vec<u32>, Step) {
        let m = slots.len();
        let mut words = Vec::with_capacity(3 * m + tables.offsets().len);
        for st in batch {
            words.extend_from_slice(st.tokens);
        }
        for (st, &(_, pos0)) in batch.iter().zip(olds) {
            words.extend((pos0..pos0 + st.tokens.len()).map(|p| p as u32));
        }
        words.extend_from_slice(slots);
        words.extend_from_slice(&tables.packed());
        let step = Step {
            m,
            tokens: 0,
            positions: m,
            slots: 2 * m,
            tables: 3 * m,
        };
        (words, step)
    }

    /// Activation buffers for `m` rows, with a 16-bit Q where the attention reads one
    /// (`attn_q_dtype`).
    pub(crate) fn scratch(&self, cache: &KvCache<B>, m: usize) -> Result<Scratch<B::Buffer>> {
        let (c, b) = (&self.config, &self.backend);
        let (d, qd, kvd) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim);
        let f32s = |n: usize| b.alloc(DType::F32, n);
        let qh = match self.attn_q_dtype(cache) {
            DType::F32 => None,
            t => Some(b.alloc(t, m * qd)?),
        };
        Ok(Scratch {
            x: f32s(m * d)?,
            h: f32s(m * d)?,
            q: f32s(m * qd)?,
            k: f32s(m * kvd)?,
            v: f32s(m * kvd)?,
            att: f32s(m * qd)?,
            proj: f32s(m * d)?,
            ff: f32s(m * c.n_ff)?,
            qh,
        })
    }

    /// The dtype the attention reads Q in: f32, except on a GPU at the default precision,
    /// where Q is rounded to the cache's 16-bit type (F16 for 8-bit caches) so that the
    /// attention runs on tensor cores (the default path already rounds activations). Decode
    /// too: at a few hundred keys the f32-Q kernel is bound by its own instruction stream
    /// (one warp per scheduler, ~2,900 instructions a warp at 160 keys), not by the cache.
    pub(crate) fn attn_q_dtype(&self, cache: &KvCache<B>) -> DType {
        if self.precision() != Precision::Default || !self.backend.caps().is_gpu() {
            return DType::F32;
        }
        match cache.store(0).layout.k_dtype {
            DType::BF16 => DType::BF16,
            DType::F32 => DType::F32,
            _ => DType::F16,
        }
    }

    /// The step's attention problem (every layer's: same layout and tables) and its plan.
    pub(crate) fn attn_problem(
        &self,
        cache: &KvCache<B>,
        batch: &[SeqTokens<'_>],
        tables: &PageTables,
    ) -> Result<(Problem, Plan<'static>)> {
        let layout = cache.store(0).layout.clone();
        let mut cu_q = Vec::with_capacity(batch.len() + 1);
        cu_q.push(0u64);
        for t in batch {
            cu_q.push(cu_q[cu_q.len() - 1] + t.tokens.len() as u64);
        }
        let p = prepare_buffers(
            self.attn_q_dtype(cache),
            self.config.n_head,
            &cu_q,
            &layout,
            tables,
            None,
            &self.causal,
        )?;
        let pl = plan(&p, &self.backend.caps(), None)?;
        Ok((p, pl))
    }

    fn run(
        &self,
        cache: &mut KvCache<B>,
        batch: &[SeqTokens<'_>],
        olds: &[(SeqId, usize)],
        slots: &[u32],
        tables: &PageTables,
        (which, rb): (Logits, Readback),
    ) -> Result<StepOut> {
        let b = &self.backend;
        let (words, st) = Self::step_words(batch, olds, slots, tables);
        let words = to_device(b, &words)?;
        let mut s = self.scratch(cache, st.m)?;
        let rows = match which {
            Logits::Last => batch.len(),
            Logits::All => st.m,
        };
        let mut logits = b.alloc(DType::F32, rows * self.config.vocab)?;
        let pp = self.attn_problem(cache, batch, tables)?;
        let inputs = StepInputs {
            words: &words,
            st: &st,
            tables,
            problem: &pp.0,
            plan: &pp.1,
        };
        self.queue_step(cache, &inputs, which, &mut s, &mut logits)?;
        self.read_out(&logits, rows, rb)
    }

    /// What the step brings back of its `rows` rows of logits: all of them, or one row's
    /// largest (found by the backend where it can).
    pub(crate) fn read_out(
        &self,
        logits: &B::Buffer,
        rows: usize,
        rb: Readback,
    ) -> Result<StepOut> {
        let vocab = self.config.vocab;
        if let (Readback::Largest(k), 1) = (rb, rows) {
            if let Some(c) = self.backend.largest(logits, vocab, k)? {
                return Ok(StepOut::Largest(c));
            }
        }
        let mut out = vec![0f32; rows * vocab];
        self.backend
            .download(logits, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(StepOut::Logits(out))
    }

    /// Queues the whole step (embedding, every layer, the output norm and projection) on the
    /// backend, from the uploaded `words` into `logits`; reads nothing back.
    pub(crate) fn queue_step(
        &self,
        cache: &mut KvCache<B>,
        inp: &StepInputs<'_, B::Buffer>,
        which: Logits,
        s: &mut Scratch<B::Buffer>,
        logits: &mut B::Buffer,
    ) -> Result<()> {
        let (c, b, w) = (&self.config, &self.backend, &self.prepared);
        let (m, d) = (inp.st.m, c.n_embd);
        b.embedding(&w.tok_embd, slice(inp.words, inp.st.tokens, m), &mut s.x)?;
        for (i, layer) in w.layers.iter().enumerate() {
            self.attention_block(i, layer, cache, inp, s)?;
            self.ffn_block(layer, m, s)?;
        }
        let rows = match which {
            Logits::Last => {
                // Each sequence's last row, gathered in batch order.
                let lens = &inp.problem.lens;
                for r in 0..lens.num_seqs() {
                    let end = lens.q_start(r) + lens.q_len(r);
                    b.copy(&s.x, (end - 1) * d, &mut s.h, r * d, d)?;
                }
                lens.num_seqs()
            }
            Logits::All => {
                b.copy(&s.x, 0, &mut s.h, 0, m * d)?;
                m
            }
        };
        let norm = Norm {
            weight: &w.output_norm,
            eps: c.rms_eps,
        };
        // One launch on a backend that normalizes inside the GEMV (CUDA decode).
        b.norm_matmul_many(norm, &[w.output()], &s.h, rows, &mut s.proj, &mut [logits])?;
        Ok(())
    }

    fn attention_block(
        &self,
        i: usize,
        l: &PreparedLayer<'a, B>,
        cache: &mut KvCache<B>,
        inp: &StepInputs<'_, B::Buffer>,
        s: &mut Scratch<B::Buffer>,
    ) -> Result<()> {
        let (c, b) = (&self.config, &self.backend);
        let (words, st, p) = (inp.words, inp.st, inp.problem);
        let m = st.m;
        let norm = Norm {
            weight: &l.attn_norm,
            eps: c.rms_eps,
        };
        // The attention's 16-bit Q, written by the RoPE launch (or converted after calibration).
        let half_q = s.qh.as_ref().is_some_and(|h| h.dtype() == p.q.dtype);
        let positions = slice(words, st.positions, m);
        let heads = (c.n_head, c.n_head_kv);
        let biased = l.bq.is_some() || l.bk.is_some() || l.bv.is_some();
        let at = |pages| RopeKv {
            heads,
            head_dim: c.head_dim,
            positions,
            rope: &self.rope,
            inv_freq: &self.inv_freq,
            pages,
            slots: slice(words, st.slots, m),
        };
        if !biased && !cache.needs_scales() {
            // Projection, RoPE and the KV append as one call (one launch on the CUDA decode step).
            b.norm_qkv_rope_kv_write(
                norm,
                [&l.wq, &l.wk, &l.wv],
                &s.x,
                m,
                &mut s.h,
                (&mut s.q, &mut s.k, &mut s.v),
                s.qh.as_mut().filter(|_| half_q),
                at(cache.store_mut(i).pages()),
            )?;
            return self.attend(i, l, cache, inp, s, half_q);
        }
        b.norm_matmul_many(
            norm,
            &[&l.wq, &l.wk, &l.wv],
            &s.x,
            m,
            &mut s.h,
            &mut [&mut s.q, &mut s.k, &mut s.v],
        )?;
        for (y, bias) in [(&mut s.q, &l.bq), (&mut s.k, &l.bk), (&mut s.v, &l.bv)] {
            if let Some(bias) = bias {
                b.add_bias(y, m, bias)?;
            }
        }
        if cache.needs_scales() {
            // Calibration reads the rotated K and V before anything is stored.
            b.rope(
                &mut s.q,
                heads.0,
                c.head_dim,
                positions,
                &self.rope,
                &self.inv_freq,
            )?;
            b.rope(
                &mut s.k,
                heads.1,
                c.head_dim,
                positions,
                &self.rope,
                &self.inv_freq,
            )?;
            let (k, v) = (to_host::<B, f32>(b, &s.k)?, to_host::<B, f32>(b, &s.v)?);
            let n = m * c.n_head_kv * c.head_dim;
            cache.calibrate(i, &k[..n], &v[..n])?;
            b.kv_write(
                cache.store_mut(i).pages(),
                slice(words, st.slots, m),
                &s.k,
                &s.v,
            )?;
        } else {
            b.rope_kv_write(
                &mut s.q,
                s.qh.as_mut().filter(|_| half_q),
                &mut s.k,
                &s.v,
                at(cache.store_mut(i).pages()),
            )?;
        }
        self.attend(i, l, cache, inp, s, half_q)
    }

    /// The attention over the layer's stored K / V (Q rotated, K and V appended), then wo with
    /// the residual add.
    fn attend(
        &self,
        i: usize,
        l: &PreparedLayer<'a, B>,
        cache: &mut KvCache<B>,
        inp: &StepInputs<'_, B::Buffer>,
        s: &mut Scratch<B::Buffer>,
        half_q: bool,
    ) -> Result<()> {
        let (c, b) = (&self.config, &self.backend);
        let (words, st, p, pl) = (inp.words, inp.st, inp.problem, inp.plan);
        let m = st.m;
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
        let q = match &mut s.qh {
            Some(qh) if half_q => {
                if cache.needs_scales() {
                    b.convert(&s.q, qh, m * c.n_head * c.head_dim)?;
                }
                &*qh
            }
            _ => &s.q,
        };
        let io = AttnIo {
            q,
            kv: paged_bufs(inp.tables, &store.k, &store.v, words, st.tables),
            out: &mut s.att,
            lse: None,
        };
        b.attention(p, pl, io)?;
        b.matmul_add(&l.wo, &s.att, m, &mut s.x, &mut s.proj)?;
        Ok(())
    }

    fn ffn_block(
        &self,
        l: &PreparedLayer<'a, B>,
        m: usize,
        s: &mut Scratch<B::Buffer>,
    ) -> Result<()> {
        let (c, b) = (&self.config, &self.backend);
        let norm = Norm {
            weight: &l.ffn_norm,
            eps: c.rms_eps,
        };
        b.norm_swiglu(norm, &l.gate, &l.up, &s.x, m, &mut s.h, &mut s.ff)?;
        b.matmul_add(&l.down, &s.ff, m, &mut s.x, &mut s.proj)?;
        Ok(())
    }
}

/// What a step brings back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readback {
    Logits,
    /// The `k` largest logits of the step's one row (0: all).
    Largest(usize),
}

pub(crate) enum StepOut {
    Logits(Vec<f32>),
    Largest(Vec<(u32, f32)>),
}

/// `sampler::largest` of host logits, refusing NaN as the device does.
fn largest_checked(l: &[f32], k: usize) -> Result<Vec<(u32, f32)>> {
    if l.iter().any(|x| x.is_nan()) {
        return Err(ModelError::InvalidArgument {
            arg: "logits",
            msg: "contain NaN".into(),
        });
    }
    Ok(crate::sampler::largest(l, k))
}

fn slice<Buf: Buffer>(buf: &Buf, start: usize, len: usize) -> Slice<'_, Buf> {
    Slice { buf, start, len }
}
