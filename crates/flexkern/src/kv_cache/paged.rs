//! `PagedKv`: the CPU's read-only view of paged K/V in host memory, implementing `KvSource`.
//! Logical position `pos` of sequence `s` lives in page `table_s[pos / page_size]` (a shift for
//! powers of two) at slot `pos % page_size`; kernels and mods only ever see `pos`.

use super::pool::PageBuf;
use crate::attention::kv::{KvRow, KvRun, KvSource};
use crate::attention::problem::{PagedLayout, SeqLens, MAX_HEAD_DIM};
use crate::error::{invalid, mismatch, Result};
use crate::variant::BlockMask;

/// Evicted positions read as zeros: only the oracle (which scores every position before masking)
/// reads them, and `paged_attention` rejects variants that could see them.
static ZEROS: [f32; MAX_HEAD_DIM] = [0.0; MAX_HEAD_DIM];

/// Paged K/V of a batch of sequences, bound to host page storage.
#[derive(Clone, Debug)]
pub struct PagedKv<'a> {
    k: PageBuf<'a>,
    v: PageBuf<'a>,
    /// Per kv head (1.0 for float types).
    k_scale: &'a [f32],
    v_scale: &'a [f32],
    page_size: usize,
    /// `Some(log2(page_size))` for powers of two.
    shift: Option<u32>,
    heads: usize,
    dk: usize,
    dv: usize,
    num_pages: usize,
    page_indices: &'a [u32],
    /// Sequence `s` owns `page_indices[cu_pages[s]..cu_pages[s + 1]]`.
    cu_pages: &'a [u32],
    kv_lens: &'a SeqLens,
    /// Logical index of each sequence's first listed page.
    first_page: &'a [u32],
    /// `(cu_pages[s], first_page[s])` side by side: the per-row lookup touches one cache line.
    lookup: Vec<(usize, usize)>,
}

impl<'a> PagedKv<'a> {
    /// Binds page storage and index arrays to `layout` and the problem's lengths. Checks what
    /// reading needs (every index in the pool, offsets inside the index array, pages holding
    /// each length), so bad tables give an error, never an out-of-bounds read.
    pub fn bind(
        layout: &'a PagedLayout,
        k: PageBuf<'a>,
        v: PageBuf<'a>,
        cu_pages: &'a [u32],
        first_page: &'a [u32],
        page_indices: &'a [u32],
        lens: &'a SeqLens,
    ) -> Result<PagedKv<'a>> {
        let l = layout;
        super::tables::check_readable(
            cu_pages,
            first_page,
            page_indices,
            lens.num_seqs(),
            |s| lens.kv_len(s) as u64,
            l.num_pages,
            l.page_size,
        )?;
        if l.k_scales.len() != l.num_kv_heads || l.v_scales.len() != l.num_kv_heads {
            return Err(invalid("k_scales", "one scale per kv head"));
        }
        let lookup = cu_pages
            .iter()
            .zip(first_page)
            .map(|(&c, &f)| (c as usize, f as usize))
            .collect();
        Ok(PagedKv {
            lookup,
            k,
            v,
            k_scale: &l.k_scales,
            v_scale: &l.v_scales,
            page_size: l.page_size,
            shift: shift_of(l.page_size),
            heads: l.num_kv_heads,
            dk: l.head_dim,
            dv: l.head_dim_v,
            num_pages: l.num_pages,
            page_indices,
            cu_pages,
            kv_lens: lens,
            first_page,
        })
    }

    pub fn num_seqs(&self) -> usize {
        self.kv_lens.num_seqs()
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }
    pub fn num_pages(&self) -> usize {
        self.num_pages
    }
    /// Flat page indices of every sequence (SGLang-JAX's `page_indices`).
    pub fn page_indices(&self) -> &[u32] {
        self.page_indices
    }
    /// First logical position still stored (evicted positions before it read as zeros).
    pub fn first_retained(&self, seq: usize) -> usize {
        self.first_page[seq] as usize * self.page_size
    }

    /// Physical page of logical page `lp` of `seq`; `None` if evicted or beyond the table.
    pub fn physical_page(&self, seq: usize, lp: usize) -> Option<u32> {
        let i = lp.checked_sub(self.first_page[seq] as usize)? + self.cu_pages[seq] as usize;
        (i < self.cu_pages[seq + 1] as usize).then(|| self.page_indices[i])
    }

    /// Element offset of (seq, head, pos) in a buffer of rows of `dim`, or `None` if evicted.
    #[inline(always)]
    fn locate(&self, seq: usize, head: usize, pos: usize, dim: usize) -> Option<usize> {
        // Past kv_len a table may run on into the next sequence's pages: a caller bug.
        debug_assert!(
            pos < self.kv_lens.kv_len(seq),
            "KV position {pos} beyond the sequence"
        );
        let (lp, slot) = match self.shift {
            Some(sh) => (pos >> sh, pos & (self.page_size - 1)),
            None => (pos / self.page_size, pos % self.page_size),
        };
        let (start, first) = self.lookup[seq];
        let i = lp.checked_sub(first)?;
        let page = self.page_indices[start + i] as usize;
        Some(((page * self.page_size + slot) * self.heads + head) * dim)
    }

    /// The rest of `pos`'s page (up to `max` positions and the sequence's end): one lookup.
    fn run(
        &self,
        buf: &PageBuf<'a>,
        scale: f32,
        seq: usize,
        pos: usize,
        max: usize,
        dim: usize,
    ) -> Option<KvRun<'a>> {
        let n = max.min(self.kv_lens.kv_len(seq).checked_sub(pos)?);
        let slot = match self.shift {
            Some(_) => pos & (self.page_size - 1),
            None => pos % self.page_size,
        };
        let n = n.min(self.page_size - slot);
        if n == 0 {
            return None;
        }
        let at = self.locate(seq, 0, pos, dim)?;
        Some(KvRun {
            first: buf.row(at, n * self.heads * dim, scale),
            head_stride: dim,
            pos_stride: self.heads * dim,
            len: n,
        })
    }

    /// Maps a BlockMask built on logical positions with `kv_block == page_size` to physical page
    /// ids (FlexAttention 5.1): the result has the CSR layout of `bm.kv_indices` and
    /// `bm.full_kv_indices` (same `*_num_blocks`), with each logical block replaced by its page.
    pub fn physical_blocks(&self, bm: &BlockMask) -> Result<PhysicalBlocks> {
        if let Some(s) = (0..bm.num_seqs()).find(|&s| bm.tiles(s).1 != self.page_size) {
            return Err(mismatch(
                "block_mask",
                "kv",
                format!(
                    "sequence {s}: kv_block {} but page size {}",
                    bm.tiles(s).1,
                    self.page_size
                ),
            ));
        }
        let fits = bm.num_seqs() == self.num_seqs()
            && (0..self.num_seqs())
                .all(|s| bm.kv_blocks(s) == self.kv_lens.kv_len(s).div_ceil(self.page_size));
        if !fits {
            return Err(mismatch("block_mask", "kv", "built for other kv lengths"));
        }
        let mut out = PhysicalBlocks {
            kv_pages: Vec::with_capacity(bm.kv_indices.len()),
            full_kv_pages: Vec::with_capacity(bm.full_kv_indices.len()),
        };
        for s in 0..bm.num_seqs() {
            for h in 0..bm.heads {
                for qb in 0..bm.q_blocks(s) {
                    let lists = [
                        (bm.partial_blocks(s, h, qb), &mut out.kv_pages),
                        (bm.full_blocks(s, h, qb), &mut out.full_kv_pages),
                    ];
                    for (blocks, dst) in lists {
                        for &kb in blocks {
                            let p = self.physical_page(s, kb as usize).ok_or_else(|| {
                                invalid(
                                    "block_mask",
                                    format!("sequence {s} visits evicted kv-block {kb}"),
                                )
                            })?;
                            dst.push(p);
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Physical page ids of a BlockMask's visited blocks (see `PagedKv::physical_blocks`).
#[derive(Clone, Debug, PartialEq)]
pub struct PhysicalBlocks {
    pub kv_pages: Vec<u32>,
    pub full_kv_pages: Vec<u32>,
}

fn shift_of(page_size: usize) -> Option<u32> {
    page_size
        .is_power_of_two()
        .then(|| page_size.trailing_zeros())
}

impl KvSource for PagedKv<'_> {
    fn num_kv_heads(&self) -> usize {
        self.heads
    }
    fn head_dim(&self) -> usize {
        self.dk
    }
    fn head_dim_v(&self) -> usize {
        self.dv
    }
    fn kv_len(&self, seq: usize) -> usize {
        self.kv_lens.kv_len(seq)
    }
    #[inline]
    fn k_row(&self, seq: usize, head: usize, pos: usize) -> KvRow<'_> {
        match self.locate(seq, head, pos, self.dk) {
            Some(at) => self.k.row(at, self.dk, self.k_scale[head]),
            None => KvRow::F32(&ZEROS[..self.dk]),
        }
    }
    #[inline]
    fn v_row(&self, seq: usize, head: usize, pos: usize) -> KvRow<'_> {
        match self.locate(seq, head, pos, self.dv) {
            Some(at) => self.v.row(at, self.dv, self.v_scale[head]),
            None => KvRow::F32(&ZEROS[..self.dv]),
        }
    }
    fn k_run(&self, seq: usize, pos: usize, max: usize) -> Option<KvRun<'_>> {
        self.run(&self.k, self.k_scale[0], seq, pos, max, self.dk)
    }
    fn v_run(&self, seq: usize, pos: usize, max: usize) -> Option<KvRun<'_>> {
        self.run(&self.v, self.v_scale[0], seq, pos, max, self.dv)
    }
}
