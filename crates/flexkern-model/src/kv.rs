//! The model's KV cache: one host page table for every sequence (every layer stores the same
//! positions) and one backend page store per layer. `new` makes a cache of one sequence (the
//! default, used by `Model::forward`); `with_pages` a shared pool that sequences join
//! (`add_seq`) and leave (`free_seq`, its pages go back to the pool) for batched generation.
//!
//! A step appends its positions to the table, writes K/V into the reserved slots layer by
//! layer, and on any error truncates the table back: slots past the committed length are never
//! read, so a failed step leaves the cache exactly as it was.
//!
//! Quantized caches (fp8 e4m3, fp8 e5m2, int8) scale each kv head of each layer by a factor
//! fixed on the first step (the prompt's prefill): `HEADROOM` times the largest |K| (|V|) of
//! that head over the prompt, mapped to the format's largest code. Later values beyond it
//! saturate. That first step reads K and V back to the host once per layer; later steps move
//! nothing but the step's upload and the logits. With several sequences the first step is the
//! first batch, so the scales depend on which prompts it held.

use crate::config::Config;
use crate::error::{ModelError, Result};
use flexkern::backend::Backend;
use flexkern::kv_cache::quant::{is_quantized, max_code};
use flexkern::kv_cache::{CacheConfig, PageStore, PageTable, PageTables, Scales, SeqId, Writes};
use flexkern::DType;

/// Tokens per page.
const PAGE: usize = 16;

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Range kept above the prompt's largest |K| / |V| per head: fp8 keeps its relative precision
/// across the range, so 4x costs it nothing; int8 trades a bit of resolution for 2x.
fn headroom(dtype: DType) -> f32 {
    if dtype == DType::I8 {
        2.0
    } else {
        4.0
    }
}

pub struct KvCache<B: Backend> {
    table: PageTable,
    /// The sequence of the single-sequence API (`len`, `clear`, `Model::forward`).
    seq: SeqId,
    /// Every live sequence, the default one included.
    live: Vec<SeqId>,
    stores: Vec<PageStore<B::Buffer>>,
    max_len: usize,
    /// Quantized and not yet calibrated (nothing stored yet).
    uncalibrated: bool,
    /// Unique per cache: a recorded step graph names the pools of one cache.
    id: u64,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache storing K and V as `dtype` (f32, f16 or bf16: llama.cpp keeps f16; or
    /// fp8e4m3, fp8e5m2, int8, calibrated on the first step), holding at most `max_len`
    /// positions.
    pub fn new(backend: &B, c: &Config, max_len: usize, dtype: DType) -> Result<Self> {
        Self::with_pages(backend, c, max_len, Self::pages_for(max_len).max(1), dtype)
    }

    /// Pages that hold `positions` positions of one sequence.
    pub fn pages_for(positions: usize) -> usize {
        positions.div_ceil(PAGE)
    }

    /// As `new`, with a pool of `num_pages` pages shared by every sequence; each sequence
    /// holds at most `max_len` positions.
    pub fn with_pages(
        backend: &B,
        c: &Config,
        max_len: usize,
        num_pages: usize,
        dtype: DType,
    ) -> Result<Self> {
        let mut cfg = CacheConfig::new(num_pages, PAGE, c.n_head_kv, c.head_dim);
        cfg.k_dtype = dtype;
        cfg.v_dtype = dtype;
        let uncalibrated = is_quantized(dtype);
        if uncalibrated {
            // Placeholders until the first step sets each layer's own.
            cfg.k_scales = Some(Scales::PerTensor(1.0));
            cfg.v_scales = Some(Scales::PerTensor(1.0));
        }
        let mut table = PageTable::new(cfg.clone())?;
        let seq = table.add_seq();
        let mut stores = flexkern::mem::try_with_capacity("block_count", c.n_layer)?;
        for _ in 0..c.n_layer {
            stores.push(PageStore::new(backend, &cfg)?);
        }
        Ok(KvCache {
            table,
            seq,
            live: vec![seq],
            stores,
            max_len,
            uncalibrated,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// This cache's unique id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Whether the layers dequantize K/V with their own scales (a quantized cache: then each
    /// layer's attention problem differs, and a recorded step cannot share one plan across
    /// them). Float caches carry scales of 1.0 (`CacheConfig::layout` expands them), which
    /// made every cache count as scaled and kept the decode graph from ever running.
    pub(crate) fn scaled(&self) -> bool {
        self.stores
            .iter()
            .any(|s| is_quantized(s.layout.k_dtype) || is_quantized(s.layout.v_dtype))
    }

    /// Whether the next step must calibrate the scales (a quantized cache, nothing stored).
    pub(crate) fn needs_scales(&self) -> bool {
        self.uncalibrated
    }

    /// Sets layer `layer`'s per-head scales from the first step's K and V (`[m, Hkv, D]`).
    pub(crate) fn calibrate(&mut self, layer: usize, k: &[f32], v: &[f32]) -> Result<()> {
        let l = &mut self.stores[layer].layout;
        let (heads, d) = (l.num_kv_heads, l.head_dim);
        for (dtype, x, scales) in [
            (l.k_dtype, k, &mut l.k_scales),
            (l.v_dtype, v, &mut l.v_scales),
        ] {
            let (qmax, room) = (max_code(dtype).unwrap_or(1.0), headroom(dtype));
            for (h, s) in scales.iter_mut().enumerate() {
                let amax = x
                    .chunks_exact(d)
                    .skip(h)
                    .step_by(heads)
                    .flatten()
                    .filter(|v| v.is_finite())
                    .fold(0f32, |m, v| m.max(v.abs()));
                *s = if amax > 0.0 { room * amax / qmax } else { 1.0 };
            }
        }
        Ok(())
    }

    /// The first step stored its K/V: the scales stay.
    pub(crate) fn calibrated(&mut self) {
        self.uncalibrated = false;
    }

    /// Positions stored.
    pub fn len(&self) -> usize {
        self.table.len(self.seq).unwrap_or(0)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Drops every position of the default sequence (a quantized cache calibrates again on
    /// its next step when no sequence holds anything).
    pub fn clear(&mut self) -> Result<()> {
        self.table.truncate(self.seq, 0)?;
        self.recalibrate_if_empty();
        Ok(())
    }

    fn recalibrate_if_empty(&mut self) {
        let empty = self.live.iter().all(|&s| self.table.len(s) == Ok(0));
        let quantized = is_quantized(self.stores.first().map_or(DType::F32, |s| s.layout.k_dtype));
        if empty && quantized {
            self.uncalibrated = true;
        }
    }

    /// The sequence `Model::forward` runs.
    pub fn default_seq(&self) -> SeqId {
        self.seq
    }

    /// A new empty sequence (it takes pages only as it grows).
    pub fn add_seq(&mut self) -> SeqId {
        let id = self.table.add_seq();
        self.live.push(id);
        id
    }

    /// Ends sequence `id`: its pages go back to the pool and the id becomes invalid. The
    /// default sequence cannot be freed (`clear` empties it).
    pub fn free_seq(&mut self, id: SeqId) -> Result<()> {
        if id == self.seq {
            return Err(ModelError::InvalidArgument {
                arg: "seq",
                msg: "the default sequence is emptied by `clear`, not freed".into(),
            });
        }
        self.table.free(id)?;
        self.live.retain(|&s| s != id);
        self.recalibrate_if_empty();
        Ok(())
    }

    /// Positions stored in sequence `id`.
    pub fn seq_len(&self, id: SeqId) -> Result<usize> {
        Ok(self.table.len(id)?)
    }

    pub fn num_pages(&self) -> usize {
        self.table.config().num_pages
    }
    pub fn num_free_pages(&self) -> usize {
        self.table.num_free_pages()
    }

    /// Reserves `n` positions of each `(seq, n)` (batch order): the slots to write, in order,
    /// and the tables attention reads after them. On error (out of pages included) every
    /// sequence is left as it was.
    pub(crate) fn begin(&mut self, steps: &[(SeqId, usize)]) -> Result<(Writes, PageTables)> {
        let mut all = Writes::default();
        let mut done = Vec::with_capacity(steps.len());
        let r = (|| {
            for &(id, n) in steps {
                let old = self.table.len(id)?;
                let w = self.table.append(id, n)?;
                done.push((id, old));
                all.copies.extend(w.copies);
                all.slots.extend(w.slots);
            }
            let ids: Vec<SeqId> = steps.iter().map(|s| s.0).collect();
            self.table.tables(&ids)
        })();
        match r {
            Ok(t) => Ok((all, t)),
            Err(e) => {
                self.abort(&done);
                Err(e.into())
            }
        }
    }

    /// Undoes a step: each `(seq, len)` back to `len` positions.
    pub(crate) fn abort(&mut self, lens: &[(SeqId, usize)]) {
        for &(id, len) in lens {
            let _ = self.table.truncate(id, len);
        }
    }

    pub(crate) fn store_mut(&mut self, layer: usize) -> &mut PageStore<B::Buffer> {
        &mut self.stores[layer]
    }

    pub(crate) fn store(&self, layer: usize) -> &PageStore<B::Buffer> {
        &self.stores[layer]
    }
}
