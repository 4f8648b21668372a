//! Paged KV cache, split as a GPU needs it: the host-side page-table manager (`PageTable`:
//! sequences, append, fork, copy-on-write, refcounts, window eviction, pool exhaustion) hands
//! out plain index arrays (`PageTables`), and a backend's `PageStore` holds the pages (written
//! by `Backend::kv_write`, quantizing on write). `KvCache` keeps the two in step. `PagedKv` is
//! the CPU kernels' view of host pages.

pub mod cache;
pub mod paged;
pub mod pool;
pub mod quant;
pub mod store;
pub mod table;
pub mod tables;
pub mod widen;

pub use cache::{KvCache, PagedBinding};
pub use paged::{PagedKv, PhysicalBlocks};
pub use pool::{CacheConfig, PageBuf, PagePool};
pub use quant::Scales;
pub use store::PageStore;
pub use table::{PageTable, SeqId, Writes};
pub use tables::{kv_lens_from_last_page, PageTables};
