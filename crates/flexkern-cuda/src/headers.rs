//! The shared CUDA headers kernel modules start with. NVRTC compiles one source text with no
//! include paths, so each module's source is these headers' text followed by its kernels.

/// Integer types, PDL, element conversions and loads, warp reductions, `fk_silu`.
pub(crate) const COMMON: &str = include_str!("../kernels/fk_common.cuh");
/// KV encodings and RoPE pairs (the KV writes and the QKV projection's epilogue).
const KV_STORE: &str = include_str!("../kernels/kv_store.cuh");

/// `kv_store.cuh` and the declaration of the arguments its users take (`FkRopeKv`).
pub(crate) fn kv_store() -> String {
    text(&[KV_STORE]) + "\n" + &crate::tensor_ops::FkRopeKv::cuda()
}
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
