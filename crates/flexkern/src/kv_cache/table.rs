//! The host-side page-table manager: per-sequence page tables over a shared pool, append
//! (which slots vLLM's reshape_and_cache writes), fork with shared prefix pages and
//! copy-on-write of a shared partial page, free, truncate, and sliding-window eviction at page
//! granularity. It touches no device memory: `append` returns the slots to write and the page
//! copies to make, and `tables` the index arrays attention reads. Every mutation validates and
//! counts pages before it changes anything, so an error (out of pages included) leaves every
//! sequence as it was.

use super::pool::{CacheConfig, PagePool};
use super::tables::PageTables;
use crate::error::{invalid, Error, Result};

/// A sequence of a `PageTable`. Ids are never reused, so a stale id is an error, not an alias.
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

/// What an append asks of the page store, in order: copy-on-write copies, then token writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Writes {
    /// `(src page, dst page, slots)`: copy the first `slots` token slots.
    pub copies: Vec<(u32, u32, usize)>,
    /// Slot (`page * page_size + offset`) of each appended token, in order.
    pub slots: Vec<u32>,
}

/// The pool plus the page table of every live sequence.
#[derive(Clone, Debug)]
pub struct PageTable {
    pool: PagePool,
    seqs: Vec<Option<Seq>>,
}

impl PageTable {
    pub fn new(cfg: CacheConfig) -> Result<PageTable> {
        Ok(PageTable {
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

    /// Appends `n` tokens to sequence `id` and returns where they go. In window mode, pages
    /// wholly before position `len + 1 - window` (the oldest any query of this append can see)
    /// are released.
    pub fn append(&mut self, id: SeqId, n: usize) -> Result<Writes> {
        let ps = self.pool.config().page_size;
        let window = self.pool.config().window;
        let s = self.seq(id)?;
        if n == 0 {
            return Ok(Writes::default());
        }
        let old = s.len;
        let new = old
            .checked_add(n)
            .filter(|&x| x.div_ceil(ps) <= u32::MAX as usize)
            .ok_or_else(|| invalid("n", "sequence length overflows"))?;
        let held = s.first_page + s.pages.len();
        let grow = new.div_ceil(ps) - held;
        // Writing into a shared partial last page must not touch the other owners' copy.
        let cow = old % ps != 0 && self.pool.refcount(*s.pages.last().expect("partial")) > 1;
        let keep_page = match window {
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
        let mut w = Writes::default();
        let mut s = self.seqs[id.0].take().expect("checked live");
        for p in s.pages.drain(..evict) {
            self.pool.release(p);
        }
        s.first_page = keep_page;
        if cow {
            let shared = s.pages.pop().expect("partial");
            let copy = self.pool.alloc(1)?[0];
            w.copies.push((shared, copy, old % ps));
            self.pool.release(shared);
            s.pages.push(copy);
        }
        let fresh = self.pool.alloc(grow)?;
        s.pages.extend(fresh);
        w.slots = (old..new)
            .map(|pos| s.pages[pos / ps - s.first_page] * ps as u32 + (pos % ps) as u32)
            .collect();
        s.len = new;
        self.seqs[id.0] = Some(s);
        Ok(w)
    }

    /// Shortens sequence `id` to `len` tokens (undoing an append whose writes failed), releasing
    /// the pages past it. Evicted pages do not come back.
    pub fn truncate(&mut self, id: SeqId, len: usize) -> Result<()> {
        let ps = self.pool.config().page_size;
        let s = self.seq(id)?;
        if len > s.len {
            return Err(invalid(
                "len",
                format!("{len} is longer than the sequence ({})", s.len),
            ));
        }
        let keep = len.div_ceil(ps).saturating_sub(s.first_page);
        let mut s = self.seqs[id.0].take().expect("checked live");
        for p in s.pages.drain(keep.min(s.pages.len())..) {
            self.pool.release(p);
        }
        s.len = len;
        self.seqs[id.0] = Some(s);
        Ok(())
    }

    /// The index arrays of sequences `ids` (batch order), as attention reads them.
    pub fn tables(&self, ids: &[SeqId]) -> Result<PageTables> {
        let mut t = PageTables {
            cu_pages: Vec::with_capacity(ids.len() + 1),
            first_page: Vec::with_capacity(ids.len()),
            page_indices: Vec::new(),
            kv_lens: Vec::with_capacity(ids.len()),
        };
        t.cu_pages.push(0);
        for &id in ids {
            let s = self.seq(id)?;
            t.page_indices.extend_from_slice(&s.pages);
            t.cu_pages.push(t.page_indices.len() as u32);
            t.kv_lens.push(s.len as u64);
            t.first_page.push(s.first_page as u32);
        }
        Ok(t)
    }
}
