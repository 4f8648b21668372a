//! The cache's configuration, the host-side page pool (free list and per-page reference
//! counts: pages are shared between forked sequences), and `PageBuf`, the CPU's typed view of
//! page storage.

use super::quant::{is_quantized, Scales};
use crate::attention::kv::KvRow;
use crate::attention::problem::PagedLayout;
use crate::dtype::DType;
use crate::error::{invalid, Error, Result};
use half::{bf16, f16};

/// Borrowed page storage of one tensor (K or V) in its stored type.
#[derive(Clone, Copy, Debug)]
pub enum PageBuf<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
    Fp8E4M3(&'a [u8]),
    Fp8E5M2(&'a [u8]),
    I8(&'a [i8]),
}

impl<'a> PageBuf<'a> {
    pub fn dtype(&self) -> DType {
        match self {
            PageBuf::F32(_) => DType::F32,
            PageBuf::F16(_) => DType::F16,
            PageBuf::BF16(_) => DType::BF16,
            PageBuf::Fp8E4M3(_) => DType::Fp8E4M3,
            PageBuf::Fp8E5M2(_) => DType::Fp8E5M2,
            PageBuf::I8(_) => DType::I8,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            PageBuf::F32(s) => s.len(),
            PageBuf::F16(s) => s.len(),
            PageBuf::BF16(s) => s.len(),
            PageBuf::Fp8E4M3(s) | PageBuf::Fp8E5M2(s) => s.len(),
            PageBuf::I8(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `dim` elements at `at`; `scale` is ignored by the float types.
    #[inline(always)]
    pub(crate) fn row(&self, at: usize, dim: usize, scale: f32) -> KvRow<'a> {
        match *self {
            PageBuf::F32(s) => KvRow::F32(&s[at..at + dim]),
            PageBuf::F16(s) => KvRow::F16(&s[at..at + dim]),
            PageBuf::BF16(s) => KvRow::BF16(&s[at..at + dim]),
            PageBuf::Fp8E4M3(s) => KvRow::Fp8E4M3(&s[at..at + dim], scale),
            PageBuf::Fp8E5M2(s) => KvRow::Fp8E5M2(&s[at..at + dim], scale),
            PageBuf::I8(s) => KvRow::I8(&s[at..at + dim], scale),
        }
    }
}

/// Geometry and types of a KV cache.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheConfig {
    pub num_pages: usize,
    /// Tokens per page, 1..=256 (powers of two take a shift on lookup, others a division).
    pub page_size: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    pub k_dtype: DType,
    pub v_dtype: DType,
    /// Required exactly when `k_dtype` is quantized.
    pub k_scales: Option<Scales>,
    pub v_scales: Option<Scales>,
    /// Sliding-window mode: keep only pages some future query within `window` positions may
    /// need (see `KvCache::append`).
    pub window: Option<usize>,
}

impl CacheConfig {
    /// An f32 cache without window.
    pub fn new(num_pages: usize, page_size: usize, heads: usize, head_dim: usize) -> Self {
        CacheConfig {
            num_pages,
            page_size,
            num_kv_heads: heads,
            head_dim,
            head_dim_v: head_dim,
            k_dtype: DType::F32,
            v_dtype: DType::F32,
            k_scales: None,
            v_scales: None,
            window: None,
        }
    }

    /// The layout kernels read (per-head scales expanded, 1.0 for float types).
    pub fn layout(&self) -> PagedLayout {
        let expand = |s: Option<&Scales>| {
            (0..self.num_kv_heads)
                .map(|h| s.map_or(1.0, |s| s.get(h)))
                .collect()
        };
        PagedLayout {
            page_size: self.page_size,
            num_pages: self.num_pages,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
            head_dim_v: self.head_dim_v,
            k_dtype: self.k_dtype,
            v_dtype: self.v_dtype,
            k_scales: expand(self.k_scales.as_ref()),
            v_scales: expand(self.v_scales.as_ref()),
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        if !(1..=256).contains(&self.page_size) {
            return Err(invalid(
                "page_size",
                format!("{} is outside 1..=256", self.page_size),
            ));
        }
        if self.num_kv_heads == 0 {
            return Err(invalid("num_kv_heads", "must be positive"));
        }
        for (arg, d) in [("head_dim", self.head_dim), ("head_dim_v", self.head_dim_v)] {
            if d == 0 || d > crate::attention::problem::MAX_HEAD_DIM {
                return Err(invalid(arg, format!("{d} is outside 1..=576")));
            }
        }
        if self.num_pages > u32::MAX as usize {
            return Err(invalid("num_pages", "page ids are 32-bit"));
        }
        if self.window == Some(0) {
            return Err(invalid("window", "must be at least 1"));
        }
        check_scales(
            "k_scales",
            self.k_dtype,
            self.k_scales.as_ref(),
            self.num_kv_heads,
        )?;
        check_scales(
            "v_scales",
            self.v_dtype,
            self.v_scales.as_ref(),
            self.num_kv_heads,
        )?;
        Ok(())
    }
}

/// A quantized type needs scales; a float type must not get any (they would be ignored).
pub(crate) fn check_scales(
    arg: &'static str,
    dtype: DType,
    s: Option<&Scales>,
    heads: usize,
) -> Result<()> {
    match (is_quantized(dtype), s) {
        (true, None) => Err(invalid(
            arg,
            format!("a {} cache needs scales", dtype.name()),
        )),
        (false, Some(_)) => Err(invalid(
            arg,
            format!("{} is not quantized: give no scales", dtype.name()),
        )),
        (true, Some(s)) => s.check(arg, heads),
        (false, None) => Ok(()),
    }
}

/// Which pages are free and how many owners each has; the pages themselves live in a
/// backend's `PageStore`.
#[derive(Clone, Debug)]
pub struct PagePool {
    cfg: CacheConfig,
    refs: Vec<u32>,
    /// Popped from the back.
    free: Vec<u32>,
}

impl PagePool {
    pub fn new(cfg: CacheConfig) -> Result<PagePool> {
        cfg.check()?;
        let bytes = cfg.num_pages as u128 * 8;
        let mut refs = Vec::new();
        let mut free = Vec::new();
        if refs.try_reserve_exact(cfg.num_pages).is_err()
            || free.try_reserve_exact(cfg.num_pages).is_err()
        {
            return Err(Error::OutOfMemory {
                what: format!("the page table of {} pages", cfg.num_pages),
                bytes,
            });
        }
        refs.resize(cfg.num_pages, 0);
        free.extend((0..cfg.num_pages as u32).rev());
        Ok(PagePool { cfg, refs, free })
    }

    pub fn config(&self) -> &CacheConfig {
        &self.cfg
    }
    pub fn num_free(&self) -> usize {
        self.free.len()
    }
    pub fn refcount(&self, page: u32) -> u32 {
        self.refs[page as usize]
    }

    /// Permutes the free list (deterministic in `seed`), so allocation order is scattered: tests
    /// and the CLI use it to exercise non-contiguous page tables.
    pub fn shuffle_free(&mut self, seed: u64) {
        let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
        for i in (1..self.free.len()).rev() {
            // xorshift64*: plenty for a shuffle, and no dependency.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let j = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) % (i as u64 + 1)) as usize;
            self.free.swap(i, j);
        }
    }

    /// Takes `n` pages (refcount 1), or none at all.
    pub(crate) fn alloc(&mut self, n: usize) -> Result<Vec<u32>> {
        if n > self.free.len() {
            return Err(Error::OutOfPages {
                needed: n,
                free: self.free.len(),
            });
        }
        let mut pages = self.free.split_off(self.free.len() - n);
        // Pop order: a fresh pool hands out ascending, memory-contiguous pages.
        pages.reverse();
        for &p in &pages {
            self.refs[p as usize] = 1;
        }
        Ok(pages)
    }

    pub(crate) fn retain(&mut self, page: u32) {
        self.refs[page as usize] += 1;
    }

    /// Drops one reference; the page returns to the free list at zero.
    pub(crate) fn release(&mut self, page: u32) {
        let r = &mut self.refs[page as usize];
        debug_assert!(*r > 0, "page {page} released while free");
        *r -= 1;
        if *r == 0 {
            self.free.push(page);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_all_or_nothing_and_refcounted() {
        let mut p = PagePool::new(CacheConfig::new(4, 16, 2, 8)).unwrap();
        let a = p.alloc(3).unwrap();
        assert_eq!(a, [0, 1, 2]);
        assert_eq!(p.num_free(), 1);
        assert_eq!(p.alloc(2), Err(Error::OutOfPages { needed: 2, free: 1 }));
        assert_eq!(p.num_free(), 1);
        p.retain(a[0]);
        p.release(a[0]);
        assert_eq!((p.refcount(a[0]), p.num_free()), (1, 1));
        p.release(a[0]);
        assert_eq!((p.refcount(a[0]), p.num_free()), (0, 2));
    }

    #[test]
    fn shuffle_keeps_every_page_once() {
        let mut p = PagePool::new(CacheConfig::new(100, 1, 1, 1)).unwrap();
        p.shuffle_free(7);
        let mut got = p.alloc(100).unwrap();
        assert_ne!(got, (0..100).collect::<Vec<u32>>());
        got.sort();
        assert_eq!(got, (0..100).collect::<Vec<u32>>());
    }

    #[test]
    fn bad_configs_are_rejected() {
        let ok = CacheConfig::new(4, 16, 2, 8);
        let mut c = ok.clone();
        c.page_size = 0;
        assert!(PagePool::new(c).is_err());
        let mut c = ok.clone();
        c.page_size = 257;
        assert!(PagePool::new(c).is_err());
        let mut c = ok.clone();
        c.k_dtype = DType::Fp8E4M3; // no scales
        assert!(matches!(
            PagePool::new(c),
            Err(Error::InvalidArgument {
                arg: "k_scales",
                ..
            })
        ));
        let mut c = ok.clone();
        c.v_scales = Some(Scales::PerTensor(1.0)); // f32 V with scales
        assert!(PagePool::new(c).is_err());
        let mut c = ok;
        c.window = Some(0);
        assert!(PagePool::new(c).is_err());
    }
}
