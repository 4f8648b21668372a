//! The backend half of a paged KV cache: K and V pages `[num_pages, page_size, Hkv, D]` in a
//! backend's buffers. The host half (`PageTable`) decides which slots a token goes to; the
//! backend writes them (`Backend::kv_write`, quantizing on write) and copies slots for
//! copy-on-write (`PageStore::copy_slots`).

use super::pool::CacheConfig;
use crate::attention::problem::PagedLayout;
use crate::backend::{Backend, Buffer, Pages};
use crate::error::{invalid, Result};

/// K/V pages of one cache in a backend's memory.
#[derive(Debug)]
pub struct PageStore<B> {
    pub k: B,
    pub v: B,
    pub layout: PagedLayout,
}

impl<B: Buffer> PageStore<B> {
    /// Zeroed pages for `cfg` (typed errors for bad configurations and for memory the backend
    /// cannot give, before anything is allocated where the size is known to overflow).
    pub fn new<Be: Backend<Buffer = B> + ?Sized>(backend: &Be, cfg: &CacheConfig) -> Result<Self> {
        cfg.check()?;
        let layout = cfg.layout();
        let size = |d: usize| {
            cfg.num_pages
                .checked_mul(cfg.page_size * cfg.num_kv_heads * d)
                .ok_or_else(|| invalid("num_pages", "cache size overflows"))
        };
        let (nk, nv) = (size(cfg.head_dim)?, size(cfg.head_dim_v)?);
        Ok(PageStore {
            k: backend.alloc(cfg.k_dtype, nk)?,
            v: backend.alloc(cfg.v_dtype, nv)?,
            layout,
        })
    }

    /// Pages a caller already holds (SGLang-style raw buffers), checked against `cfg`: each
    /// buffer's dtype and length must be what the layout says.
    pub fn from_buffers(cfg: &CacheConfig, k: B, v: B) -> Result<Self> {
        cfg.check()?;
        let layout = cfg.layout();
        for (arg, b, dtype, d) in [
            ("k_pages", &k, cfg.k_dtype, cfg.head_dim),
            ("v_pages", &v, cfg.v_dtype, cfg.head_dim_v),
        ] {
            let need = cfg.num_pages as u128 * (cfg.page_size * cfg.num_kv_heads * d) as u128;
            if b.dtype() != dtype || b.len() as u128 != need {
                return Err(invalid(
                    arg,
                    format!(
                        "{} elements of {}, the layout needs {need} of {}",
                        b.len(),
                        b.dtype().name(),
                        dtype.name()
                    ),
                ));
            }
        }
        Ok(PageStore { k, v, layout })
    }

    /// The page buffers and layout, for `Backend::kv_write`.
    pub fn pages(&mut self) -> Pages<'_, B> {
        Pages {
            k: &mut self.k,
            v: &mut self.v,
            layout: &self.layout,
        }
    }

    /// Elements of one page of K (`dim` = head_dim) or V.
    pub fn page_elems(&self, dim: usize) -> usize {
        self.layout.page_size * self.layout.num_kv_heads * dim
    }

    /// Copies the first `slots` token slots of page `src` into page `dst`, K and V (the
    /// copy-on-write of a shared partial page).
    pub fn copy_slots<Be: Backend<Buffer = B> + ?Sized>(
        &mut self,
        backend: &Be,
        src: u32,
        dst: u32,
        slots: usize,
    ) -> Result<()> {
        let l = &self.layout;
        for (buf, d) in [(&mut self.k, l.head_dim), (&mut self.v, l.head_dim_v)] {
            let page = l.page_size * l.num_kv_heads * d;
            let n = slots * l.num_kv_heads * d;
            backend.copy_within(buf, src as usize * page, dst as usize * page, n)?;
        }
        Ok(())
    }
}
