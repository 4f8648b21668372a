// flexkern-cuda: the streamed GEMV's activation prologue (gemv_stream.cu, after its wait for the
// previous kernel; appended before it): RMSNorm's scale when the launch fuses the norm, then
// the row X into the block's shared memory as Q8_0 (FK_DP4A 1) or Q8_K (2) codes, bit for bit
// as the CPU's default path, or as floats (0).
//
// Every block needs the whole row, and quantizing it is a few hundred instructions per 32
// elements. Repeated by each of ~264 blocks, that was most of a decode GEMV's fixed cost (H200,
// 8B Q4_0 step timeline with the release stamped after this prologue: 3.0 us for wo, 4.3-4.5
// for the launches that fuse the norm, 5.1 for the down projection; loading the whole row
// first, coalesced, with eight lanes a block, was slower still: more instructions). Under
// FK_SCL > 1 the launch runs in clusters of FK_SCL blocks (Hopper): each block normalizes and
// quantizes 1 / FK_SCL of the row and stores the codes into every block of its cluster
// (distributed shared memory), so each block does a fraction of the work and reads a fraction
// of X.

#ifndef FK_SCL
#define FK_SCL 1
#endif
constexpr int FK_SNT = FK_SNW * 32;  // the block's threads

// This block's rank in its cluster (0 without clusters).
__device__ __forceinline__ u32 fk_scl_rank() {
#if FK_SCL > 1
  u32 r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
#else
  return 0;
#endif
}

// Cluster barriers. The kernel arrives once at its start (fk_scl_arrive), and the prologue's
// first wait (fk_scl_opened) completes that barrier before any store into another block's
// shared memory (every block of the cluster must have started); later arrive / wait pairs
// order the prologue's stores. Without clusters the wait is the block's barrier.
__device__ __forceinline__ void fk_scl_opened() {
#if FK_SCL > 1
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void fk_scl_arrive() {
#if FK_SCL > 1
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void fk_scl_wait() {
#if FK_SCL > 1
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __syncthreads();
#endif
}

// Stores at shared address `p` of every block of the cluster (this one's included).
template <typename T>
__device__ __forceinline__ void fk_scl_store(T* p, T v) {
#if FK_SCL > 1
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "4, 8 or 16 bytes");
  const u32 a = (u32)__cvta_generic_to_shared(p);
  const u32* w = (const u32*)&v;
#pragma unroll
  for (u32 r = 0; r < FK_SCL; ++r) {
    u32 ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(r));
    if constexpr (sizeof(T) == 4) asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(ra), "r"(w[0]) : "memory");
    else if constexpr (sizeof(T) == 8)
      asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(ra), "r"(w[0]), "r"(w[1]) : "memory");
    else
      asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(ra), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                   "r"(w[3])
                   : "memory");
  }
#else
  *p = v;
#endif
}

// The weights the launch asks for after its activations (FK_SLATE, gemv_stream.cu), called where
// this thread's first activation loads are issued: the compiler barrier keeps those loads
// ahead of the weights', which would otherwise queue in front of them (the activations are
// L2 hits; in session 38's trace they arrived 1.4-3 us after the wait behind the weights).
template <class Late>
__device__ __forceinline__ void fk_late(Late& late) {
  asm volatile("" ::: "memory");
  late();
}

// This block's share [u0, u1) of `n` units of the row.
struct FkSShare {
  i64 u0, u1;
};
__device__ __forceinline__ FkSShare fk_sshare(i64 n) {
  if (FK_SCL == 1) return {0, n};
  const i64 r = fk_scl_rank();
  return {n * r / FK_SCL, n * (r + 1) / FK_SCL};
}

// RMSNorm's scale from each thread's sum of squares `ss` over its part of this block's share
// of the row (ops.cu's fk_rms_norm: the sum in f64): the block adds its threads' sums, the
// cluster adds the blocks' sums in rank order (the same total in every block). `part` (FK_SNW
// doubles of the activation area) is free again when this returns: no static shared memory
// beyond the cluster's FK_SCL sums, which the plan's budget does not count.
__device__ __forceinline__ float fk_snorm_total(double ss, i64 k, float eps, double* part) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  double tot = 0.0;
#pragma unroll
  for (int w = 0; w < FK_SNW; ++w) tot += part[w];
#if FK_SCL > 1
  __shared__ double fk_scl_ss[FK_SCL];
  if (threadIdx.x == 0) fk_scl_store(&fk_scl_ss[fk_scl_rank()], tot);
  fk_scl_arrive();
  fk_scl_wait();
  tot = 0.0;
#pragma unroll
  for (int r = 0; r < FK_SCL; ++r) tot += fk_scl_ss[r];
#endif
  __syncthreads();  // every warp has read `part` before the activations overwrite it
  return (float)(1.0 / sqrt(tot / (double)k + (double)eps));
}

__device__ __forceinline__ double fk_ss4(float4 x) {
  return (double)x.x * (double)x.x + (double)x.y * (double)x.y + (double)x.z * (double)x.z +
         (double)x.w * (double)x.w;
}

// RMSNorm's scale of the row X; 1 when NW is null. The block sums the float4s [f0, f1) (its
// share).
__device__ __forceinline__ float fk_snorm_scale(const float* __restrict__ X, const float* NW, i64 k, float eps,
                                                double* part, i64 f0, i64 f1) {
  if (NW == nullptr) return 1.f;
  double ss = 0.0;
#pragma unroll 4
  for (i64 f = f0 + threadIdx.x; f < f1; f += FK_SNT) ss += fk_ss4(*(const float4*)(X + 4 * f));
  return fk_snorm_total(ss, k, eps, part);
}

// The norm weights' cache lines into L1, issued before the wait for the previous kernel (they
// never change), so that the quantizing pass after the sum of squares finds both X and NW in L1
// (ncu, H100: that pass waited on its loads for about 8 % of an 8B QKV launch's warp samples;
// the prefetch's own effect is within the end-to-end noise and was not profiled).
__device__ __forceinline__ void fk_sprefetch_nw(const float* NW, i64 k) {
  if (NW == nullptr) return;
  for (i64 l = threadIdx.x; 32 * l < k; l += FK_SNT) asm volatile("prefetch.global.L1 [%0];" ::"l"(NW + 32 * l));
}

// Four activations from element `at` (a multiple of 4), normalized when NW is not null: x *
// scale * w, rounded as fk_rms_norm rounds.
__device__ __forceinline__ float4 fk_sx4(const float* __restrict__ X, const float* NW, float scale, i64 at) {
  float4 x = *(const float4*)(X + at);
  if (NW != nullptr) {
    const float4 w = *(const float4*)(NW + at);
    x.x = __fmul_rn(__fmul_rn(x.x, scale), w.x);
    x.y = __fmul_rn(__fmul_rn(x.y, scale), w.y);
    x.z = __fmul_rn(__fmul_rn(x.z, scale), w.z);
    x.w = __fmul_rn(__fmul_rn(x.w, scale), w.w);
  }
  return x;
}

// round-half-even of |v| < 2^22 by the float adder: the sum's low mantissa bits are the
// integer in two's complement (its low byte is the Q8 code). One FADD at full rate where
// __float2int_rn's F2I runs at a quarter; the same integer.
__device__ __forceinline__ u32 fk_rne_bits(float v) { return __float_as_uint(__fadd_rn(v, 12582912.f)); }

#if FK_DP4A == 1
#ifndef FK_SQL
#define FK_SQL 1
#endif
static_assert(FK_SQL == 1 || FK_SQL == 2 || FK_SQL == 4 || FK_SQL == 8, "lanes a 32-block");

// Q8_0 codes sit in shared memory as 16-byte chunks, the two of each 32-block swapped in every
// other 128 bytes (chunk q at fk_xqc(q)): a lane reads its 32-block's two chunks, consecutive
// lanes consecutive blocks, and unpermuted a quarter-warp's reads 32 bytes apart fell on the
// same banks two ways.
__device__ __forceinline__ int fk_xqc(int q) { return q ^ ((q >> 3) & 1); }

// Item t of the prologue (32-block t / FK_SQL, its part t % FK_SQL): x holds its activations,
// already normalized (zeros where !live). The lanes of a 32-block combine their maxima and code
// sums by shuffles, so every lane of the warp calls this; the live ones store.
__device__ __forceinline__ void fk_squant_item(float4 (&x)[8 / FK_SQL], bool live, i64 t, signed char* xq,
                                               float2* xd) {
  constexpr int L = FK_SQL, NF = 8 / L;
  float amax = 0.f;
#pragma unroll
  for (int j = 0; j < NF; ++j)
    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(x[j].x), fabsf(x[j].y)), fmaxf(fabsf(x[j].z), fabsf(x[j].w))));
#pragma unroll
  for (int o = 1; o < L; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float id = amax != 0.f ? __fdiv_rn(127.f, amax) : 0.f;
  u32 w[NF];
  int sum = 0;
#pragma unroll
  for (int j = 0; j < NF; ++j) {
    const u32 q0 = fk_rne_bits(__fmul_rn(x[j].x, id)), q1 = fk_rne_bits(__fmul_rn(x[j].y, id));
    const u32 q2 = fk_rne_bits(__fmul_rn(x[j].z, id)), q3 = fk_rne_bits(__fmul_rn(x[j].w, id));
    w[j] = __byte_perm(__byte_perm(q0, q1, 0x0040), __byte_perm(q2, q3, 0x0040), 0x5410);
    sum = __dp4a((int)w[j], 0x01010101, sum);
  }
#pragma unroll
  for (int o = 1; o < L; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (!live) return;
  const i64 g = t / L;
  const int b = (int)(t % L) * 4 * NF;  // the part's first byte in its 32-block
  signed char* const dst = xq + 16 * fk_xqc(2 * (int)g + b / 16) + b % 16;
  if constexpr (NF == 8) {
    fk_scl_store((uint4*)dst, make_uint4(w[0], w[1], w[2], w[3]));
    fk_scl_store((uint4*)(xq + 16 * fk_xqc(2 * (int)g + 1)), make_uint4(w[4], w[5], w[6], w[7]));
  } else if constexpr (NF == 4) {
    fk_scl_store((uint4*)dst, make_uint4(w[0], w[1], w[2], w[3]));
  } else if constexpr (NF == 2) {
    fk_scl_store((uint2*)dst, make_uint2(w[0], w[1]));
  } else {
    fk_scl_store((u32*)dst, w[0]);
  }
  if (t % L == 0) {
    unsigned short h;
    const float d = __fdiv_rn(amax, 127.f);
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(d));
    fk_scl_store(xd + g, make_float2(fk_half(h), __int_as_float(sum)));
  }
}

// Activations to Q8_0 codes xq [k] and (scale, code sum) xd [k / 32], bit for bit as
// fk_quant_q8 (the CPU's default rounding). FK_SQL lanes share a 32-element block, each with
// 8 / FK_SQL consecutive float4s (the planner picks it so that the share's blocks fill the
// block's threads): a lane a block left half the warps idle at k 4096 and put each load
// instruction on 32 different cache lines. With the norm, when the share's items fit the
// block's threads, each lane loads its activations once and sums their squares from
// registers: one trip to L2 after the wait, not two (H200, 8B Q4_0 decode 526-527 against
// 519-520 tok/s). The loops are warp-uniform (shuffles).
// The caller's arrive / wait publishes the codes.
template <class Late>
__device__ __forceinline__ void fk_squant(const float* __restrict__ X, const float* NW, float eps,
                                          signed char* xq, float2* xd, i64 k, double* part, Late late) {
  constexpr int L = FK_SQL, NF = 8 / L;  // lanes a block, float4s a lane
  fk_scl_opened();
  const FkSShare s = fk_sshare(k / 32);
  const i64 t0 = s.u0 * L, t1 = s.u1 * L;  // this block's (32-block, part) items
  float4 x[NF];
  if (NW != nullptr && t1 - t0 <= FK_SNT) {
    const i64 t = t0 + threadIdx.x;
    const bool live = t < t1;
    const i64 at = t / L * 32 + (t % L) * 4 * NF;
#pragma unroll
    for (int j = 0; j < NF; ++j) x[j] = live ? *(const float4*)(X + at + 4 * j) : make_float4(0.f, 0.f, 0.f, 0.f);
    fk_late(late);
    double ss = 0.0;
#pragma unroll
    for (int j = 0; j < NF; ++j) ss += fk_ss4(x[j]);
    FK_TRACE_POINT(1, ss);  // the activations loaded
    const float ns = fk_snorm_total(ss, k, eps, part);
    FK_TRACE_POINT(2, ns);  // the norm's sum reduced
    if (live) {
#pragma unroll
      for (int j = 0; j < NF; ++j) {
        const float4 w = *(const float4*)(NW + at + 4 * j);
        x[j].x = __fmul_rn(__fmul_rn(x[j].x, ns), w.x);
        x[j].y = __fmul_rn(__fmul_rn(x[j].y, ns), w.y);
        x[j].z = __fmul_rn(__fmul_rn(x[j].z, ns), w.z);
        x[j].w = __fmul_rn(__fmul_rn(x[j].w, ns), w.w);
      }
    }
    fk_squant_item(x, live, t, xq, xd);
    FK_TRACE_POINT(3, 0);  // its codes stored
    return;
  }
  const float ns = fk_snorm_scale(X, NW, k, eps, part, 8 * s.u0, FK_SCL == 1 ? k / 4 : 8 * s.u1);
  FK_TRACE_POINT(2, ns);
  bool asked = NW != nullptr;  // the norm's pass asked for the activations first
  if (asked) fk_late(late);
  for (i64 base = t0 + (threadIdx.x & ~31); base < t1; base += FK_SNT) {  // warp-uniform
    const i64 t = base + (threadIdx.x & 31);
    const bool live = t < t1;
    const i64 at = t / L * 32 + (t % L) * 4 * NF;
#pragma unroll
    for (int j = 0; j < NF; ++j) x[j] = live ? fk_sx4(X, NW, ns, at + 4 * j) : make_float4(0.f, 0.f, 0.f, 0.f);
    if (!asked) fk_late(late), asked = true;
    FK_TRACE_POINT(1, x[0].x);
    fk_squant_item(x, live, t, xq, xd);
  }
  if (!asked) fk_late(late);  // a warp without activations to quantize
  FK_TRACE_POINT(3, 0);
}
#elif FK_DP4A == 2
// Q8_K codes sit in shared memory as 16-byte chunks permuted within each 64 bytes, chunk q at
// fk_xqc(q): a lane reads its 64- or 32-weight unit's chunks, consecutive lanes consecutive
// units, and unpermuted a quarter-warp's 16-byte reads 64 bytes apart fell on the same banks
// four ways (ncu, H200, Q4_K 14336 x 4096: 69 % of the launch's shared wavefronts excess).
__device__ __forceinline__ int fk_xqc(int q) { return q ^ ((q >> 3) & 3); }

// One 256-element block g of Q8_K activations, v the lane's eight (already normalized): bit
// for bit as flexkern-quant's BlockQ8K (ggml's quantize_row_q8_K_ref, the CPU default path of
// the K-quants): the first element of largest magnitude sets iscale = -127 / max, codes
// min(round-half-even(iscale * x), 127), d = 1 / iscale; an all-zero block stays zero. The
// whole warp calls it.
__device__ __forceinline__ void fk_squant_k_item(const float (&v)[8], i64 g, int lane, signed char* xq, float* xd,
                                                 int* xs16) {
  float am = 0.f, bv = 0.f;
  int bi = 0x7fffffff;
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (fabsf(v[j]) > am) am = fabsf(v[j]), bv = v[j], bi = 8 * lane + j;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {  // larger magnitude wins, then the lower index
    const float oam = __shfl_xor_sync(0xffffffffu, am, o), obv = __shfl_xor_sync(0xffffffffu, bv, o);
    const int obi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (oam > am || (oam == am && obi < bi)) am = oam, bv = obv, bi = obi;
  }
  const float iscale = am != 0.f ? __fdiv_rn(-127.f, bv) : 0.f;
  u32 w[2] = {0u, 0u};
  int sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = am != 0.f ? min(__float2int_rn(__fmul_rn(iscale, v[j])), 127) : 0;
    sum += q;
    w[j >> 2] |= (u32)(q & 0xff) << (8 * (j & 3));
  }
  fk_scl_store((uint2*)(xq + 16 * fk_xqc((int)g * 16 + lane / 2) + 8 * (lane & 1)), make_uint2(w[0], w[1]));
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  if ((lane & 1) == 0) fk_scl_store(xs16 + g * 16 + lane / 2, sum);
  if (lane == 0) fk_scl_store(xd + g, am != 0.f ? __fdiv_rn(1.f, iscale) : 0.f);
}

// Activations to Q8_K codes xq [k], sums of 16 codes xs16 [k / 16] and scales xd [k / 256]: a
// warp per 256-element block of the block's share, eight elements a lane. When the launch
// fuses the norm and the share has at most two blocks a warp (k 4096 on one block), each lane
// loads both blocks' activations once and sums their squares from registers (one trip to L2,
// not two; H200, 8B Q4_K_M step: Q, K, V 7.6 against 8.3 us). Plain launches lost with that
// form (Q4_K 4096 x 4096 35.3 against 36.9 % of copy): they keep the loop.
template <class Late>
__device__ __forceinline__ void fk_squant_k(const float* __restrict__ X, const float* NW, float eps,
                                            signed char* xq, float* xd, int* xs16, i64 k, int warp, int lane,
                                            double* part, Late late) {
  fk_scl_opened();
  const FkSShare s = fk_sshare(k / 256);
  if (NW != nullptr && s.u1 - s.u0 <= 2 * FK_SNW) {
    const i64 g[2] = {s.u0 + warp, s.u0 + warp + FK_SNW};
    float v[2][8];
    float4 a[2], b[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const bool live = g[i] < s.u1;  // warp-uniform
      a[i] = live ? *(const float4*)(X + g[i] * 256 + 8 * lane) : make_float4(0.f, 0.f, 0.f, 0.f);
      b[i] = live ? *(const float4*)(X + g[i] * 256 + 8 * lane + 4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    fk_late(late);
    double ss = 0.0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      ss += fk_ss4(a[i]) + fk_ss4(b[i]);
      v[i][0] = a[i].x, v[i][1] = a[i].y, v[i][2] = a[i].z, v[i][3] = a[i].w;
      v[i][4] = b[i].x, v[i][5] = b[i].y, v[i][6] = b[i].z, v[i][7] = b[i].w;
    }
    FK_TRACE_POINT(1, ss);
    const float ns = fk_snorm_total(ss, k, eps, part);
    FK_TRACE_POINT(2, ns);
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (g[i] < s.u1) {
        const float4 wa = *(const float4*)(NW + g[i] * 256 + 8 * lane);
        const float4 wb = *(const float4*)(NW + g[i] * 256 + 8 * lane + 4);
        const float w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) v[i][j] = __fmul_rn(__fmul_rn(v[i][j], ns), w[j]);
      }
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (g[i] < s.u1) fk_squant_k_item(v[i], g[i], lane, xq, xd, xs16);
    FK_TRACE_POINT(3, 0);
    return;
  }
  const float ns = fk_snorm_scale(X, NW, k, eps, part, 64 * s.u0, FK_SCL == 1 ? k / 4 : 64 * s.u1);
  FK_TRACE_POINT(2, ns);
  bool asked = NW != nullptr;  // the norm's pass asked for the activations first
  if (asked) fk_late(late);
  for (i64 g = s.u0 + warp; g < s.u1; g += FK_SNW) {  // warp-uniform
    const float4 a = fk_sx4(X, NW, ns, g * 256 + 8 * lane);
    const float4 b = fk_sx4(X, NW, ns, g * 256 + 8 * lane + 4);
    if (!asked) fk_late(late), asked = true;
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    FK_TRACE_POINT(1, v[0]);
    fk_squant_k_item(v, g, lane, xq, xd, xs16);
  }
  if (!asked) fk_late(late);
  FK_TRACE_POINT(3, 0);
}
#endif
