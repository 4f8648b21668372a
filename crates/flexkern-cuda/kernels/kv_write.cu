// flexkern-cuda: KV page writes. Token i's rows ([Hkv, D] f32) go to page slot slots[i],
// encoded to the store's type with the head's scale (kv_store.cuh, pasted before this file).

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

// Decode's RoPE and KV append in one launch (fk_rope on Q, fk_rope on K, fk_kv_write of K and V):
// one thread per Q pair, K pair (rotated in place, both elements stored), K element past the
// rotated ones (stored), and V element (stored). With `qcode` (1 f16, 2 bf16) Q is also written
// to `qh` rounded as fk_convert rounds it (one more thread per Q element past the rotated
// ones), so the attention reads 16-bit Q without a convert launch.

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
