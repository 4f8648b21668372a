//! The shared CUDA headers kernel modules start with. NVRTC compiles one source text with no
//! include paths, so each module's source is these headers' text followed by its kernels.

/// Integer types, PDL, element conversions and loads, warp reductions, `fk_silu`.
pub(crate) const COMMON: &str = include_str!("../kernels/fk_common.cuh");
/// KV encodings, RoPE pairs and `FkRopeKv` (the KV writes and the QKV projection's epilogue).
pub(crate) const KV_STORE: &str = include_str!("../kernels/kv_store.cuh");
/// mma.sync, ldmatrix and cp.async helpers (attention and the prompt GEMM).
pub(crate) const MMA: &str = include_str!("../kernels/mma.cuh");
/// Hopper wgmma, mbarrier and TMA helpers (attention and the prompt GEMM).
pub(crate) const WGMMA: &str = include_str!("../kernels/wgmma.cuh");

/// The headers' text for one module source (`#pragma once` dropped: they are pasted, not
/// included).
pub(crate) fn text(headers: &[&str]) -> String {
    headers
        .iter()
        .map(|h| h.replace("#pragma once", ""))
        .collect::<Vec<_>>()
        .join("\n")
}
