// flexkern-cuda: K/V tiles of the mma.sync attention kernel staged into shared memory by
// cp.async (after attention_tc.cu): rows split among the block's threads, page lookups shared by
// a warp, K and V of equal bytes queued in one loop.
#if FK_MMA
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
#if FK_PAGE_SHIFT >= 0
// Pages a stage spans: it may start mid-page, so one more than it fills, and two where pages
// outgrow stages (128-key stages start 64 keys into a 256-key page when partitions are odd
// multiples of 64 keys: with one, a stage's second page was read from its first).
constexpr int FK_STAGE_SPAN = ((FK_MTILE - 1) >> FK_PAGE_SHIFT) + 2;
#endif
// The pool slots of a stage's keys [t0, t0 + FK_MTILE). Where the stage spans at most 32 pages
// (power-of-two pages, every thread looping over whole passes), each lane of a warp looks up one
// of them and rows take theirs by a shuffle: one page-table round trip a stage, not one per row
// pass (ncu, H100, fp8 B1 x 128k paged: a tenth of the decode kernel's warp samples waited on
// those per-row lookups). Otherwise (or not ON: the page window serves the stage) each row
// looks its page up itself.
template <int RPP, bool ON = true>
struct FkStagePages {
#if FK_PAGE_SHIFT >= 0
  static constexpr int SPAN = FK_STAGE_SPAN;
  static constexpr bool SHARED = ON && SPAN <= 32 && FK_MTILE % RPP == 0;
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
  // The physical page of key `pos` of the stage at t0 (SHARED builds). Every thread of the
  // warp calls this for the same pass, live or not: the shuffle needs them all (a call skipped
  // for dead keys hung the model's decode, whose last tile is part dead).
  __device__ __forceinline__ u32 page(i64 t0, i64 pos) const {
#if FK_PAGE_SHIFT >= 0
    return __shfl_sync(0xffffffffu, mine, (int)(((u32)pos >> FK_PAGE_SHIFT) - ((u32)t0 >> FK_PAGE_SHIFT)));
#else
    return 0;
#endif
  }
  // The slot of key `pos` of the stage at t0 (0 where not `live`), as `page` where SHARED.
  __device__ __forceinline__ i64 slot(const FkArgs& a, u32 seq, i64 t0, i64 pos, bool live) const {
#if FK_PAGE_SHIFT >= 0
    if constexpr (SHARED) {
      const u32 phys = page(t0, pos);
      return live ? ((i64)phys << FK_PAGE_SHIFT) + ((u32)pos & ((1u << FK_PAGE_SHIFT) - 1u)) : 0;
    }
#endif
    return live ? fk_kv_slot(a, seq, pos) : 0;
  }
};
#endif

// Where the planner asks (FK_PAGE_WINDOW: long decode partitions, `plan::page_window`), the
// paged copies of K and V together (fk_mrows_kv below) read their pages from a window the block
// holds: lane l of every warp keeps the physical page of logical page `base` + l (`cur`) and of
// `base` + 32 + l (`nxt`), and a stage's rows take theirs by shuffles. The next window is
// loaded as the stages move into this one, 32 pages ahead, so no stage's issue waits on a
// page-table load (paged decode spent 1.8x contiguous's cycles queueing its copies, session
// 29). At a model step's short context it lost (session 31, call d): there the stages look
// their pages up one at a time (FkStagePages).
#if FK_PAGED && FK_PAGE_SHIFT >= 0
constexpr bool FK_PWIN = FK_PAGE_WINDOW && FK_STAGE_SPAN <= 32 &&
                         FK_DK * FK_MKB == FK_DV * FK_MVB && FK_DK <= 128 && FK_DV <= 128 &&
                         FK_MTILE % FkRowSplit<FK_DK * FK_MKB / 16>::RPP == 0;
#else
constexpr bool FK_PWIN = false;
#endif
struct FkPageWindow {
#if FK_PAGED && FK_PAGE_SHIFT >= 0
  u32 base, last, cur, nxt;
  // Branch-free (fk_page clamps every index into the tables): under a branch, the first
  // window's two loads ran one after the other, four round trips before the first copy
  // (SASS; B1 x 128k paged: the first tile 0.7 us later than without the window).
  __device__ __forceinline__ u32 load(const FkArgs& a, u32 seq, u32 lp) const {
    const u32 p = fk_page(a, a.cu_pages, a.first_page, a.pages, seq, lp);
    return lp <= last ? p : 0u;
  }
#endif
  // The item's keys [k0, k1).
  __device__ __forceinline__ FkPageWindow(const FkArgs& a, u32 seq, i64 k0, i64 k1) {
#if FK_PAGED && FK_PAGE_SHIFT >= 0
    if constexpr (FK_PWIN) {
      const u32 lane = threadIdx.x & 31;
      base = (u32)k0 >> FK_PAGE_SHIFT;
      last = k1 > k0 ? (u32)(k1 - 1) >> FK_PAGE_SHIFT : base;
      cur = load(a, seq, base + lane);
      nxt = load(a, seq, base + 32 + lane);
    }
#endif
  }
  // Moves to the stage at t0 (stages come in increasing order, at most a window apart: a
  // stage spans at most 32 pages).
  __device__ __forceinline__ void to(const FkArgs& a, u32 seq, i64 t0) {
#if FK_PAGED && FK_PAGE_SHIFT >= 0
    if constexpr (FK_PWIN) {
      if (((u32)t0 >> FK_PAGE_SHIFT) >= base + 32) {
        base += 32;
        cur = nxt;
        nxt = load(a, seq, base + 32 + (threadIdx.x & 31));
      }
    }
#endif
  }
#if FK_PAGED
  // The physical page of key `pos` of the current stage. Every thread of the warp calls it for
  // the same pass, live or not: the shuffles need them all. Only FK_PWIN builds call it (pages
  // of other sizes have no window).
  __device__ __forceinline__ u32 page(u32 pos) const {
#if FK_PAGE_SHIFT >= 0
    const u32 from = (pos >> FK_PAGE_SHIFT) - base;  // < 64 after `to`
    const u32 c = __shfl_sync(0xffffffffu, cur, from & 31u), n = __shfl_sync(0xffffffffu, nxt, from & 31u);
    return from < 32 ? c : n;
#else
    return 0;
#endif
  }
  // The slot of key `pos` of the current stage (0 where not `live`), as `page`.
  __device__ __forceinline__ i64 slot(u32 pos, bool live) const {
    const u32 phys = page(pos);
#if FK_PAGE_SHIFT >= 0
    return live ? ((i64)phys << FK_PAGE_SHIFT) + (pos & ((1u << FK_PAGE_SHIFT) - 1u)) : 0;
#else
    return 0;
#endif
  }
#endif
};

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
__device__ __forceinline__ void fk_mrows_kv(const FkArgs& a, u32 seq, i64 kvh, const FkPageWindow& pw, u8* kdst,
                                            u8* vdst, i64 t0, i64 end, i64 visible0) {
  constexpr int CH = FK_DK * FK_MKB / 16;
  using L = FkRowSplit<CH>;
  const int sub = threadIdx.x % L::TPR;
  const FkStagePages<L::RPP, !FK_PWIN> pages(a, seq, t0);
  // Two rows at once: four spilled the 1-byte-KV decode kernel (128-key tiles).
#pragma unroll 2
  for (int j = threadIdx.x / L::TPR; j < FK_MTILE; j += L::RPP) {
    const i64 pos = t0 + j;
    const bool live = pos < end && pos >= visible0;
    // K's and V's rows sit at the same offset of their pools.
    i64 at;  // outside the select: it shuffles
    if constexpr (FK_PWIN) at = pw.slot((u32)pos, live);
    else at = pages.slot(a, seq, t0, pos, live);
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

// A tile whose keys are all live (all but an item's last and a paged sequence's first): each
// thread's rows are RPP keys apart, so no row is bounds-checked and, strided, the source just
// advances by RPP keys a pass. Per 16-byte copy the general loops above spent ~33 instructions
// on 64-bit row addresses, checks and zero-fill padding (SASS of the fp8 decode kernel: over
// 40 % of its instruction stream at B1 x 128k).
template <int CH>
constexpr bool fk_whole_passes() {
  return FK_MTILE % FkRowSplit<CH>::RPP == 0;
}

#if !FK_PAGED
template <bool IS_V>
__device__ __forceinline__ void fk_mrows_whole(const FkArgs& a, const FkSeq& sq, u32 seq, i64 kvh, u8* dst,
                                               i64 t0) {
  constexpr int ESZ = IS_V ? FK_MVB : FK_MKB;
  constexpr int CH = (IS_V ? FK_DV : FK_DK) * ESZ / 16;
  constexpr int PITCH = IS_V ? FK_VPITCH : FK_KPITCH;
  using L = FkRowSplit<CH>;
  const int sub = threadIdx.x % L::TPR, j0 = threadIdx.x / L::TPR;
  const u8* src = (IS_V ? a.v : a.k) + fk_kv_row(a, sq, seq, t0 + j0, kvh, IS_V) * ESZ;
  const i64 step = (IS_V ? a.v_tok_stride : a.k_tok_stride) * (L::RPP * ESZ);
  const u32 d = fk_msmem(dst + j0 * PITCH);
#pragma unroll
  for (int p = 0; p < FK_MTILE / L::RPP; ++p, src += step)
#pragma unroll
    for (int ch = sub; ch < CH; ch += L::TPR) fk_cp16_live(d + p * L::RPP * PITCH + ch * 16, src + ch * 16);
}
#else
__device__ __forceinline__ void fk_mrows_kv_whole(const FkArgs& a, u32 seq, i64 kvh, const FkPageWindow& pw,
                                                  u8* kdst, u8* vdst, i64 t0) {
  constexpr int CH = FK_DK * FK_MKB / 16;
  using L = FkRowSplit<CH>;
  const int sub = threadIdx.x % L::TPR, j0 = threadIdx.x / L::TPR;
  using Pages = FkStagePages<L::RPP, !FK_PWIN>;
  const Pages pages(a, seq, t0);
  const u32 dk = fk_msmem(kdst + j0 * FK_KPITCH), dv = fk_msmem(vdst + j0 * FK_VPITCH);
#if FK_PAGE_SHIFT >= 0
  // Where a pass's page comes from the window or the stage's shared lookup, its rows are
  // addressed from the page's first byte: one 32 x 32-bit multiply-add and a 32-bit offset in
  // the page, not the slot's 64-bit products (validation keeps a page under 4 GiB). ~12
  // instructions a pass against ~20 (SASS, fp8 B1 x 128k paged: 71 -> 73 % of read, call e).
  constexpr u32 ROWB = FK_DK * FK_MKB;
  const u32 tokb = (u32)a.num_kv_heads * ROWB, pageb = tokb << FK_PAGE_SHIFT;
  const u8* const kh = a.k + kvh * ROWB;
#endif
#pragma unroll 4
  for (int p = 0; p < FK_MTILE / L::RPP; ++p) {
    const i64 pos = t0 + j0 + p * L::RPP;
    const u8* ks;
#if FK_PAGE_SHIFT >= 0
    if constexpr (FK_PWIN || Pages::SHARED) {
      const u32 phys = FK_PWIN ? pw.page((u32)pos) : pages.page(t0, pos);
      const u32 in_page = (u32)pos & ((1u << FK_PAGE_SHIFT) - 1u);
      ks = kh + ((u64)phys * pageb + in_page * tokb);
    } else
#endif
    {
      const i64 at = pages.slot(a, seq, t0, pos, true);
      ks = a.k + (at * a.num_kv_heads + kvh) * (FK_DK * FK_MKB);
    }
    const u8* vs = ks + (a.v - a.k);
#pragma unroll
    for (int ch = sub; ch < CH; ch += L::TPR) {
      fk_cp16_live(dk + p * L::RPP * FK_KPITCH + ch * 16, ks + ch * 16);
      fk_cp16_live(dv + p * L::RPP * FK_VPITCH + ch * 16, vs + ch * 16);
    }
  }
}
#endif

// Queues K and V of keys [t0, t0 + FK_MTILE) into `stage` as one commit group (empty past the
// item's end, so group counting stays uniform).
__device__ __forceinline__ void fk_missue(const FkArgs& a, const FkSeq& sq, u32 seq, i64 kvh, FkPageWindow& pw,
                                          u8* stage, i64 t0, i64 end, i64 visible0) {
  const bool whole = t0 >= visible0 && t0 + FK_MTILE <= end;
  if (t0 < end) {
#if FK_PAGED
    // Heads above 128 keep two loops: both at once spill their registers.
    if constexpr (FK_DK * FK_MKB == FK_DV * FK_MVB && FK_DK <= 128 && FK_DV <= 128) {
      pw.to(a, seq, t0);
      if (fk_whole_passes<FK_DK * FK_MKB / 16>() && whole)
        fk_mrows_kv_whole(a, seq, kvh, pw, stage, stage + FK_MTILE * FK_KPITCH, t0);
      else
        fk_mrows_kv(a, seq, kvh, pw, stage, stage + FK_MTILE * FK_KPITCH, t0, end, visible0);
    } else
#else
    if (fk_whole_passes<FK_DK * FK_MKB / 16>() && fk_whole_passes<FK_DV * FK_MVB / 16>() && whole) {
      fk_mrows_whole<false>(a, sq, seq, kvh, stage, t0);
      fk_mrows_whole<true>(a, sq, seq, kvh, stage + FK_MTILE * FK_KPITCH, t0);
    } else
#endif
    {
      fk_mrows<false>(a, sq, seq, kvh, stage, t0, end, visible0);
      fk_mrows<true>(a, sq, seq, kvh, stage + FK_MTILE * FK_KPITCH, t0, end, visible0);
    }
  }
  asm volatile("cp.async.commit_group;");
}
#endif  // FK_MMA
