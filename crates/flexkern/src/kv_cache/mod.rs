//! Paged KV cache: page pool (any KV dtype, refcounts), per-sequence page tables with fork,
//! copy-on-write and sliding-window eviction, KV quantization, and the `PagedKv` view that the
//! attention kernels read through `KvSource`.

pub mod paged;
pub mod pool;
pub mod quant;
pub mod table;
pub mod widen;

pub use paged::{PageLayout, PagedKv, PhysicalBlocks};
pub use pool::{CacheConfig, PageBuf, PagePool};
pub use quant::Scales;
pub use table::{KvCache, SeqId};
