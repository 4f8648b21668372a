// How close to the copy rate can one kernel launch read a decode GEMV's weights? A ceiling study
// for issue 14, outside flexkern: a kernel that only reads B bytes (16-byte loads, U of them in
// flight a thread, folded into one word so the loads stay) over a grid of G blocks an SM of T
// threads, its launches back to back in one CUDA graph, each launch reading its own copy of the
// bytes (the copies overflow L2), timed per launch. Launch forms:
//   plain: stream order (the next launch starts when this one has ended);
//   pdl:   programmatic dependent launch, each kernel waiting (griddepcontrol.wait) before
//          its first load, as a GEMV must wait for its activations: the next launch's blocks
//          may start early but read nothing until this one ends.
// Sizes: Q4_0 14336 x 4096 (33 MB), 4096 x 4096 (9.4 MB), 4096 x 14336, F16 14336 x 4096 (117
// MB). Who reads which bytes: see `k_read`.
// Rated against a device-to-device copy of 2 GiB (read + write), as flexkern's bench is.
// Build and run (device): nvcc -O3 -std=c++17 -arch=sm_90a -o rc read_ceiling.cu && ./rc
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "micro.cuh"

// Who reads which bytes (own): 0 grid-stride: each warp reads whole 512 * U-byte chunks, warp
// w the chunks w, w + warps, ... (the whole grid sweeps the bytes together); 1 warp rows: the
// bytes are n rows and every warp owns consecutive rows (counts differ by at most one), which
// it reads front to back, as flexkern's streamed GEMV does; 2 block rows: every block owns
// consecutive rows and its warps take turns over them in 512 * U-byte chunks. Thread t loads U
// words 512 bytes apart. (Rows owned cyclically, warp w rows w, w + warps, ..., read slower
// than warp rows in session 35 call f; that branch also slowed the other forms' code, so it
// went.)
template <int U>
__global__ void k_read(const uint4* __restrict__ p, long words, long n, int own, int pdl, unsigned* out) {
  if (pdl) {
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  const long lane = threadIdx.x & 31, wpb = blockDim.x >> 5, warp = threadIdx.x >> 5;
  const long warps = (long)gridDim.x * wpb, gw = (long)blockIdx.x * wpb + warp;
  long lo = 0, hi = words, first = gw, step = warps;
  if (own == 1) {
    const long rw = words / n;  // words a row
    lo = gw * n / warps * rw, hi = (gw + 1) * n / warps * rw, first = 0, step = 1;
  } else if (own == 2) {
    const long rw = words / n;
    lo = (long)blockIdx.x * n / gridDim.x * rw, hi = ((long)blockIdx.x + 1) * n / gridDim.x * rw;
    first = warp, step = wpb;
  }
  unsigned acc = 0;
  for (long c = lo + first * 32 * U; c < hi; c += step * 32 * U) {
    uint4 v[U];
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const long w = c + 32 * i + lane;
      v[i] = w < hi ? __ldg(p + w) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < U; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

template <int U>
static void launch(const uint4* p, long words, long n, int own, int blocks, int threads, bool pdl, unsigned* out,
                   cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, k_read<U>, p, words, n, own, (int)pdl, out));
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* out;
  CK(cudaMalloc(&out, 4));
  auto time = [&](auto body, int reps) { return median_ms_on(s, body, reps); };
  // One 1.2 GB pool: copies of each size are consecutive slices of it.
  const size_t pool_bytes = 1200ul << 20;
  unsigned char* pool;
  CK(cudaMalloc(&pool, pool_bytes));
  CK(cudaMemset(pool, 3, pool_bytes));
  const double copy_gbs = ::copy_gbs(s);
  printf("%s, %d SMs; copy %.0f GB/s (read + write, median of 7)\n", prop.name, sms, copy_gbs);
  // Rows: Q4_0's 18 bytes a 32-weight unit (codes and scale together), F16's 2 a weight.
  struct Size {
    const char* name;
    long n, row_bytes;
  };
  const Size sizes[] = {{"Q4_0 14336x4096", 14336, 4096 / 32 * 18},
                        {"Q4_0 4096x4096", 4096, 4096 / 32 * 18},
                        {"Q4_0 4096x14336", 4096, 14336 / 32 * 18},
                        {"F16 14336x4096", 14336, 4096 * 2}};
  struct Cfg {
    int blocks_per_sm, threads, u;
  };
  const Cfg cfgs[] = {{2, 256, 4}, {2, 256, 8}, {2, 512, 4}, {4, 256, 4}, {16, 128, 4}};
  const char* owns[3] = {"grid-stride", "warp rows", "block rows"};
  for (const Size& sz : sizes) {
    const long bytes = sz.n * sz.row_bytes;
    const long words = bytes / 16, stride = (bytes + 255) / 256 * 256;
    const int copies = (int)std::min(64L, (long)(pool_bytes / stride));
    for (int own = 0; own < 3; ++own)
    for (bool pdl : {false, true}) {
      for (const Cfg& c : cfgs) {
        const int blocks = c.blocks_per_sm * sms;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < copies; ++i) {
          const uint4* p = (const uint4*)(pool + (long)i * stride);
          if (c.u == 4) launch<4>(p, words, sz.n, own, blocks, c.threads, pdl, out, s);
          else launch<8>(p, words, sz.n, own, blocks, c.threads, pdl, out, s);
        }
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        const float ms = time([&] { CK(cudaGraphLaunch(ge, s)); }, 9) / copies;
        printf("%-16s %-11s %-5s %2d blocks/SM x %4d threads, %d x 16 B in flight: %7.2f us  %5.1f %% of copy\n",
               sz.name, owns[own], pdl ? "pdl" : "plain", c.blocks_per_sm, c.threads, c.u, ms * 1e3,
               100.0 * bytes / (ms * 1e6) / copy_gbs);
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
      }
    }
  }
  CK(cudaGetLastError());
  return 0;
}
