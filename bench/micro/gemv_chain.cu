// What does the launch boundary cost a decode step's GEMVs, and does one kernel living across
// them win it back? A ceiling study for issue 14, outside flexkern. The 8B decode step's four
// weight GEMVs a layer (Q/K/V stacked 6144 x 4096, wo 4096 x 4096 added into the residual,
// gate and up 2 x 14336 x 4096 with silu(gate) * up, down 4096 x 14336 added into the
// residual), 32 layers, in planar Q4_0 (16 code bytes a 32-weight unit, its f16 scale in a
// side array) against Q8_0 activations quantized per block in shared memory with dp4a, as
// flexkern's streamed GEMV does: every warp owns consecutive rows and keeps two register
// batches of four units a lane in flight, the first loaded before the wait. Two ways to run
// the 128 GEMVs:
//   launches: one kernel a GEMV, programmatic dependent launch, the whole step one CUDA graph
//             (flexkern's decode step);
//   chain:    one persistent launch; a grid-wide barrier (a counter in global memory) between
//             GEMVs, each warp loading its next GEMV's first batch before it waits there, and,
//             with a prefetch size, lane 0 asking L2 for that many bytes of its next rows.
// Both compute the same rows in the same order, so their residuals must agree bit for bit.
// Rated against the bytes of weights read and a device-to-device copy of 2 GiB (read + write).
// Build and run (device): nvcc -O3 -std=c++17 -arch=sm_90a -o gc gemv_chain.cu && ./gc
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "micro.cuh"

constexpr int NW = 8, SUN = 4, HID = 4096, FFN = 14336, QKV = 6144, LAYERS = 32;
constexpr int KMAX = FFN;

// One GEMV: rows [0, n) of a (and b in mode 1), k weights each, against x.
// mode 0: y = W x; 1: y = silu(A x) * (B x); 2: y += W x.
struct Phase {
  const uint4* ac;
  const __half* ad;
  const uint4* bc;
  const __half* bd;
  const float* x;
  float* y;
  int n, k, mode;
  int idx;    // its place in the step, for the stamps
  // The activation prologue: 0 each thread loads its part of x and quantizes it; 1 none (timing
  // only: the dots read stale codes); 2 x bulk-copied into shared memory, then quantized from
  // there; 3 codes already quantized (xqg, as a producer's epilogue could leave them)
  // bulk-copied in (timing only).
  int pmode;
  int late;  // 1: the first batch loads after the prologue, not before the wait
  int l2d;   // launches: batches after the first that each lane asks L2 for before the wait
  const unsigned char* xqg;
};

// Thread 0's globaltimer stamps per GEMV and block: start, wait returned, prologue done, rows
// stored. The last run of a graph leaves them here.
constexpr int MAXB = 512;
__device__ unsigned long long g_st[4 * LAYERS * MAXB * 4];
__device__ __forceinline__ void stamp(const Phase& p, int slot) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    g_st[((long)p.idx * MAXB + blockIdx.x) * 4 + slot] = t;
  }
}

__device__ __forceinline__ float silu(float v) { return v / (1.f + __expf(-v)); }

// Units a lane loads as one batch: the same bytes in flight for one matrix or two (gate and up
// at four units each spilled the chain kernel).
template <int NM>
__host__ __device__ constexpr int sun() { return NM == 2 ? SUN / 2 : SUN; }
template <int NM>
struct Batch {
  uint4 w[sun<NM>()][NM];
  __half d[sun<NM>()][NM];
};

template <int NM>
__device__ __forceinline__ void load(Batch<NM>& b, const Phase& p, int row, int u0, int units) {
#pragma unroll
  for (int j = 0; j < sun<NM>(); ++j) {
    const int u = u0 + 32 * j;
    if (u < units) {
      const int at = row * units + u;
      b.w[j][0] = __ldg(p.ac + at);
      b.d[j][0] = p.ad[at];
      if (NM == 2) {
        b.w[j][NM - 1] = __ldg(p.bc + at);
        b.d[j][NM - 1] = p.bd[at];
      }
    }
  }
}

// The block's Q8_0 copy of x: codes [k] and (scale, code sum) [k / 32], four lanes a group of
// 32 (few registers: the warp's first batch is live across this). x was written by other
// blocks of this launch in the chain, so it is read through L2 (ld.global.cg), never .nc.
// SH: x is already in shared memory (read there).
template <bool SH = false>
__device__ __forceinline__ void quantize(const float* x, int k, signed char* xq, float2* xd) {
  for (int e = 8 * threadIdx.x; e < k; e += 8 * NW * 32) {
    const float4* x4 = (const float4*)(x + e);
    const float4 f0 = SH ? x4[0] : __ldcg(x4), f1 = SH ? x4[1] : __ldcg(x4 + 1);
    const float v[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const float d = amax / 127.f, id = d > 0.f ? 1.f / d : 0.f;
    int sum = 0;
    unsigned w[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = __float2int_rn(v[i] * id);
      sum += q;
      w[i / 4] |= (unsigned)(q & 255) << (8 * (i % 4));
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    *(uint2*)(xq + e) = make_uint2(w[0], w[1]);
    if ((threadIdx.x & 3) == 0) xd[e / 32] = make_float2(d, __int_as_float(sum));
  }
}

// Thread 0 copies `bytes` from `src` to shared `dst` in 16 KB pieces; the block waits for them.
__device__ __forceinline__ void bulk_in(void* dst, const void* src, unsigned bytes) {
  __shared__ __align__(8) unsigned long long bar;
  const unsigned b = (unsigned)__cvta_generic_to_shared(&bar), d = (unsigned)__cvta_generic_to_shared(dst);
  if (threadIdx.x == 0) {
    bar_init(b, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    bar_expect(b, bytes);
    for (unsigned o = 0; o < bytes; o += 16384)
      bulk_g2s(d + o, (const char*)src + o, bytes - o < 16384 ? bytes - o : 16384, b);
  }
  __syncthreads();  // the barrier initialized before anyone waits on it
  bar_wait(b, 0);
}

// Two such copies on one barrier (one trip to L2).
__device__ __forceinline__ void bulk_in2(void* d1, const void* s1, unsigned n1, void* d2, const void* s2, unsigned n2) {
  __shared__ __align__(8) unsigned long long bar;
  const unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    bar_init(b, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    bar_expect(b, n1 + n2);
    bulk_g2s((unsigned)__cvta_generic_to_shared(d1), s1, n1, b);
    bulk_g2s((unsigned)__cvta_generic_to_shared(d2), s2, n2, b);
  }
  __syncthreads();
  bar_wait(b, 0);
}

__device__ __forceinline__ float dot(const uint4& w, __half d, const signed char* xq, float2 xd, int u) {
  const int4 lo = *(const int4*)(xq + 32 * u), hi = *(const int4*)(xq + 32 * u + 16);
  const unsigned ws[4] = {w.x, w.y, w.z, w.w};
  const int xl[4] = {lo.x, lo.y, lo.z, lo.w}, xh[4] = {hi.x, hi.y, hi.z, hi.w};
  int acc = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = __dp4a((int)(ws[i] & 0x0f0f0f0fu), xl[i], acc);
    acc = __dp4a((int)((ws[i] >> 4) & 0x0f0f0f0fu), xh[i], acc);
  }
  return (float)(acc - 8 * __float_as_int(xd.y)) * __half2float(d) * xd.x;
}

// The warp's rows of one GEMV after its first batch came in: quantize x (whole block), stream.
template <int NM>
__device__ __forceinline__ void stream(const Phase& p, Batch<NM>& first, int r0, int r1, signed char* xq, float2* xd) {
  const int lane = threadIdx.x & 31, units = p.k / 32;
  if (p.pmode == 0) {
    quantize(p.x, p.k, xq, xd);
  } else if (p.pmode == 2) {
    float* xs = (float*)(xq + KMAX + KMAX / 4);  // after the codes and their (scale, sum)
    bulk_in(xs, p.x, 4 * p.k);
    quantize<true>(xs, p.k, xq, xd);
  } else if (p.pmode == 3) {
    bulk_in2(xq, p.xqg, p.k, xd, p.xqg + KMAX, p.k / 4);  // one trip to L2
  }
  __syncthreads();
  if (p.late && r0 < r1) load<NM>(first, p, r0, lane, units);
  stamp(p, 2);
  if (r0 >= r1) return;
  int row = r0;
  int u0 = lane;
  float acc[NM] = {};
  auto compute = [&](const Batch<NM>& b) {
#pragma unroll
    for (int j = 0; j < sun<NM>(); ++j) {
      const int u = u0 + 32 * j;
      if (u < units) {
#pragma unroll
        for (int t = 0; t < NM; ++t) acc[t] += dot(b.w[j][t], b.d[j][t], xq, xd[u], u);
      }
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int t = 0; t < NM; ++t)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
    if (lane == 0) {
      const float v = NM == 2 ? silu(acc[0]) * acc[NM - 1] : acc[0];
      p.y[row] = p.mode == 2 ? p.y[row] + v : v;
    }
#pragma unroll
    for (int t = 0; t < NM; ++t) acc[t] = 0.f;
  };
  // Two batches take turns: the next (this row's or the next row's) loads while one computes.
  auto step = [&](Batch<NM>& cur, Batch<NM>& nxt) {
    int nrow = row;
    int nu = u0 + 32 * sun<NM>();
    if (nu - lane >= units) nu = lane, ++nrow;
    const bool more = nrow < r1;
    if (more) load<NM>(nxt, p, nrow, nu, units);
    compute(cur);
    if (nrow != row) store();
    row = nrow, u0 = nu;
    return more;
  };
  Batch<NM> other;
  while (step(first, other) && step(other, first)) {
  }
}

// Rows split evenly over every warp of the grid (counts differ by at most one).
__device__ __forceinline__ void rows_of(const Phase& p, int& r0, int& r1) {
  const int warps = gridDim.x * NW, gw = blockIdx.x * NW + (threadIdx.x >> 5);
  r0 = (int)((long)gw * p.n / warps), r1 = (int)((long)(gw + 1) * p.n / warps);
}

extern __shared__ __align__(16) unsigned char smem[];

// Lane's units of the warp's batches 1..d (after its first) asked of L2.
template <int NM>
__device__ __forceinline__ void prefetch_batches(const Phase& p, int r0, int r1, int d) {
  const int lane = threadIdx.x & 31, units = p.k / 32;
  int row = r0, u0 = lane;
  for (int i = 0; i < d; ++i) {
    if ((u0 += 32 * sun<NM>()) - lane >= units) u0 = lane, ++row;
    if (row >= r1) return;
#pragma unroll
    for (int j = 0; j < sun<NM>(); ++j) {
      const int u = u0 + 32 * j;
      if (u < units) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p.ac + row * units + u));
        if (NM == 2) asm volatile("prefetch.global.L2 [%0];" ::"l"(p.bc + row * units + u));
      }
    }
  }
}

__global__ void __launch_bounds__(NW * 32, 2) k_launch(Phase p) {
  signed char* xq = (signed char*)smem;
  float2* xd = (float2*)(smem + KMAX);
  int r0, r1;
  rows_of(p, r0, r1);
  const int lane = threadIdx.x & 31;
  stamp(p, 0);
  if (p.mode == 1) {
    Batch<2> first;
    if (r0 < r1 && !p.late) load<2>(first, p, r0, lane, p.k / 32);
    prefetch_batches<2>(p, r0, r1, p.l2d);
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    stamp(p, 1);
    stream<2>(p, first, r0, r1, xq, xd);
  } else {
    Batch<1> first;
    if (r0 < r1 && !p.late) load<1>(first, p, r0, lane, p.k / 32);
    prefetch_batches<1>(p, r0, r1, p.l2d);
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    stamp(p, 1);
    stream<1>(p, first, r0, r1, xq, xd);
  }
  __syncthreads();
  stamp(p, 3);
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Lane 0 asks L2 for up to `bytes` of the warp's rows of `c` from row r0 (rows are contiguous).
__device__ __forceinline__ void prefetch_rows(const uint4* c, int r0, int r1, int units, int bytes) {
  if (bytes <= 0 || r0 >= r1 || (threadIdx.x & 31) != 0) return;
  const long span = (long)(r1 - r0) * units * 16;
  const unsigned size = (unsigned)(span < bytes ? span : bytes) & ~15u;
  if (size) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(c + (long)r0 * units), "r"(size) : "memory");
}

// Waits until `target` blocks have arrived (thread 0 spins; the block follows at the barrier).
__device__ __forceinline__ void grid_wait(const unsigned* ctr, unsigned target) {
  if (threadIdx.x == 0)
    while (ld_acquire(ctr) < target) __nanosleep(20);
  __syncthreads();
}

template <int NM>
__device__ __forceinline__ void chain_phase(const Phase& p, int i, unsigned* ctr, int pf, signed char* xq, float2* xd) {
  int r0, r1;
  rows_of(p, r0, r1);
  const int lane = threadIdx.x & 31;
  stamp(p, 0);
  Batch<NM> first;
  if (r0 < r1) load<NM>(first, p, r0, lane, p.k / 32);
  if (pf > 0) {
    prefetch_rows(p.ac, r0, r1, p.k / 32, pf);
    if (NM == 2) prefetch_rows(p.bc, r0, r1, p.k / 32, pf);
  }
  if (i > 0) grid_wait(ctr, (unsigned)i * gridDim.x);
  stamp(p, 1);
  stream<NM>(p, first, r0, r1, xq, xd);
  __syncthreads();  // every warp's rows stored
  stamp(p, 3);
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(ctr, 1u);
  }
}

// The chain's GEMVs in constant memory: read where used, not held in registers (a Phase copied
// into registers made the chain spill).
constexpr int MAXPH = 8 * LAYERS;  // the step, then the step without prologues
__constant__ Phase c_ph[MAXPH];

__global__ void __launch_bounds__(NW * 32, 2) k_chain(int first, int stride, int n, unsigned* ctr, int pf) {
  signed char* xq = (signed char*)smem;
  float2* xd = (float2*)(smem + KMAX);
  for (int i = 0; i < n; ++i) {
    const Phase& p = c_ph[first + stride * i];
    if (p.mode == 1) chain_phase<2>(p, i, ctr, pf, xq, xd);
    else chain_phase<1>(p, i, ctr, pf, xq, xd);
  }
}

// Fills [0, n) 16-byte words with hashed bits (codes), or f16 scales of random sign.
__global__ void k_fill_codes(uint4* c, long n, unsigned seed) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    uint4 v;
    h ^= h >> 13, h *= 0x5bd1e995u, v.x = h;
    h ^= h >> 15, h *= 0x27d4eb2du, v.y = h;
    h ^= h >> 13, h *= 0x5bd1e995u, v.z = h;
    h ^= h >> 15, h *= 0x27d4eb2du, v.w = h;
    c[i] = v;
  }
}
__global__ void k_fill_scales(__half* d, long n, unsigned seed, float mag) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2246822519u ^ seed;
    h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12;
    d[i] = __float2half((h & 1 ? mag : -mag) * (0.5f + (h >> 8 & 255) / 512.f));
  }
}

struct Mat {
  uint4* c;
  __half* d;
  int n, k;
};

static Mat make_mat(int n, int k, unsigned seed) {
  Mat m{nullptr, nullptr, n, k};
  const long units = (long)n * (k / 32);
  CK(cudaMalloc(&m.c, units * 16));
  CK(cudaMalloc(&m.d, units * 2));
  k_fill_codes<<<1024, 256>>>(m.c, units, seed);
  // |y| about |x| / 2 for random codes (q - 8 has a spread of ~4.6): keeps 32 layers finite.
  k_fill_scales<<<1024, 256>>>(m.d, units, seed * 7 + 1, 0.5f / (4.6f * sqrtf((float)k)));
  return m;
}

static Phase phase(const Mat& a, const Mat* b, const float* x, float* y, int mode) {
  return Phase{a.c, a.d, b ? b->c : nullptr, b ? b->d : nullptr, x, y, a.n, a.k, mode, 0, 0, 0, 0, nullptr};
}

static double bytes_of(const Phase& p) { return (double)p.n * (p.k / 32) * 18.0 * (p.mode == 1 ? 2 : 1); }

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms of `reps` replays of g (after two warm-ups), each reset by `reset` first if set.
static float time_graph(cudaGraphExec_t g, cudaStream_t s, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 2; ++i) CK(cudaGraphLaunch(g, s));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(g, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  return median(t);
}

static void launch_one(const Phase& p, int grid, int smem_bytes, bool pdl, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(NW * 32);
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, k_launch, p));
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int smem_bytes = KMAX + KMAX / 32 * 8;
  CK(cudaFuncSetAttribute(k_launch, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  CK(cudaFuncSetAttribute(k_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  int occ_l = 0, occ_c = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_l, k_launch, NW * 32, smem_bytes));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_c, k_chain, NW * 32, smem_bytes));
  const int sms = prop.multiProcessorCount, grid = sms * std::min(occ_l, occ_c);
  printf("%s: %d SMs, L2 %d MiB; %d warps a block, blocks an SM: launch %d, chain %d; grid %d\n", prop.name, sms,
         prop.l2CacheSize >> 20, NW, occ_l, occ_c, grid);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  printf("copy: %.0f GB/s (read + write, median of 7)\n", copy_gbs(s));

  // The step's weights, 32 layers (3.9 GB), and its activations.
  std::vector<Mat> wqkv, wo, wg, wu, wd;
  for (int l = 0; l < LAYERS; ++l) {
    wqkv.push_back(make_mat(QKV, HID, 100 * l + 1));
    wo.push_back(make_mat(HID, HID, 100 * l + 2));
    wg.push_back(make_mat(FFN, HID, 100 * l + 3));
    wu.push_back(make_mat(FFN, HID, 100 * l + 4));
    wd.push_back(make_mat(HID, FFN, 100 * l + 5));
  }
  float *x, *x0, *qkv, *h;
  CK(cudaMalloc(&x, HID * 4));
  CK(cudaMalloc(&x0, HID * 4));
  CK(cudaMalloc(&qkv, QKV * 4));
  CK(cudaMalloc(&h, FFN * 4));
  {
    std::vector<float> hx(HID);
    for (int i = 0; i < HID; ++i) hx[i] = sinf(0.37f * i) + 0.25f * cosf(1.3f * i);
    CK(cudaMemcpy(x0, hx.data(), HID * 4, cudaMemcpyHostToDevice));
  }
  // "Attention" is the identity here: wo reads Q's 4096 outputs.
  std::vector<Phase> ph;
  for (int l = 0; l < LAYERS; ++l) {
    ph.push_back(phase(wqkv[l], nullptr, x, qkv, 0));
    ph.push_back(phase(wo[l], nullptr, qkv, x, 2));
    ph.push_back(phase(wg[l], &wu[l], x, h, 1));
    ph.push_back(phase(wd[l], nullptr, h, x, 2));
  }
  for (size_t i = 0; i < ph.size(); ++i) ph[i].idx = (int)i;
  std::vector<Phase> ph_skip = ph;  // the same GEMVs without their activation prologue
  for (Phase& p : ph_skip) p.pmode = 1;
  unsigned char* xqg;  // "already quantized" codes for prologue 3 (zeros: timing only)
  CK(cudaMalloc(&xqg, KMAX + KMAX / 4));
  CK(cudaMemset(xqg, 0, KMAX + KMAX / 4));
  double step_bytes = 0, kind_bytes[4] = {};
  for (size_t i = 0; i < ph.size(); ++i) step_bytes += bytes_of(ph[i]), kind_bytes[i % 4] += bytes_of(ph[i]);
  CK(cudaMemcpyToSymbol(c_ph, ph.data(), ph.size() * sizeof(Phase)));
  CK(cudaMemcpyToSymbol(c_ph, ph_skip.data(), ph.size() * sizeof(Phase), ph.size() * sizeof(Phase)));
  unsigned* ctr;
  CK(cudaMalloc(&ctr, 4));
  CK(cudaDeviceSynchronize());
  printf("step: %zu GEMVs, %.1f MB of weights (a layer: QKV %.1f, wo %.1f, gate/up %.1f, down %.1f MB)\n", ph.size(),
         step_bytes / 1e6, kind_bytes[0] / LAYERS / 1e6, kind_bytes[1] / LAYERS / 1e6, kind_bytes[2] / LAYERS / 1e6,
         kind_bytes[3] / LAYERS / 1e6);

  // Graphs: the residual reset, then the step.
  auto capture = [&](auto body) {
    cudaGraph_t g;
    cudaGraphExec_t e;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(cudaMemcpyAsync(x, x0, HID * 4, cudaMemcpyDeviceToDevice, s));
    body();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&e, g, 0));
    return e;
  };
  // The ways: launches (programmatic dependent launch; "2 an SM": padded shared memory lets no
  // third block of the next launch in beside a launch's two) with each prologue, the chain.
  const int pad_smem = 80 << 10;  // three of these exceed an SM's 228 KB
  CK(cudaFuncSetAttribute(k_launch, cudaFuncAttributeMaxDynamicSharedMemorySize, pad_smem));
  int occ_pad = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_pad, k_launch, NW * 32, pad_smem));
  printf("launch blocks an SM with %d KB of shared memory: %d\n", pad_smem >> 10, occ_pad);
  struct Way {
    const char* name;
    int kind;  // 0: launches, 1: chain
    bool pdl;
    int smem, pf;
    bool skipq;  // the chain: its GEMVs without prologues
    int pmode, late, l2d;  // launches: the prologue, the first batch after it, L2 prefetch depth
    bool exact;  // computes what the first way does (checked)
  };
  const Way ways[] = {{"launches", 0, true, pad_smem, 0, false, 0, 0, 0, true},
                      {"launches, L2 1 batch", 0, true, pad_smem, 0, false, 0, 0, 1, true},
                      {"launches, L2 2 batches", 0, true, pad_smem, 0, false, 0, 0, 2, true},
                      {"launches, L2 4 batches", 0, true, pad_smem, 0, false, 0, 0, 4, true},
                      {"launches, codes bulk-copied", 0, true, pad_smem, 0, false, 3, 0, 0, false},
                      {"launches, codes, L2 2 batches", 0, true, pad_smem, 0, false, 3, 0, 2, false},
                      {"launches, no prologue", 0, true, pad_smem, 0, false, 1, 0, 0, false},
                      {"chain", 1, false, smem_bytes, 0, false, 0, 0, 0, true}};
  constexpr int NWAYS = sizeof(ways) / sizeof(ways[0]);
  // A graph of `way` over GEMVs first, first + stride, ... (n of them).
  auto build = [&](const Way& w, int first, int stride, int n) {
    return capture([&] {
      if (w.kind == 0) {
        for (int i = 0; i < n; ++i) {
          Phase p = ph[first + stride * i];
          p.pmode = w.pmode, p.late = w.late, p.l2d = w.l2d, p.xqg = xqg;
          launch_one(p, grid, w.smem, w.pdl, s);
        }
      } else {
        CK(cudaMemsetAsync(ctr, 0, 4, s));
        k_chain<<<grid, NW * 32, w.smem, s>>>(first + (w.skipq ? (int)ph.size() : 0), stride, n, ctr, w.pf);
        CK(cudaGetLastError());
      }
    });
  };
  cudaGraphExec_t g_step[NWAYS];
  for (int i = 0; i < NWAYS; ++i) g_step[i] = build(ways[i], 0, 1, (int)ph.size());

  // Agreement: the residual after one step, each way, against the first.
  std::vector<float> ra(HID), rb(HID);
  for (int i = 0; i < NWAYS; ++i) {
    if (!ways[i].exact) continue;
    CK(cudaGraphLaunch(g_step[i], s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(i == 0 ? ra.data() : rb.data(), x, HID * 4, cudaMemcpyDeviceToHost));
    if (i == 0) {
      bool finite = true;
      double amax = 0;
      for (float v : ra) finite &= std::isfinite(v), amax = std::max(amax, (double)fabsf(v));
      printf("%s: residual max |x| %.3g, %s\n", ways[0].name, amax, finite ? "finite" : "NOT FINITE");
      if (!finite) return 1;
    } else {
      const bool same = memcmp(ra.data(), rb.data(), HID * 4) == 0;
      printf("%s: residual %s %s's\n", ways[i].name, same ? "bit-identical to" : "DIFFERS from", ways[0].name);
      if (!same) return 1;
    }
  }

  // Timing: rounds alternating the ways (this card is not ours alone).
  for (int r = 0; r < 3; ++r) {
    float base = 0;
    for (int i = 0; i < NWAYS; ++i) {
      const float ms = time_graph(g_step[i], s, 15);
      if (i == 0) base = ms;
      printf("round %d: %-26s %7.1f us a step, %5.2f us a layer, %4.0f GB/s of weights, %.3fx the first\n", r,
             ways[i].name, 1e3 * ms, 1e3 * ms / LAYERS, step_bytes / (ms * 1e6), base / ms);
    }
  }

  // Where a GEMV's time goes: one more replay of each way, its stamps read back. Per kind, the
  // mean over layers 2-32 of each stamp's first / median / last block, in us from the previous
  // GEMV's last block end.
  const char* kinds[4] = {"QKV", "wo", "gate/up", "down"};
  std::vector<unsigned long long> st(4 * LAYERS * MAXB * 4);
  for (int i = 0; i < NWAYS; ++i) {
    CK(cudaGraphLaunch(g_step[i], s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpyFromSymbol(st.data(), g_st, st.size() * 8));
    printf("stamps, %s (us after the previous GEMV's last block end; first / median / last block):\n", ways[i].name);
    for (int kind = 0; kind < 4; ++kind) {
      double acc[4][3] = {};
      int cnt = 0;
      for (int l = 1; l < LAYERS; ++l) {
        const int q = 4 * l + kind;
        unsigned long long prev_end = 0;
        for (int b = 0; b < grid; ++b) prev_end = std::max(prev_end, st[((long)(q - 1) * MAXB + b) * 4 + 3]);
        for (int slot = 0; slot < 4; ++slot) {
          std::vector<double> v;
          for (int b = 0; b < grid; ++b) v.push_back(((double)st[((long)q * MAXB + b) * 4 + slot] - (double)prev_end) / 1e3);
          std::sort(v.begin(), v.end());
          acc[slot][0] += v.front(), acc[slot][1] += v[v.size() / 2], acc[slot][2] += v.back();
        }
        ++cnt;
      }
      printf("  %-8s start %6.2f %6.2f %6.2f | wait done %6.2f %6.2f %6.2f | prologue done %6.2f %6.2f %6.2f | end %6.2f %6.2f %6.2f\n",
             kinds[kind], acc[0][0] / cnt, acc[0][1] / cnt, acc[0][2] / cnt, acc[1][0] / cnt, acc[1][1] / cnt,
             acc[1][2] / cnt, acc[2][0] / cnt, acc[2][1] / cnt, acc[2][2] / cnt, acc[3][0] / cnt, acc[3][1] / cnt,
             acc[3][2] / cnt);
    }
  }

  // Each GEMV kind alone, back to back over the 32 layers' copies (distinct weights, L2 cold).
  const char* names[4] = {"QKV 6144 x 4096", "wo 4096 x 4096", "gate/up 2 x 14336 x 4096", "down 4096 x 14336"};
  for (int kind = 0; kind < 4; ++kind) {
    cudaGraphExec_t g[NWAYS];
    for (int i = 0; i < NWAYS; ++i) g[i] = build(ways[i], kind, 4, LAYERS);
    for (int r = 0; r < 2; ++r) {
      printf("%-25s round %d:", names[kind], r);
      for (int i = 0; i < NWAYS; ++i) {
        const float ms = time_graph(g[i], s, 15);
        printf(" | %s %.2f us (%.0f GB/s)", ways[i].name, 1e3 * ms / LAYERS, kind_bytes[kind] / (ms * 1e6));
      }
      printf("\n");
    }
  }
  return 0;
}
