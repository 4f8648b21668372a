// flexkern-cuda: KV page writes. Token i's rows ([Hkv, D] f32) go to page slot slots[i],
// encoded to the store's type with the head's scale, bit for bit as the CPU encodes: f16 and
// bf16 round to nearest even, fp8 rounds to nearest even and saturates (cvt ... satfinite),
// int8 rounds half to even and clamps to +-127 (NaN to 0).

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

extern "C" __global__ void fk_kv_write(const u32* slots, u64 m, const float* src, u8* dst, int dtype,
                                       int heads, int dim, const float* scales) {
  FK_PDL_ENTER();  // launched with programmatic dependent launch on Hopper
  const u64 n = m * (u64)heads * dim;
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
    const u64 t = i / ((u64)heads * dim);
    const int h = (int)((i / dim) % heads), e = (int)(i % dim);
    fk_kv_store(dst, dtype, ((u64)slots[t] * heads + h) * dim + e, src[i], scales[h]);
  }
}

// The pair (a, b) of one head row rotated by RoPE, in place (ops.cu's fk_rope, the same
// roundings); returns the pair's indices.
__device__ __forceinline__ int2 fk_rope_pair(float* row, int p, u32 pos, const float* inv_freq, int half,
                                             int neox, float mscale) {
  float s, c;
  sincosf(__fmul_rn((float)pos, inv_freq[p]), &s, &c);
  c = __fmul_rn(c, mscale);
  s = __fmul_rn(s, mscale);
  const int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
  const float x0 = row[a], x1 = row[b];
  row[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  row[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  return make_int2(a, b);
}

// Decode's RoPE and KV append in one launch (fk_rope on Q, fk_rope on K, fk_kv_write of K and V):
// one thread per Q pair, K pair (rotated in place, both elements stored), K element past the
// rotated ones (stored), and V element (stored). With `qcode` (1 f16, 2 bf16) Q is also written
// to `qh` rounded as fk_convert rounds it (one more thread per Q element past the rotated
// ones), so the attention reads 16-bit Q without a convert launch.
struct FkRopeKv {
  float* q;
  float* k;
  const float* v;
  const u32* pos;
  const u32* slots;
  const float* inv_freq;
  u8* kdst;
  u8* vdst;
  const float* kscales;
  const float* vscales;
  u16* qh;
  i64 tokens;
  int hq, hkv, dim, dim_v, half, neox, kcode, vcode, qcode;
  float mscale;
};

// Element i of the launch (I: u32 where the launch's total fits, else i64; a 64-bit division by
// a run-time value is a slow-path call, three of them a thread in a decode step's launch).
template <typename I>
__device__ __forceinline__ void fk_rope_kv_item(const FkRopeKv& a, I i, I nq, I nqt, I nk, I nt) {
  const I half = (I)a.half, tail = (I)(a.dim - 2 * a.half);
  if (i < nq) {
    const I th = i / half;
    float* row = a.q + (i64)th * a.dim;
    const int2 ab = fk_rope_pair(row, (int)(i % half), a.pos[th / (I)a.hq], a.inv_freq, a.half, a.neox, a.mscale);
    if (a.qcode) {
      a.qh[(i64)th * a.dim + ab.x] = fk_to16(row[ab.x], a.qcode);
      a.qh[(i64)th * a.dim + ab.y] = fk_to16(row[ab.y], a.qcode);
    }
  } else if (i < nq + nqt) {
    const I j = i - nq;
    const i64 at = (i64)(j / tail) * a.dim + 2 * a.half + (i64)(j % tail);
    a.qh[at] = fk_to16(a.q[at], a.qcode);
  } else if (i < nq + nqt + nk) {
    const I j = i - nq - nqt, th = j / half, t = th / (I)a.hkv;
    const int h = (int)(th % (I)a.hkv);
    float* row = a.k + (i64)th * a.dim;
    const int2 ab = fk_rope_pair(row, (int)(j % half), a.pos[t], a.inv_freq, a.half, a.neox, a.mscale);
    const u64 base = ((u64)a.slots[t] * a.hkv + h) * a.dim;
    fk_kv_store(a.kdst, a.kcode, base + ab.x, row[ab.x], a.kscales[h]);
    fk_kv_store(a.kdst, a.kcode, base + ab.y, row[ab.y], a.kscales[h]);
  } else if (i < nq + nqt + nk + nt) {
    const I j = i - nq - nqt - nk, th = j / tail, t = th / (I)a.hkv;
    const int h = (int)(th % (I)a.hkv), e = (int)(2 * a.half + j % tail);
    fk_kv_store(a.kdst, a.kcode, ((u64)a.slots[t] * a.hkv + h) * a.dim + e, a.k[(i64)th * a.dim + e], a.kscales[h]);
  } else {
    const I j = i - nq - nqt - nk - nt, th = j / (I)a.dim_v, t = th / (I)a.hkv;
    const int h = (int)(th % (I)a.hkv), e = (int)(j % (I)a.dim_v);
    fk_kv_store(a.vdst, a.vcode, ((u64)a.slots[t] * a.hkv + h) * a.dim_v + e, a.v[j], a.vscales[h]);
  }
}

extern "C" __global__ void fk_rope_kv_write(const FkRopeKv a) {
  FK_PDL_ENTER();
  const i64 T = a.tokens, tail = a.dim - 2 * a.half;
  const i64 nq = T * a.hq * a.half, nqt = a.qcode ? T * a.hq * tail : 0;
  const i64 nk = T * a.hkv * a.half, nt = T * a.hkv * tail;
  const i64 total = nq + nqt + nk + nt + T * a.hkv * a.dim_v;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  if (total + stride <= 0xffffffffll) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < (u32)total; i += (u32)stride)
      fk_rope_kv_item<u32>(a, i, (u32)nq, (u32)nqt, (u32)nk, (u32)nt);
  } else {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += stride)
      fk_rope_kv_item<i64>(a, i, nq, nqt, nk, nt);
  }
}
