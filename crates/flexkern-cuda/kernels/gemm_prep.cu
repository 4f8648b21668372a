// flexkern-cuda: the operands of the prompt GEMM (gemm_mma.cu), written once per call.
//
// fk_gemm_weights decodes a panel of weight rows (any format, quant_blocks.cuh's units) into
// 16-bit operands, exactly as flexkern-quant's `dequantize` computes each weight and then
// rounded once to the operand type; fk_gemm_acts rounds the f32 activation rows (mode 2:
// silu(X) * X2, formed here once). Rows are `kp` elements (k rounded up to the GEMM's k-tile),
// the tail zero, so the GEMM's k loop needs no bounds.
// Configured by the module's defines: FK_FMT (a unit type; plain floats read a per-element
// tail), FK_GT (operand type: 1 f16, 2 bf16).

// Two floats to an operand pair, lo in the low half.
__device__ __forceinline__ u32 fk_gpack(float lo, float hi) {
  u32 r;
#if FK_GT == 2
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

// Element c of a row past its whole units: plain floats read it (c < k), the rest are zero.
template <class F>
__device__ __forceinline__ float fk_gtail(const FkMat& a, i64 row, i64 c, i64 k) {
  if constexpr (FkHasTail<F>::value) return c < k ? F::elem(a, row, c) : 0.0f;
  else return 0.0f;
}

// Weight rows [r0, r0 + rows) into dst (row i at dst + i * kp): one thread per unit slot of UE
// elements. Whole units decode at once; the slot holding k's end (plain floats) or the zero
// tail goes element by element.
extern "C" __global__ void __launch_bounds__(256) fk_gemm_weights(FkMat a, u16* __restrict__ dst, i64 r0,
                                                                  i64 rows, i64 k, i64 kp) {
  FK_PDL_ENTER();
  using F = FK_FMT;
  constexpr int UE = F::UE;
  static_assert(UE % 8 == 0, "units of whole 16-byte stores");
  const i64 slots = (kp + UE - 1) / UE;
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * slots) return;
  const i64 i = t / slots, u = t % slots, row = r0 + i;
  u16* out = dst + i * kp + u * UE;
  if ((u + 1) * UE <= k) {
    float q[UE], s[F::G], o[F::G], y[UE];
    F::unit(a, row, u, q, s, o);
    fk_unit_decode<F>(q, s, o, y);
#pragma unroll
    for (int e = 0; e < UE; e += 8) {
      uint4 v;
      v.x = fk_gpack(y[e], y[e + 1]);
      v.y = fk_gpack(y[e + 2], y[e + 3]);
      v.z = fk_gpack(y[e + 4], y[e + 5]);
      v.w = fk_gpack(y[e + 6], y[e + 7]);
      *(uint4*)(out + e) = v;
    }
    return;
  }
  for (int e = 0; e < UE && u * UE + e < kp; e += 2) {
    float v[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const i64 c = u * UE + e + h;
      v[h] = fk_gtail<F>(a, row, c, k);
    }
    *(u32*)(out + e) = fk_gpack(v[0], v[1]);
  }
}

// Activation rows: dst[j, e] = X[j, e] (mode 2: silu(X) * X2) for e < k, 0 up to kp. One thread
// per 8 elements.
extern "C" __global__ void __launch_bounds__(256) fk_gemm_acts(const float* __restrict__ x,
                                                               const float* __restrict__ x2,
                                                               u16* __restrict__ dst, i64 m, i64 k, i64 kp,
                                                               int mode) {
  FK_PDL_ENTER();
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 per = kp / 8;
  if (t >= m * per) return;
  const i64 j = t / per, e0 = (t % per) * 8;
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const i64 c = e0 + e;
    v[e] = 0.0f;
    if (c < k) {
      const float a = __ldg(x + j * k + c);
      v[e] = mode == 2 ? fk_silu(a) * __ldg(x2 + j * k + c) : a;
    }
  }
  uint4 w;
  w.x = fk_gpack(v[0], v[1]);
  w.y = fk_gpack(v[2], v[3]);
  w.z = fk_gpack(v[4], v[5]);
  w.w = fk_gpack(v[6], v[7]);
  *(uint4*)(dst + j * kp + e0) = w;
}
