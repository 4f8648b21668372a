//! The shared CUDA headers kernel modules start with. NVRTC compiles one source text with no
//! include paths, so each module's source is these headers' text followed by its kernels.

use crate::device_struct::device_struct;

/// Integer types, PDL, mbarriers and bulk copies, element conversions and loads, warp
/// reductions, `fk_silu`.
pub(crate) const COMMON: &str = include_str!("../kernels/fk_common.cuh");
/// KV encodings and RoPE pairs (the KV writes and the QKV projection's epilogue).
const KV_STORE: &str = include_str!("../kernels/kv_store.cuh");

/// `kv_store.cuh` and the declaration of the arguments its users take (`FkRopeKv`).
pub(crate) fn kv_store() -> String {
    text(&[KV_STORE]) + "\n" + &FkRopeKv::cuda()
}

device_struct! {
    /// A decode step's RoPE and KV append (`fk_rope_kv_write`, and the QKV projection's
    /// epilogue under FK_SROPE), built and checked by the backend (`rope_kv_args`).
    pub struct FkRopeKv {
        q: u64 => "float*",
        k: u64 => "float*",
        v: u64 => "const float*",
        pos: u64 => "const u32*",
        slots: u64 => "const u32*",
        inv_freq: u64 => "const float*",
        kdst: u64 => "u8*",
        vdst: u64 => "u8*",
        kscales: u64 => "const float*",
        vscales: u64 => "const float*",
        qh: u64 => "u16*",
        tokens: i64 => "i64",
        hq: i32 => "int",
        hkv: i32 => "int",
        dim: i32 => "int",
        dim_v: i32 => "int",
        half: i32 => "int",
        neox: i32 => "int",
        kcode: i32 => "int",
        vcode: i32 => "int",
        qcode: i32 => "int",
        mscale: f32 => "float",
    }
}

/// mma.sync, ldmatrix and cp.async helpers (attention and the prompt GEMM).
pub(crate) const MMA: &str = include_str!("../kernels/mma.cuh");
/// Hopper wgmma, named-barrier and TMA helpers (attention and the prompt GEMM).
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
