//! What the planner knows about a device: its kind, its parallelism and the tile policy its
//! backend supplies. Plain data, so the planner never imports a backend (and a backend in
//! another crate describes itself with the same types).

/// The hardware a backend runs on.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceKind {
    Cpu {
        /// Worker threads the backend runs on.
        cores: usize,
        /// Per-core L2 (tiles are sized to sit in it).
        l2_bytes: usize,
        /// f32 lanes of the kernels' vectors (1 = portable kernels).
        simd_lanes: usize,
    },
    Gpu {
        /// Streaming multiprocessors.
        sms: usize,
        compute_capability: (u32, u32),
        /// Opt-in shared memory one block may use.
        smem_per_block: usize,
        smem_per_sm: usize,
        l2_bytes: usize,
    },
}

/// Tile and split choices a backend makes for its kernels; the planner reads only these and
/// `Caps::workers`, so the choice is testable with any policy.
#[derive(Clone, Debug, PartialEq)]
pub struct TilePolicy {
    /// Decode kernel when every sequence has at most this many queries.
    pub decode_max_q: usize,
    /// Stacked rows (q rows times group size) per prefill tile.
    pub prefill_rows: usize,
    pub prefill_kv_block: usize,
    pub decode_kv_block: usize,
    /// Below this fraction of visited tiles a prefill mask counts as sparse and tiles shrink.
    pub sparse_density: f64,
    pub min_sparse_q_block: usize,
    pub min_sparse_kv_block: usize,
    /// A split-KV partition covers at least this many kv blocks, so merging stays cheap.
    pub min_part_blocks: usize,
    /// Decode partitions wanted per worker (GPUs want several resident blocks per SM).
    pub parts_per_worker: usize,
    /// Decode over a token-major cache runs all kv heads in one item (a CPU stream-prefetch
    /// win; GPUs run heads as separate blocks).
    pub fuse_kv_heads: bool,
    /// Each sequence takes the kernel family of its own query count (a mixed batch of prefill
    /// chunks and decode tokens); `false` gives the whole batch the family of its longest
    /// query run (the single path, kept so the two are compared by measurement).
    pub mixed: bool,
}

impl TilePolicy {
    /// The CPU defaults, measured on Zen 3 with a 512 KiB L2 (docs/PERFORMANCE.md): 256
    /// stacked rows halve the K/V tile copies per flop against 128 (-10 % causal time).
    pub fn cpu() -> TilePolicy {
        Self::cpu_for_l2(512 << 10)
    }

    /// The CPU policy for a per-core L2 of `l2_bytes`: below 512 KiB the prefill tile keeps
    /// 128 stacked rows, so Q, O and the score tile (about 320 KiB at 256 rows, D 128) still
    /// fit.
    pub fn cpu_for_l2(l2_bytes: usize) -> TilePolicy {
        TilePolicy {
            decode_max_q: 16,
            prefill_rows: if l2_bytes >= 512 << 10 { 256 } else { 128 },
            prefill_kv_block: 64,
            decode_kv_block: 128,
            sparse_density: 0.25,
            min_sparse_q_block: 64,
            min_sparse_kv_block: 64,
            min_part_blocks: 4,
            parts_per_worker: 1,
            fuse_kv_heads: true,
            mixed: true,
        }
    }
}

/// A device as the planner sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Caps {
    /// Backend name, e.g. "cpu" or "cuda".
    pub name: String,
    pub kind: DeviceKind,
    /// Parallel workers the planner balances over (CPU threads, GPU SMs).
    pub workers: usize,
    pub tiles: TilePolicy,
}

impl Caps {
    /// A CPU with `cores` workers and the default policy (tests and planning experiments).
    pub fn cpu(cores: usize, simd_lanes: usize) -> Caps {
        Caps {
            name: "cpu".into(),
            kind: DeviceKind::Cpu {
                cores,
                l2_bytes: 1 << 20,
                simd_lanes,
            },
            workers: cores,
            tiles: TilePolicy::cpu(),
        }
    }

    pub fn is_gpu(&self) -> bool {
        matches!(self.kind, DeviceKind::Gpu { .. })
    }
}
