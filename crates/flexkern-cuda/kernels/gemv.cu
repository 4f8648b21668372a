// flexkern-cuda: quantized GEMV, one template for every format (quant_blocks.cuh's units).
//
// Y[j, r] = sum_e W[r, e] X[j, e] for the first m (<= MB) activation rows. A block of FK_NW
// warps owns FK_NW * R consecutive weight rows, each warp R of them; lane l walks units l,
// l + 32, ... of its rows (consecutive lanes read consecutive units: coalesced), decodes each
// unit once and dots it against all m activation rows, then the warp reduces with shuffles.
// Modes: 0 plain; 1 gate and up in one pass (matrices a and b), Y = silu(a x) * (b x);
// 2 the down projection with the activation formed on load, x = silu(X) * X2.
// Configured by the module's defines: FK_FMT (a unit type), FK_MB, FK_R, FK_MODE, FK_XV (1:
// activation rows 16-byte aligned, float4 loads), FK_DP4A (staged Q8_0 / Q4_0: activations
// quantized to Q8_0 first, as the CPU's default precision does, and dotted with dp4a), FK_ACC
// (1: the product is added into Y).
// FK_STREAM: single rows run gemv_stream.cu's kernel instead (appended after this file).

#define FK_NW 4
#ifndef FK_DP4A
#define FK_DP4A 0
#endif
// Blocks per SM the register budget must allow: 4 (<= 128 registers) for small batches, 2 for
// MB >= 8, whose accumulators need more (ptxas's default budget spills them).
#ifndef FK_MINB
#define FK_MINB (FK_MB >= 8 ? 2 : 4)
#endif
#ifndef FK_ACC
#define FK_ACC 0
#endif

__device__ __forceinline__ FkF4 fk_ldx4(const float* p) {
  FkF4 v;
#if FK_XV
  asm("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.a), "=f"(v.b), "=f"(v.c), "=f"(v.d) : "l"(p));
#else
  v.a = __ldg(p);
  v.b = __ldg(p + 1);
  v.c = __ldg(p + 2);
  v.d = __ldg(p + 3);
#endif
  return v;
}

// FK_DNORM (the direct kernel, one activation row): x is RMS-normalized with weights NW first.
// The row's scale is known only after every element, so the kernel dots x * NW and scales the
// sums at the end, while each warp sums the squares of the x it loads anyway (no prologue pass,
// no block barrier): the norm's own launch goes.
#ifndef FK_DNORM
#define FK_DNORM 0
#endif
// FK_DXS: the direct kernel stages its activation row in shared memory (fk_gemv_dxs, below).
#ifndef FK_DXS
#define FK_DXS 0
#endif

// Activation row j from element `at`: X (mode 2: silu(X) * X2; FK_DNORM: X * NW).
struct FkX {
  const float* x;
  const float* x2;
  const float* nw;
  __device__ __forceinline__ FkF4 ld4(int e) const {
    FkF4 v = fk_ldx4(x + e);
#if FK_MODE == 2
    const FkF4 u = fk_ldx4(x2 + e);
    v.a = fk_silu(v.a) * u.a;
    v.b = fk_silu(v.b) * u.b;
    v.c = fk_silu(v.c) * u.c;
    v.d = fk_silu(v.d) * u.d;
#elif FK_DNORM
    const FkF4 w = fk_ldx4(nw + e);
    v.a = __fmul_rn(v.a, w.a);
    v.b = __fmul_rn(v.b, w.b);
    v.c = __fmul_rn(v.c, w.c);
    v.d = __fmul_rn(v.d, w.d);
#endif
    return v;
  }
  __device__ __forceinline__ float ld1(i64 e) const {
#if FK_MODE == 2
    return fk_silu(__ldg(x + e)) * __ldg(x2 + e);
#elif FK_DNORM
    return __fmul_rn(__ldg(x + e), __ldg(nw + e));
#else
    return __ldg(x + e);
#endif
  }
};

#ifndef FK_EMBED
// The warp's sums reduced across lanes and written: Y[j, row] (mode 1: silu(gate) * up).
template <int NM>
__device__ __forceinline__ void fk_gemv_store(const float (&acc)[NM][FK_R][FK_MB], float* __restrict__ Y,
                                              i64 row0, i64 n, int m, int lane) {
#pragma unroll
  for (int r = 0; r < FK_R; ++r) {
#pragma unroll
    for (int j = 0; j < FK_MB; ++j) {
      float v[NM];
#pragma unroll
      for (int t = 0; t < NM; ++t) {
        v[t] = acc[t][r][j];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v[t] += __shfl_xor_sync(0xffffffffu, v[t], off);
      }
      const i64 row = row0 + r;
      if (lane == 0 && row < n && j < m) {
#if FK_MODE == 1
        const float y = fk_silu(v[0]) * v[1];
#else
        const float y = v[0];
#endif
        // FK_ACC: a residual connection, Y += W x (the residual add's launch goes).
        Y[j * n + row] = FK_ACC ? Y[j * n + row] + y : y;
      }
    }
  }
}
#endif

#if defined(FK_STREAM) || FK_MODE == 3
// Mode 3: rows [0, na) are a's into Y, [na, na + nb) b's into y2, the rest c's into y3 (the
// launch's n is the total): FkStack (quant/gemv.rs, declared before this file), passed to every
// streamed kernel and to the direct kernel's stacked launches; the other modes ignore it.
// Where row `row` of the launch lives: its matrix, its row there, its output.
struct FkSRow {
  FkMat m;
  i64 row;
  float* y;
};
__device__ __forceinline__ FkSRow fk_srow(const FkMat& a, const FkMat& b, const FkStack& st, float* Y, i64 row) {
#if FK_MODE == 3
  if (row < st.na) return {a, row, Y};
  if (row < st.na + st.nb) return {b, row - st.na, st.y2};
  return {st.c, row - st.na - st.nb, st.y3};
#else
  return {a, row, Y};
#endif
}
#endif

// Float4 f of activations (a chunk, or the whole row in the streamed kernel) lives at f ^ (unit & 7): unit-strided reads spread banks.
template <class F>
__device__ __forceinline__ int fk_xswz(int f) {
  constexpr int PER = F::UE / 4;
  static_assert(PER >= 8, "units of at least 32 weights");
  return f ^ ((f / PER) & 7);
}

template <class F>
struct FkXs {
  const float* xs;
  int u;
  __device__ __forceinline__ FkF4 ld4(int e) const {
    const float4 v = *(const float4*)(xs + 4 * fk_xswz<F>((u * F::UE + e) >> 2));
    return FkF4{v.x, v.y, v.z, v.w};
  }
};

#if defined(FK_STREAM)
// The streamed kernel (gemv_stream.cu) follows this file.
#elif defined(FK_STAGED) && !defined(FK_EMBED)
// The staged form, for block formats: the block walks k in chunks of FK_CW weights. Per chunk,
// every thread copies its share of the activation rows into shared memory (swizzled so lanes
// reading consecutive units hit distinct banks) and each warp copies the byte window of its
// rows' blocks with 16-byte loads, issued one chunk ahead into registers; then lanes decode
// units from shared memory. Every weight byte is read from DRAM once, by wide coalesced loads,
// instead of by 1-2 byte loads per unit field (which left the old kernel bound by L1
// wavefronts at ~15 % of DRAM bandwidth).
// FK_CW, weights per chunk, comes from the host (quant::staged_chunk): one unit per lane where
// the activation rows fit in 64 KB of dynamic shared memory.
static_assert(FK_CW % FK_FMT::UE == 0, "chunks of whole units");
constexpr int FK_QK = FK_FMT::QK;
static_assert(FK_CW % FK_QK == 0, "chunks of whole blocks");
constexpr int FK_WB = (FK_CW / FK_QK * FK_BB + 15) / 16 * 16 + 16;  // window bytes, with slack
constexpr int FK_NLD = (FK_WB / 16 + 31) / 32;  // 16-byte loads per lane per row and chunk

template <class F>
__device__ __forceinline__ void fk_gemv_staged(const FkMat& a, const FkMat& b, const float* __restrict__ X,
                                               const float* __restrict__ X2, float* __restrict__ Y, int m,
                                               i64 n, i64 k) {
  constexpr int NM = FK_MODE == 1 ? 2 : 1;
  extern __shared__ __align__(16) float fk_xs[];  // FK_MB rows of FK_CW activations
  float (*xs)[FK_CW] = reinterpret_cast<float (*)[FK_CW]>(fk_xs);
#if FK_DP4A
  // Int8 activations instead: FK_MB rows of FK_CW codes, then each block's (scale, code sum).
  // X is the codes [m][k], X2 the (scale, sum) pairs [m][k / 32] (fk_quant_q8).
  signed char (*xq)[FK_CW] = reinterpret_cast<signed char (*)[FK_CW]>(fk_xs);
  float2 (*xd)[FK_CW / 32] = reinterpret_cast<float2 (*)[FK_CW / 32]>(fk_xs + FK_MB * FK_CW / 4);
  static_assert(F::UE == 32 && FK_MODE != 2, "Q8_0 activations: 32-weight units, no fused SwiGLU input");
#endif
  __shared__ __align__(16) u8 ws[FK_NW][NM * FK_R][FK_WB];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 row0 = ((i64)blockIdx.x * FK_NW + warp) * FK_R;
  float acc[NM][FK_R][FK_MB] = {};

  // The byte window [lo, hi) of row `row`'s blocks for weights [c0, c0 + cw), 16-aligned.
  auto window = [&](i64 row, i64 c0, int cw, i64& lo, int& len, int& skew) {
    const i64 start = row * a.row_bytes + c0 / FK_QK * FK_BB;
    lo = start & ~(i64)15;
    skew = (int)(start - lo);
    len = (int)(((start + cw / FK_QK * FK_BB + 15) & ~(i64)15) - lo);
  };
  uint4 pre[NM * FK_R][FK_NLD];
  auto fetch = [&](i64 c0) {
    const int cw = (int)min((i64)FK_CW, k - c0);
#pragma unroll
    for (int t = 0; t < NM; ++t)
#pragma unroll
      for (int r = 0; r < FK_R; ++r) {
        const i64 row = row0 + r;
        i64 lo;
        int len, skew;
        window(row, c0, cw, lo, len, skew);
        const u8* base = (t == 0 ? a.w : b.w) + lo;
#pragma unroll
        for (int i = 0; i < FK_NLD; ++i) {
          const int at = 16 * (lane + 32 * i);
          if (row < n && at < len)
            asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(pre[t * FK_R + r][i].x), "=r"(pre[t * FK_R + r][i].y),
                           "=r"(pre[t * FK_R + r][i].z), "=r"(pre[t * FK_R + r][i].w)
                         : "l"(base + at));
        }
      }
  };
  fetch(0);
  for (i64 c0 = 0; c0 < k; c0 += FK_CW) {
    const int cw = (int)min((i64)FK_CW, k - c0);
#if FK_DP4A
    // Int8 activations of this chunk, 16 bytes at a time, and the blocks' scales.
    for (int i = threadIdx.x; i < FK_MB * (FK_CW / 16); i += FK_NW * 32) {
      const int j = i / (FK_CW / 16), f = i % (FK_CW / 16);
      if (j < m && 16 * f < cw)
        *(uint4*)(&xq[j][16 * f]) = __ldg((const uint4*)((const signed char*)X + j * k + c0) + f);
    }
    for (int i = threadIdx.x; i < FK_MB * (FK_CW / 32); i += FK_NW * 32) {
      const int j = i / (FK_CW / 32), b = i % (FK_CW / 32);
      if (j < m && 32 * b < cw) xd[j][b] = __ldg((const float2*)X2 + (j * k + c0) / 32 + b);
    }
#else
    // Activations of this chunk, swizzled (mode 2 forms silu(X) * X2 here, once).
    for (int i = threadIdx.x; i < FK_MB * (FK_CW / 4); i += FK_NW * 32) {
      const int j = i / (FK_CW / 4), f = i % (FK_CW / 4);
      if (j < m && 4 * f < cw) {
        const FkX xl{X + j * k + c0, X2 + j * k + c0};
        const FkF4 v = xl.ld4(4 * f);
        *(float4*)(&xs[j][4 * fk_xswz<FK_FMT>(f)]) = make_float4(v.a, v.b, v.c, v.d);
      }
    }
#endif
#pragma unroll
    for (int tr = 0; tr < NM * FK_R; ++tr)
#pragma unroll
      for (int i = 0; i < FK_NLD; ++i) {
        const int at = 16 * (lane + 32 * i);
        if (at < FK_WB) *(uint4*)(&ws[warp][tr][at]) = pre[tr][i];
      }
    __syncthreads();
    if (c0 + FK_CW < k) fetch(c0 + FK_CW);  // in flight while this chunk is computed
    const int units = cw / F::UE;
    for (int u = lane; u < units; u += 32) {
#pragma unroll
      for (int r = 0; r < FK_R; ++r) {
        const i64 row = row0 + r;
        if (row < n) {
          i64 lo;
          int len, skew;
          window(row, c0, cw, lo, len, skew);
#pragma unroll
          for (int t = 0; t < NM; ++t) {
            const FkMat sm = fk_window_mat<F>(&ws[warp][t * FK_R + r][skew], t == 0 ? a : b, row, c0 / FK_QK);
#if FK_DP4A
#pragma unroll
            for (int j = 0; j < FK_MB; ++j)
              if (j < m) {
                int x8[8];
                *(uint4*)x8 = *(const uint4*)(&xq[j][32 * u]);
                *(uint4*)(x8 + 4) = *(const uint4*)(&xq[j][32 * u + 16]);
                const float2 d = xd[j][u];
                acc[t][r][j] += F::dot_q8(sm, 0, u, x8, d.x, __float_as_int(d.y));
              }
#else
            float q[F::UE], s[F::G], o[F::G];
            F::unit(sm, 0, u, q, s, o);
#pragma unroll
            for (int j = 0; j < FK_MB; ++j)
              if (j < m) acc[t][r][j] += fk_unit_dot<F>(q, s, o, FkXs<F>{xs[j], u});
#endif
          }
        }
      }
    }
    __syncthreads();
  }
  fk_gemv_store<NM>(acc, Y, row0, n, m, lane);
}
extern "C" __global__ void __launch_bounds__(FK_NW * 32, FK_MINB)
    fk_gemv(FkMat a, FkMat b, const float* __restrict__ X, const float* __restrict__ X2,
            float* __restrict__ Y, int m, i64 n, i64 k) {
  fk_gemv_staged<FK_FMT>(a, b, X, X2, Y, m, n, k);
}
#if FK_DP4A
// Activation rows to Q8_0 codes as the CPU's default path quantizes them (flexkern-quant's
// quantize_activation, ggml's x86 rounding): per 32-element block, amax, d = f16(amax / 127),
// codes round-to-nearest-even(x * (127 / amax)); also each block's code sum (Q4_0's offset).
// One warp per block, a lane per element. Out: codes [m][k], (d, sum bits) [m][k / 32].
extern "C" __global__ void fk_quant_q8(const float* __restrict__ X, signed char* __restrict__ Q,
                                       float2* __restrict__ D, i64 blocks) {
  const i64 bidx = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (bidx >= blocks) return;  // warp-uniform
  const int lane = threadIdx.x & 31;
  const float x = X[bidx * 32 + lane];
  float amax = fabsf(x);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float id = amax != 0.f ? __fdiv_rn(127.f, amax) : 0.f;
  const int q = __float2int_rn(__fmul_rn(x, id));
  Q[bidx * 32 + lane] = (signed char)q;
  int sum = q;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    unsigned short h;
    const float d = __fdiv_rn(amax, 127.f);
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(d));
    D[bidx] = make_float2(fk_half(h), __int_as_float(sum));
  }
}
#endif
#elif !defined(FK_EMBED)
// The stack (mode 3) and the norm's arguments: FkStack comes with either (quant/mod.rs), so
// the launch's parameters keep the streamed kernel's order.
#if FK_DNORM
static_assert(FK_MB == 1 && FK_MODE != 2, "the norm: one activation row, formed from X alone");
#define FK_STACK_ARG , FkStack st, const float *__restrict__ NW, float eps
#define FK_STACK_PASS , st, NW, eps
#elif FK_MODE == 3
#define FK_STACK_ARG , FkStack st
#define FK_STACK_PASS , st
#else
#define FK_STACK_ARG
#define FK_STACK_PASS
#endif
// The direct kernel's step: unit u of the warp's rows [rb, min(rb + FK_R, ny)) of each matrix,
// decoded once and dotted with activation row j's unit (`x_at(j)`, an FkX or FkXs) for each j
// that `live(j)`.
template <class F, int NM, class XAt, class Live>
__device__ __forceinline__ void fk_dunit(const FkMat& wa, const FkMat& b, i64 rb, i64 ny, i64 u,
                                         float (&acc)[NM][FK_R][FK_MB], const XAt& x_at, const Live& live) {
#pragma unroll
  for (int r = 0; r < FK_R; ++r) {
    const i64 row = rb + r;
    if (row < ny) {
#pragma unroll
      for (int t = 0; t < NM; ++t) {
        float q[F::UE], s[F::G], o[F::G];
        F::unit(t == 0 ? wa : b, row, u, q, s, o);
#pragma unroll
        for (int j = 0; j < FK_MB; ++j)
          if (live(j)) acc[t][r][j] += fk_unit_dot<F>(q, s, o, x_at(j));
      }
    }
  }
}
// A template, so `if constexpr` discards the tail of formats without one.
template <class F>
__device__ __forceinline__ void fk_gemv_impl(const FkMat& a, const FkMat& b, const float* __restrict__ X,
                                             const float* __restrict__ X2, float* __restrict__ Y, int m,
                                             i64 n, i64 k FK_STACK_ARG) {
  constexpr int NM = FK_MODE == 1 ? 2 : 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 row0 = ((i64)blockIdx.x * FK_NW + warp) * FK_R;
  if (row0 >= n) return;  // warp-uniform
  // The warp's first matrix, its first row there, that matrix's rows and output: a, row0, n
  // and Y, except in a stacked launch (mode 3: Q, K and V), where they are the row's own.
  FkMat wa = a;
  i64 rb = row0, ny = n;
  float* y = Y;
#if FK_MODE == 3
  static_assert(FK_R == 1 && FK_MB == 1, "stacked launches: a row per warp, one activation row");
  {
    const FkSRow s = fk_srow(a, b, st, Y, row0);
    wa = s.m, rb = s.row, ny = s.row + 1, y = s.y;  // the row is in its matrix (row0 < n)
  }
#endif
#if __CUDA_ARCH__ >= 900
  // Programmatic dependent launch (the host sets it on Hopper): our blocks start as the
  // previous kernel's leave, and nothing is read or written before it completes. (Asking for
  // the weights' first bytes here, into L1 or L2, made 8B F16 decode 4-12 % slower.)
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");  // X and Y only after this
#endif
  float acc[NM][FK_R][FK_MB] = {};
#if FK_DNORM
  double ss = 0.0;  // this lane's share of the row's sum of squares
#define FK_NWAT(e) (NW + (e))
#else
#define FK_NWAT(e) nullptr  // FkX's norm weights: none
#endif

  const i64 units = k / F::UE;
  // FK_DUN (choose::direct_unroll): units a lane loads before their FMAs, so each warp keeps
  // that many units' loads in flight instead of one round trip a unit.
#ifdef FK_DUN
#pragma unroll FK_DUN
#endif
  for (i64 u = lane; u < units; u += 32) {
    fk_dunit<F, NM>(
        wa, b, rb, ny, u, acc,
        [&](int j) { return FkX{X + j * k + u * F::UE, X2 + j * k + u * F::UE, FK_NWAT(u * F::UE)}; },
        [&](int j) { return FK_DNORM || j < m; });  // the norm: m is 1 (the host checks), no branch before the loads
#if FK_DNORM
    // The unit's squares after its dots: x is in L1 by now, and the weights' loads above go
    // out first (summed before them, x's round trip came ahead of the weights' in every unit:
    // 8B F16's large launches lost 9 %).
    float s = 0.f;  // a unit's squares in f32, then one f64 add
#pragma unroll
    for (int e = 0; e < F::UE; e += 4) {
      const FkF4 v = fk_ldx4(X + u * F::UE + e);
      s += v.a * v.a + v.b * v.b + v.c * v.c + v.d * v.d;
    }
    ss += (double)s;
#endif
  }
  if constexpr (FkHasTail<F>::value) {
    // Plain floats: the last k % UE (< 8) elements, one per lane (j outermost: few live
    // pointers, no spills at MB 16).
#pragma unroll
    for (int j = 0; j < FK_MB; ++j) {
      if (j < m) {
        const FkX xl{X + j * k, X2 + j * k, FK_NWAT(0)};
        for (i64 e = units * F::UE + lane; e < k; e += 32) {
          const float xv = xl.ld1(e);
#if FK_DNORM
          ss += (double)__ldg(X + e) * (double)__ldg(X + e);
#endif
#pragma unroll
          for (int r = 0; r < FK_R; ++r) {
            const i64 row = rb + r;
            if (row < ny) {
#pragma unroll
              for (int t = 0; t < NM; ++t) acc[t][r][j] += F::elem(t == 0 ? wa : b, row, e) * xv;
            }
          }
        }
      }
    }
  }
#if FK_DNORM
  // The warp's sum of squares, then the CPU's scale (f64), applied to the sums of x * NW.
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float ns = (float)(1.0 / sqrt(ss / (double)k + (double)eps));
#pragma unroll
  for (int t = 0; t < NM; ++t)
#pragma unroll
    for (int r = 0; r < FK_R; ++r) acc[t][r][0] *= ns;
#endif
  fk_gemv_store<NM>(acc, y, rb, ny, m, lane);
}
#if FK_DXS
// FK_DXS (quant::choose::direct_stages_x; single rows of MLX): a lane reading its own unit's 32
// activations from global memory touches 32 cache lines a load across the warp, which held MLX
// at 10-22 % of copy. Here the block stages the row once in shared memory (formed as FkX forms
// it, swizzled as the staged kernel's), and its warps then walk the row groups grid-stride: the
// host launches the resident blocks only, so each block's staging serves many rows.
static_assert(FK_MB == 1, "one activation row in shared memory");
template <class F>
__device__ __forceinline__ void fk_gemv_dxs(const FkMat& a, const FkMat& b, const float* __restrict__ X,
                                            const float* __restrict__ X2, float* __restrict__ Y, int m,
                                            i64 n, i64 k FK_STACK_ARG) {
  constexpr int NM = FK_MODE == 1 ? 2 : 1;
  extern __shared__ __align__(16) float fk_dx[];  // the row, k floats
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");  // X and Y only after this
#endif
  const FkX xl{X, X2, FK_NWAT(0)};
#if FK_DNORM
  double ss = 0.0;  // this thread's share of the sum of squares: f32 a float4, then f64
#endif
  for (int f = threadIdx.x; f < (int)(k / 4); f += FK_NW * 32) {
    const FkF4 v = xl.ld4(4 * f);
    *(float4*)(fk_dx + 4 * fk_xswz<F>(f)) = make_float4(v.a, v.b, v.c, v.d);
#if FK_DNORM
    const FkF4 r = fk_ldx4(X + 4 * f);
    ss += (double)(r.a * r.a + r.b * r.b + r.c * r.c + r.d * r.d);
#endif
  }
#if FK_DNORM
  // The block's sum in a fixed order: lanes, then warps.
  __shared__ double fk_dss[FK_NW];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if (lane == 0) fk_dss[warp] = ss;
#endif
  __syncthreads();
#if FK_DNORM
  ss = 0.0;
#pragma unroll
  for (int w = 0; w < FK_NW; ++w) ss += fk_dss[w];
  const float ns = (float)(1.0 / sqrt(ss / (double)k + (double)eps));
#endif
  const i64 units = k / F::UE, groups = (n + FK_R - 1) / FK_R;
  for (i64 g = (i64)blockIdx.x * FK_NW + warp; g < groups; g += (i64)gridDim.x * FK_NW) {
    FkMat wa = a;
    i64 rb = g * FK_R, ny = n;
    float* y = Y;
#if FK_MODE == 3
    static_assert(FK_R == 1, "stacked launches: a row per warp");
    {
      const FkSRow s = fk_srow(a, b, st, Y, rb);
      wa = s.m, rb = s.row, ny = s.row + 1, y = s.y;
    }
#endif
    float acc[NM][FK_R][FK_MB] = {};
#ifdef FK_DUN
#pragma unroll FK_DUN
#endif
    for (i64 u = lane; u < units; u += 32)
      fk_dunit<F, NM>(
          wa, b, rb, ny, u, acc, [&](int) { return FkXs<F>{fk_dx, (int)u}; }, [](int) { return true; });
#if FK_DNORM
#pragma unroll
    for (int t = 0; t < NM; ++t)
#pragma unroll
      for (int r = 0; r < FK_R; ++r) acc[t][r][0] *= ns;
#endif
    fk_gemv_store<NM>(acc, y, rb, ny, m, lane);
  }
}
#endif
extern "C" __global__ void __launch_bounds__(FK_NW * 32, FK_MINB)
    fk_gemv(FkMat a, FkMat b, const float* __restrict__ X, const float* __restrict__ X2,
            float* __restrict__ Y, int m, i64 n, i64 k FK_STACK_ARG) {
#if FK_DXS
  fk_gemv_dxs<FK_FMT>(a, b, X, X2, Y, m, n, k FK_STACK_PASS);
#else
  fk_gemv_impl<FK_FMT>(a, b, X, X2, Y, m, n, k FK_STACK_PASS);
#endif
}
#else
// Embedding: out[t, :] = the exact dequantization of row ids[t] (ids checked on the host).
// One thread per unit of the output.
template <class F>
__device__ __forceinline__ void fk_embed_impl(const FkMat& a, const u32* __restrict__ ids,
                                              float* __restrict__ out, i64 tokens, i64 k) {
  const i64 units = k / F::UE;
  const i64 per_row = units + (k - units * F::UE);  // whole units, then tail elements
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < tokens * per_row;
       i += (i64)gridDim.x * blockDim.x) {
    const i64 t = i / per_row, u = i % per_row;
    const i64 row = ids[t];
    float* y = out + t * k;
    if (u < units) {
      float q[F::UE], s[F::G], o[F::G], w[F::UE];
      F::unit(a, row, u, q, s, o);
      fk_unit_decode<F>(q, s, o, w);
#pragma unroll
      for (int e = 0; e < F::UE; ++e) y[u * F::UE + e] = w[e];
    } else if constexpr (FkHasTail<F>::value) {
      const i64 e = units * F::UE + (u - units);
      y[e] = F::elem(a, row, e);
    }
  }
}
extern "C" __global__ void fk_embed(FkMat a, const u32* __restrict__ ids, float* __restrict__ out,
                                    i64 tokens, i64 k) {
  fk_embed_impl<FK_FMT>(a, ids, out, tokens, k);
}
#endif
