// flexkern-cuda: attention on tensor cores (mma.sync m16n8k16, bf16 or f16 in, f32 accumulate).
//
// Same blocks, rows and partial outputs as fk_attention (where row tiles have few partitions,
// the last block of each joins them itself and no merge kernel runs): one block = one KV head x one work
// item, its FK_ROWS rows are (query, q head of this KV head) pairs. A warp owns a 16-row m-tile
// (rows past FK_ROWS are padding). The FK_NWARPS warps are FK_MMA_MT m-tiles x FK_MKS key
// splits: decode (one m-tile) splits every staged KV tile between the warps, each with its own
// running max / sum / O for the same rows; prefill (one m-tile per warp) shares every K/V tile
// between the m-tiles (FlashAttention-2). Warp results meet in shared memory at the end. S, P
// and O stay in registers; P becomes the A operand of P·V without leaving them.
//
// K/V tiles are staged with cp.async FK_MMA_STAGES deep into rows padded by 16 bytes (fragment
// loads are conflict-free). bf16 / f16 K and V are read with ldmatrix (.trans for V); fp8 and
// int8 codes are read as words and converted exactly to the compute type per fragment, in an
// order that permutes the contraction (Q is loaded in the same order) and V's columns (undone
// in the epilogue), so each thread's bytes are contiguous.
//
// Defined by the host besides attention.cu's: FK_MMA, FK_MMA_MT, FK_MMA_TILE, FK_MMA_STAGES,
// FK_MMA_TPR, FK_MMA_L2 (the K/V copies: threads per row, L2 prefetch bytes), FK_MMA_MINB
// (blocks per SM the register budget must allow), FK_WGMMA (the Hopper kernel instead; the
// helpers here serve both).
#if FK_MMA

constexpr int FK_MMT = FK_MMA_MT;
constexpr int FK_MKS = FK_NWARPS / FK_MMT;
constexpr int FK_MTILE = FK_MMA_TILE;
constexpr int FK_MKW = FK_MTILE / FK_MKS;  // keys per warp per stage
constexpr int FK_MKB = FkSize<FK_KT>::value, FK_MVB = FkSize<FK_VT>::value;
constexpr int FK_KPITCH = FK_DK * FK_MKB + 16;
constexpr int FK_VPITCH = FK_DV * FK_MVB + 16;
constexpr int FK_MSTAGE = FK_MTILE * (FK_KPITCH + FK_VPITCH);
constexpr bool FK_K8 = FK_MKB == 1, FK_V8 = FK_MVB == 1;
constexpr int FK_NS = FK_MKW / 8;      // S n-tiles per warp
constexpr int FK_NO = FK_DV / 8;       // O n-tiles
constexpr int FK_KSTEPS = FK_DK / 16;  // k16 steps of Q·K
// 1-byte V: one load covers FK_VG columns of FK_VG n-tiles.
constexpr int FK_VG = FK_DV % 32 == 0 ? 4 : 2;
static_assert(FK_QT == 1 || FK_QT == 2, "compute type f16 or bf16");
static_assert(FK_DK % 16 == 0 && FK_DV % 16 == 0, "head sizes are whole k16 steps");
static_assert(FK_NWARPS % FK_MMT == 0 && FK_MKW % 16 == 0, "warps split whole 16-key steps");
static_assert(FK_MMT == 1 ? FK_ROWS <= 16 : FK_ROWS == 16 * FK_MMT, "rows fill the m-tiles");
static_assert(FK_MMA_STAGES >= 2, "at least double buffering");
static_assert(FK_MKB == FkSize<FK_QT>::value || FK_K8, "K is the compute type or 1-byte codes");
static_assert(FK_MVB == FkSize<FK_QT>::value || FK_V8, "V is the compute type or 1-byte codes");

// The mma operand type: Q's, but f16 where Q is bf16 and K and V are both 1-byte codes (sm_89
// and later). A pair of fp8 codes then becomes operands in one instruction (cvt.rn.f16x2.e4m3x2)
// where bf16 took four, through f16 and f32 (over a quarter of the fp8 decode kernel's
// instructions, ncu, H100), and P enters P V with f16's 11 significant bits, not bf16's 8. The
// B1 x 128k fp8 decode kernel measured the same time either way (0.123 ms, H100): it waits on
// its loads, not on these. Q enters f16 scaled per row by a power of two, undone in the score's
// scale (fk_mma_q).
#if __CUDA_ARCH__ >= 890
constexpr int FK_CT = FK_QT == 2 && FK_K8 && FK_V8 ? 1 : FK_QT;
#else
constexpr int FK_CT = FK_QT;
#endif

__device__ __forceinline__ float fk_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Two floats to a compute-type pair, lo in the low half.
__device__ __forceinline__ u32 fk_mpack(float lo, float hi) {
  u32 r;
  if constexpr (FK_CT == 2) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Two 1-byte codes (the low 16 bits, first in the low byte) to a compute-type pair. Exact:
// every e4m3, e5m2 and int8 value is a bf16 and an f16.
template <int T> __device__ __forceinline__ u32 fk_mcodes(u32 two) {
#if __CUDA_ARCH__ >= 890
  if constexpr (T == 3 || T == 4) {
    u32 h2;
    const unsigned short b = (unsigned short)(two & 0xffffu);
    if constexpr (T == 3) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(b));
    else asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"(b));
    if constexpr (FK_CT == 1) return h2;
    else return fk_mpack(fk_f16(h2 & 0xffffu), fk_f16(h2 >> 16));
  }
#endif
  return fk_mpack(fk_cvt<T>(two & 0xffu), fk_cvt<T>((two >> 8) & 0xffu));
}

__device__ __forceinline__ void fk_mma(float* d, const u32* a, u32 b0, u32 b1) { fk_mma_t<FK_CT>(d, a, b0, b1); }

// Physical dimension of Q·K's logical k index (kk step, half h, lane quad c, element e). 1-byte
// K: each thread's four codes of a step are one word.
__device__ __forceinline__ int fk_mqdim(int kk, int h, int c, int e) {
  return FK_K8 ? kk * 16 + 4 * c + 2 * h + e : kk * 16 + 8 * h + 2 * c + e;
}
// Physical V column of O n-tile ot, fragment column n (0..7).
__device__ __forceinline__ int fk_mvcol(int ot, int n) {
  return FK_V8 ? (ot / FK_VG) * 8 * FK_VG + FK_VG * n + ot % FK_VG : ot * 8 + n;
}

__device__ __forceinline__ void fk_cp16(u32 dst, const u8* from, bool live) {
  fk_cp16_l2<FK_MMA_L2>(dst, from, live);
}

// A thread's query rows (g and g + 8 of the m-tile starting at block row r0) and their Q
// fragments: kk steps of 16 dimensions in the A layout of m16n8k16 (and of wgmma's register A).
struct FkMRows {
  bool ok[2];
  i64 qi[2], head[2];
  float qs[2];  // the factor that undoes the row's scaling of Q into the operand type (1: none)
};
template <int KSTEPS>
__device__ __forceinline__ FkMRows fk_mma_q(const FkArgs& a, const FkSeq& sq, u32 row_tile, i64 kvh, int r0,
                                            int g, int c4, u32 (*qf)[4]) {
  FkMRows q;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r0 + g + 8 * h;
    const i64 R = (i64)row_tile * FK_ROWS + r;
    q.qi[h] = R / a.group;
    q.head[h] = kvh * a.group + R % a.group;
    q.ok[h] = r < FK_ROWS && q.qi[h] < sq.q_len;
    const i64 qo = sq.q_base + q.qi[h] * a.q_tok_stride + q.head[h] * a.q_head_stride;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        u32 w = 0;
        if (q.ok[h]) {
          // A pair of adjacent elements: one 4-byte load where the row starts on an even element.
          const i64 d = qo + fk_mqdim(kk, hh, c4, 0);
          if ((qo & 1) == 0) w = __ldg((const u32*)a.q + d / 2);
          else w = (u32)__ldg((const unsigned short*)a.q + d) | ((u32)__ldg((const unsigned short*)a.q + d + 1) << 16);
        }
        qf[kk][h + 2 * hh] = w;
      }
    q.qs[h] = 1.f;
    if constexpr (FK_CT != FK_QT) {
      // bf16 Q into f16 operands: the row's largest magnitude (bf16 magnitudes order as
      // integers; the quad of lanes sharing g holds the row) is scaled into [2^14, 2^15), so
      // every bf16 value of 8 significant bits down to 2^-24 of it stays exact; inf and NaN
      // stay what they were.
      u32 mx = 0;
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const u32 w = qf[kk][h + 2 * hh];
          mx = max(mx, max(w & 0x7fffu, (w >> 16) & 0x7fffu));
        }
      mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const int f = mx == 0 ? 0 : max(-126, min(126, 14 - ((int)(mx >> 7) - 127)));
      const float up = __uint_as_float((u32)(127 + f) << 23);
      q.qs[h] = __uint_as_float((u32)(127 - f) << 23);
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const u32 w = qf[kk][h + 2 * hh];
          u32 r;
          asm("cvt.rn.f16x2.f32 %0, %1, %2;"
              : "=r"(r)
              : "f"(__uint_as_float(w & 0xffff0000u) * up), "f"(__uint_as_float(w << 16) * up));
          qf[kk][h + 2 * hh] = r;
        }
    }
  }
  return q;
}

// One score: scaled, through the variant's score hook, and -inf where the mask drops it (the
// mask hook is skipped in tiles the host proved fully kept), the key is past the tile or before
// the sequence's first visible page, or the row is padding. `checked` false: the caller proved
// the key live and the mask true (a whole tile inside the full range), and only the score hook
// runs, without a branch (the hooks are; a branch per element would serialize the unrolled
// softmax on latency). The checked form keeps its early return: it serves the mma.sync kernels
// and, in the Hopper kernel, the edge tiles over paged K/V or masks that read captures, where
// its branches cost fewer registers than every element's mask at once (fk_wg_masked).
__device__ __forceinline__ float fk_mma_score(const FkParams& P, const FkSeq& sq, u32 seq, const FkMRows& q, int h,
                                              float s, float kscale, bool key_ok, i64 pos, bool tile_true,
                                              bool checked = true) {
  if (checked && (!key_ok || !q.ok[h])) return FK_NEG_INF;
  float x = s * kscale;
  if (FK_HAS_SCORE || (checked && FK_HAS_MASK && !tile_true)) {
    FkVars V;
    V.b = seq; V.h = q.head[h]; V.q_pos = sq.q_pos0 + q.qi[h]; V.kv_pos = pos;
    V.q_len = sq.q_len; V.kv_len = sq.kv_len; V.q_token = sq.q_start + q.qi[h];
    x = fk_score(P, V, x);
    if (checked && !tile_true && !fk_mask(P, V)) x = FK_NEG_INF;
  }
  return x;
}

// Online-softmax step of row half h (the quad of lanes sharing g holds the row) over NS n8
// fragments of scores, each worth `sk` times its value (sk > 0: a scale folded in here): they
// become probabilities against the new running max m, l moves on, and the factor for the old
// accumulators is returned. m stays natural-log; exponentials go through ex2 with the max
// pre-scaled, guarded for an all -inf row.
template <int NS>
__device__ __forceinline__ float fk_mma_softmax(float (*s)[4], float& m, float& l, int h, float sk = 1.f) {
  constexpr float L2E = 1.4426950408889634f;
  float mx = FK_NEG_INF;
#pragma unroll
  for (int nt = 0; nt < NS; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float mnew = fmaxf(m, mx * sk);
  const float ml = mnew == FK_NEG_INF ? 0.f : mnew * L2E, skl = sk * L2E;
  const float alpha = fk_ex2(fmaf(m, L2E, -ml));
  m = mnew;
  float sum = 0.f;
#pragma unroll
  for (int nt = 0; nt < NS; ++nt)
#pragma unroll
    for (int e = 2 * h; e < 2 * h + 2; ++e) {
      const float p = fk_ex2(fmaf(s[nt][e], skl, -ml));
      s[nt][e] = p;
      sum += p;
    }
  l = fmaf(l, alpha, sum);
  return alpha;
}

// A row's final (O scale, LSE) from its running max and sum: O = 0 and LSE = -inf for a row
// with nothing visible; a NaN sum (a kept NaN score) stays NaN.
__device__ __forceinline__ float2 fk_mma_final(float M, float L, float vscale) {
  if (L > 0.f) return make_float2(vscale / L, M + logf(L));
  return L != L ? make_float2(L, L) : make_float2(0.f, FK_NEG_INF);
}

// How the block's threads share a stage's rows of CH 16-byte chunks: TPR threads a row (a whole
// row per group of lanes by default, coalesced; FK_MMA_TPR picks fewer for A/B runs), RPP rows
// per pass of the block.
template <int CH>
struct FkRowSplit {
  static constexpr int WHOLE = CH >= 32 ? 32 : (CH >= 16 ? 16 : (CH >= 8 ? 8 : (CH >= 4 ? 4 : (CH >= 2 ? 2 : 1))));
  static constexpr int TPR = FK_MMA_TPR > 0 && FK_MMA_TPR < WHOLE ? FK_MMA_TPR : WHOLE;
  static constexpr int RPP = FK_NWARPS * 32 / TPR;
};

#if FK_PAGED
// The pool slots of a stage's keys [t0, t0 + FK_MTILE). Where the stage spans at most 32 pages
// (power-of-two pages, every thread looping over whole passes), each lane of a warp looks up one
// of them and rows take theirs by a shuffle: one page-table round trip a stage, not one per row
// pass (ncu, H100, fp8 B1 x 128k paged: a tenth of the decode kernel's warp samples waited on
// those per-row lookups). Otherwise each row looks its page up itself.
template <int RPP>
struct FkStagePages {
#if FK_PAGE_SHIFT >= 0
  static constexpr int SPAN = (FK_MTILE >> FK_PAGE_SHIFT) + 1;  // a stage may start mid-page
  static constexpr bool SHARED = SPAN <= 32 && FK_MTILE % RPP == 0;
#else
  static constexpr bool SHARED = false;
#endif
  u32 mine;  // the physical page of logical page (t0 >> FK_PAGE_SHIFT) + lane
  __device__ __forceinline__ FkStagePages(const FkArgs& a, u32 seq, i64 t0) {
#if FK_PAGE_SHIFT >= 0
    if constexpr (SHARED) {
      const int lane = threadIdx.x & 31;
      const u32 lp = ((u32)t0 >> FK_PAGE_SHIFT) + (u32)(lane < SPAN ? lane : SPAN - 1);
      mine = fk_page(a, a.cu_pages, a.first_page, a.pages, seq, lp);
    }
#endif
  }
  // The slot of key `pos` of the stage at t0 (0 where not `live`). Every thread of the warp
  // calls this for the same pass, live or not: the shuffle needs them all (a call skipped for
  // dead keys hung the model's decode, whose last tile is part dead).
  __device__ __forceinline__ i64 slot(const FkArgs& a, u32 seq, i64 t0, i64 pos, bool live) const {
#if FK_PAGE_SHIFT >= 0
    if constexpr (SHARED) {
      const int from = (int)(((u32)pos >> FK_PAGE_SHIFT) - ((u32)t0 >> FK_PAGE_SHIFT));
      const u32 phys = __shfl_sync(0xffffffffu, mine, from);
      return live ? ((i64)phys << FK_PAGE_SHIFT) + ((u32)pos & ((1u << FK_PAGE_SHIFT) - 1u)) : 0;
    }
#endif
    return live ? fk_kv_slot(a, seq, pos) : 0;
  }
};
#endif

// Queues the rows of keys [t0, t0 + FK_MTILE) of K (IS_V false) or V at `dst` (rows `pitch`
// bytes apart). A few threads share a row, so its address (a page-table lookup when paged) is
// found once per row, not once per 16-byte chunk. Keys past `end` or before the first visible
// one are zero-filled: P is 0 there, and 0 * V must not be NaN.
template <bool IS_V>
__device__ __forceinline__ void fk_mrows(const FkArgs& a, const FkSeq& sq, u32 seq, i64 kvh, u8* dst, i64 t0,
                                         i64 end, i64 visible0) {
  constexpr int ESZ = IS_V ? FK_MVB : FK_MKB;
  constexpr int CH = (IS_V ? FK_DV : FK_DK) * ESZ / 16;
  constexpr int PITCH = IS_V ? FK_VPITCH : FK_KPITCH;
  using L = FkRowSplit<CH>;
  const int sub = threadIdx.x % L::TPR;
  const u8* base = IS_V ? a.v : a.k;
#if FK_PAGED
  const FkStagePages<L::RPP> pages(a, seq, t0);
#endif
  // Unrolled: several rows' address lookups (page-table loads) are in flight together; two
  // for wide rows, whose kernels are short of registers.
  constexpr int UNROLL = CH >= 32 ? 2 : 4;
#pragma unroll UNROLL
  for (int j = threadIdx.x / L::TPR; j < FK_MTILE; j += L::RPP) {
    const i64 pos = t0 + j;
    const bool live = pos < end && pos >= visible0;
#if FK_PAGED
    const i64 slot = pages.slot(a, seq, t0, pos, live);
    const u8* src = live ? base + (slot * a.num_kv_heads + kvh) * (IS_V ? FK_DV : FK_DK) * ESZ : base;
#else
    const u8* src = live ? base + fk_kv_row(a, sq, seq, pos, kvh, IS_V) * ESZ : base;
#endif
    const u32 d = fk_msmem(dst + j * PITCH);
#pragma unroll
    for (int ch = sub; ch < CH; ch += L::TPR) fk_cp16(d + ch * 16, src + (live ? ch * 16 : 0), live);
  }
}

#if FK_PAGED
// As fk_mrows for K and V at once, for paged rows of the same bytes: one page-table lookup and
// one loop per key instead of two (at a few hundred keys a decode block is bound by its own
// instruction stream, and these loops were a fifth of it).
__device__ __forceinline__ void fk_mrows_kv(const FkArgs& a, u32 seq, i64 kvh, u8* kdst, u8* vdst, i64 t0,
                                            i64 end, i64 visible0) {
  constexpr int CH = FK_DK * FK_MKB / 16;
  using L = FkRowSplit<CH>;
  const int sub = threadIdx.x % L::TPR;
  const FkStagePages<L::RPP> pages(a, seq, t0);
  // Two rows at once: four spilled the 1-byte-KV decode kernel (128-key tiles).
#pragma unroll 2
  for (int j = threadIdx.x / L::TPR; j < FK_MTILE; j += L::RPP) {
    const i64 pos = t0 + j;
    const bool live = pos < end && pos >= visible0;
    // K's and V's rows sit at the same offset of their pools.
    const i64 at = pages.slot(a, seq, t0, pos, live);  // outside the select: it shuffles
    const i64 slot = live ? at * a.num_kv_heads + kvh : 0;
    const u8* ks = a.k + slot * (FK_DK * FK_MKB);
    const u8* vs = ks + (a.v - a.k);
    const u32 dk = fk_msmem(kdst + j * FK_KPITCH), dv = fk_msmem(vdst + j * FK_VPITCH);
#pragma unroll
    for (int ch = sub; ch < CH; ch += L::TPR) {
      fk_cp16(dk + ch * 16, ks + (live ? ch * 16 : 0), live);
      fk_cp16(dv + ch * 16, vs + (live ? ch * 16 : 0), live);
    }
  }
}
#endif

// Queues K and V of keys [t0, t0 + FK_MTILE) into `stage` as one commit group (empty past the
// item's end, so group counting stays uniform).
__device__ __forceinline__ void fk_missue(const FkArgs& a, const FkSeq& sq, u32 seq, i64 kvh, u8* stage,
                                          i64 t0, i64 end, i64 visible0) {
  if (t0 < end) {
#if FK_PAGED
    // Heads above 128 keep two loops: both at once spill their registers.
    if constexpr (FK_DK * FK_MKB == FK_DV * FK_MVB && FK_DK <= 128 && FK_DV <= 128) {
      fk_mrows_kv(a, seq, kvh, stage, stage + FK_MTILE * FK_KPITCH, t0, end, visible0);
    } else
#endif
    {
      fk_mrows<false>(a, sq, seq, kvh, stage, t0, end, visible0);
      fk_mrows<true>(a, sq, seq, kvh, stage + FK_MTILE * FK_KPITCH, t0, end, visible0);
    }
  }
  asm volatile("cp.async.commit_group;");
}

// Joins the partitions of row tile `t` (at most FK_JOIN_PARTS) for KV head kvh, as fk_merge
// does (the same weights, sinks, NaN and fully-masked rules, and order of sums). Partials are
// read through L2 (`ld.global.cg`): other blocks wrote them. Lane p holds partition p's LSE and
// weight; every partial's columns are loaded before any is added (one round trip, not one per
// partition).
__device__ __forceinline__ void fk_join_tile(const FkArgs& a, const uint4 t, i64 kvh) {
  static_assert(FK_JOIN_PARTS <= 32, "a lane per partition");
  const FkSeq sq = fk_seq(a, t.x);
  const i64 G = a.group, hq = a.num_kv_heads * G;
  const float* sinks = (const float*)(a.step + a.off_sinks);
  const int lane = threadIdx.x & 31;
  const u32 parts = min(t.w, (u32)FK_JOIN_PARTS);
  // A warp per row (its max, weights and total once), its lanes over the columns.
  for (int r = threadIdx.x >> 5; r < FK_ROWS; r += FK_NWARPS) {
    const i64 R = (i64)t.y * FK_ROWS + r, qi = R / G, head = kvh * G + R % G;
    if (qi >= sq.q_len) continue;
    auto row = [&](u32 p) { return ((u64)(t.z + p) * a.num_kv_heads + kvh) * FK_ROWS + r; };
    const float sink = a.has_sinks ? sinks[head] : FK_NEG_INF;
    const float l = lane < parts ? __ldcg(a.part_lse + row(lane)) : FK_NEG_INF;
    const bool nan = __any_sync(0xffffffffu, l != l);
    float M = sink;
    for (u32 p = 0; p < parts; ++p) M = fmaxf(M, __shfl_sync(0xffffffffu, l, p));
    const float wl = (M == FK_NEG_INF || l == FK_NEG_INF) ? 0.f : expf(l - M);
    float total = (M == FK_NEG_INF || sink == FK_NEG_INF) ? 0.f : expf(sink - M);
    for (u32 p = 0; p < parts; ++p) total += __shfl_sync(0xffffffffu, wl, p);
    float w[FK_JOIN_PARTS];
#pragma unroll
    for (int p = 0; p < FK_JOIN_PARTS; ++p) w[p] = __shfl_sync(0xffffffffu, wl, p);
    const i64 token = sq.q_start + qi;
    float* out = a.out + (token * hq + head) * FK_DV;
    for (int d = lane; d < FK_DV; d += 32) {
      float v[FK_JOIN_PARTS];
#pragma unroll
      for (int p = 0; p < FK_JOIN_PARTS; ++p) v[p] = p < (int)parts ? __ldcg(a.part_o + row(p) * FK_DV + d) : 0.f;
      float o = 0.f;
#pragma unroll
      for (int p = 0; p < FK_JOIN_PARTS; ++p)
        if (p < (int)parts && w[p] != 0.f) o = fmaf(w[p], v[p], o);
      out[d] = nan ? __int_as_float(0x7fc00000) : (M == FK_NEG_INF ? 0.f : o / total);
    }
    if (lane == 0 && a.has_lse)
      a.lse[token * hq + head] = nan ? __int_as_float(0x7fc00000) : (M == FK_NEG_INF ? FK_NEG_INF : M + logf(total));
  }
}

// After a block wrote its partial: where its row tile has few partitions, the last block of the
// row tile to finish joins them (no second launch; the join starts the moment its inputs exist).
// The counter is reset for the next replay. Many partitions go to the merge kernel, whose many
// blocks join them faster. The FK_NWARPS compute warps call this (a named barrier: the Hopper
// kernel's producer warps have left).
__device__ __forceinline__ void fk_sync_compute() { asm volatile("bar.sync 1, %0;" ::"n"(FK_NWARPS * 32) : "memory"); }
__device__ __forceinline__ void fk_mma_join_last(const FkArgs& a, u32 item, i64 kvh) {
  __shared__ u32 s_last;
  const u32 tile = ((const u32*)(a.step + a.off_item_tiles))[item];
  const uint4 tt = ((const uint4*)(a.step + a.off_tiles))[tile];
  __threadfence();
  fk_sync_compute();
  if (threadIdx.x == 0) {
    u32* cnt = (u32*)(a.step + a.off_counters) + ((u64)tile * a.num_kv_heads + kvh);
    s_last = atomicAdd(cnt, 1u) == tt.w - 1;
    if (s_last) *cnt = 0;
  }
  fk_sync_compute();
  if (!s_last) return;
  __threadfence();
  fk_join_tile(a, tt, kvh);
}

// The Hopper kernel (attention_wgmma.cu) replaces this one in its modules.
#if !FK_WGMMA
#if FK_MMA_MINB > 1
#define FK_MMA_BOUNDS __launch_bounds__(FK_NWARPS * 32, FK_MMA_MINB)
#else
#define FK_MMA_BOUNDS __launch_bounds__(FK_NWARPS * 32)
#endif
extern "C" __global__ void FK_MMA_BOUNDS fk_attention_mma(const FkArgs a) {
  extern __shared__ __align__(16) u8 fk_mstages[];
  constexpr float L2E = 1.4426950408889634f;
  FK_TRACE_SCOPE();
#if FK_TRACE
  const u64 trace_t0 = fk_now();
#endif
  const u32 item = blockIdx.x;
  const i64 kvh = blockIdx.y;
  const uint4 it = ((const uint4*)(a.step + a.off_items))[item];
  const u32 seq = it.x;
  const FkSeq sq = fk_seq(a, seq);
  const i64 G = a.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c4 = lane & 3;
  const int mt = warp % FK_MMT, ks = warp / FK_MMT;
  FkParams P;
  fk_params_load(P, a.step + a.off_params);
  const float kscale = ((const float*)(a.step + a.off_kscale))[kvh] * a.scale;
  const i64 visible0 = fk_first_visible(a, seq);
  const i64 k0 = it.z, k1 = it.w;
  const uint2 full = ((const uint2*)(a.step + a.off_item_full))[item];
  const int ntiles = (int)((k1 - k0 + FK_MTILE - 1) / FK_MTILE);

#pragma unroll
  for (int s = 0; s < FK_MMA_STAGES - 1; ++s)
    fk_missue(a, sq, seq, kvh, fk_mstages + s * FK_MSTAGE, k0 + (i64)s * FK_MTILE, s < ntiles ? k1 : k0,
              visible0);

  // This thread's rows: g and g + 8 of the warp's m-tile.
  u32 qf[FK_KSTEPS][4];
  const FkMRows q = fk_mma_q<FK_KSTEPS>(a, sq, it.y & FK_ROW_TILE_BITS, kvh, mt * 16, g, c4, qf);
  const float kq[2] = {kscale * q.qs[0], kscale * q.qs[1]};

  float o[FK_NO][4];
#pragma unroll
  for (int i = 0; i < FK_NO; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[i][e] = 0.f;
  float m[2] = {FK_NEG_INF, FK_NEG_INF}, l[2] = {0.f, 0.f};

  for (int t = 0; t < ntiles; ++t) {
    asm volatile("cp.async.wait_group %0;" ::"n"(FK_MMA_STAGES - 2));
    __syncthreads();
    // Every warp is past tile t - 1: its stage takes the tile FK_MMA_STAGES - 1 ahead.
    const int ahead = t + FK_MMA_STAGES - 1;
    fk_missue(a, sq, seq, kvh, fk_mstages + (ahead % FK_MMA_STAGES) * FK_MSTAGE, k0 + (i64)ahead * FK_MTILE,
              ahead < ntiles ? k1 : k0, visible0);
    const u8* sk = fk_mstages + (t % FK_MMA_STAGES) * FK_MSTAGE;
    const u8* sv = sk + FK_MTILE * FK_KPITCH;
    const i64 t0 = k0 + (i64)t * FK_MTILE;
    const int n = (int)fk_min_i((i64)FK_MTILE, k1 - t0);
    const int jw = ks * FK_MKW;
    if (jw >= n) continue;
    // Tiles inside the item's full range skip the mask (the host proved it true there; a
    // MASK_TRUE item's range is all of it).
    const bool tile_true = t0 >= full.x && t0 + n <= full.y;

    // S = Q K^T for this warp's FK_MKW keys.
    float s[FK_NS][4];
#pragma unroll
    for (int nt = 0; nt < FK_NS; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
      const u8* krow = sk + (jw + nt * 8) * FK_KPITCH;
      if constexpr (!FK_K8) {
        const u32 base = fk_msmem(krow + (lane & 7) * FK_KPITCH);
#pragma unroll
        for (int kk = 0; kk + 1 < FK_KSTEPS; kk += 2) {
          u32 b[4];
          fk_ldsm4(b, base + (kk * 16 + (lane >> 3) * 8) * 2);
          fk_mma(s[nt], qf[kk], b[0], b[1]);
          fk_mma(s[nt], qf[kk + 1], b[2], b[3]);
        }
        if constexpr (FK_KSTEPS % 2 == 1) {
          u32 b[2];
          fk_ldsm2(b, base + ((FK_KSTEPS - 1) * 16 + ((lane >> 3) & 1) * 8) * 2);
          fk_mma(s[nt], qf[FK_KSTEPS - 1], b[0], b[1]);
        }
      } else {
#pragma unroll
        for (int kk = 0; kk < FK_KSTEPS; ++kk) {
          const u32 w = *(const u32*)(krow + g * FK_KPITCH + kk * 16 + 4 * c4);
          fk_mma(s[nt], qf[kk], fk_mcodes<FK_KT>(w), fk_mcodes<FK_KT>(w >> 16));
        }
      }
    }

    // Scale, variant hooks, mask; fragment element e is row g + 8 (e / 2), key 2 c4 + e % 2.
#pragma unroll
    for (int nt = 0; nt < FK_NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = jw + nt * 8 + 2 * c4 + (e & 1);
        const i64 pos = t0 + j;
        s[nt][e] = fk_mma_score(P, sq, seq, q, e >> 1, s[nt][e], kq[e >> 1], j < n && pos >= visible0, pos, tile_true);
      }

    // Online softmax per row. Once a row's max settles, alpha is 1: prefill skips the rescale of
    // its accumulators (decode, bound by bandwidth, keeps the straight line: the branch costs
    // wide heads registers).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float alpha = fk_mma_softmax<FK_NS>(s, m[h], l[h], h);
      if (FK_MMT == 1 || alpha != 1.f) {
#pragma unroll
        for (int ot = 0; ot < FK_NO; ++ot) {
          o[ot][2 * h] *= alpha;
          o[ot][2 * h + 1] *= alpha;
        }
      }
    }

    // O += P V: P's accumulator fragments are the A fragments of the next mma.
#pragma unroll
    for (int kc = 0; kc < FK_MKW / 16; ++kc) {
      const u32 pa[4] = {fk_mpack(s[2 * kc][0], s[2 * kc][1]), fk_mpack(s[2 * kc][2], s[2 * kc][3]),
                         fk_mpack(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                         fk_mpack(s[2 * kc + 1][2], s[2 * kc + 1][3])};
      const u8* vrow = sv + (jw + kc * 16) * FK_VPITCH;
      if constexpr (!FK_V8) {
        const u32 base = fk_msmem(vrow + ((lane & 7) + ((lane >> 3) & 1) * 8) * FK_VPITCH + (lane >> 4) * 16);
#pragma unroll
        for (int ot = 0; ot < FK_NO; ot += 2) {
          u32 b[4];
          fk_ldsm4t(b, base + ot * 16);
          fk_mma(o[ot], pa, b[0], b[1]);
          fk_mma(o[ot + 1], pa, b[2], b[3]);
        }
      } else {
        const u8* r0 = vrow + 2 * c4 * FK_VPITCH;
#pragma unroll
        for (int grp = 0; grp < FK_NO / FK_VG; ++grp) {
          u32 w[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const u8* p = r0 + ((i & 1) + (i >> 1) * 8) * FK_VPITCH + grp * 8 * FK_VG + FK_VG * g;
            w[i] = FK_VG == 4 ? *(const u32*)p : (u32)*(const unsigned short*)p;
          }
#pragma unroll
          for (int tt = 0; tt < FK_VG; ++tt) {
            const u32 lo = ((w[0] >> (8 * tt)) & 0xffu) | (((w[1] >> (8 * tt)) & 0xffu) << 8);
            const u32 hi = ((w[2] >> (8 * tt)) & 0xffu) | (((w[3] >> (8 * tt)) & 0xffu) << 8);
            fk_mma(o[grp * FK_VG + tt], pa, fk_mcodes<FK_VT>(lo), fk_mcodes<FK_VT>(hi));
          }
        }
      }
    }
  }
  asm volatile("cp.async.wait_group 0;");
  __syncthreads();

  // Each warp leaves its rows' (max, sum, O) in the free stage memory; the block joins the key
  // splits row by row and writes the partial in fk_write_partial's format.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  float* red_o = (float*)fk_mstages;  // [warp][16][DV]
  float* red_m = red_o + FK_NWARPS * 16 * FK_DV;
  float* red_l = red_m + FK_NWARPS * 16;
#pragma unroll
  for (int ot = 0; ot < FK_NO; ++ot)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      red_o[(warp * 16 + g + 8 * (e >> 1)) * FK_DV + fk_mvcol(ot, 2 * c4 + (e & 1))] = o[ot][e];
  if (c4 == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      red_m[warp * 16 + g + 8 * h] = m[h];
      red_l[warp * 16 + g + 8 * h] = l[h];
    }
  }
  __syncthreads();
  const u64 base = ((u64)item * a.num_kv_heads + kvh) * FK_ROWS;
  const bool sole = ((it.y >> 30) & 1u) && !a.has_sinks;
  // Loaded here, not at the start: one register fewer through the loop (wide heads spill).
  const float vscale = ((const float*)(a.step + a.off_vscale))[kvh];
  // A warp per row: the row's max, split weights, sum, final scale and destination once, its
  // lanes over the columns (per element, they cost a decode block a third of its time: four
  // rows of 128 columns on 128 threads recomputed them, with two 64-bit divisions, 4 times).
  for (int r = warp; r < FK_ROWS; r += FK_NWARPS) {
    float M = FK_NEG_INF;
#pragma unroll
    for (int k = 0; k < FK_MKS; ++k) M = fmaxf(M, red_m[r + k * FK_MMT * 16]);
    float w[FK_MKS], L = 0.f;
#pragma unroll
    for (int k = 0; k < FK_MKS; ++k) {
      const float mw = red_m[r + k * FK_MMT * 16];
      // 0 * NaN stays NaN: a kept NaN score poisons the row whatever its weight.
      w[k] = mw == FK_NEG_INF ? 0.f : fk_ex2((mw - M) * L2E);
      L = fmaf(red_l[r + k * FK_MMT * 16], w[k], L);
    }
    const float2 f = fk_mma_final(M, L, vscale);
    float* dst;
    float* lse_at = nullptr;
    if (sole) {
      // The only partition of its rows and no sinks: the merge would copy it; write it here.
      // The sequence record is read again: kept through the loop, it spilled wide heads.
      const FkSeq se = fk_seq(a, seq);
      const i64 R = (i64)(it.y & FK_ROW_TILE_BITS) * FK_ROWS + r, qi = R / G;
      if (qi >= se.q_len) continue;
      const i64 hq = a.num_kv_heads * G, head = kvh * G + R % G, token = se.q_start + qi;
      dst = a.out + (token * hq + head) * FK_DV;
      if (a.has_lse) lse_at = a.lse + token * hq + head;
    } else {
      dst = a.part_o + (base + r) * FK_DV;
      lse_at = a.part_lse + base + r;
    }
    for (int d = lane; d < FK_DV; d += 32) {
      float O = 0.f;
#pragma unroll
      for (int k = 0; k < FK_MKS; ++k) O = fmaf(red_o[(r + k * FK_MMT * 16) * FK_DV + d], w[k], O);
      dst[d] = L > 0.f ? O * f.x : f.x;
    }
    if (lane == 0 && lse_at != nullptr) *lse_at = f.y;
  }
#if FK_TRACE
  if (blockIdx.y * gridDim.x + blockIdx.x < FK_TRACE_SLOTS / 4 * 3) fk_trace_block(blockIdx.y * gridDim.x + blockIdx.x, trace_t0);
#endif
  if (sole || a.off_counters == 0) return;
  fk_mma_join_last(a, item, kvh);
}
#endif  // !FK_WGMMA
#endif
