// flexkern-cuda: warp-level tensor-core helpers shared by the attention kernels and the prompt
// GEMM: shared-memory addresses, ldmatrix, mma.sync m16n8k16 and cp.async.
#pragma once

__device__ __forceinline__ u32 fk_msmem(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// d += a * b on one m16n8k16 tile, operands of type T (1 f16, 2 bf16), f32 accumulators.
template <int T>
__device__ __forceinline__ void fk_mma_t(float* d, const u32* a, u32 b0, u32 b1) {
  static_assert(T == 1 || T == 2, "f16 or bf16 operands");
  if constexpr (T == 2)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void fk_ldsm4(u32* r, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void fk_ldsm2(u32* r, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void fk_ldsm4t(u32* r, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// One 16-byte cp.async, zero-filled when `live` is false (nothing is read then). L2 > 0 asks L2
// to fetch that many bytes around the address from DRAM at once.
template <int L2>
__device__ __forceinline__ void fk_cp16_l2(u32 dst, const void* from, bool live) {
  const u32 n = live ? 16 : 0;
  if constexpr (L2 == 256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(from), "r"(n));
  else if constexpr (L2 == 128)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(from), "r"(n));
  else if constexpr (L2 == 64)
    asm volatile("cp.async.cg.shared.global.L2::64B [%0], [%1], 16, %2;" ::"r"(dst), "l"(from), "r"(n));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(from), "r"(n));
}

// The same copy of a row known to be live: no source size, so ptxas emits the LDGSTS alone (the
// zero-filling form came with three predicated-off LDS of padding each, SASS, NVRTC 13.0).
template <int L2>
__device__ __forceinline__ void fk_cp16_live_l2(u32 dst, const void* from) {
  if constexpr (L2 == 256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(from));
  else if constexpr (L2 == 128)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(from));
  else if constexpr (L2 == 64)
    asm volatile("cp.async.cg.shared.global.L2::64B [%0], [%1], 16;" ::"r"(dst), "l"(from));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(from));
}
