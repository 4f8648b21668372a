// Helpers shared by the standalone nvcc studies in this folder (decode_stream.cu, gemv_chain.cu):
// a CUDA error check and the mbarrier operations of bulk copies. The studies stay outside the
// crate (no NVRTC, no crate headers) so that they build with nvcc alone on the device.
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));        \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

// An mbarrier in shared memory at `b` (callers fence the inits: fence.mbarrier_init).
__device__ __forceinline__ void bar_init(unsigned b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(n));
}
__device__ __forceinline__ void bar_expect(unsigned b, unsigned bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(b), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned b, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(b), "r"(parity)
                 : "memory");
  } while (!done);
}
// `bytes` (a multiple of 16) from global `src` to shared `dst`, completing on mbarrier `bar`.
__device__ __forceinline__ void bulk_g2s(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
