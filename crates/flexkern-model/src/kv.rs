//! The model's KV cache: one host page table for the sequence (every layer stores the same
//! positions) and one backend page store per layer.
//!
//! A step appends its positions to the table, writes K/V into the reserved slots layer by
//! layer, and on any error truncates the table back: slots past the committed length are never
//! read, so a failed step leaves the cache exactly as it was.

use crate::config::Config;
use crate::error::Result;
use flexkern::backend::Backend;
use flexkern::kv_cache::{CacheConfig, PageStore, PageTable, PageTables, SeqId, Writes};
use flexkern::DType;

/// Tokens per page.
const PAGE: usize = 16;

pub struct KvCache<B: Backend> {
    table: PageTable,
    seq: SeqId,
    stores: Vec<PageStore<B::Buffer>>,
    max_len: usize,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache storing K and V as `dtype` (f32, f16 or bf16: llama.cpp keeps f16),
    /// holding at most `max_len` positions.
    pub fn new(backend: &B, c: &Config, max_len: usize, dtype: DType) -> Result<Self> {
        let mut cfg =
            CacheConfig::new(max_len.div_ceil(PAGE).max(1), PAGE, c.n_head_kv, c.head_dim);
        cfg.k_dtype = dtype;
        cfg.v_dtype = dtype;
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
        })
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

    /// Drops every position.
    pub fn clear(&mut self) -> Result<()> {
        self.table.truncate(self.seq, 0)?;
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
