//! Per-sequence page tables over a shared pool: append (vLLM's reshape_and_cache), fork with
//! shared prefix pages and copy-on-write of a shared partial page, free, and sliding-window
//! eviction at page granularity. Every mutation validates and counts pages before it changes
//! anything, so an error (out of pages included) leaves every sequence as it was.

use super::paged::PagedKv;
use super::pool::{CacheConfig, PagePool};
use crate::error::{invalid, mismatch, Error, Result};
use crate::tensor::TensorView;

/// A sequence of a `KvCache`. Ids are never reused, so a stale id is an error, not an alias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeqId(pub usize);

#[derive(Clone, Debug)]
struct Seq {
    /// Physical pages of logical pages `first_page..`.
    pages: Vec<u32>,
    /// Logical index of `pages[0]`: pages before it were evicted by the window.
    first_page: usize,
    len: usize,
}

/// A paged KV cache: the pool plus the page table of every live sequence.
#[derive(Clone, Debug)]
pub struct KvCache {
    pool: PagePool,
    seqs: Vec<Option<Seq>>,
}

impl KvCache {
    pub fn new(cfg: CacheConfig) -> Result<KvCache> {
        Ok(KvCache {
            pool: PagePool::new(cfg)?,
            seqs: Vec::new(),
        })
    }

    pub fn pool(&self) -> &PagePool {
        &self.pool
    }
    pub fn config(&self) -> &CacheConfig {
        self.pool.config()
    }
    pub fn num_free_pages(&self) -> usize {
        self.pool.num_free()
    }
    /// See `PagePool::shuffle_free`.
    pub fn shuffle_free_pages(&mut self, seed: u64) {
        self.pool.shuffle_free(seed)
    }

    /// A new empty sequence.
    pub fn add_seq(&mut self) -> SeqId {
        self.seqs.push(Some(Seq {
            pages: Vec::new(),
            first_page: 0,
            len: 0,
        }));
        SeqId(self.seqs.len() - 1)
    }

    fn seq(&self, id: SeqId) -> Result<&Seq> {
        self.seqs
            .get(id.0)
            .and_then(Option::as_ref)
            .ok_or_else(|| invalid("seq", format!("no live sequence {}", id.0)))
    }

    /// Logical length (tokens appended, evicted ones included).
    pub fn len(&self, id: SeqId) -> Result<usize> {
        Ok(self.seq(id)?.len)
    }
    /// First logical position still stored (page-aligned; 0 unless the window evicted pages).
    pub fn first_retained(&self, id: SeqId) -> Result<usize> {
        Ok(self.seq(id)?.first_page * self.pool.config().page_size)
    }
    /// Physical pages of the retained logical pages, in order.
    pub fn page_table(&self, id: SeqId) -> Result<&[u32]> {
        Ok(&self.seq(id)?.pages)
    }

    /// A sequence sharing every page of `id` (reference counts, no copy). The first append to a
    /// shared partial last page copies it first (copy-on-write).
    pub fn fork(&mut self, id: SeqId) -> Result<SeqId> {
        let s = self.seq(id)?.clone();
        for &p in &s.pages {
            self.pool.retain(p);
        }
        self.seqs.push(Some(s));
        Ok(SeqId(self.seqs.len() - 1))
    }

    /// Releases every page of `id`; the id becomes invalid.
    pub fn free(&mut self, id: SeqId) -> Result<()> {
        self.seq(id)?;
        let s = self.seqs[id.0].take().expect("checked live");
        for p in s.pages {
            self.pool.release(p);
        }
        Ok(())
    }

    /// Appends `k` `[n, Hkv, D]` and `v` `[n, Hkv, Dv]` (any activation dtype, any strides) to
    /// sequence `id`, quantizing to the cache's types. In window mode, pages wholly before
    /// position `len + 1 - window` (the oldest any query of this append can see) are released.
    pub fn append(&mut self, id: SeqId, k: &TensorView, v: &TensorView) -> Result<()> {
        let c = self.pool.config().clone();
        let n = check_rows("k", k, c.num_kv_heads, c.head_dim)?;
        let nv = check_rows("v", v, c.num_kv_heads, c.head_dim_v)?;
        if n != nv {
            return Err(mismatch("k", "v", format!("{n} vs {nv} tokens")));
        }
        super::quant::check_storable("k", c.k_dtype, k)?;
        super::quant::check_storable("v", c.v_dtype, v)?;
        let s = self.seq(id)?;
        if n == 0 {
            return Ok(());
        }
        let ps = c.page_size;
        let old = s.len;
        let new = old
            .checked_add(n)
            .ok_or_else(|| invalid("k", "sequence length overflows"))?;
        let held = s.first_page + s.pages.len();
        let grow = new.div_ceil(ps) - held;
        // Writing into a shared partial last page must not touch the other owners' copy.
        let cow = old % ps != 0 && self.pool.refcount(*s.pages.last().expect("partial")) > 1;
        let keep_page = match c.window {
            Some(w) => ((old + 1).saturating_sub(w) / ps).max(s.first_page),
            None => s.first_page,
        };
        let evict = keep_page - s.first_page;
        let freed = s.pages[..evict]
            .iter()
            .filter(|&&p| self.pool.refcount(p) == 1)
            .count();
        let needed = grow + cow as usize;
        let free = self.pool.num_free() + freed;
        if needed > free {
            return Err(Error::OutOfPages { needed, free });
        }
        // Validated and counted: from here on nothing fails.
        let mut s = self.seqs[id.0].take().expect("checked live");
        for p in s.pages.drain(..evict) {
            self.pool.release(p);
        }
        s.first_page = keep_page;
        if cow {
            let shared = s.pages.pop().expect("partial");
            let copy = self.pool.alloc(1)?[0];
            self.pool.copy_slots(shared, copy, old % ps);
            self.pool.release(shared);
            s.pages.push(copy);
        }
        let fresh = self.pool.alloc(grow)?;
        s.pages.extend(fresh);
        let mut kb = vec![0f32; c.num_kv_heads * c.head_dim];
        let mut vb = vec![0f32; c.num_kv_heads * c.head_dim_v];
        for t in 0..n {
            gather(k, t, c.head_dim, &mut kb);
            gather(v, t, c.head_dim_v, &mut vb);
            let pos = old + t;
            let page = s.pages[pos / ps - s.first_page];
            self.pool.write_token(page, pos % ps, &kb, &vb);
        }
        s.len = new;
        self.seqs[id.0] = Some(s);
        Ok(())
    }

    /// A read-only view of sequences `ids` (batch order) for `paged_attention`.
    pub fn view(&self, ids: &[SeqId]) -> Result<PagedKv<'_>> {
        let mut indices = Vec::new();
        let mut cu = Vec::with_capacity(ids.len() + 1);
        cu.push(0);
        let (mut lens, mut first) = (Vec::new(), Vec::new());
        for &id in ids {
            let s = self.seq(id)?;
            indices.extend_from_slice(&s.pages);
            cu.push(indices.len());
            lens.push(s.len);
            first.push(s.first_page);
        }
        Ok(PagedKv::from_cache(&self.pool, indices, cu, lens, first))
    }
}

/// A rank-3 `[n, heads, dim]` view; returns n.
fn check_rows(arg: &'static str, t: &TensorView, heads: usize, dim: usize) -> Result<usize> {
    t.validate(arg)?;
    if t.rank() != 3 || t.shape[1] != heads || t.shape[2] != dim {
        return Err(invalid(
            arg,
            format!("shape {:?}, expected [n, {heads}, {dim}]", t.shape),
        ));
    }
    Ok(t.shape[0])
}

/// Token `t` of a validated `[n, H, D]` view, all heads, widened to f32.
fn gather(t: &TensorView, tok: usize, dim: usize, dst: &mut [f32]) {
    for (h, d) in dst.chunks_exact_mut(dim).enumerate() {
        t.data.read_f32(tok * t.strides[0] + h * t.strides[1], d);
    }
}
