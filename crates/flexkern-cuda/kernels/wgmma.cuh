// flexkern-cuda: Hopper warpgroup MMA helpers (sm_90a) shared by the prefill attention and the
// prompt GEMM: shared-memory descriptors, wgmma issue / fence / commit / wait, named barriers
// and TMA tensor copies (the mbarriers are fk_common.cuh's). The operand type is FK_QT's (1 f16, 2 bf16).
#pragma once
#if __CUDA_ARCH__ >= 900

// Shared-memory matrix descriptor: start, leading and stride byte offsets (16-byte units),
// 128-byte swizzle.
__device__ __forceinline__ u64 fk_wdesc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3ffffu) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}

// d (64 x N f32, the m16n8 accumulator layout per warp: N / 8 fragments of 4) += A B, A from
// registers (`a`, wgmma's register layout) or shared memory (`da`, K-major), B by `desc` (TRANS:
// N-major). Accumulates onto d when `acc` is non-zero, else overwrites. N 128 (Q K^T of a
// 128-key tile, P V at Dv 128) reads A once where two n64 instructions would read it twice.
#if FK_QT == 2
#define FK_WTY "bf16"
#else
#define FK_WTY "f16"
#endif
#define FK_WD(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define FK_WD_ALL FK_WD(0), FK_WD(1), FK_WD(2), FK_WD(3), FK_WD(4), FK_WD(5), FK_WD(6), FK_WD(7)
#define FK_WD_ALL16 FK_WD_ALL, FK_WD(8), FK_WD(9), FK_WD(10), FK_WD(11), FK_WD(12), FK_WD(13), FK_WD(14), FK_WD(15)
#define FK_WD_LIST                                                                                    \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FK_WD_LIST64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, " \
  "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, " \
  "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
// One wgmma: N, the accumulator list and operands, the operand number of `acc`, the A and B
// operands' text, then the inputs.
#define FK_WGMMA_ASM(N, DLIST, DOPS, ACC, AB, ...)                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #ACC ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N \
               "k16.f32." FK_WTY "." FK_WTY " " DLIST ", " AB ";\n}\n"                                  \
               : DOPS                                                                                \
               : __VA_ARGS__)
template <int TRANS>
__device__ __forceinline__ void fk_wgmma(float (*d)[4], const u32* a, u64 desc, u32 acc) {
  FK_WGMMA_ASM(64, FK_WD_LIST, FK_WD_ALL, 38, "{%32, %33, %34, %35}, %36, p, 1, 1, %37", "r"(a[0]), "r"(a[1]),
               "r"(a[2]), "r"(a[3]), "l"(desc), "n"(TRANS), "r"(acc));
}
template <int TRANS>
__device__ __forceinline__ void fk_wgmma128(float (*d)[4], const u32* a, u64 desc, u32 acc) {
  FK_WGMMA_ASM(128, FK_WD_LIST64, FK_WD_ALL16, 70, "{%64, %65, %66, %67}, %68, p, 1, 1, %69", "r"(a[0]), "r"(a[1]),
               "r"(a[2]), "r"(a[3]), "l"(desc), "n"(TRANS), "r"(acc));
}
__device__ __forceinline__ void fk_wgmma_ss(float (*d)[4], u64 da, u64 db, u32 acc) {
  FK_WGMMA_ASM(64, FK_WD_LIST, FK_WD_ALL, 34, "%32, %33, p, 1, 1, 0, 0", "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void fk_wgmma_ss128(float (*d)[4], u64 da, u64 db, u32 acc) {
  FK_WGMMA_ASM(128, FK_WD_LIST64, FK_WD_ALL16, 66, "%64, %65, p, 1, 1, 0, 0", "l"(da), "l"(db), "r"(acc));
}

__device__ __forceinline__ void fk_wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void fk_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void fk_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// All but the last committed group done (the last may still run).
__device__ __forceinline__ void fk_wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
// Pins accumulator registers at this point of the program: the compiler must not move their
// reads or writes across a wgmma issue or wait, which it cannot see use them.
template <int N> __device__ __forceinline__ void fk_wg_pin(float (*d)[4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

// Named barriers of the consumers: ids 2 + wg (a warpgroup's turn at the tensor cores, both
// warpgroups), 4 + wg (one warpgroup). 0 is __syncthreads, 1 fk_sync_compute.
__device__ __forceinline__ void fk_named_sync(u32 id, u32 n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void fk_named_arrive(u32 id, u32 n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

// A CUtensorMap, passed by value (__grid_constant__: TMA reads it where the parameter lives).
struct __align__(64) FkTmap {
  u64 v[16];
};

// TMA bulk copies of one box into shared memory at `dst`, completing on mbarrier `bar` (which
// expects their bytes: fk_bar_expect). Coordinates innermost first; out-of-range elements
// arrive as zeros.
__device__ __forceinline__ void fk_tma_load2(u32 dst, const FkTmap* map, int x, int y, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"((u64)map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void fk_tma_load3(u32 dst, const FkTmap* map, int x, int y, int z, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(dst),
      "l"((u64)map), "r"(x), "r"(y), "r"(z), "r"(bar)
      : "memory");
}

#endif
