// flexkern-cuda: attention over strided or paged KV on CUDA cores, any query length, GQA-packed.
//
// One block = one KV head x one work item (sequence, row tile, KV range). The FK_ROWS rows of a
// tile are (query, q head of this KV head) pairs, so every K/V row is read once for all of them.
// Per KV tile of FK_TILE keys: (A) groups of lanes dot one key each against all rows (16-byte
// loads, several keys in flight), the variant hooks run, scores go to shared memory; (B) one
// warp per row updates the running max and sum; (C) groups of lanes accumulate p * V.
// The block writes a partial (O, LSE); fk_merge joins partitions and applies sinks.
//
// Defined by the host: FK_QT FK_KT FK_VT (element types), FK_DK FK_DV (head sizes), FK_VK FK_VV
// (elements per K / V load), FK_ROWS, FK_PAGED, FK_TILE, FK_NWARPS. The variant hooks
// (fk_mask, fk_score, FkParams, fk_params_load) come from codegen, and the parameter block
// FkArgs from the host's declaration (attention/mod.rs), before this file.

// Per sequence (i64 x 8): q_start, q_len, kv_len, q_base, k_base, v_base, q_pos0, 0.
// Item (u32 x 4): seq, row tile (bit 31: mask proved true, bit 30: the row tile's only
// partition), first key, end key.  Tile (u32 x 4): seq, row tile, first item, parts.
constexpr u32 FK_ROW_TILE_BITS = 0x3fffffffu;

constexpr int FK_NVK = FK_DK / FK_VK;
constexpr int FK_TPK = FK_NVK >= 32 ? 32 : fk_pow2ceil(FK_NVK);
constexpr int FK_CPK = (FK_NVK + FK_TPK - 1) / FK_TPK;
constexpr int FK_KPW = 32 / FK_TPK;
constexpr int FK_NVV = FK_DV / FK_VV;
constexpr int FK_TPV = FK_NVV >= 32 ? 32 : fk_pow2ceil(FK_NVV);
constexpr int FK_CPV = (FK_NVV + FK_TPV - 1) / FK_TPV;
constexpr int FK_VPW = 32 / FK_TPV;
constexpr int FK_KSTEP = FK_NWARPS * FK_KPW;
constexpr int FK_KITERS = FK_TILE / FK_KSTEP;
constexpr int FK_KB0 = 8 / FK_CPK > 0 ? 8 / FK_CPK : 1;
constexpr int FK_KB = FK_KITERS < FK_KB0 ? FK_KITERS : FK_KB0;
constexpr int FK_VSTEP = FK_NWARPS * FK_VPW;
constexpr int FK_VITERS = FK_TILE / FK_VSTEP;
constexpr int FK_VB0 = 8 / FK_CPV > 0 ? 8 / FK_CPV : 1;
constexpr int FK_VB = FK_VITERS < FK_VB0 ? FK_VITERS : FK_VB0;
static_assert(FK_DK % FK_VK == 0 && FK_DV % FK_VV == 0, "vector width divides the head size");
static_assert(FK_KITERS % FK_KB == 0 && FK_VITERS % FK_VB == 0, "batches divide the tile");

struct FkSeq {
  i64 q_start, q_len, kv_len, q_base, k_base, v_base, q_pos0;
};

__device__ __forceinline__ FkSeq fk_seq(const FkArgs& a, u32 s) {
  const i64* p = (const i64*)(a.step + a.off_seqs) + 8 * (u64)s;
  FkSeq r;
  r.q_start = p[0]; r.q_len = p[1]; r.kv_len = p[2]; r.q_base = p[3];
  r.k_base = p[4]; r.v_base = p[5]; r.q_pos0 = p[6];
  return r;
}

#if FK_PAGED
// Physical page of logical page lp of sequence s. Host tables are validated before launch;
// device tables come from the page-table manager, and the clamps keep even a corrupt one from
// reading outside the tables or the pool.
__device__ __forceinline__ u32 fk_page(const FkArgs& a, const u32* cu, const u32* first, const u32* pages, u32 s, u32 lp) {
  const u64 at = (u64)cu[s] + (lp - first[s]);
  const u32 phys = pages[at < (u64)a.pages_len ? at : (u64)a.pages_len - 1];
  return phys < (u64)a.num_pages ? phys : (u32)(a.num_pages - 1);
}
#endif

#if FK_PAGED
// Pool slot of position pos of sequence s.
__device__ __forceinline__ i64 fk_kv_slot(const FkArgs& a, u32 s, i64 pos) {
  const u32* cu = a.cu_pages;
  const u32* first = a.first_page;
  const u32* pages = a.pages;
#if FK_PAGE_SHIFT >= 0
  // Power-of-two pages (the host checked): shifts instead of a division per row.
  const u32 lp = (u32)pos >> FK_PAGE_SHIFT;
  const u32 phys = fk_page(a, cu, first, pages, s, lp);
  return ((i64)phys << FK_PAGE_SHIFT) + ((u32)pos & ((1u << FK_PAGE_SHIFT) - 1u));
#else
  const u32 ps = (u32)a.page_size;
  const u32 lp = (u32)pos / ps;
  const u32 phys = fk_page(a, cu, first, pages, s, lp);
  return (i64)phys * ps + ((u32)pos - lp * ps);
#endif
}
#endif

// Element offset of (kv head h, position pos) of sequence s in the K (is_v = false) or V pool.
__device__ __forceinline__ i64 fk_kv_row(const FkArgs& a, const FkSeq& sq, u32 s, i64 pos, i64 h, bool is_v) {
#if FK_PAGED
  return (fk_kv_slot(a, s, pos) * a.num_kv_heads + h) * (is_v ? FK_DV : FK_DK);
#else
  return is_v ? sq.v_base + pos * a.v_tok_stride + h * a.v_head_stride
              : sq.k_base + pos * a.k_tok_stride + h * a.k_head_stride;
#endif
}

__device__ __forceinline__ i64 fk_first_visible(const FkArgs& a, u32 s) {
#if FK_PAGED
  return (i64)a.first_page[s] * a.page_size;
#else
  return 0;
#endif
}

// Steps both attention kernels share (the register path below, the cp.async path in
// attention_async.cu): the accumulator, the online-softmax update of a tile, the epilogue.
typedef float FkAcc[FK_ROWS][FK_CPV][FK_VV];

__device__ __forceinline__ void fk_acc_zero(FkAcc& acc) {
#pragma unroll
  for (int r = 0; r < FK_ROWS; ++r)
#pragma unroll
    for (int c = 0; c < FK_CPV; ++c)
#pragma unroll
      for (int e = 0; e < FK_VV; ++e) acc[r][c][e] = 0.f;
}

// (B) One warp per row: the tile's scores s_p[r][0..TILE) become probabilities against the new
// running max; s_alpha[r] rescales the old state, s_m and s_l move on.
template <int TILE>
__device__ __forceinline__ void fk_softmax_tile(float (*s_p)[TILE], float* s_m, float* s_l,
                                                float* s_alpha, int warp, int lane) {
  for (int r = warp; r < FK_ROWS; r += FK_NWARPS) {
    float mx = FK_NEG_INF;
    for (int j = lane; j < TILE; j += 32) mx = fmaxf(mx, s_p[r][j]);
    mx = fk_warp_max(mx);
    const float m_old = s_m[r];
    const float m_new = fmaxf(m_old, mx);
    float sum = 0.f;
    for (int j = lane; j < TILE; j += 32) {
      const float s = s_p[r][j];
      const float p = (s == FK_NEG_INF) ? 0.f : expf(s - m_new);
      s_p[r][j] = p;
      sum += p;
    }
    sum = fk_warp_sum(sum);
    __syncwarp();
    if (lane == 0) {
      const float alpha = (m_old == FK_NEG_INF) ? 0.f : expf(m_old - m_new);
      s_alpha[r] = alpha;
      s_l[r] = s_l[r] * alpha + sum;
      s_m[r] = m_new;
    }
  }
}

// (C, first half) acc *= alpha, row by row.
__device__ __forceinline__ void fk_acc_rescale(FkAcc& acc, const float* s_alpha) {
#pragma unroll
  for (int r = 0; r < FK_ROWS; ++r) {
    const float al = s_alpha[r];
#pragma unroll
    for (int c = 0; c < FK_CPV; ++c)
#pragma unroll
      for (int e = 0; e < FK_VV; ++e) acc[r][c][e] *= al;
  }
}

// Epilogue: joins the lane groups of each warp, then the warps, in `red` (FK_ROWS x FK_DV
// floats of shared memory), and writes this item's partial O (times vscale / l) and LSE.
__device__ __forceinline__ void fk_write_partial(const FkArgs& a, FkAcc& acc, float* red,
                                                 const float* s_m, const float* s_l, u32 item,
                                                 i64 kvh, float vscale, int warp, int vsub,
                                                 int vgrp) {
#pragma unroll
  for (int o = FK_TPV; o < 32; o <<= 1)
#pragma unroll
    for (int r = 0; r < FK_ROWS; ++r)
#pragma unroll
      for (int c = 0; c < FK_CPV; ++c)
#pragma unroll
        for (int e = 0; e < FK_VV; ++e) acc[r][c][e] += __shfl_xor_sync(0xffffffffu, acc[r][c][e], o);
  for (int w = 0; w < FK_NWARPS; ++w) {
    if (warp == w && vgrp == 0) {
#pragma unroll
      for (int r = 0; r < FK_ROWS; ++r)
#pragma unroll
        for (int c = 0; c < FK_CPV; ++c) {
          const int vec = vsub + c * FK_TPV;
          if (vec < FK_NVV)
#pragma unroll
            for (int e = 0; e < FK_VV; ++e) {
              float& d = red[r * FK_DV + vec * FK_VV + e];
              d = (w == 0 ? 0.f : d) + acc[r][c][e];
            }
        }
    }
    __syncthreads();
  }
  const u64 base = ((u64)item * a.num_kv_heads + kvh) * FK_ROWS;
  // The only partition of its rows and no sinks: the merge would copy it (weight 1, total 1),
  // so it goes straight to `out` and the host launches no merge.
  const uint4 it = ((const uint4*)(a.step + a.off_items))[item];
  const bool sole = ((it.y >> 30) & 1u) && !a.has_sinks;
  const FkSeq sq = fk_seq(a, it.x);
  const i64 G = a.group, hq = a.num_kv_heads * G;
  for (int i = threadIdx.x; i < FK_ROWS * FK_DV; i += FK_NWARPS * 32) {
    const int r = i / FK_DV, d = i % FK_DV;
    const float l = s_l[r];
    const float o = l > 0.f ? red[r * FK_DV + d] * vscale / l : (l != l ? l : 0.f);
    if (!sole) {
      a.part_o[(base + r) * FK_DV + d] = o;
      continue;
    }
    const i64 R = (i64)(it.y & FK_ROW_TILE_BITS) * FK_ROWS + r, qi = R / G;
    if (qi < sq.q_len) a.out[((sq.q_start + qi) * hq + kvh * G + R % G) * FK_DV + d] = o;
  }
  if (threadIdx.x < FK_ROWS) {
    const int r = threadIdx.x;
    const float l = s_l[r];
    // A kept NaN (or +inf) score leaves the running sum NaN: the row's O and LSE are NaN.
    const float lse = l > 0.f ? s_m[r] + logf(l) : (l != l ? l : FK_NEG_INF);
    const i64 R = (i64)(it.y & FK_ROW_TILE_BITS) * FK_ROWS + r, qi = R / G;
    if (!sole)
      a.part_lse[base + r] = lse;
    else if (qi < sq.q_len && a.has_lse)
      a.lse[(sq.q_start + qi) * hq + kvh * G + R % G] = lse;
  }
}

// The register kernel is left out of tensor-core modules (their 16-64 row tiles would not fit it).
#if !FK_MMA
extern "C" __global__ void __launch_bounds__(FK_NWARPS * 32) fk_attention(const FkArgs a) {
  __shared__ float s_p[FK_ROWS][FK_TILE];
  __shared__ float s_m[FK_ROWS], s_l[FK_ROWS], s_alpha[FK_ROWS];
  __shared__ float s_red[FK_ROWS][FK_DV];

  const u32 item = blockIdx.x;
  const i64 kvh = blockIdx.y;
  const uint4 it = ((const uint4*)(a.step + a.off_items))[item];
  const u32 seq = it.x;
  const bool mask_true = (it.y >> 31) != 0;  // interval analysis proved the mask true here
  const FkSeq sq = fk_seq(a, seq);
  const i64 G = a.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  FkParams P;
  fk_params_load(P, a.step + a.off_params);
  const float kscale = ((const float*)(a.step + a.off_kscale))[kvh] * a.scale;
  const float vscale = ((const float*)(a.step + a.off_vscale))[kvh];
  const i64 visible0 = fk_first_visible(a, seq);

  // Q rows in registers, widened to f32.
  const int ksub = lane % FK_TPK, kgrp = lane / FK_TPK;
  float q[FK_ROWS][FK_CPK][FK_VK];
  bool row_ok[FK_ROWS];
  i64 row_qi[FK_ROWS], row_head[FK_ROWS];
#pragma unroll
  for (int r = 0; r < FK_ROWS; ++r) {
    const i64 R = (i64)(it.y & FK_ROW_TILE_BITS) * FK_ROWS + r;
    row_qi[r] = R / G;
    row_head[r] = kvh * G + R % G;
    row_ok[r] = row_qi[r] < sq.q_len;
    const i64 qo = sq.q_base + row_qi[r] * a.q_tok_stride + row_head[r] * a.q_head_stride;
#pragma unroll
    for (int c = 0; c < FK_CPK; ++c) {
      const int vec = ksub + c * FK_TPK;
#pragma unroll
      for (int e = 0; e < FK_VK; ++e)
        q[r][c][e] = (row_ok[r] && vec < FK_NVK) ? fk_load1<FK_QT>(a.q, qo + vec * FK_VK + e) : 0.f;
    }
  }
  if (threadIdx.x < FK_ROWS) {
    s_m[threadIdx.x] = FK_NEG_INF;
    s_l[threadIdx.x] = 0.f;
  }
  const int vsub = lane % FK_TPV, vgrp = lane / FK_TPV;
  FkAcc acc;
  fk_acc_zero(acc);
  __syncthreads();

  for (i64 t0 = it.z; t0 < (i64)it.w; t0 += FK_TILE) {
    const int n = (int)fk_min_i((i64)FK_TILE, (i64)it.w - t0);
    // (A) scores.
#pragma unroll 1
    for (int b0 = 0; b0 < FK_KITERS; b0 += FK_KB) {
      FkRaw<FK_KT, FK_VK> raw[FK_KB][FK_CPK];
#pragma unroll
      for (int i = 0; i < FK_KB; ++i) {
        const int j = (b0 + i) * FK_KSTEP + warp * FK_KPW + kgrp;
        if (j < n) {
          const u8* kp = a.k + fk_kv_row(a, sq, seq, t0 + j, kvh, false) * FkSize<FK_KT>::value;
#pragma unroll
          for (int c = 0; c < FK_CPK; ++c) {
            const int vec = ksub + c * FK_TPK;
            if (vec < FK_NVK) fk_ld<FK_KT, FK_VK>(raw[i][c], kp + vec * FK_VK * FkSize<FK_KT>::value);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < FK_KB; ++i) {
        const int j = (b0 + i) * FK_KSTEP + warp * FK_KPW + kgrp;
        float part[FK_ROWS];
#pragma unroll
        for (int r = 0; r < FK_ROWS; ++r) part[r] = 0.f;
        if (j < n) {
#pragma unroll
          for (int c = 0; c < FK_CPK; ++c) {
            const int vec = ksub + c * FK_TPK;
            if (vec < FK_NVK) {
              float kv[FK_VK];
              fk_unpack<FK_KT, FK_VK>(raw[i][c], kv);
#pragma unroll
              for (int r = 0; r < FK_ROWS; ++r)
#pragma unroll
                for (int e = 0; e < FK_VK; ++e) part[r] = fmaf(q[r][c][e], kv[e], part[r]);
            }
          }
        }
#pragma unroll
        for (int o = FK_TPK / 2; o > 0; o >>= 1)
#pragma unroll
          for (int r = 0; r < FK_ROWS; ++r) part[r] += __shfl_xor_sync(0xffffffffu, part[r], o);
#pragma unroll
        for (int r = 0; r < FK_ROWS; ++r) {
          if (r % FK_TPK == ksub) {
            const i64 pos = t0 + j;
            float s = FK_NEG_INF;
            if (j < n && row_ok[r] && pos >= visible0) {
              s = part[r] * kscale;
              FkVars V;
              V.b = seq; V.h = row_head[r]; V.q_pos = sq.q_pos0 + row_qi[r]; V.kv_pos = pos;
              V.q_len = sq.q_len; V.kv_len = sq.kv_len; V.q_token = sq.q_start + row_qi[r];
              s = fk_score(P, V, s);
              if (!mask_true && !fk_mask(P, V)) s = FK_NEG_INF;
            }
            s_p[r][j] = s;
          }
        }
      }
    }
    __syncthreads();
    // (B) running max and sum, one warp per row.
    fk_softmax_tile(s_p, s_m, s_l, s_alpha, warp, lane);
    __syncthreads();
    // (C) acc = acc * alpha + p V.
    fk_acc_rescale(acc, s_alpha);
#pragma unroll 1
    for (int b0 = 0; b0 < FK_VITERS; b0 += FK_VB) {
      FkRaw<FK_VT, FK_VV> raw[FK_VB][FK_CPV];
      bool live[FK_VB];
#pragma unroll
      for (int i = 0; i < FK_VB; ++i) {
        const int j = (b0 + i) * FK_VSTEP + warp * FK_VPW + vgrp;
        live[i] = false;
        if (j < n) {
#pragma unroll
          for (int r = 0; r < FK_ROWS; ++r) live[i] |= s_p[r][j] != 0.f;
        }
        if (live[i]) {
          const u8* vp = a.v + fk_kv_row(a, sq, seq, t0 + j, kvh, true) * FkSize<FK_VT>::value;
#pragma unroll
          for (int c = 0; c < FK_CPV; ++c) {
            const int vec = vsub + c * FK_TPV;
            if (vec < FK_NVV) fk_ld<FK_VT, FK_VV>(raw[i][c], vp + vec * FK_VV * FkSize<FK_VT>::value);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < FK_VB; ++i) {
        if (!live[i]) continue;
        const int j = (b0 + i) * FK_VSTEP + warp * FK_VPW + vgrp;
#pragma unroll
        for (int c = 0; c < FK_CPV; ++c) {
          const int vec = vsub + c * FK_TPV;
          if (vec < FK_NVV) {
            float vv[FK_VV];
            fk_unpack<FK_VT, FK_VV>(raw[i][c], vv);
#pragma unroll
            for (int r = 0; r < FK_ROWS; ++r) {
              const float p = s_p[r][j];
#pragma unroll
              for (int e = 0; e < FK_VV; ++e) acc[r][c][e] = fmaf(p, vv[e], acc[r][c][e]);
            }
          }
        }
      }
    }
    __syncthreads();
  }

  // Join the lane groups of each warp, then the warps, in shared memory; write the partial.
  fk_write_partial(a, acc, &s_red[0][0], s_m, s_l, item, kvh, vscale, warp, vsub, vgrp);
}
#endif

// Joins the partitions of one row (grid: row tiles x kv heads x FK_ROWS; 256 threads):
// O = sum_p w_p O_p / (sum_p w_p + e^(sink - M)), w_p = e^(lse_p - M), M the largest of the
// partition LSEs and the sink. The weights are reduced across the block, then each warp takes
// every 8th partition and the warps' sums meet in shared memory, so a row with hundreds of
// partitions (one long sequence) is joined in a few microseconds. A row with nothing visible and
// no sink gets O = 0, LSE = -inf.
//
// The merge runs after the attention kernel, with every SM waiting on it, so its time is a
// chain of round trips to L2: one for the LSEs, then the partial outputs. Each warp loads
// FK_MERGE_U of its partitions' columns before adding any (a load per partition behind the
// weight's `!= 0` test ran them one round trip each: 7.7 us for B1 x 128k's 49 partitions on
// an H100, the trace showed). The sums keep their order.
constexpr int FK_MERGE_WARPS = 8;
constexpr int FK_MAX_PARTS = 4096;
constexpr int FK_MERGE_NC = (FK_DV + 31) / 32;  // columns per lane
constexpr int FK_MERGE_U = FK_MERGE_NC >= 32 ? 1 : (32 / FK_MERGE_NC > 8 ? 8 : 32 / FK_MERGE_NC);
extern "C" __global__ void __launch_bounds__(FK_MERGE_WARPS * 32) fk_merge(const FkArgs a) {
  __shared__ float s_w[FK_MAX_PARTS];
  __shared__ float s_o[FK_MERGE_WARPS][FK_DV];
  __shared__ float s_red[FK_MERGE_WARPS];
#if FK_TRACE
  // The merge's blocks take the timeline's last quarter.
  const u64 trace_t0 = fk_now();
  struct Rec {
    u64 t0;
    ~Rec() { fk_trace_block(FK_TRACE_SLOTS / 4 * 3 + (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x, t0); }
  } rec{trace_t0};
#endif
  // Launched with programmatic dependent launch on Hopper: the grid starts as the attention
  // kernel's blocks leave, reads the plan (uploaded before the attention kernel started), and
  // waits for the partials.
  FK_TRACE_SCOPE();
  const uint4 t = ((const uint4*)(a.step + a.off_tiles))[blockIdx.x];
  const i64 kvh = blockIdx.y;
  const int r = blockIdx.z;
  const FkSeq sq = fk_seq(a, t.x);
  const i64 G = a.group, hq = a.num_kv_heads * G;
  const i64 R = (i64)t.y * FK_ROWS + r, qi = R / G, head = kvh * G + R % G;
  if (qi >= sq.q_len) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 parts = t.w;
  // The attention kernel wrote a sole partition's rows straight to `out`.
  if (parts == 1 && !a.has_sinks) return;
  const float* sinks = (const float*)(a.step + a.off_sinks);
  const float sink = a.has_sinks ? sinks[head] : FK_NEG_INF;
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  FK_TRACE_RELEASED();
  auto row = [&](u32 p) { return ((u64)(t.z + p) * a.num_kv_heads + kvh) * FK_ROWS + r; };
  // M over the partitions and the sink; a NaN partition (a kept NaN score) makes the row NaN.
  // Each thread keeps its partitions' LSEs in s_w (it alone reads them back below).
  float m = FK_NEG_INF;
  bool nan = false;
  for (u32 p = threadIdx.x; p < parts; p += blockDim.x) {
    const float l = a.part_lse[row(p)];
    s_w[p] = l;
    m = fmaxf(m, l);
    nan |= l != l;
  }
  nan = __syncthreads_or(nan);
  m = fk_warp_max(m);
  if (lane == 0) s_red[warp] = m;
  __syncthreads();
  float M = sink;
  for (int w = 0; w < FK_MERGE_WARPS; ++w) M = fmaxf(M, s_red[w]);
  __syncthreads();
  // Weights and their sum.
  float sum = 0.f;
  for (u32 p = threadIdx.x; p < parts; p += blockDim.x) {
    const float l = s_w[p];
    const float w = (M == FK_NEG_INF || l == FK_NEG_INF) ? 0.f : expf(l - M);
    s_w[p] = w;
    sum += w;
  }
  sum = fk_warp_sum(sum);
  if (lane == 0) s_red[warp] = sum;
  __syncthreads();
  float total = (M == FK_NEG_INF || sink == FK_NEG_INF) ? 0.f : expf(sink - M);
  for (int w = 0; w < FK_MERGE_WARPS; ++w) total += s_red[w];
  // Weighted sum of the partial outputs: warp w takes partitions w, w + 8, ..., FK_MERGE_U of
  // them loaded together; a zero weight adds nothing (its partial may be anything finite).
  float o[FK_MERGE_NC];
#pragma unroll
  for (int c = 0; c < FK_MERGE_NC; ++c) o[c] = 0.f;
  for (u32 p0 = warp; p0 < parts; p0 += FK_MERGE_WARPS * FK_MERGE_U) {
    float v[FK_MERGE_U][FK_MERGE_NC], w[FK_MERGE_U];
#pragma unroll
    for (int u = 0; u < FK_MERGE_U; ++u) {
      const u32 p = p0 + u * FK_MERGE_WARPS;
      w[u] = p < parts ? s_w[p] : 0.f;
      const float* src = a.part_o + row(p) * FK_DV;
#pragma unroll
      for (int c = 0; c < FK_MERGE_NC; ++c) {
        const int d = lane + 32 * c;
        v[u][c] = p < parts && d < FK_DV ? src[d] : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < FK_MERGE_U; ++u)
#pragma unroll
      for (int c = 0; c < FK_MERGE_NC; ++c)
        if (w[u] != 0.f) o[c] = fmaf(w[u], v[u][c], o[c]);
  }
#pragma unroll
  for (int c = 0; c < FK_MERGE_NC; ++c)
    if (lane + 32 * c < FK_DV) s_o[warp][lane + 32 * c] = o[c];
  __syncthreads();
  const i64 token = sq.q_start + qi;
  for (int d = threadIdx.x; d < FK_DV; d += blockDim.x) {
    float o = 0.f;
    for (int w = 0; w < FK_MERGE_WARPS; ++w) o += s_o[w][d];
    a.out[(token * hq + head) * FK_DV + d] = nan ? __int_as_float(0x7fc00000) : (M == FK_NEG_INF ? 0.f : o / total);
  }
  if (threadIdx.x == 0 && a.has_lse)
    a.lse[token * hq + head] = nan ? __int_as_float(0x7fc00000) : (M == FK_NEG_INF ? FK_NEG_INF : M + logf(total));
}
