//! The model's KV cache: one flexkern paged KV cache per layer (the cache manager owns the
//! page pool and page table), holding one sequence.
//!
//! A forward step runs on a copy-on-write fork of the sequence and replaces it only when every
//! layer succeeded, so a failed step leaves the cache exactly as it was.

use crate::config::Config;
use crate::error::Result;
use flexkern::kv_cache::{CacheConfig, KvCache as PagedCache, PagedKv, SeqId};
use flexkern::{DType, TensorView};

/// Tokens per page.
const PAGE: usize = 16;

pub struct KvCache {
    layers: Vec<PagedCache>,
    /// The committed sequence, and the fork a step in progress writes.
    seq: SeqId,
    step: Option<SeqId>,
    len: usize,
    max_len: usize,
    kv_heads: usize,
}

impl KvCache {
    /// An empty f32 cache for `c` holding at most `max_len` positions.
    pub fn new(c: &Config, max_len: usize) -> Result<KvCache> {
        Self::with_dtype(c, max_len, DType::F32)
    }

    /// An empty cache storing K and V as `dtype` (f32, f16 or bf16: llama.cpp keeps f16).
    pub fn with_dtype(c: &Config, max_len: usize, dtype: DType) -> Result<KvCache> {
        // One spare page per layer for the copy-on-write of a shared partial last page.
        let pages = max_len.div_ceil(PAGE) + 1;
        let mut layers = flexkern::mem::try_with_capacity("block_count", c.n_layer)?;
        let mut seq = None;
        for _ in 0..c.n_layer {
            let mut cfg = CacheConfig::new(pages, PAGE, c.n_head_kv, c.head_dim);
            cfg.k_dtype = dtype;
            cfg.v_dtype = dtype;
            let mut l = PagedCache::new(cfg)?;
            seq = Some(l.add_seq());
            layers.push(l);
        }
        Ok(KvCache {
            layers,
            seq: seq.unwrap_or(SeqId(0)),
            step: None,
            len: 0,
            max_len,
            kv_heads: c.n_head_kv,
        })
    }

    /// Positions stored.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Drops every position.
    pub fn clear(&mut self) -> Result<()> {
        self.abort();
        let old = self.seq;
        for l in &mut self.layers {
            l.free(old)?;
            self.seq = l.add_seq();
        }
        self.len = 0;
        Ok(())
    }

    /// Starts a step: forks the sequence in every layer.
    pub(crate) fn begin(&mut self) -> Result<()> {
        self.abort();
        let mut fork = self.seq;
        for (i, l) in self.layers.iter_mut().enumerate() {
            match l.fork(self.seq) {
                Ok(f) => fork = f,
                Err(e) => {
                    for l in &mut self.layers[..i] {
                        let _ = l.free(fork);
                    }
                    return Err(e.into());
                }
            }
        }
        self.step = Some(fork);
        Ok(())
    }

    /// Appends `k`, `v` (`[m, kv_heads * head_dim]`) to `layer` of the step in progress and
    /// returns that layer's paged view of the whole sequence.
    pub(crate) fn append(&mut self, layer: usize, k: &[f32], v: &[f32]) -> Result<PagedKv<'_>> {
        let id = self.step.expect("append inside a step");
        let l = &mut self.layers[layer];
        let d = l.config().head_dim;
        let rows = k.len() / (self.kv_heads * d);
        let kt = TensorView::contiguous(k, &[rows, self.kv_heads, d]);
        let vt = TensorView::contiguous(v, &[rows, self.kv_heads, d]);
        l.append(id, &kt, &vt)?;
        Ok(l.view(&[id])?)
    }

    /// Makes the step's `m` positions part of the sequence.
    pub(crate) fn commit(&mut self, m: usize) {
        if let Some(step) = self.step.take() {
            for l in &mut self.layers {
                let _ = l.free(self.seq);
            }
            self.seq = step;
            self.len += m;
        }
    }

    /// Drops the step in progress, if any.
    pub(crate) fn abort(&mut self) {
        if let Some(step) = self.step.take() {
            for l in &mut self.layers {
                let _ = l.free(step);
            }
        }
    }
}
