//! `KvCache`: the host page-table manager and a backend page store kept in step. Appends plan
//! on the host (which slots, which copy-on-write copies), then run on the backend; a failed
//! backend write rolls the table back, so every sequence is left as it was.

use super::pool::{CacheConfig, PagePool};
use super::store::PageStore;
use super::table::{PageTable, SeqId, Writes};
use super::tables::PageTables;
use super::PagedKv;
use crate::attention::problem::SeqLens;
use crate::backend::host::HostBuffer;
use crate::backend::{to_device, Backend, Slice};
use crate::error::{invalid, mismatch, Result};
use crate::tensor::TensorView;

/// A paged KV cache on backend `B`.
pub struct KvCache<B: Backend + ?Sized> {
    table: PageTable,
    store: PageStore<B::Buffer>,
}

/// Sequences of a cache bound for one attention call: the store and host index arrays.
pub struct PagedBinding<'a, Buf> {
    pub store: &'a PageStore<Buf>,
    pub tables: PageTables,
    /// The sequences' KV lengths (no queries), for reading the pages on the host.
    kv_lens: SeqLens,
}

impl<'a, Buf> PagedBinding<'a, Buf> {
    /// Binds index arrays to a store, checking them against its pool.
    pub fn new(store: &'a PageStore<Buf>, tables: PageTables) -> Result<Self> {
        tables.validate(store.layout.num_pages, store.layout.page_size)?;
        let kv_lens = SeqLens::new(&vec![0; tables.num_seqs() + 1], &tables.kv_lens)?;
        Ok(PagedBinding {
            store,
            tables,
            kv_lens,
        })
    }
}

impl PagedBinding<'_, HostBuffer> {
    /// The CPU's reading view of these sequences (tests and oracles read rows through it).
    pub fn host_kv(&self) -> Result<PagedKv<'_>> {
        let t = &self.tables;
        PagedKv::bind(
            &self.store.layout,
            self.store.k.page_buf("k_pages")?,
            self.store.v.page_buf("v_pages")?,
            &t.cu_pages,
            &t.first_page,
            &t.page_indices,
            &self.kv_lens,
        )
    }
}

impl<B: Backend + ?Sized> KvCache<B> {
    pub fn new(backend: &B, cfg: CacheConfig) -> Result<Self> {
        // The pages first: they are the large allocation, refused first when too large.
        let store = PageStore::new(backend, &cfg)?;
        Ok(KvCache {
            table: PageTable::new(cfg)?,
            store,
        })
    }

    pub fn config(&self) -> &CacheConfig {
        self.table.config()
    }
    pub fn pool(&self) -> &PagePool {
        self.table.pool()
    }
    pub fn table(&self) -> &PageTable {
        &self.table
    }
    pub fn store(&self) -> &PageStore<B::Buffer> {
        &self.store
    }
    pub fn num_free_pages(&self) -> usize {
        self.table.num_free_pages()
    }
    /// See `PagePool::shuffle_free`.
    pub fn shuffle_free_pages(&mut self, seed: u64) {
        self.table.shuffle_free_pages(seed)
    }
    pub fn add_seq(&mut self) -> SeqId {
        self.table.add_seq()
    }
    pub fn len(&self, id: SeqId) -> Result<usize> {
        self.table.len(id)
    }
    pub fn first_retained(&self, id: SeqId) -> Result<usize> {
        self.table.first_retained(id)
    }
    pub fn page_table(&self, id: SeqId) -> Result<&[u32]> {
        self.table.page_table(id)
    }
    pub fn fork(&mut self, id: SeqId) -> Result<SeqId> {
        self.table.fork(id)
    }
    pub fn free(&mut self, id: SeqId) -> Result<()> {
        self.table.free(id)
    }

    /// Appends `k` `[n, Hkv, D]` and `v` `[n, Hkv, Dv]` host rows (any float dtype, any strides)
    /// to sequence `id`, quantizing to the cache's types: three uploads (rows and slots).
    pub fn append(&mut self, backend: &B, id: SeqId, k: &TensorView, v: &TensorView) -> Result<()> {
        let c = self.table.config();
        let n = check_rows("k", k, c.num_kv_heads, c.head_dim)?;
        let nv = check_rows("v", v, c.num_kv_heads, c.head_dim_v)?;
        if n != nv {
            return Err(mismatch("k", "v", format!("{n} vs {nv} tokens")));
        }
        self.table.len(id)?;
        if n == 0 {
            return Ok(());
        }
        let kb = to_device(backend, &gather(k, c.head_dim))?;
        let vb = to_device(backend, &gather(v, c.head_dim_v))?;
        self.append_buffers(backend, id, &kb, &vb, n)
    }

    /// Appends `n` tokens whose K/V rows (`[n, Hkv, D]` f32) already sit in backend buffers:
    /// one upload (the slots).
    pub fn append_buffers(
        &mut self,
        backend: &B,
        id: SeqId,
        k: &B::Buffer,
        v: &B::Buffer,
        n: usize,
    ) -> Result<()> {
        let old = self.table.len(id)?;
        let w = self.table.append(id, n)?;
        let r = (|| {
            let slots = to_device(backend, &w.slots)?;
            self.write(backend, &w, Slice::all(&slots), k, v)
        })();
        if r.is_err() {
            self.table.truncate(id, old)?;
        }
        r
    }

    /// Runs an append's copies and writes (slots already on the backend).
    pub fn write(
        &mut self,
        backend: &B,
        w: &Writes,
        slots: Slice<'_, B::Buffer>,
        k: &B::Buffer,
        v: &B::Buffer,
    ) -> Result<()> {
        if slots.len != w.slots.len() {
            return Err(mismatch("slots", "writes", "slot counts differ"));
        }
        for &(src, dst, n) in &w.copies {
            self.store.copy_slots(backend, src, dst, n)?;
        }
        backend.kv_write(self.store.pages(), slots, k, v)
    }

    /// Sequences `ids` (batch order) for `paged_attention`.
    pub fn view(&self, ids: &[SeqId]) -> Result<PagedBinding<'_, B::Buffer>> {
        let tables = self.table.tables(ids)?;
        let kv_lens = SeqLens::new(&vec![0; ids.len() + 1], &tables.kv_lens)?;
        Ok(PagedBinding {
            store: &self.store,
            tables,
            kv_lens,
        })
    }

    /// Reserves slots without writing (the caller writes them through `write`).
    pub fn reserve(&mut self, id: SeqId, n: usize) -> Result<Writes> {
        self.table.append(id, n)
    }

    /// See `PageTable::truncate`.
    pub fn truncate(&mut self, id: SeqId, len: usize) -> Result<()> {
        self.table.truncate(id, len)
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

/// A validated `[n, H, D]` view widened to contiguous f32.
fn gather(t: &TensorView, dim: usize) -> Vec<f32> {
    let (n, h) = (t.shape[0], t.shape[1]);
    let mut out = vec![0f32; n * h * dim];
    for (i, row) in out.chunks_exact_mut(dim).enumerate() {
        let (tok, head) = (i / h, i % h);
        t.data
            .read_f32(tok * t.strides[0] + head * t.strides[1], row);
    }
    out
}
