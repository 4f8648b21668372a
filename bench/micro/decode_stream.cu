// How fast can a decode block stream K/V tiles into shared memory on this card? A ceiling
// study for issue 13, outside flexkern: the B1 x 128k decode shape (bf16, D 128, 8 KV heads,
// [token][head][d] rows of 256 bytes, 2 KiB apart), each block streaming its partition of one
// head's keys through a ring of stages and only touching the bytes (no attention math), with
//   cpasync: every thread issues 16-byte cp.async per row chunk (flexkern's decode copies),
//   tma:     one thread issues 64-column TMA boxes of a whole tile, completing on an mbarrier,
// contiguous and paged (page 16, pages shuffled), against a plain 16-byte read of the same bytes.
// Build and run (device): nvcc -O3 -std=c++17 -arch=sm_90a -o ds decode_stream.cu -lcuda && ./ds
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "micro.cuh"

constexpr int D = 128, HKV = 8, ROW = D * 2, PAGE = 16;
constexpr long T = 131072;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
template <bool L2H>
__device__ __forceinline__ void cp16(unsigned dst, const void* src) {
  if constexpr (L2H) asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(src));
  else asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}
// A stand-in for a tile's attention math: a dependent chain of n FMAs a thread (latency, few
// issue slots), seeded from the stage so it cannot start before the tile lands.
__device__ __forceinline__ unsigned chain(unsigned seed, int n) {
  float x = __uint_as_float((seed & 0x007fffffu) | 0x3f800000u);
#pragma unroll 1
  for (int i = 0; i < n; ++i) x = fmaf(x, 0.999f, 0.001f);
  return __float_as_uint(x);
}
__device__ __forceinline__ void tma3(unsigned dst, const CUtensorMap* m, int x, int y, int z, unsigned b) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(dst),
      "l"(m), "r"(x), "r"(y), "r"(z), "r"(b)
      : "memory");
}

// Touches every 16 bytes of a stage once (as the kernel's ldmatrix would), folding them into acc.
template <int BYTES, int NT>
__device__ __forceinline__ unsigned touch(const char* st) {
  unsigned acc = 0;
#pragma unroll 4
  for (int c = threadIdx.x; c < BYTES / 16; c += NT) {
    const uint4 v = *(const uint4*)(st + c * 16);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  return acc;
}

struct Args {
  const char *k, *v;
  const int* pages;  // logical page -> physical page (paged), nullptr: contiguous
  int parts;
  unsigned* out;
};

__device__ __forceinline__ long slot_of(const Args& a, long pos) {
  if (!a.pages) return pos;
  return (long)__ldg(a.pages + (pos / PAGE)) * PAGE + pos % PAGE;
}

template <int TILE, int S, int NT, bool L2H, int FMA>
__global__ void __launch_bounds__(NT) k_cpasync(const Args a) {
  extern __shared__ __align__(1024) char sm[];
  constexpr int STAGE = TILE * ROW * 2, CH = ROW / 16, RPP = NT / CH;
  const int kvh = blockIdx.y;
  const long per = (T / a.parts) / TILE * TILE, k0 = blockIdx.x * per;
  const int nt = (int)(per / TILE);
  auto issue = [&](int t) {
    if (t < nt) {
      char* st = sm + (t % S) * STAGE;
      const int sub = threadIdx.x % CH;
#pragma unroll 4
      for (int j = threadIdx.x / CH; j < TILE; j += RPP) {
        const long slot = slot_of(a, k0 + (long)t * TILE + j);
        const long off = (slot * HKV + kvh) * ROW + sub * 16;
        cp16<L2H>(smem_u32(st + j * ROW + sub * 16), a.k + off);
        cp16<L2H>(smem_u32(st + TILE * ROW + j * ROW + sub * 16), a.v + off);
      }
    }
    asm volatile("cp.async.commit_group;");
  };
  for (int s = 0; s < S - 1; ++s) issue(s);
  unsigned acc = 0;
  for (int t = 0; t < nt; ++t) {
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 2));
    __syncthreads();
    issue(t + S - 1);
    acc ^= touch<STAGE, NT>(sm + (t % S) * STAGE);
    if constexpr (FMA > 0) acc ^= chain(acc, FMA);
  }
  if (acc == 0x12345678u) a.out[0] = acc;
}

template <int TILE, int S, int NT>
__global__ void __launch_bounds__(NT) k_tma(const Args a, const __grid_constant__ CUtensorMap tk,
                                             const __grid_constant__ CUtensorMap tv) {
  extern __shared__ __align__(1024) char sm[];
  constexpr int COL = TILE * 128, STAGE = 4 * COL;
  const unsigned base = (smem_u32(sm) + 1023u) & ~1023u;
  const unsigned bars = base + S * STAGE;
  const char* gbase = sm + (base - smem_u32(sm));
  const int kvh = blockIdx.y;
  const long per = (T / a.parts) / TILE * TILE, k0 = blockIdx.x * per;
  const int nt = (int)(per / TILE);
  if (threadIdx.x == 0)
    for (int s = 0; s < S; ++s) bar_init(bars + 8 * s, 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  // Contiguous: one thread, four boxes a tile. Paged: lane i of warp 0 copies page i / 4's box
  // i % 4 (K or V, column block).
  auto issue = [&](int t) {
    if (t >= nt) return;
    const unsigned st = base + (t % S) * STAGE, b = bars + 8 * (t % S);
    const long t0 = k0 + (long)t * TILE;
    if (!a.pages) {
      if (threadIdx.x == 0) {
        bar_expect(b, STAGE);
        tma3(st, &tk, 0, kvh, (int)t0, b);
        tma3(st + COL, &tk, 64, kvh, (int)t0, b);
        tma3(st + 2 * COL, &tv, 0, kvh, (int)t0, b);
        tma3(st + 3 * COL, &tv, 64, kvh, (int)t0, b);
      }
    } else if (threadIdx.x < 32) {
      constexpr int NP = TILE / PAGE;
      if (threadIdx.x == 0) bar_expect(b, STAGE);
      __syncwarp();
      for (int i = threadIdx.x; i < NP * 4; i += 32) {
        const int pg = i >> 2, which = i & 3;
        const int phys = __ldg(a.pages + (t0 / PAGE) + pg);
        const unsigned dst = st + which * COL + pg * PAGE * 128;
        tma3(dst, which < 2 ? &tk : &tv, (which & 1) * 64, kvh, phys * PAGE, b);
      }
    }
  };
  for (int s = 0; s < S; ++s) issue(s);
  unsigned acc = 0;
  for (int t = 0; t < nt; ++t) {
    bar_wait(bars + 8 * (t % S), (t / S) & 1);
    acc ^= touch<STAGE, NT>(gbase + (t % S) * STAGE);
    __syncthreads();
    issue(t + S);
  }
  if (acc == 0x12345678u) a.out[0] = acc;
}

// The read-only ceiling: 16-byte loads, eight in flight a thread.
__global__ void k_read(const uint4* p, long n, unsigned* out) {
  unsigned acc = 0;
  const long stride = (long)gridDim.x * blockDim.x;
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                                             : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                                             : "l"(p + i + u * stride));
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) acc ^= p[i].x;
  if (acc == 0x12345678u) out[0] = acc;
}

template <class F>
float median_ms(F launch, int reps = 15) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  launch();
  CK(cudaDeviceSynchronize());
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float m;
    CK(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
  }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

static CUtensorMap make_map(const void* p, int box_rows) {
  CUtensorMap m;
  cuuint64_t dims[3] = {D, HKV, (cuuint64_t)T};
  cuuint64_t strides[2] = {ROW, (cuuint64_t)HKV * ROW};
  cuuint32_t box[3] = {64, 1, (cuuint32_t)box_rows}, el[3] = {1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void*)p, dims, strides, box, el,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    printf("cuTensorMapEncodeTiled failed: %d\n", (int)r);
    exit(1);
  }
  return m;
}

int main() {
  const size_t bytes = (size_t)T * HKV * ROW;
  char *k, *v;
  unsigned* out;
  int* pages;
  CK(cudaMalloc(&k, bytes));
  CK(cudaMalloc(&v, bytes));
  CK(cudaMalloc(&out, 64));
  CK(cudaMemset(k, 1, bytes));
  CK(cudaMemset(v, 2, bytes));
  std::vector<int> perm(T / PAGE);
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = (int)i;
  srand(7);
  for (size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rand() % (i + 1)]);
  CK(cudaMalloc(&pages, perm.size() * 4));
  CK(cudaMemcpy(pages, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  const float rd = median_ms([&] { k_read<<<sms * 4, 512>>>((const uint4*)k, (long)(2 * bytes / 16), out); });
  // k and v are adjacent allocations only by luck: read each half separately for the ceiling.
  const float rk = median_ms([&] {
    k_read<<<sms * 4, 512>>>((const uint4*)k, (long)(bytes / 16), out);
    k_read<<<sms * 4, 512>>>((const uint4*)v, (long)(bytes / 16), out);
  });
  (void)rd;
  const double read_gbs = 2.0 * bytes / (rk * 1e-3) / 1e9;
  printf("read: %.0f GB/s (two launches of %zu MB)\n", read_gbs, bytes >> 20);

  const CUtensorMap mk64 = make_map(k, 64), mv64 = make_map(v, 64);
  const CUtensorMap mk128 = make_map(k, 128), mv128 = make_map(v, 128);
  const CUtensorMap pk = make_map(k, PAGE), pv = make_map(v, PAGE);

  auto report = [&](const char* what, int tile, int s, int parts, bool paged, float ms) {
    const long per = (T / parts) / tile * tile;
    const double b = 2.0 * HKV * parts * per * ROW;
    printf("%-18s %-6s tile %3d stages %d parts %3d blocks %4d: %.3f ms %6.0f GB/s %5.1f %% of read\n", what,
           paged ? "paged" : "contig", tile, s, parts, parts * HKV, ms, b / (ms * 1e-3) / 1e9,
           100.0 * b / (ms * 1e-3) / 1e9 / read_gbs);
  };

#define RUN_CPX(TILE, S, NT, PARTS, PAGED, L2H, FMA, WHAT)                                           \
  do {                                                                                                 \
    Args a{k, v, PAGED ? pages : nullptr, PARTS, out};                                                 \
    const int smem = TILE * ROW * 2 * S;                                                               \
    auto kf = k_cpasync<TILE, S, NT, L2H, FMA>;                                                        \
    CK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));                   \
    const float ms = median_ms([&] { kf<<<dim3(PARTS, HKV), NT, smem>>>(a); });                        \
    report(WHAT, TILE, S, PARTS, PAGED, ms);                                                           \
  } while (0)
#define RUN_CP(TILE, S, NT, PARTS, PAGED) RUN_CPX(TILE, S, NT, PARTS, PAGED, false, 0, "cpasync")
#define RUN_TMA(TILE, S, NT, PARTS, PAGED)                                                             \
  do {                                                                                                 \
    Args a{k, v, PAGED ? pages : nullptr, PARTS, out};                                                 \
    const int smem = TILE * ROW * 2 * S + 1024 + 64;                                                   \
    CK(cudaFuncSetAttribute(k_tma<TILE, S, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));   \
    const CUtensorMap& a_ = PAGED ? pk : (TILE == 64 ? mk64 : mk128);                                  \
    const CUtensorMap& b_ = PAGED ? pv : (TILE == 64 ? mv64 : mv128);                                  \
    const float ms = median_ms([&] { k_tma<TILE, S, NT><<<dim3(PARTS, HKV), NT, smem>>>(a, a_, b_); }); \
    report("tma", TILE, S, PARTS, PAGED, ms);                                                          \
  } while (0)

  if (getenv("DS_STUDY")) {
    for (int paged = 0; paged < 2; ++paged) {
      RUN_CPX(64, 2, 128, 49, paged, false, 0, "cp");
      RUN_CPX(64, 2, 128, 49, paged, true, 0, "cp+l2");
      RUN_CPX(64, 2, 128, 49, paged, true, 64, "cp+l2 f64");
      RUN_CPX(64, 2, 128, 49, paged, true, 128, "cp+l2 f128");
      RUN_CPX(64, 2, 128, 49, paged, true, 256, "cp+l2 f256");
      RUN_CPX(64, 2, 128, 49, paged, true, 512, "cp+l2 f512");
      RUN_CPX(64, 3, 128, 49, paged, true, 0, "cp+l2");
      RUN_CPX(64, 3, 128, 49, paged, true, 128, "cp+l2 f128");
      RUN_CPX(64, 3, 128, 49, paged, true, 256, "cp+l2 f256");
      RUN_CPX(64, 3, 128, 49, paged, true, 512, "cp+l2 f512");
      RUN_CPX(64, 4, 128, 49, paged, true, 256, "cp+l2 f256");
      RUN_CPX(32, 2, 128, 49, paged, true, 128, "cp+l2 f128");
      RUN_CPX(32, 4, 128, 49, paged, true, 128, "cp+l2 f128");
      RUN_CPX(64, 2, 256, 49, paged, true, 128, "cp+l2 f128 nt256");
      RUN_CPX(64, 2, 128, 98, paged, true, 128, "cp+l2 f128");
      RUN_CPX(64, 2, 128, 33, paged, true, 128, "cp+l2 f128");
    }
    return 0;
  }
  for (int paged = 0; paged < 2; ++paged) {
    for (int parts : {16, 33, 49, 66}) {
      if (paged) {
        RUN_CP(64, 3, 128, parts, true);
        RUN_CP(64, 4, 128, parts, true);
        RUN_TMA(64, 3, 128, parts, true);
        RUN_TMA(64, 4, 128, parts, true);
        RUN_TMA(64, 6, 128, parts, true);
      } else {
        RUN_CP(64, 3, 128, parts, false);
        RUN_CP(64, 4, 128, parts, false);
        RUN_CP(128, 2, 128, parts, false);
        RUN_TMA(64, 3, 128, parts, false);
        RUN_TMA(64, 4, 128, parts, false);
        RUN_TMA(64, 6, 128, parts, false);
        RUN_TMA(128, 2, 128, parts, false);
        RUN_TMA(128, 3, 128, parts, false);
      }
    }
  }
  return 0;
}
