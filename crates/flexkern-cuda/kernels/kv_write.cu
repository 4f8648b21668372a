// flexkern-cuda: KV page writes. Token i's rows ([Hkv, D] f32) go to page slot slots[i],
// encoded to the store's type with the head's scale, bit for bit as the CPU encodes: f16 and
// bf16 round to nearest even, fp8 rounds to nearest even and saturates (cvt ... satfinite),
// int8 rounds half to even and clamps to +-127 (NaN to 0).

__device__ __forceinline__ u32 fk_bf16_rne(float x) {
  const u32 u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN stays a (quiet) NaN
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

extern "C" __global__ void fk_kv_write(const u32* slots, u64 m, const float* src, u8* dst, int dtype,
                                       int heads, int dim, const float* scales) {
  FK_PDL_ENTER();  // launched with programmatic dependent launch on Hopper
  const u64 n = m * (u64)heads * dim;
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    const u64 t = i / ((u64)heads * dim);
    const int h = (int)((i / dim) % heads), e = (int)(i % dim);
    const u64 at = ((u64)slots[t] * heads + h) * dim + e;
    const float x = src[i];
    if (dtype == 0) {
      ((float*)dst)[at] = x;
    } else if (dtype == 1) {
      unsigned short b;
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
      ((unsigned short*)dst)[at] = b;
    } else if (dtype == 2) {
      ((unsigned short*)dst)[at] = (unsigned short)fk_bf16_rne(x);
    } else if (dtype == 5) {
      const float y = x / scales[h];
      const float r = y != y ? 0.f : fminf(fmaxf(rintf(y), -127.f), 127.f);
      dst[at] = (u8)(signed char)(int)r;
    } else {
      const float y = x / scales[h];
      unsigned short b;
      if (dtype == 3) asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(b) : "f"(0.f), "f"(y));
      else asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(b) : "f"(0.f), "f"(y));
      dst[at] = (u8)(b & 0xffu);
    }
  }
}
