// Helpers shared by the standalone nvcc studies in this folder: a CUDA error check, timing and
// the copy rate they rate against, and the mbarrier operations of bulk copies. The studies stay outside the
// crate (no NVRTC, no crate headers) so that they build with nvcc alone on the device.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

// Median milliseconds of `reps` calls of `body` on stream `s`, CUDA events around each, after
// one untimed call.
template <class F>
float median_ms_on(cudaStream_t s, F body, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  body();
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, s));
    body();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A device-to-device copy of 2 GiB on `s`, read and write counted, in GB/s (median of 7): the
// rate the studies are rated against, as flexkern's bench rates its figures.
inline double copy_gbs(cudaStream_t s) {
  const size_t bytes = 1ul << 31;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  const float ms = median_ms_on(s, [&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); }, 7);
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e6);
}
