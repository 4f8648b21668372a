//! `PagedKv`: a read-only view of paged K/V for a batch of sequences, implementing `KvSource`.
//! Logical position `pos` of sequence `s` lives in page `table_s[pos / page_size]` (a shift for
//! powers of two) at slot `pos % page_size`; kernels and mods only ever see `pos`.

use super::pool::{check_scales, PageBuf, PagePool};
use super::quant::Scales;
use crate::attention::kv::{KvRow, KvRun, KvSource};
use crate::attention::problem::MAX_HEAD_DIM;
use crate::error::{invalid, mismatch, Result};
use crate::variant::BlockMask;

/// Evicted positions read as zeros: only the oracle (which scores every position before masking)
/// reads them, and `paged_attention` rejects variants that could see them.
static ZEROS: [f32; MAX_HEAD_DIM] = [0.0; MAX_HEAD_DIM];

/// Geometry of raw page buffers `[num_pages, page_size, Hkv, D]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PageLayout {
    pub page_size: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// Required exactly for quantized K / V.
    pub k_scales: Option<Scales>,
    pub v_scales: Option<Scales>,
}

/// Paged K/V of a batch of sequences.
#[derive(Clone, Debug)]
pub struct PagedKv<'a> {
    k: PageBuf<'a>,
    v: PageBuf<'a>,
    /// Per kv head (1.0 for float types).
    k_scale: Vec<f32>,
    v_scale: Vec<f32>,
    page_size: usize,
    /// `Some(log2(page_size))` for powers of two.
    shift: Option<u32>,
    heads: usize,
    dk: usize,
    dv: usize,
    num_pages: usize,
    page_indices: Vec<u32>,
    /// Sequence `s` owns `page_indices[cu_pages[s]..cu_pages[s + 1]]`.
    cu_pages: Vec<usize>,
    kv_lens: Vec<usize>,
    /// Logical index of each sequence's first listed page.
    first_page: Vec<usize>,
    /// `(cu_pages[s], first_page[s])` side by side: the per-row lookup touches one cache line.
    lookup: Vec<(usize, usize)>,
}

fn expand(s: Option<&Scales>, heads: usize) -> Vec<f32> {
    (0..heads).map(|h| s.map_or(1.0, |s| s.get(h))).collect()
}

impl<'a> PagedKv<'a> {
    /// From a cache's own tables (already consistent: no validation needed).
    pub(crate) fn from_cache(
        pool: &'a PagePool,
        page_indices: Vec<u32>,
        cu_pages: Vec<usize>,
        kv_lens: Vec<usize>,
        first_page: Vec<usize>,
    ) -> PagedKv<'a> {
        let c = pool.config();
        let lookup = lookup_of(&cu_pages, &first_page);
        PagedKv {
            lookup,
            k: pool.k_pages(),
            v: pool.v_pages(),
            k_scale: expand(c.k_scales.as_ref(), c.num_kv_heads),
            v_scale: expand(c.v_scales.as_ref(), c.num_kv_heads),
            page_size: c.page_size,
            shift: shift_of(c.page_size),
            heads: c.num_kv_heads,
            dk: c.head_dim,
            dv: c.head_dim_v,
            num_pages: c.num_pages,
            page_indices,
            cu_pages,
            kv_lens,
            first_page,
        }
    }

    /// From raw SGLang-style arrays: page buffers `[num_pages, page_size, Hkv, D]`, the flat
    /// `page_indices` of every sequence, `cu_pages` (n+1 offsets into it) and `kv_lens`. Checks
    /// every index, that no table lists a page twice, and that the pages hold each kv length.
    pub fn from_raw(
        k: PageBuf<'a>,
        v: PageBuf<'a>,
        layout: &PageLayout,
        page_indices: &[u32],
        cu_pages: &[u64],
        kv_lens: &[u64],
    ) -> Result<PagedKv<'a>> {
        let l = layout;
        if !(1..=256).contains(&l.page_size) {
            return Err(invalid(
                "page_size",
                format!("{} is outside 1..=256", l.page_size),
            ));
        }
        if l.num_kv_heads == 0 {
            return Err(invalid("num_kv_heads", "must be positive"));
        }
        for (arg, d) in [("head_dim", l.head_dim), ("head_dim_v", l.head_dim_v)] {
            if d == 0 || d > MAX_HEAD_DIM {
                return Err(invalid(arg, format!("{d} is outside 1..={MAX_HEAD_DIM}")));
            }
        }
        check_scales("k_scales", k.dtype(), l.k_scales.as_ref(), l.num_kv_heads)?;
        check_scales("v_scales", v.dtype(), l.v_scales.as_ref(), l.num_kv_heads)?;
        let page_k = l.page_size * l.num_kv_heads * l.head_dim;
        let page_v = l.page_size * l.num_kv_heads * l.head_dim_v;
        if !k.len().is_multiple_of(page_k) {
            return Err(invalid(
                "k_pages",
                format!(
                    "length {} is not a multiple of the page size {page_k}",
                    k.len()
                ),
            ));
        }
        let num_pages = k.len() / page_k;
        if v.len() != num_pages * page_v {
            return Err(mismatch(
                "k_pages",
                "v_pages",
                format!(
                    "{num_pages} K pages need {} V elements, got {}",
                    num_pages * page_v,
                    v.len()
                ),
            ));
        }
        if cu_pages.len() != kv_lens.len() + 1 {
            return Err(mismatch(
                "cu_pages",
                "kv_lens",
                format!("{} offsets for {} sequences", cu_pages.len(), kv_lens.len()),
            ));
        }
        if cu_pages[0] != 0 || cu_pages.windows(2).any(|w| w[1] < w[0]) {
            return Err(invalid("cu_pages", "must start at 0 and never decrease"));
        }
        if *cu_pages.last().unwrap() != page_indices.len() as u64 {
            return Err(mismatch(
                "cu_pages",
                "page_indices",
                format!(
                    "ends at {} but {} indices",
                    cu_pages.last().unwrap(),
                    page_indices.len()
                ),
            ));
        }
        if let Some(i) = page_indices.iter().position(|&p| p as usize >= num_pages) {
            return Err(invalid(
                "page_indices",
                format!("entry {i} is page {} of {num_pages}", page_indices[i]),
            ));
        }
        // A page twice in one table would alias two positions of one sequence.
        let mut seen = vec![usize::MAX; num_pages];
        for s in 0..kv_lens.len() {
            let table = &page_indices[cu_pages[s] as usize..cu_pages[s + 1] as usize];
            for &p in table {
                if seen[p as usize] == s {
                    return Err(invalid(
                        "page_indices",
                        format!("sequence {s} lists page {p} twice"),
                    ));
                }
                seen[p as usize] = s;
            }
            let cap = table.len() as u64 * l.page_size as u64;
            if kv_lens[s] > cap {
                return Err(mismatch(
                    "kv_lens",
                    "page_indices",
                    format!(
                        "sequence {s} has {} tokens but {} pages hold {cap}",
                        kv_lens[s],
                        table.len()
                    ),
                ));
            }
        }
        let cu_pages: Vec<usize> = cu_pages.iter().map(|&x| x as usize).collect();
        let first_page = vec![0; kv_lens.len()];
        Ok(PagedKv {
            lookup: lookup_of(&cu_pages, &first_page),
            k,
            v,
            k_scale: expand(l.k_scales.as_ref(), l.num_kv_heads),
            v_scale: expand(l.v_scales.as_ref(), l.num_kv_heads),
            page_size: l.page_size,
            shift: shift_of(l.page_size),
            heads: l.num_kv_heads,
            dk: l.head_dim,
            dv: l.head_dim_v,
            num_pages,
            page_indices: page_indices.to_vec(),
            cu_pages,
            kv_lens: kv_lens.iter().map(|&x| x as usize).collect(),
            first_page,
        })
    }

    pub fn num_seqs(&self) -> usize {
        self.kv_lens.len()
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }
    pub fn num_pages(&self) -> usize {
        self.num_pages
    }
    /// Flat page indices of every sequence (SGLang-JAX's `page_indices`).
    pub fn page_indices(&self) -> &[u32] {
        &self.page_indices
    }
    /// Offsets of each sequence's pages in `page_indices` (n+1 entries).
    pub fn cu_pages(&self) -> &[usize] {
        &self.cu_pages
    }
    /// First logical position still stored (evicted positions before it read as zeros).
    pub fn first_retained(&self, seq: usize) -> usize {
        self.first_page[seq] * self.page_size
    }

    /// Physical page of logical page `lp` of `seq`; `None` if evicted or beyond the table.
    pub fn physical_page(&self, seq: usize, lp: usize) -> Option<u32> {
        let i = lp.checked_sub(self.first_page[seq])? + self.cu_pages[seq];
        (i < self.cu_pages[seq + 1]).then(|| self.page_indices[i])
    }

    /// Element offset of (seq, head, pos) in a buffer of rows of `dim`, or `None` if evicted.
    #[inline(always)]
    fn locate(&self, seq: usize, head: usize, pos: usize, dim: usize) -> Option<usize> {
        // Past kv_len a table may run on into the next sequence's pages: a caller bug.
        debug_assert!(
            pos < self.kv_lens[seq],
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
        let n = max.min(self.kv_lens[seq].checked_sub(pos)?);
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
        if bm.kv_block != self.page_size {
            return Err(mismatch(
                "block_mask",
                "kv",
                format!("kv_block {} but page size {}", bm.kv_block, self.page_size),
            ));
        }
        let fits = bm.num_seqs() == self.num_seqs()
            && (0..self.num_seqs())
                .all(|s| bm.kv_blocks(s) == self.kv_lens[s].div_ceil(self.page_size));
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

/// Per-sequence KV lengths from FlashInfer-style last-page lengths: a sequence with `n > 0`
/// pages holds `(n - 1) * page_size + last` tokens, `1 <= last <= page_size`; with none, 0.
pub fn kv_lens_from_last_page(
    cu_pages: &[u64],
    last_page_lens: &[u64],
    page_size: usize,
) -> Result<Vec<u64>> {
    if cu_pages.len() != last_page_lens.len() + 1 {
        return Err(mismatch(
            "cu_pages",
            "last_page_lens",
            format!(
                "{} offsets for {} sequences",
                cu_pages.len(),
                last_page_lens.len()
            ),
        ));
    }
    let ps = page_size as u64;
    let mut out = Vec::with_capacity(last_page_lens.len());
    for (s, (w, &last)) in cu_pages.windows(2).zip(last_page_lens).enumerate() {
        let n = w[1]
            .checked_sub(w[0])
            .ok_or_else(|| invalid("cu_pages", "decreases"))?;
        let ok = if n == 0 {
            last == 0
        } else {
            (1..=ps).contains(&last)
        };
        if !ok {
            return Err(invalid(
                "last_page_lens",
                format!("sequence {s}: last page holds {last} tokens, page size {ps}, {n} pages"),
            ));
        }
        out.push(n.saturating_sub(1) * ps + last);
    }
    Ok(out)
}

fn lookup_of(cu_pages: &[usize], first_page: &[usize]) -> Vec<(usize, usize)> {
    cu_pages
        .iter()
        .copied()
        .zip(first_page.iter().copied())
        .collect()
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
        self.kv_lens[seq]
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
