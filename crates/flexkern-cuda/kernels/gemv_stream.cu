// flexkern-cuda: the streamed GEMV, for one activation row (decode) over a block format: plain,
// gate and up fused, or up to three matrices stacked (Q, K and V in one launch) (FK_MODE 0 / 1
// / 3). Appended to gemv.cu under FK_STREAM.
//
// Why a third kernel: a decode GEMV reads each weight byte once, so it runs at DRAM speed only
// with about 40 KB per SM in flight (H100). The staged kernel kept ~1 KB per warp in flight and
// stopped every warp at two block barriers per chunk (44 % of copy for Q4_0). Here each warp
// streams its own consecutive rows through a private ring of FK_SS cp.async stages, one chunk
// of FK_CW weights of each matrix per stage, and never waits for another warp; the grid holds
// only resident blocks, and every warp owns n / warps consecutive rows (give or take one).
// The block first fills the activation row into shared memory (quantized there under
// FK_DP4A, bit for bit as the CPU's default path, so no separate launch) while the ring's
// first stages load; on Hopper those loads start before the previous kernel ends
// (programmatic dependent launch).
//
// FK_ACC adds the result into Y (the residual add, fused: one launch fewer per projection).
// NW (not null) normalizes the activation row first, RMSNorm with weights NW (ops.cu's
// fk_rms_norm formula): the norm's own launch goes, each block reading the row once more from L2.
//
// Shared memory (dynamic): the rings [FK_SNW][FK_SS][matrices][FK_SWB] bytes, then the
// activations: FK_DP4A 1: Q8_0 codes [k] and (scale, code sum) [k / 32]; 2: Q8_K codes [k],
// sums of 16 codes [k / 16], scales [k / 256]; 0: k floats, float4-swizzled. The codes' 16-byte
// chunks are permuted against bank conflicts (gemv_acts.cu, fk_xqc).

constexpr int FK_SNM = FK_MODE == 1 ? 2 : 1;
static_assert(FK_MODE == 0 || FK_MODE == 1 || FK_MODE == 3, "plain, gate/up or stacked");

// A compile-time flag for a generic lambda's argument. A batch whose units all lie in the row
// (k a multiple of 32 FK_SUN units) runs unguarded: a guard per unit made each unit a branch
// of its own, so ptxas ran one unit's dot chain at a time (~12 cycles between a warp's
// instructions); unguarded, the batch's chains interleave.
template <bool B>
struct FkBool {
  static constexpr bool value = B;
};

// Where a lane finds the activation codes of unit u = ub + lane (ub a multiple of 32) of a
// format with UE weights a unit. fk_xqc permutes a code chunk's index q within its 64 chunks
// (Q8_0: bit 3 into bit 0; Q8_K: bits 3-4 into 0-1), and UE / 16 * ub is a multiple of 64, so
// fk_xqc(UE / 16 * u + i) is UE / 16 * ub + fk_xqc(UE / 16 * lane + i): a warp-uniform base
// plus a lane's fixed offsets, with no index arithmetic per unit.
template <int UE>
struct FkXLane {
  static constexpr int C = UE / 16;  // 16-byte chunks a unit
  static_assert(C == 2, "32-weight units (Q8_0 activations, and Q6_K's against Q8_K)");
  int off[C];  // byte offsets of the lane's chunks
  __device__ __forceinline__ explicit FkXLane(int lane) {
#pragma unroll
    for (int i = 0; i < C; ++i) off[i] = 16 * fk_xqc(C * lane + i);
  }
  __device__ __forceinline__ void codes(const signed char* xq, int ub, int (&x8)[4 * C]) const {
    const signed char* base = xq + 16 * C * ub;
#pragma unroll
    for (int i = 0; i < C; ++i) *(uint4*)(x8 + 4 * i) = *(const uint4*)(base + off[i]);
  }
};

// FK_SROPE (mode 3, Q, K and V of one decode token): the epilogue applies RoPE to Q and K and
// appends K and V to the page store, as fk_rope_kv_write does after a plain launch (the same
// roundings: kv_store.cuh), so that launch goes. A rotated pair is two adjacent rows (RoPE's
// normal style): a block's rows start at an even row, and a warp holds a pair's first row
// until its second is reduced (or, where the pair spans two warps, meets it after the loop).
#ifndef FK_SROPE
#define FK_SROPE 0
#endif
static_assert(!FK_SROPE || FK_MODE == 3, "RoPE in the epilogue of the stacked Q, K, V launch");

#ifndef FK_SBULK
#define FK_SBULK 0
#endif
// FK_SLATE: of the weights a warp asks for before the wait (the bulk ring's FK_SBULK stages, or
// the first register batch), the last FK_SLATE wait instead until its block's first activation
// loads are issued (gemv_acts.cu, fk_late), so that those loads do not queue behind them.
#ifndef FK_SLATE
#define FK_SLATE 0
#endif
static_assert(FK_SLATE <= (FK_SBULK ? FK_SBULK : FK_SPIPE ? 1 : 0), "late stages of those planned");
static_assert(!FK_SBULK || (FK_SREG && FK_SPIPE), "the bulk ring feeds the pipelined batches");

#if FK_SREG && FK_SBULK
// FK_SBULK (Hopper; planar Q4_0 / Q8_0 and Q4_K, rows whose spans are 16-byte aligned): each
// warp streams its batches through a private ring of FK_SBULK stages in shared memory, one
// bulk copy per batch and matrix (and one of the side entries), completing on the stage's
// mbarrier. A batch's codes (FK_BC bytes a matrix) and side entries (FK_BS) are the units
// [u0, u0 + 32 FK_SUN) of one row, contiguous in the device layout. Register batches keep
// one or two batches in flight and spend ~15 instructions a unit on 64-bit addresses (ncu,
// H200: 44 % of DRAM bandwidth for Q4_0 at 14336 x 4096, 12.5 cycles between a warp's
// instructions); here FK_SBULK - 1 are in flight while one is computed, and lane 0 issues them.
// A side entry (SH_USB bytes) per SH_UPS units: one a unit (Q4_0, Q8_0), a block (Q6_K), none.
static_assert((32 * FK_SUN) % FK_FMT::SH_UPS == 0, "a batch of whole side entries");
constexpr int FK_BC = 32 * FK_SUN * FK_FMT::SH_UB, FK_BS = 32 * FK_SUN / FK_FMT::SH_UPS * FK_FMT::SH_USB;
constexpr int FK_BST = FK_SNM * (FK_BC + FK_BS);  // one stage
constexpr int FK_RING = FK_SBULK * FK_BST;        // one warp's ring
static_assert(FK_BC % 16 == 0 && FK_BS % 16 == 0, "stages of whole 16-byte words");
#elif FK_SREG
// FK_SREG (planar formats, layout.rs): every unit's codes are 16-byte aligned in global memory,
// so lanes load them straight into registers, several units in flight, and no ring is needed.
constexpr int FK_RING = 0;
#else
static_assert(FK_CW % FK_FMT::QK == 0 && FK_CW % FK_FMT::UE == 0, "chunks of whole blocks");
// A chunk's byte window, 16-aligned around its blocks (the start moves by up to 15 bytes).
constexpr int FK_SWB = (FK_CW / FK_FMT::QK * FK_BB + 15) / 16 * 16 + 16;
constexpr int FK_SLD = (FK_SWB / 16 + 31) / 32;  // 16-byte copies per lane per matrix
constexpr int FK_RING = FK_SS * FK_SNM * FK_SWB;  // one warp's ring
static_assert(FK_SS >= 2, "at least one stage in flight");

__device__ __forceinline__ void fk_scp16(u32 dst, const u8* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}

// Row `row`'s bytes for weights [c0, c0 + cw): the 16-aligned window start and the skew of the
// first block in it.
__device__ __forceinline__ void fk_swindow(i64 row_bytes, i64 row, i64 c0, int cw, i64& lo, int& skew,
                                           int& len) {
  const i64 start = row * row_bytes + c0 / FK_FMT::QK * FK_BB;
  lo = start & ~(i64)15;
  skew = (int)(start - lo);
  len = (int)(((start + cw / FK_FMT::QK * FK_BB + 15) & ~(i64)15) - lo);
}

// Queues one chunk of each matrix (row `row` of w0, and of w1 in mode 1) into `stage` as one
// commit group (an empty group past the warp's items, so the count stays uniform).
__device__ __forceinline__ void fk_sissue(const u8* w0, const u8* w1, i64 row_bytes, u32 stage, bool live,
                                          i64 row, i64 c0, int cw, int lane) {
  if (live) {
#pragma unroll
    for (int t = 0; t < FK_SNM; ++t) {
      i64 lo;
      int skew, len;
      fk_swindow(row_bytes, row, c0, cw, lo, skew, len);
      const u8* base = (t == 0 ? w0 : w1) + lo;
#pragma unroll
      for (int i = 0; i < FK_SLD; ++i) {
        const int at = 16 * (lane + 32 * i);
        if (at < len) fk_scp16(stage + t * FK_SWB + at, base + at);
      }
    }
  }
  asm volatile("cp.async.commit_group;");
}
#endif  // FK_SREG

#if FK_SROPE
// What the epilogue reads besides the row: the token's position and page slot (registers),
// the frequencies and the per-head store scales (shared memory, filled after the wait). Read
// from global memory at each row, they stalled the warp (lane 0's divergent path holds all
// of it): the fused launch took 11.4 us of an 8B layer against 9.6 + 2.3 for the two.
constexpr int FK_ROPE_HALF_MAX = 256, FK_ROPE_HKV_MAX = 64;
struct FkSRope {
  u32 pos, slot;
  const float* invf;
  const float* ksc;
  const float* vsc;
};

// Row r (its value v, reduced in every lane) of the stacked Q (into Y), K (st.y2), V (st.y3) of
// token 0, with fk_rope_kv_item's arithmetic: a rotated dim's even row waits in `held`; its odd
// row rotates the pair and stores both (Q in f32 and, with rk.qcode, 16-bit; K in f32 and in
// the page store); rows past the rotated dims and V store as they come. Lane 0 writes.
__device__ __forceinline__ void fk_srope_store(const FkRopeKv& rk, const FkSRope& sr, const FkStack& st,
                                               const FkSRow& r, float v, float& held, int lane) {
  const int dim = rk.dim, rot = 2 * rk.half, row = (int)r.row;  // rows of one matrix fit an int
  if (r.y == st.y3) {  // V
    if (lane == 0) {
      const int h = row / rk.dim_v, e = row - h * rk.dim_v;
      r.y[row] = v;
      fk_kv_store(rk.vdst, rk.vcode, ((u64)sr.slot * rk.hkv + h) * rk.dim_v + e, v, sr.vsc[h]);
    }
    return;
  }
  const bool is_k = r.y == st.y2;
  const int h = row / dim, e = row - h * dim;
  float x0 = v, x1 = v;
  int e0 = e, n = 1;
  if (e < rot) {
    if ((e & 1) == 0) {
      held = v;
      return;
    }
    x0 = held, x1 = v, e0 = e - 1, n = 2;
    fk_rope_rotate(x0, x1, e0 / 2, sr.pos, sr.invf, rk.mscale);
  }
  if (lane != 0) return;
  const int at = row - (e - e0);
  const float xs[2] = {x0, x1};
  for (int i = 0; i < n; ++i) {
    r.y[at + i] = xs[i];
    if (is_k)
      fk_kv_store(rk.kdst, rk.kcode, ((u64)sr.slot * rk.hkv + h) * dim + e0 + i, xs[i], sr.ksc[h]);
    else if (rk.qcode)
      rk.qh[at + i] = fk_to16(xs[i], rk.qcode);
  }
}
#endif

#if FK_SCL > 1
#define FK_SCLUSTER __cluster_dims__(FK_SCL, 1, 1)
#else
#define FK_SCLUSTER
#endif
extern "C" __global__ void __launch_bounds__(FK_SNW * 32, FK_SMINB) FK_SCLUSTER
    fk_gemv(FkMat a, FkMat b, const float* __restrict__ X, const float* __restrict__ X2, float* __restrict__ Y,
            int m, i64 n, i64 k, FkStack st, const float* __restrict__ NW, float eps
#if FK_SROPE
            ,
            const FkRopeKv rk
#endif
    ) {
  using F = FK_FMT;
  extern __shared__ __align__(16) u8 fk_sm[];
  FK_TRACE_SCOPE();
  fk_scl_arrive();  // completed by the prologue's first wait (gemv_acts.cu)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Rows split evenly (counts differ by at most one, spread over every block): with
  // ceil(n / warps) rows each, 4096 rows on 3168 warps left a third of the SMs idle.
#if FK_SROPE
  // Whole rotated pairs a block (n is even), then a row at a time over its warps. Whole pairs
  // a warp left an 8B step's Q, K, V (3072 pairs, 2112 warps) most warps two rows and the
  // rest four; a pair split between two warps meets in shared memory after the loop.
  const i64 b0 = 2 * ((i64)blockIdx.x * (n / 2) / gridDim.x);
  const i64 nb = 2 * (((i64)blockIdx.x + 1) * (n / 2) / gridDim.x) - b0;
  auto first_row = [&](int w) { return b0 + w * nb / FK_SNW; };
  const i64 r0 = first_row(warp), r1 = first_row(warp + 1);
#else
  const i64 warps = (i64)gridDim.x * FK_SNW, gw = (i64)blockIdx.x * FK_SNW + warp;
  const i64 r0 = gw * n / warps, r1 = (gw + 1) * n / warps;
#endif
#if FK_SREG
  constexpr int UE = F::UE;
  const int units = (int)(k / UE);
  // Whole batches run unguarded (FkBool) with 32-weight units. Not in RoPE launches: there
  // MLX 8-bit spilled, and two units at a time (unrolled by two) cost 8B decode 10 %; not for
  // Q4_K, which lost half a point (session 36, calls c, d).
  constexpr bool FK_SWHOLE = UE == 32 && !FK_SROPE;
#if FK_SBULK
  const u32 ring = (u32)__cvta_generic_to_shared(fk_sm) + warp * FK_RING;
  const u8* const ring_p = fk_sm + warp * FK_RING;
  __shared__ __align__(8) u64 fk_sbar[FK_SNW * FK_SBULK];
  const u32 bars = (u32)__cvta_generic_to_shared(fk_sbar) + 8 * FK_SBULK * warp;
  // Lane 0's issue cursor: the next batch's row and first unit.
  i64 irow = r0;
  int iu = 0;
  auto issue = [&](int slot) {
    if (irow >= r1) return;
    const FkSRow r = fk_srow(a, b, st, Y, irow);
    const int nu = min(32 * FK_SUN, units - iu);
    const u32 bar = bars + 8 * slot;
    const u32 side = (u32)(nu / F::SH_UPS * F::SH_USB);  // nu: whole side entries (the plan's k)
    fk_bar_expect(bar, (u32)FK_SNM * ((u32)nu * F::SH_UB + side));
#pragma unroll
    for (int t = 0; t < FK_SNM; ++t) {
      const FkMat& mt = t == 0 ? r.m : b;
      const u32 dst = ring + slot * FK_BST + t * (FK_BC + FK_BS);
      fk_bulk_g2s(dst, mt.w + r.row * mt.row_bytes + (i64)iu * F::SH_UB, (u32)(nu * F::SH_UB), bar);
      if (F::SH_USB > 0)
        fk_bulk_g2s(dst + FK_BC, mt.s + (r.row * mt.groups + iu / F::SH_UPS) * F::SH_USB, side, bar);
    }
    if ((iu += 32 * FK_SUN) >= units) iu = 0, ++irow;
  };
  // The ring fills before the wait below (weights never depend on the previous kernel), but
  // for FK_SLATE stages, which follow the activations' loads.
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < FK_SBULK; ++s) fk_bar_init(bars + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#pragma unroll
    for (int s = 0; s < FK_SBULK - FK_SLATE; ++s) issue(s);
  }
  __syncwarp();
  auto late = [&] {
    if (FK_SLATE > 0 && lane == 0) {
#pragma unroll
      for (int s = FK_SBULK - FK_SLATE; s < FK_SBULK; ++s) issue(s);
    }
  };
#elif FK_SPIPE
  // A batch: FK_SUN consecutive units of this lane (32 apart) of each matrix, as the format's
  // raw words (F::Raw), loaded before any is used. The warp's first batch is loaded before
  // the wait below, while the previous kernel finishes (weights never depend on it).
  struct Batch {
    typename F::Raw r[FK_SUN][FK_SNM];
  };
  // A whole batch (every unit in the row) loads unguarded, so its units share their address
  // arithmetic: guarded, each unit's loads were a branch of their own, about 15 instructions
  // a unit recomputing the row's address.
  auto load = [&](Batch& bt, const FkSRow& r, int u0) {
    auto units_of = [&](auto guarded) {
#pragma unroll
      for (int j = 0; j < FK_SUN; ++j) {
        const int u = u0 + 32 * j;
#pragma unroll
        for (int t = 0; t < FK_SNM; ++t)
          if (!decltype(guarded)::value || u < units) F::load(t == 0 ? r.m : b, r.row, u, bt.r[j][t]);
      }
    };
    if (FK_SWHOLE && u0 - lane + 32 * FK_SUN <= units) units_of(FkBool<false>{});
    else units_of(FkBool<true>{});
  };
  Batch first;
  if (!FK_SLATE && r0 < r1) load(first, fk_srow(a, b, st, Y, r0), lane);
  auto late = [&] {
    if (FK_SLATE && r0 < r1) load(first, fk_srow(a, b, st, Y, r0), lane);
  };
#else
  auto late = [] {};
#endif
#else
  const u32 ring = (u32)__cvta_generic_to_shared(fk_sm) + warp * FK_RING;
  u8* const ring_p = fk_sm + warp * FK_RING;
  // The issue cursor (row, chunk start) runs FK_SS - 1 items ahead of the compute cursor;
  // cursors, not item indices, so the loop has no 64-bit division.
  i64 irow = r0, ic0 = 0;
  auto issue = [&](int slot) {
    const bool live = irow < r1;
    const FkSRow r = fk_srow(a, b, st, Y, irow);
    fk_sissue(r.m.w, b.w, a.row_bytes, ring + (u32)slot * (FK_SNM * FK_SWB), live, r.row, ic0,
              (int)min((i64)FK_CW, k - ic0), lane);
    if (live && (ic0 += FK_CW) >= k) ic0 = 0, ++irow;
  };
#pragma unroll
  for (int s = 0; s < FK_SS - 1; ++s) issue(s);
  auto late = [] {};
#endif
  fk_sprefetch_nw(NW, k);
#if __CUDA_ARCH__ >= 900
  // Programmatic dependent launch (the host sets it on Hopper): the next GEMV may start its
  // blocks as ours leave, and ours may have started before the previous kernel finished. The
  // weights never change, so only the activations wait for it; every global write follows.
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  FK_TRACE_RELEASED();
#if FK_SROPE
  // The epilogue's inputs (the host keeps half and hkv within the arrays); the activation
  // prologue's barrier below publishes the shared ones.
  __shared__ float s_invf[FK_ROPE_HALF_MAX], s_ksc[FK_ROPE_HKV_MAX], s_vsc[FK_ROPE_HKV_MAX];
  for (int i = threadIdx.x; i < rk.half; i += FK_SNW * 32) s_invf[i] = rk.inv_freq[i];
  for (int i = threadIdx.x; i < rk.hkv; i += FK_SNW * 32) s_ksc[i] = rk.kscales[i], s_vsc[i] = rk.vscales[i];
  const FkSRope sr{rk.pos[0], rk.slots[0], s_invf, s_ksc, s_vsc};
#endif

  // The activation prologue (gemv_acts.cu), shared by a cluster's blocks under FK_SCL.
  u8* const acts = fk_sm + FK_SNW * FK_RING;
#if FK_DP4A == 1
  signed char* const xq = (signed char*)acts;
  float2* const xd = (float2*)(acts + k);
  fk_squant(X, NW, eps, xq, xd, k, (double*)acts, late);
#elif FK_DP4A == 2
  signed char* const xq = (signed char*)acts;
  int* const xs16 = (int*)(acts + k);  // 16-byte aligned: k is a multiple of 256
  float* const xd = (float*)(acts + k + k / 4);
  fk_squant_k(X, NW, eps, xq, xd, xs16, k, warp, lane, (double*)acts, late);
#else
  static_assert(FK_SCL == 1, "clusters share quantized activations only");
  (void)late;  // float activations take no batches
  const float ns = fk_snorm_scale(X, NW, k, eps, (double*)acts, 0, k / 4);
  float* const xs = (float*)acts;
#pragma unroll 4
  for (i64 f = threadIdx.x; f < k / 4; f += FK_SNW * 32)
    *(float4*)(xs + 4 * fk_xswz<F>((int)f)) = fk_sx4(X, NW, ns, 4 * f);
#endif
  fk_scl_arrive();
  fk_scl_wait();  // every block of the cluster has stored its share
#ifdef FK_TRACE_PROLOGUE
  FK_TRACE_RELEASED();  // FLEXKERN_CUDA_TRACE=step,prologue: "released" after the prologue
#endif
#if defined(FK_STEP_TRACE) && defined(FK_TRACE_AT) && FK_DP4A != 0
  fk_step_trace.t1 = *fk_trace_at_slot();  // step,at=N: thread 0's point N of the prologue
#endif

  // Q8_0 activations serve only the planar formats, which take the batches below.
  static_assert(FK_DP4A != 1 || FK_SPIPE, "Q8_0 activations stream through register batches");
  static_assert(!FK_SPIPE || (FK_SREG && FK_DP4A != 0), "batches hold raw words for an integer dot");
#if FK_SPIPE
  const FkXLane<32> xl(lane);  // used by 32-weight units only
#endif
#if !FK_SPIPE
  // Unit u of row `row` of `mw` against the activations from element c0 + u * UE.
  auto dot = [&](const FkMat& mw, i64 row, int u, i64 c0) -> float {
#if FK_DP4A == 2
    const i64 e0 = c0 + F::UE * u;  // the unit's first weight
    int x8[F::UE / 4], s16[F::UE / 16];
#pragma unroll
    for (int i = 0; i < F::UE / 16; ++i) {
      *(uint4*)(x8 + 4 * i) = *(const uint4*)(xq + 16 * fk_xqc((int)(e0 / 16) + i));
      s16[i] = xs16[e0 / 16 + i];
    }
    return F::dot_q8k(mw, row, u, x8, xd[e0 / 256], s16);
#else
    float q[F::UE], s[F::G], o[F::G];
    F::unit(mw, row, u, q, s, o);
    return fk_unit_dot<F>(q, s, o, FkXs<F>{xs, (int)(c0 / F::UE) + u});
#endif
  };
#endif
  // A row's sums reduced across the warp and stored (mode 1: silu(gate) * up).
#if FK_SROPE
  float held = 0.f;  // a rotated pair's first row
  // A pair split between warps: the earlier warp leaves its even row in s_even; the later one
  // keeps its odd first row in `split_v` and rotates the pair after the loop.
  __shared__ float s_even[FK_SNW];
  float split_v = 0.f;
  bool split = false;
  i64 at = r0;  // the row being stored
  auto store = [&](const FkSRow& r, float (&acc)[1]) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], off);
    const i64 g = at++;
    const int e = (int)r.row % rk.dim;
    if (r.y != st.y3 && e < 2 * rk.half && (g == r0 || g == r1 - 1)) {
      if ((e & 1) == 0 && g == r1 - 1) {
        if (lane == 0) s_even[warp] = acc[0];
        return;
      }
      if ((e & 1) == 1 && g == r0) {
        split = true, split_v = acc[0];
        return;
      }
    }
    fk_srope_store(rk, sr, st, r, acc[0], held, lane);
  };
#else
  auto store = [&](const FkSRow& r, float (&acc)[FK_SNM]) {
#pragma unroll
    for (int t = 0; t < FK_SNM; ++t)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], off);
    if (lane == 0) {
#if FK_MODE == 1
      const float v = fk_silu(acc[0]) * acc[1];
#else
      const float v = acc[0];
#endif
      r.y[r.row] = FK_ACC ? r.y[r.row] + v : v;  // FK_ACC: a residual connection, y += W x
    }
  };
#endif

#if FK_SPIPE
  // Unit u's raw words dotted with its activations (Q8_0: 32 codes, scale and code sum; Q8_K:
  // UE codes, the block scale and the sums of 16); ub = u - lane, a multiple of 32.
  auto act_dot = [&](const typename F::Raw& w, int ub, int u) -> float {
#if FK_DP4A == 1
    int x8[8];
    xl.codes(xq, ub, x8);
    const float2 d = xd[u];
    return F::dot_raw(w, u, x8, d.x, __float_as_int(d.y));
#else
    static_assert(UE == 32 || UE == 64, "Q8_K batches: Q6_K's 32-weight units, Q4_K's 64");
    if constexpr (UE == 32) {
      int x8[8];
      xl.codes(xq, ub, x8);
      const int2 s = *(const int2*)(xs16 + 2 * u);
      const int s16[2] = {s.x, s.y};
      return F::dot_raw(w, u, x8, xd[u >> 3], s16);
    } else {
      // Q4_K keeps fk_xqc per unit: FkXLane's four offsets cost it about half a point.
      const int e0 = UE * u;
      int x8[UE / 4], s16[UE / 16];
#pragma unroll
      for (int i = 0; i < UE / 16; ++i) *(uint4*)(x8 + 4 * i) = *(const uint4*)(xq + 16 * fk_xqc(e0 / 16 + i));
      *(int4*)s16 = *(const int4*)(xs16 + e0 / 16);
      return F::dot_raw(w, u, x8, xd[e0 / 256], s16);
    }
#endif
  };
#if FK_SBULK
  // The ring, stage after stage: wait for the stage's copies, dot its units, then (all lanes
  // past their reads) lane 0 refills it with the batch FK_SBULK ahead. Phase bits per stage.
  i64 row = r0;
  int u0 = 0, slot = 0;
  u32 ph = 0;
  float acc[FK_SNM] = {};
  FkSRow r = fk_srow(a, b, st, Y, row);
  while (row < r1) {
    fk_bar_wait(bars + 8 * slot, (ph >> slot) & 1u);
    ph ^= 1u << slot;
    const u8* sp = ring_p + slot * FK_BST;
    auto batch = [&](auto guarded) {
#pragma unroll
      for (int j = 0; j < FK_SUN; ++j) {
        const int u = u0 + lane + 32 * j;
        if (!decltype(guarded)::value || u < units) {
#pragma unroll
          for (int t = 0; t < FK_SNM; ++t) {
            typename F::Raw w;
            F::load_sh(sp + t * (FK_BC + FK_BS), sp + t * (FK_BC + FK_BS) + FK_BC, u - u0, w);
            acc[t] += act_dot(w, u0 + 32 * j, u);
          }
        }
      }
    };
    if (FK_SWHOLE && u0 + 32 * FK_SUN <= units) batch(FkBool<false>{});
    else batch(FkBool<true>{});
    __syncwarp();
    if (lane == 0) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // our reads before the refill
      issue(slot);
    }
    slot = slot + 1 == FK_SBULK ? 0 : slot + 1;
    if ((u0 += 32 * FK_SUN) >= units) {
      store(r, acc);
#pragma unroll
      for (int t = 0; t < FK_SNM; ++t) acc[t] = 0.f;
      u0 = 0;
      if (++row < r1) r = fk_srow(a, b, st, Y, row);
    }
  }
#else
  // Batches of FK_SUN units a lane (about 64-144 bytes of loads in flight), loaded before any
  // is computed; the warp's first batch came in before the wait.
  auto compute = [&](const Batch& bt, int u0, float (&acc)[FK_SNM]) {
    const int ub = u0 - lane;  // the batch's first unit, warp-uniform
    auto units_of = [&](auto guarded) {
#pragma unroll
      for (int j = 0; j < FK_SUN; ++j) {
        const int u = u0 + 32 * j;
        if (!decltype(guarded)::value || u < units) {
#pragma unroll
          for (int t = 0; t < FK_SNM; ++t) acc[t] += act_dot(bt.r[j][t], ub + 32 * j, u);
        }
      }
    };
    if (FK_SWHOLE && ub + 32 * FK_SUN <= units) units_of(FkBool<false>{});
    else units_of(FkBool<true>{});
  };
  // A software pipeline over the warp's batches, row after row: the next batch (of this row or
  // the next) is loaded before the current one is computed, so two are in flight. Two Batch
  // variables take turns (no copies).
  i64 row = r0;
  int u0 = lane;
  FkSRow r = fk_srow(a, b, st, Y, row);
  float acc[FK_SNM] = {};
  // Moves (row, u0) to the next batch; true when it is in the warp's rows.
  auto advance = [&](i64& rw, int& u) {
    if ((u += 32 * FK_SUN) - lane >= units) u = lane, ++rw;
    return rw < r1;
  };
  // One step: loads the next batch into `nxt`, computes `cur` (at row, u0), stores a finished
  // row; false after the warp's last batch.
  auto step = [&](Batch& cur, Batch& nxt) {
    i64 nrow = row;
    int nu = u0;
    const bool more = advance(nrow, nu);
    FkSRow nr = r;
    if (more) {
      if (nrow != row) nr = fk_srow(a, b, st, Y, nrow);
      load(nxt, nr, nu);
    }
    compute(cur, u0, acc);
    if (nrow != row) {
      store(r, acc);
#pragma unroll
      for (int t = 0; t < FK_SNM; ++t) acc[t] = 0.f;
    }
    row = nrow, u0 = nu, r = nr;
    return more;
  };
  if (r0 < r1) {
    Batch other;
    while (step(first, other) && step(other, first)) {
    }
  }
#endif  // FK_SBULK
#elif FK_SREG
  // Q8_K or f32 activations: FK_SUN units of a row unrolled. (FkXLane's offsets and unguarded
  // rounds here cost Q6_K 2-5 points in session 36: ptxas then kept fewer loads in flight.)
  for (i64 row = r0; row < r1; ++row) {
    const FkSRow r = fk_srow(a, b, st, Y, row);
    float acc[FK_SNM] = {};
#pragma unroll (FK_SUN)
    for (int u = lane; u < units; u += 32) {
#pragma unroll
      for (int t = 0; t < FK_SNM; ++t) acc[t] += dot(t == 0 ? r.m : b, r.row, u, 0);
    }
    store(r, acc);
  }
#else
  float acc[FK_SNM] = {};
  i64 c0 = 0;
  for (i64 row = r0, slot = 0; row < r1; slot = slot + 1 == FK_SS ? 0 : slot + 1) {
    asm volatile("cp.async.wait_group %0;" ::"n"(FK_SS - 2));
    __syncwarp();
    issue(slot == 0 ? FK_SS - 1 : (int)slot - 1);  // the stage computed last iteration
    const int cw = (int)min((i64)FK_CW, k - c0);
    const FkSRow r = fk_srow(a, b, st, Y, row);
    const int skew = (int)((r.row * a.row_bytes + c0 / F::QK * FK_BB) & 15);
    const u8* stage = ring_p + slot * (FK_SNM * FK_SWB) + skew;
    const int units = cw / F::UE;
#pragma unroll 2
    for (int u = lane; u < units; u += 32) {
#pragma unroll
      for (int t = 0; t < FK_SNM; ++t)
        acc[t] += dot(fk_window_mat<F>(stage + t * FK_SWB, t == 0 ? r.m : b, r.row, c0 / F::QK), 0, u, c0);
    }
    if ((c0 += FK_CW) >= k) {  // the row's last chunk: reduce and store
      store(r, acc);
#pragma unroll
      for (int t = 0; t < FK_SNM; ++t) acc[t] = 0.f;
      c0 = 0;
      ++row;
    }
  }
  asm volatile("cp.async.wait_all;");
#endif
#if FK_SROPE
  // Pairs split between warps: the even row's warp is the last before ours that has rows.
  __syncthreads();
  if (split) {
    int w = warp - 1;
    while (first_row(w) > r0 - 1) --w;
    held = s_even[w];
    fk_srope_store(rk, sr, st, fk_srow(a, b, st, Y, r0), split_v, held, lane);
  }
#endif
}
