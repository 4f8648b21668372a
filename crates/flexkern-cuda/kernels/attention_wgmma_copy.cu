// flexkern-cuda: the Hopper prefill's stage layout and the copies into it: K/V tiles by the
// producer warpgroup (fk_wrows: cp.async gathers, so paged KV is the same code as strided;
// TMA copies whole strided tiles in the kernel itself) and each consumer warpgroup's Q rows
// (fk_wq). Included before attention_wgmma.cu, the kernel.
//
// Stage layout: K then V, each as column blocks of 64 elements (128 bytes) x FK_MMA_TILE rows,
// 16-byte chunks XOR-swizzled by row (the 128-byte swizzle wgmma descriptors name). K is the
// K-major B operand of Q K^T, V the N-major (transposed) B operand of P V; Q (128 rows, after
// the stages, FK_ROWS of them) is the K-major A operand.
#if FK_WGMMA

constexpr int FK_WT = FK_MMA_TILE;             // keys per stage
constexpr int FK_WST = FK_MMA_STAGES;          // stages
constexpr int FK_WCOL = FK_WT * 128;           // bytes of one 64-column block of a tile
constexpr int FK_WKB = FK_DK / 64 * FK_WCOL;   // K bytes of a stage
constexpr int FK_WSTAGE = FK_WKB + FK_DV / 64 * FK_WCOL;
constexpr int FK_WNB = FK_WT / 64;             // n64 blocks of S
constexpr int FK_WNO = FK_DV / 64;             // n64 blocks of O
constexpr int FK_WQCOL = FK_ROWS * 128;       // bytes of one 64-column block of Q
constexpr int FK_WQ = FK_DK / 64 * FK_WQCOL;   // Q bytes
constexpr int FK_WPROD = 128;                  // producer threads
constexpr int FK_WGS = FK_NWARPS / 4;          // consumer warpgroups
static_assert(FK_KT == FK_QT && FK_VT == FK_QT && FkSize<FK_QT>::value == 2, "2-byte Q, K, V of one type");
static_assert(FK_DK % 64 == 0 && FK_DV % 64 == 0, "whole 128-byte swizzle columns");
static_assert(FK_ROWS == 16 * FK_NWARPS && (FK_WGS == 2 || FK_WGS == 3), "two or three consumer warpgroups of 64 rows");
static_assert(FK_WT % 64 == 0, "keys per stage are whole n64 blocks");
// How Q K^T reads Q (FK_WG_S): 0 shared memory, n64 instructions; 1 shared memory, one n128
// instruction per k16 step where the tile is 128 keys; 2 registers, n64 instructions.
static_assert(FK_WG_S >= 0 && FK_WG_S <= 2, "a Q mode");
// The producer signals tile t - 1 after queueing tile t, and consumers free tile t - 1's stage
// only after the turn that needs tile t: with two stages each would wait for the other.
static_assert(FK_WST >= 3, "three stages at least");

// The producer: keys [t0, t0 + FK_WT) of K and V into the swizzled column blocks of the stage at
// `dst`. Each thread owns one 16-byte chunk position of every 128-byte block and every 16th row,
// so its swizzled offset is fixed and a row's addresses (one page-table lookup for K and V when
// paged) are found once. Keys past `end` or before the first visible one are zero-filled. Lean
// on registers: the producer runs on 40. `kb` / `vb`: this KV head's position 0 (strided).
__device__ __forceinline__ void fk_wrows(const FkArgs& a, const u8* kb, const u8* vb, u32 seq, i64 kvh, u32 dst,
                                         i64 t0, i64 end, i64 visible0, int pt, u64 pbase) {
  const int c = pt & 7;
  const u32 swz = (u32)((c ^ ((pt >> 3) & 7)) << 4);  // rows 16 apart share j & 7
#if FK_PAGED
  // Every row's page first, all lookups in flight: one after another they made the producer
  // the bottleneck of paged chunked prefill (a consumer's loop waited on tiles 3/4 of its
  // time, session 21 trace). `pbase`: the sequence's page-list start less its first page.
  constexpr int NJ = FK_WT / (FK_WPROD / 8);
  u32 phys[NJ];
#pragma unroll
  for (int i = 0; i < NJ; ++i) {
    const i64 pos = t0 + (pt >> 3) + i * (FK_WPROD / 8);
#if FK_PAGE_SHIFT >= 0
    const u32 lp = (u32)pos >> FK_PAGE_SHIFT;
#else
    const u32 lp = (u32)pos / (u32)a.page_size;
#endif
    const u64 at = pbase + lp;
    phys[i] = pos < end && pos >= visible0 ? __ldg(a.pages + (at < (u64)a.pages_len ? at : (u64)a.pages_len - 1)) : 0u;
  }
#pragma unroll
  for (int i = 0; i < NJ; ++i) {
    const int j = (pt >> 3) + i * (FK_WPROD / 8);
    const i64 pos = t0 + j;
    const bool live = pos < end && pos >= visible0;
    const u32 ph = phys[i] < (u64)a.num_pages ? phys[i] : (u32)(a.num_pages - 1);
#if FK_PAGE_SHIFT >= 0
    const i64 in_page = (u32)pos & ((1u << FK_PAGE_SHIFT) - 1u), slot0 = (i64)ph << FK_PAGE_SHIFT;
#else
    const i64 in_page = (u32)pos % (u32)a.page_size, slot0 = (i64)ph * a.page_size;
#endif
    const i64 slot = live ? (slot0 + in_page) * a.num_kv_heads + kvh : 0;
    const u8* ks = a.k + slot * (FK_DK * 2) + c * 16;
    const u8* vs = a.v + slot * (FK_DV * 2) + c * 16;
#else
#pragma unroll 1
  for (int j = pt >> 3; j < FK_WT; j += FK_WPROD / 8) {
    const i64 pos = t0 + j;
    const bool live = pos < end && pos >= visible0;
    const u8* ks = (live ? kb + pos * a.k_tok_stride * 2 : a.k) + c * 16;
    const u8* vs = (live ? vb + pos * a.v_tok_stride * 2 : a.v) + c * 16;
#endif
    const u32 d = dst + j * 128 + swz;
#pragma unroll
    for (int cb = 0; cb < FK_DK / 64; ++cb) fk_cp16(d + cb * FK_WCOL, ks + cb * 128, live);
#pragma unroll
    for (int cb = 0; cb < FK_DV / 64; ++cb) fk_cp16(d + FK_WKB + cb * FK_WCOL, vs + cb * 128, live);
  }
}

// A thread's two rows, r and r + 8 of the tile: query, q head, whether the query exists.
__device__ __forceinline__ FkMRows fk_wrows_of(const FkArgs& a, const FkSeq& sq, u32 row_tile, i64 kvh, int r) {
  FkMRows q;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const i64 R = (i64)row_tile * FK_ROWS + r + 8 * h;
    q.qi[h] = R / a.group;
    q.head[h] = kvh * a.group + R % a.group;
    q.ok[h] = q.qi[h] < sq.q_len;
    q.qs[h] = 1.f;
  }
  return q;
}

// Warpgroup wg's 64 Q rows into the swizzled column blocks at `qs` (zero past the tile's
// queries), then visible to its wgmma; returns this thread's rows (r0 + 8 h of the warpgroup).
__device__ __forceinline__ FkMRows fk_wq(const FkArgs& a, const FkSeq& sq, u32 row_tile, i64 kvh, int wg, int r0,
                                         u32 qs) {
  const int wt = threadIdx.x & 127, c = wt & 7;
  constexpr int NR = 64 / 16, NC = FK_DK / 64;
  auto at = [&](int i, const unsigned short*& src, bool& ok) {
    const int r = wg * 64 + (wt >> 3) + 16 * i;
    const i64 R = (i64)row_tile * FK_ROWS + r, qi = R / a.group, head = kvh * a.group + R % a.group;
    ok = qi < sq.q_len;
    src = (const unsigned short*)a.q + sq.q_base + qi * a.q_tok_stride + head * a.q_head_stride + c * 8;
    return qs + r * 128 + ((c ^ (r & 7)) << 4);
  };
  if ((((u64)a.q | (u64)(sq.q_base | a.q_tok_stride | a.q_head_stride) * 2) & 15) == 0) {
    // 16-byte rows: every copy in flight at once, straight to shared memory (zero past the
    // queries). Loads behind the register stores went one round trip at a time: 3.5 us a
    // block before its first tile (session 21 trace).
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      const unsigned short* src;
      bool ok;
      const u32 d = at(i, src, ok);
#pragma unroll
      for (int cb = 0; cb < NC; ++cb) fk_cp16(d + cb * FK_WQCOL, ok ? (const u8*)(src + cb * 64) : a.q, ok);
    }
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;" ::: "memory");
  } else {
    for (int i = 0; i < NR; ++i) {
      const unsigned short* src;
      bool ok;
      const u32 d = at(i, src, ok);
#pragma unroll
      for (int cb = 0; cb < NC; ++cb) {
        u32 w[4] = {0, 0, 0, 0};
        if (ok) {
#pragma unroll
          for (int k = 0; k < 4; ++k) w[k] = (u32)__ldg(src + cb * 64 + 2 * k) | ((u32)__ldg(src + cb * 64 + 2 * k + 1) << 16);
        }
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(d + cb * FK_WQCOL), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                     "r"(w[3])
                     : "memory");
      }
    }
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  fk_named_sync(5 + wg, 128);  // 1 is the compute warps', 2-4 the turns'
  return fk_wrows_of(a, sq, row_tile, kvh, wg * 64 + r0);
}

#endif
