// flexkern-cuda: the k largest logits (sampling on the device: only they go back to the host).
// Order: larger value first, equal values (-0 equal to +0) by lower index, as the CPU's
// `sampler::largest`. Two launches: every block finds the top k of its slice of the row, then
// one block the top k of those candidates. Each step is a radix select over order-preserving
// 32-bit keys (four 8-bit digit passes over a shared histogram), then the elements at or above
// the k-th key are ranked in shared memory. Degenerate rows (more than FK_TOPK_CAP elements
// tied at the k-th value) report an overflow and the host falls back to the whole row.

constexpr int FK_TOPK_THREADS = 256;  // one thread per histogram bin
constexpr int FK_TOPK_CAP = 2048;

// Status words: [0] NaN seen, [1] overflow.
__device__ __forceinline__ u32 fk_topk_key(float x) {
  const u32 u = __float_as_uint(x == 0.f ? 0.f : x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The top `k` of `count` elements (value v(i), id id(i)) of this block (FK_TOPK_THREADS
// threads) into out_ids / out_vals (largest first). `k` <= count, `k` <= FK_TOPK_CAP.
template <class V, class I>
__device__ void fk_block_top(V v, I id, int count, int k, u32* out_ids, float* out_vals, u32* status) {
  __shared__ u32 hist[256];
  __shared__ u32 s_prefix, s_mask, s_remaining, s_eq, s_n, s_wsum[FK_TOPK_THREADS / 32];
  __shared__ u32 c_key[FK_TOPK_CAP];
  __shared__ u32 c_id[FK_TOPK_CAP];
  __shared__ float c_val[FK_TOPK_CAP];
  if (threadIdx.x == 0) s_prefix = 0, s_mask = 0, s_remaining = (u32)k, s_n = 0;
  bool nan = false;
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    const u32 prefix = s_prefix, mask = s_mask;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      const float x = v(i);
      nan |= x != x;
      const u32 key = fk_topk_key(x);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    // The digit d of the k-th key: the bins above d hold fewer than `remaining` elements, d's
    // with them at least that many (else d = 0). A block scan from the top bin, thread t holding
    // bin 255 - t: one thread walking the bins took about 3 us a pass (ncu, H100, greedy decode:
    // 33 us a step for the two launches).
    {
      const int t = threadIdx.x;
      const u32 h = hist[255 - t], rem = s_remaining;
      u32 incl = h;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const u32 up = __shfl_up_sync(0xffffffffu, incl, o);
        if ((t & 31) >= o) incl += up;
      }
      if ((t & 31) == 31) s_wsum[t >> 5] = incl;
      __syncthreads();
      for (int w = 0; w < (t >> 5); ++w) incl += s_wsum[w];
      const u32 excl = incl - h;
      if (excl < rem && (incl >= rem || t == 255)) {
        const u32 d = 255u - (u32)t;
        s_remaining = rem - excl;
        s_prefix |= d << shift;
        s_mask |= 255u << shift;
        s_eq = h;
      }
    }
    __syncthreads();
  }
  if (__syncthreads_or(nan) && threadIdx.x == 0) status[0] = 1;
  // Everything above the k-th key, and every element equal to it, then ranked.
  const u32 kth = s_prefix, total = (u32)k - s_remaining + s_eq;
  if (total > (u32)FK_TOPK_CAP) {
    if (threadIdx.x == 0) status[1] = 1;
    return;
  }
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    const float x = v(i);
    const u32 key = fk_topk_key(x);
    if (key >= kth) {
      const u32 at = atomicAdd(&s_n, 1u);
      if (at < (u32)FK_TOPK_CAP) c_key[at] = key, c_id[at] = id(i), c_val[at] = x;
    }
  }
  __syncthreads();
  const int n = (int)min(s_n, (u32)FK_TOPK_CAP);
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const u32 kj = c_key[j], ij = c_id[j];
    int rank = 0;
    for (int l = 0; l < n; ++l) rank += c_key[l] > kj || (c_key[l] == kj && c_id[l] < ij);
    if (rank < k) out_ids[rank] = ij, out_vals[rank] = c_val[j];
  }
}

// Block b: the top k of x[b * n / G, (b + 1) * n / G) into cand[b * k ..] (the host keeps every
// slice at least k long).
extern "C" __global__ void __launch_bounds__(FK_TOPK_THREADS) fk_top_slices(const float* __restrict__ x, int n,
                                                                         int k, u32* cand_ids, float* cand_vals,
                                                                         u32* status) {
  FK_PDL_ENTER();
  const int lo = (int)((long long)blockIdx.x * n / gridDim.x), hi = (int)((long long)(blockIdx.x + 1) * n / gridDim.x);
  fk_block_top([&](int i) { return x[lo + i]; }, [&](int i) { return (u32)(lo + i); }, hi - lo, k,
               cand_ids + (u64)blockIdx.x * k, cand_vals + (u64)blockIdx.x * k, status);
}

// One block: the top k of the `m` candidates.
extern "C" __global__ void __launch_bounds__(FK_TOPK_THREADS) fk_top_merge(const u32* __restrict__ cand_ids,
                                                                        const float* __restrict__ cand_vals, int m,
                                                                        int k, u32* out_ids, float* out_vals,
                                                                        u32* status) {
  FK_PDL_ENTER();
  fk_block_top([&](int i) { return cand_vals[i]; }, [&](int i) { return cand_ids[i]; }, m, k, out_ids, out_vals,
               status);
}
