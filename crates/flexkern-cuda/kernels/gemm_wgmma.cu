// flexkern-cuda: the prompt GEMM on Hopper warpgroup MMA (sm_90a), replacing gemm_mma.cu's
// mma.sync kernel where the planner sets FK_GWG; same operands, staging and epilogue.
//
// A block of two warpgroups computes FK_BM = 128 rows x FK_BN columns of Y, each warpgroup 64
// rows with wgmma m64n128k16 (both operands read from shared memory by descriptor: the staging's
// 128-byte rows with chunks XOR-swizzled by row are exactly wgmma's 128-byte swizzle, the stages
// 1 KiB aligned). cp.async keeps FK_GS - 2 k-tiles in flight ahead of the tensor cores, and one
// k-tile's wgmma group runs while the next is issued (wait_group 1), so the stage refilled at
// step kt is the one step kt - 2 read, finished by then.
#if FK_GWG
static_assert(FK_BM == 128 && FK_WM == 2 && FK_WN == 4, "two warpgroups of 64 rows");
static_assert(FK_BN % 128 == 0, "whole n128 instructions");
static_assert(FK_GS >= 3, "a stage in use, one in flight, one being filled");

extern "C" __global__ void __launch_bounds__(256, 1)
    fk_gemm(const u16* __restrict__ A, const u16* __restrict__ B, float* __restrict__ Y, int m, i64 n, i64 kp,
            i64 ldy, int mode) {
  FK_PDL_ENTER();
  extern __shared__ __align__(16) u8 fk_gsmem[];
  // Swizzle atoms repeat every 1 KiB: the host adds that much slack.
  const u32 s0 = (fk_msmem(fk_gsmem) + 1023u) & ~1023u;
  const int warp = threadIdx.x >> 5, wg = warp >> 2, wi = warp & 3;
  const i64 m0 = (i64)blockIdx.x * FK_BM, n0 = (i64)blockIdx.y * FK_BN;
  const int nk = (int)(kp / FK_BK);

  float d[FK_BN / 8][4];
#pragma unroll
  for (int j = 0; j < FK_BN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) d[j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < FK_GS - 2; ++s) {
    if (s < nk) fk_gemm_issue(s0 + s * FK_STAGE, A, B, m0, n0, m, n, kp, s);
    else asm volatile("cp.async.commit_group;");
  }
  for (int kt = 0; kt < nk; ++kt) {
    asm volatile("cp.async.wait_group %0;" ::"n"(FK_GS - 3) : "memory");
    // wgmma reads shared memory through the async proxy; cp.async wrote it through the generic one.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const int next = kt + FK_GS - 2;
    if (next < nk) fk_gemm_issue(s0 + (next % FK_GS) * FK_STAGE, A, B, m0, n0, m, n, kp, next);
    else asm volatile("cp.async.commit_group;");
    const u32 st = s0 + (kt % FK_GS) * FK_STAGE;
    fk_wg_fence();
#pragma unroll
    for (int kk = 0; kk < FK_BK / 16; ++kk) {
      // k16 step kk sits 32 bytes into each 128-byte row; this warpgroup's A rows start 64 rows in.
      const u64 da = fk_wdesc(st + wg * 64 * FK_ROWB + kk * 32, 16, 1024);
#pragma unroll
      for (int nb = 0; nb < FK_BN / 128; ++nb)
        fk_wgmma_ss128(d + nb * 16, da, fk_wdesc(st + (FK_BM + nb * 128) * FK_ROWB + kk * 32, 16, 1024), 1);
    }
    fk_wg_commit();
    fk_wg_wait1();
  }
  fk_wg_wait();
  fk_wg_pin<FK_BN / 8>(d);
  asm volatile("cp.async.wait_group 0;");
  fk_gemm_store<FK_BN / 8>(d, Y, m0 + wg * 64 + wi * 16, n0, m, n, ldy, mode);
}
#endif
