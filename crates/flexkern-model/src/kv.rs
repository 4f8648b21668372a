//! The model's KV cache: one host page table for the sequence (every layer stores the same
//! positions) and one backend page store per layer.
//!
//! A step appends its positions to the table, writes K/V into the reserved slots layer by
//! layer, and on any error truncates the table back: slots past the committed length are never
//! read, so a failed step leaves the cache exactly as it was.
//!
//! Quantized caches (fp8 e4m3, fp8 e5m2, int8) scale each kv head of each layer by a factor
//! fixed on the first step (the prompt's prefill): `HEADROOM` times the largest |K| (|V|) of
//! that head over the prompt, mapped to the format's largest code. Later values beyond it
//! saturate. That first step reads K and V back to the host once per layer; later steps move
//! nothing but the step's upload and the logits.

use crate::config::Config;
use crate::error::Result;
use flexkern::backend::Backend;
use flexkern::kv_cache::quant::{is_quantized, max_code};
use flexkern::kv_cache::{CacheConfig, PageStore, PageTable, PageTables, Scales, SeqId, Writes};
use flexkern::DType;

/// Tokens per page.
const PAGE: usize = 16;

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
    seq: SeqId,
    stores: Vec<PageStore<B::Buffer>>,
    max_len: usize,
    /// Quantized and not yet calibrated (nothing stored yet).
    uncalibrated: bool,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache storing K and V as `dtype` (f32, f16 or bf16: llama.cpp keeps f16; or
    /// fp8e4m3, fp8e5m2, int8, calibrated on the first step), holding at most `max_len`
    /// positions.
    pub fn new(backend: &B, c: &Config, max_len: usize, dtype: DType) -> Result<Self> {
        let mut cfg =
            CacheConfig::new(max_len.div_ceil(PAGE).max(1), PAGE, c.n_head_kv, c.head_dim);
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
        let stores = (0..c.n_layer)
            .map(|_| PageStore::new(backend, &cfg))
            .collect::<flexkern::Result<Vec<_>>>()?;
        Ok(KvCache {
            table,
            seq,
            stores,
            max_len,
            uncalibrated,
        })
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

    /// Drops every position (a quantized cache calibrates again on its next step).
    pub fn clear(&mut self) -> Result<()> {
        self.table.truncate(self.seq, 0)?;
        self.uncalibrated =
            is_quantized(self.stores.first().map_or(DType::F32, |s| s.layout.k_dtype));
        Ok(())
    }

    /// Reserves `m` positions: the slots to write and the tables attention reads after them.
    pub(crate) fn begin(&mut self, m: usize) -> Result<(Writes, PageTables)> {
        let w = self.table.append(self.seq, m)?;
        match self.table.tables(&[self.seq]) {
            Ok(t) => Ok((w, t)),
            Err(e) => {
                self.abort(self.len() - m);
                Err(e.into())
            }
        }
    }

    /// Undoes a step: back to `len` positions.
    pub(crate) fn abort(&mut self, len: usize) {
        let _ = self.table.truncate(self.seq, len);
    }

    pub(crate) fn store_mut(&mut self, layer: usize) -> &mut PageStore<B::Buffer> {
        &mut self.stores[layer]
    }

    pub(crate) fn store(&self, layer: usize) -> &PageStore<B::Buffer> {
        &self.stores[layer]
    }
}
