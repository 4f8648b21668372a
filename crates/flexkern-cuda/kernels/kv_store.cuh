// flexkern-cuda: KV encodings and RoPE pairs, shared by kv_write.cu and the QKV projection that
// applies them in its epilogue (gemv_stream.cu, FK_SROPE); the host declares their arguments,
// FkRopeKv, after this header (tensor_ops.rs). The encodings are the CPU's, bit for bit: f16 and bf16 round to nearest even, fp8
// rounds to nearest even and saturates (cvt ... satfinite), int8 rounds half to even and clamps
// to +-127 (NaN to 0).
#pragma once

__device__ __forceinline__ u32 fk_bf16_rne(float x) {
  const u32 u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN stays a (quiet) NaN
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// Element `at` of a store of type `dtype` (0 f32, 1 f16, 2 bf16, 3 e4m3, 4 e5m2, 5 int8; the
// last three divided by the head's `scale` first).
__device__ __forceinline__ void fk_kv_store(u8* dst, int dtype, u64 at, float x, float scale) {
  if (dtype == 0) {
    ((float*)dst)[at] = x;
  } else if (dtype == 1) {
    unsigned short b;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
    ((unsigned short*)dst)[at] = b;
  } else if (dtype == 2) {
    ((unsigned short*)dst)[at] = (unsigned short)fk_bf16_rne(x);
  } else if (dtype == 5) {
    const float y = x / scale;
    const float r = y != y ? 0.f : fminf(fmaxf(rintf(y), -127.f), 127.f);
    dst[at] = (u8)(signed char)(int)r;
  } else {
    const float y = x / scale;
    unsigned short b;
    if (dtype == 3) asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(b) : "f"(0.f), "f"(y));
    else asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(b) : "f"(0.f), "f"(y));
    dst[at] = (u8)(b & 0xffu);
  }
}

// RoPE's rotation of the pair (x0, x1) at frequency p (ops.cu's fk_rope, the same roundings).
__device__ __forceinline__ void fk_rope_rotate(float& x0, float& x1, int p, u32 pos, const float* inv_freq,
                                               float mscale) {
  float s, c;
  sincosf(__fmul_rn((float)pos, inv_freq[p]), &s, &c);
  c = __fmul_rn(c, mscale);
  s = __fmul_rn(s, mscale);
  const float a = x0, b = x1;
  x0 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  x1 = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

// The pair (a, b) of one head row rotated in place; returns the pair's indices.
__device__ __forceinline__ int2 fk_rope_pair(float* row, int p, u32 pos, const float* inv_freq, int half,
                                             int neox, float mscale) {
  const int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
  fk_rope_rotate(row[a], row[b], p, pos, inv_freq, mscale);
  return make_int2(a, b);
}
