// flexkern-cuda: quantized GEMV, one template for every format (quant_blocks.cuh's units).
//
// Y[j, r] = sum_e W[r, e] X[j, e] for the first m (<= MB) activation rows. A block of FK_NW
// warps owns FK_NW * R consecutive weight rows, each warp R of them; lane l walks units l,
// l + 32, ... of its rows (consecutive lanes read consecutive units: coalesced), decodes each
// unit once and dots it against all m activation rows, then the warp reduces with shuffles.
// Modes: 0 plain; 1 gate and up in one pass (matrices a and b), Y = silu(a x) * (b x);
// 2 the down projection with the activation formed on load, x = silu(X) * X2.
// Configured by the module's defines: FK_FMT (a unit type), FK_MB, FK_R, FK_MODE, FK_XV (1:
// activation rows 16-byte aligned, float4 loads).

#define FK_NW 4
// Blocks per SM the register budget must allow: 4 (<= 128 registers) for small batches, 2 for
// MB >= 8, whose accumulators need more (ptxas's default budget spills them).
#define FK_MINB (FK_MB >= 8 ? 2 : 4)

// Not inlined: the accurate expf, inlined at every (activation row, unit element) of the
// down-with-SwiGLU kernel, took ptxas over a minute for Q4_K at MB 16 (under 2 s as a call).
__device__ __noinline__ float fk_silu(float x) { return x / (1.0f + expf(-x)); }

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

// Activation row j from element `at`: X (mode 2: silu(X) * X2).
struct FkX {
  const float* x;
  const float* x2;
  __device__ __forceinline__ FkF4 ld4(int e) const {
    FkF4 v = fk_ldx4(x + e);
#if FK_MODE == 2
    const FkF4 u = fk_ldx4(x2 + e);
    v.a = fk_silu(v.a) * u.a;
    v.b = fk_silu(v.b) * u.b;
    v.c = fk_silu(v.c) * u.c;
    v.d = fk_silu(v.d) * u.d;
#endif
    return v;
  }
  __device__ __forceinline__ float ld1(i64 e) const {
#if FK_MODE == 2
    return fk_silu(__ldg(x + e)) * __ldg(x2 + e);
#else
    return __ldg(x + e);
#endif
  }
};

#ifndef FK_EMBED
// A template, so `if constexpr` discards the tail of formats without one.
template <class F>
__device__ __forceinline__ void fk_gemv_impl(const FkMat& a, const FkMat& b, const float* __restrict__ X,
                                             const float* __restrict__ X2, float* __restrict__ Y, int m,
                                             i64 n, i64 k) {
  constexpr int NM = FK_MODE == 1 ? 2 : 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 row0 = ((i64)blockIdx.x * FK_NW + warp) * FK_R;
  if (row0 >= n) return;  // warp-uniform
  float acc[NM][FK_R][FK_MB];
#pragma unroll
  for (int t = 0; t < NM; ++t)
#pragma unroll
    for (int r = 0; r < FK_R; ++r)
#pragma unroll
      for (int j = 0; j < FK_MB; ++j) acc[t][r][j] = 0.0f;

  const i64 units = k / F::UE;
  for (i64 u = lane; u < units; u += 32) {
#pragma unroll
    for (int r = 0; r < FK_R; ++r) {
      const i64 row = row0 + r;
      if (row < n) {
#pragma unroll
        for (int t = 0; t < NM; ++t) {
          float q[F::UE], s[F::G], o[F::G];
          F::unit(t == 0 ? a : b, row, u, q, s, o);
#pragma unroll
          for (int j = 0; j < FK_MB; ++j) {
            if (j < m) {
              const FkX xl{X + j * k + u * F::UE, X2 + j * k + u * F::UE};
              acc[t][r][j] += fk_unit_dot<F>(q, s, o, xl);
            }
          }
        }
      }
    }
  }
  if constexpr (FkHasTail<F>::value) {
    // Plain floats: the last k % UE (< 8) elements, one per lane (j outermost: few live
    // pointers, no spills at MB 16).
#pragma unroll
    for (int j = 0; j < FK_MB; ++j) {
      if (j < m) {
        const FkX xl{X + j * k, X2 + j * k};
        for (i64 e = units * F::UE + lane; e < k; e += 32) {
          const float xv = xl.ld1(e);
#pragma unroll
          for (int r = 0; r < FK_R; ++r) {
            const i64 row = row0 + r;
            if (row < n) {
#pragma unroll
              for (int t = 0; t < NM; ++t) acc[t][r][j] += F::elem(t == 0 ? a : b, row, e) * xv;
            }
          }
        }
      }
    }
  }
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
        Y[j * n + row] = fk_silu(v[0]) * v[1];
#else
        Y[j * n + row] = v[0];
#endif
      }
    }
  }
}
extern "C" __global__ void __launch_bounds__(FK_NW * 32, FK_MINB)
    fk_gemv(FkMat a, FkMat b, const float* __restrict__ X, const float* __restrict__ X2,
            float* __restrict__ Y, int m, i64 n, i64 k) {
  fk_gemv_impl<FK_FMT>(a, b, X, X2, Y, m, n, k);
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
