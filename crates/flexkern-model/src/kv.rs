//! The per-sequence KV cache the forward pass writes: contiguous `[pos, kv_heads * head_dim]`
//! rows per layer, grown as tokens arrive (a 8k-context model does not reserve its whole
//! context up front).
//!
//! TODO(kv_cache): move to flexkern's paged KV cache manager and `paged_attention` once they land.

use crate::config::Config;

#[derive(Clone, Debug)]
pub struct KvCache {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    row: usize,
    len: usize,
    max_len: usize,
}

impl KvCache {
    /// An empty cache for `c` holding at most `max_len` positions.
    pub fn new(c: &Config, max_len: usize) -> KvCache {
        KvCache {
            k: vec![Vec::new(); c.n_layer],
            v: vec![Vec::new(); c.n_layer],
            row: c.n_head_kv * c.head_dim,
            len: 0,
            max_len,
        }
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

    /// Drops every position from `len` on (used to undo a failed step).
    pub fn truncate(&mut self, len: usize) {
        let len = len.min(self.len);
        for b in self.k.iter_mut().chain(self.v.iter_mut()) {
            b.truncate(len * self.row);
        }
        self.len = len;
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Appends `k`, `v` rows (`[m, row]`) for `layer`; positions after `len()`.
    pub(crate) fn append(&mut self, layer: usize, k: &[f32], v: &[f32]) {
        self.k[layer].extend_from_slice(k);
        self.v[layer].extend_from_slice(v);
    }

    /// K and V of `layer` (every stored position plus those appended this step).
    pub(crate) fn layer(&self, layer: usize) -> (&[f32], &[f32]) {
        (&self.k[layer], &self.v[layer])
    }

    /// Marks `m` appended positions as stored.
    pub(crate) fn commit(&mut self, m: usize) {
        self.len += m;
    }
}
