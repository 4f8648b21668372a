// flexkern-cuda: attention on tensor cores (mma.sync m16n8k16, bf16 or f16 in, f32 accumulate):
// the layout, constants and fragment helpers the mma.sync kernel (attention_mma.cu) and the
// Hopper kernel (attention_wgmma.cu) share. K/V staging is attention_stage.cu, the in-kernel
// join of partitions attention_join.cu.
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
// The high two codes of a word: the fp8 conversion reads that half in place (no shift first).
template <int T> __device__ __forceinline__ u32 fk_mcodes_hi(u32 four) {
#if __CUDA_ARCH__ >= 890
  if constexpr ((T == 3 || T == 4) && FK_CT == 1) {
    u32 h2;
    if constexpr (T == 3)
      asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.rn.f16x2.e4m3x2 %0, h; }" : "=r"(h2) : "r"(four));
    else
      asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.rn.f16x2.e5m2x2 %0, h; }" : "=r"(h2) : "r"(four));
    return h2;
  }
#endif
  return fk_mcodes<T>(four >> 16);
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
__device__ __forceinline__ void fk_cp16_live(u32 dst, const u8* from) { fk_cp16_live_l2<FK_MMA_L2>(dst, from); }

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

// fk_mma_softmax for both row halves at once, for the Hopper kernel, whose softmax is on its
// critical path: a warpgroup's own MMA waits for it. Maxima and sums run as trees of four
// chains, both rows' shuffles and exponentials interleave, and no branch splits them (the
// caller rescales O unconditionally, in the exponentials' shadow). One row at a time, with a
// branch per row, took ~1500 cycles a 64 x 128 tile (session 21 trace), three times the ex2
// pipe's 512.
template <int NS>
__device__ __forceinline__ void fk_mma_softmax_rows(float (*s)[4], float* m, float* l, float sk, float* alpha) {
  constexpr float L2E = 1.4426950408889634f;
  float mx[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    static_assert(NS >= 8, "four chains of two fragments at least");
    float p[4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) p[nt] = fmaxf(s[nt][2 * h], s[nt][2 * h + 1]);
#pragma unroll
    for (int nt = 4; nt < NS; ++nt) p[nt & 3] = fmaxf(p[nt & 3], fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
    mx[h] = fmaxf(fmaxf(p[0], p[1]), fmaxf(p[2], p[3]));
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
#pragma unroll
  for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
  const float skl = sk * L2E;
  float ml[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mnew = fmaxf(m[h], mx[h] * sk);
    ml[h] = mnew == FK_NEG_INF ? 0.f : mnew * L2E;
    alpha[h] = fk_ex2(fmaf(m[h], L2E, -ml[h]));
    m[h] = mnew;
  }
  float sum[2][4];
#pragma unroll
  for (int nt = 0; nt < NS; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = fk_ex2(fmaf(s[nt][e], skl, -ml[e >> 1]));
      s[nt][e] = p;
      float& acc = sum[e >> 1][(nt & 1) * 2 + (e & 1)];
      acc = nt < 2 ? p : acc + p;
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = fmaf(l[h], alpha[h], (sum[h][0] + sum[h][1]) + (sum[h][2] + sum[h][3]));
}

// A row's final (O scale, LSE) from its running max and sum: O = 0 and LSE = -inf for a row
// with nothing visible; a NaN sum (a kept NaN score) stays NaN.
__device__ __forceinline__ float2 fk_mma_final(float M, float L, float vscale) {
  if (L > 0.f) return make_float2(vscale / L, M + logf(L));
  return L != L ? make_float2(L, L) : make_float2(0.f, FK_NEG_INF);
}
#endif  // FK_MMA
