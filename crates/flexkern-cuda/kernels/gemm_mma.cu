// flexkern-cuda: the prompt GEMM on tensor cores, Y[j, c] = sum_e A[j, e] B[c, e] (A the
// activation rows, B the weight rows, both 16-bit with rows of kp elements, kp a multiple of
// the k-tile; f32 accumulators). mma.sync m16n8k16 with cp.async FK_GS stages deep: the
// FlashAttention-2 generation's pipeline, for any sm_80+ GPU.
//
// A block computes an FK_BM x FK_BN tile of Y; its FK_WM x FK_WN warps each a (BM / WM) x
// (BN / WN) sub-tile. Tiles of A and B rows are staged 64 elements (128 bytes) per row with the
// 16-byte chunks of row r at chunk ^ (r & 7): cp.async writes and ldmatrix reads of 8
// consecutive rows then hit distinct banks. Rows past m or n are zero-filled (never read).
// Blocks of one B tile are adjacent in launch order (grid x walks the m-tiles), so the weights
// come from DRAM about once.
//
// Epilogue (`mode`): 0 Y = acc, 1 Y += acc, 2 Y = silu(Y) * acc (SwiGLU: the gate's product
// is in Y already, this pass is up's). Y rows are `ldy` floats apart.
// Configured by the module's defines: FK_GT (1 f16, 2 bf16), FK_BM, FK_BN, FK_WM, FK_WN, FK_GS,
// FK_GMINB (blocks per SM the register budget must allow), FK_GWG (1: gemm_wgmma.cu's Hopper
// kernel follows this file and replaces this one; the staging and epilogue here serve both).

constexpr int FK_BK = 64;
constexpr int FK_ROWB = FK_BK * 2;
constexpr int FK_NT = FK_WM * FK_WN * 32;
constexpr int FK_TM = FK_BM / FK_WM, FK_TN = FK_BN / FK_WN;  // a warp's sub-tile
constexpr int FK_MI = FK_TM / 16, FK_NI = FK_TN / 8;          // its m16 and n8 tiles
constexpr int FK_STAGE = (FK_BM + FK_BN) * FK_ROWB;
constexpr int FK_CHUNKS = (FK_BM + FK_BN) * (FK_ROWB / 16);
static_assert(FK_TM % 16 == 0 && FK_TN % 16 == 0, "warp tiles of whole m16 and n16 steps");
static_assert(FK_GS >= 2, "at least double buffering");

// Stage the k-tile `kt` of both operands (rows past m / n zero-filled) with NT threads, this
// one `t`; the caller commits.
template <int NT>
__device__ __forceinline__ void fk_gemm_copy(u32 stage, const u16* A, const u16* B, i64 m0, i64 n0, int m, i64 n,
                                             i64 kp, int kt, int t) {
  static_assert(FK_CHUNKS % NT == 0, "every thread copies the same number of chunks");
#pragma unroll
  for (int i = 0; i < FK_CHUNKS / NT; ++i) {
    const int c = t + i * NT;
    const int row = c >> 3, ch = c & 7;
    const bool a = row < FK_BM;
    const i64 r = a ? m0 + row : n0 + (row - FK_BM);
    const bool live = a ? r < m : r < n;
    const u16* src = (a ? A : B) + (live ? r : 0) * kp + kt * FK_BK + ch * 8;
    fk_cp16_l2<0>(stage + row * FK_ROWB + ((ch ^ (row & 7)) << 4), src, live);
  }
}

// fk_gemm_copy by every thread of the block, one commit group.
__device__ __forceinline__ void fk_gemm_issue(u32 stage, const u16* A, const u16* B, i64 m0, i64 n0, int m, i64 n,
                                              i64 kp, int kt) {
  fk_gemm_copy<FK_NT>(stage, A, B, m0, n0, m, n, kp, kt, threadIdx.x);
  asm volatile("cp.async.commit_group;");
}

// The epilogue of one warp's 16 rows from `row0`: NJ n8 fragments of 4 accumulators (rows g
// and g + 8, columns 2c and 2c + 1 of each), the first at column col0.
template <int NJ>
__device__ __forceinline__ void fk_gemm_store(const float (*acc)[4], float* __restrict__ Y, i64 row0, i64 col0,
                                              int m, i64 n, i64 ldy, int mode) {
  const int lane = threadIdx.x & 31, g = lane >> 2, c2 = 2 * (lane & 3);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const i64 row = row0 + g + 8 * h;
    if (row >= m) continue;
    float* yr = Y + row * ldy;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const i64 col = col0 + 8 * j + c2;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (col + e >= n) continue;
        const float v = acc[j][2 * h + e];
        float* p = yr + col + e;
        if (mode == 1) *p += v;
        else if (mode == 2) *p = fk_silu(*p) * v;
        else *p = v;
      }
    }
  }
}

#if !FK_GWG
extern "C" __global__ void __launch_bounds__(FK_NT, FK_GMINB)
    fk_gemm(const u16* __restrict__ A, const u16* __restrict__ B, float* __restrict__ Y, int m, i64 n, i64 kp,
            i64 ldy, int mode) {
  FK_PDL_ENTER();
  extern __shared__ __align__(128) u8 fk_gsmem[];
  const u32 s0 = fk_msmem(fk_gsmem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp % FK_WM, wn = warp / FK_WM;
  const i64 m0 = (i64)blockIdx.x * FK_BM, n0 = (i64)blockIdx.y * FK_BN;
  const int nk = (int)(kp / FK_BK);

  float acc[FK_MI][FK_NI][4];
#pragma unroll
  for (int i = 0; i < FK_MI; ++i)
#pragma unroll
    for (int j = 0; j < FK_NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < FK_GS - 1; ++s) {
    if (s < nk) fk_gemm_issue(s0 + s * FK_STAGE, A, B, m0, n0, m, n, kp, s);
    else asm volatile("cp.async.commit_group;");
  }
  // ldmatrix lanes: A rows (lane & 15), k chunk (lane >> 4); B rows (lane & 7) + 8 (lane >> 4),
  // k chunk (lane >> 3) & 1 (matrices: n 0-7 k 0-7, n 0-7 k 8-15, n 8-15 k 0-7, n 8-15 k 8-15).
  const int arow = wm * FK_TM + (lane & 15), ach = lane >> 4;
  const int brow = FK_BM + wn * FK_TN + (lane & 7) + ((lane >> 4) << 3), bch = (lane >> 3) & 1;
  for (int kt = 0; kt < nk; ++kt) {
    asm volatile("cp.async.wait_group %0;" ::"n"(FK_GS - 2));
    __syncthreads();
    // The stage read at kt - 1 is free once every warp passed the barrier above.
    const int next = kt + FK_GS - 1;
    if (next < nk) fk_gemm_issue(s0 + (next % FK_GS) * FK_STAGE, A, B, m0, n0, m, n, kp, next);
    else asm volatile("cp.async.commit_group;");
    const u32 st = s0 + (kt % FK_GS) * FK_STAGE;
#pragma unroll
    for (int kk = 0; kk < FK_BK / 16; ++kk) {
      u32 af[FK_MI][4], bf[FK_NI / 2][4];
#pragma unroll
      for (int i = 0; i < FK_MI; ++i) {
        const int r = arow + 16 * i, ch = 2 * kk + ach;
        fk_ldsm4(af[i], st + r * FK_ROWB + ((ch ^ (r & 7)) << 4));
      }
#pragma unroll
      for (int j = 0; j < FK_NI / 2; ++j) {
        const int r = brow + 16 * j, ch = 2 * kk + bch;
        fk_ldsm4(bf[j], st + r * FK_ROWB + ((ch ^ (r & 7)) << 4));
      }
#pragma unroll
      for (int i = 0; i < FK_MI; ++i)
#pragma unroll
        for (int j = 0; j < FK_NI; ++j) fk_mma_t<FK_GT>(acc[i][j], af[i], bf[j / 2][2 * (j % 2)], bf[j / 2][2 * (j % 2) + 1]);
    }
  }
  asm volatile("cp.async.wait_group 0;");

#pragma unroll
  for (int i = 0; i < FK_MI; ++i)
    fk_gemm_store<FK_NI>(acc[i], Y, m0 + wm * FK_TM + 16 * i, n0 + wn * FK_TN, m, n, ldy, mode);
}
#endif
