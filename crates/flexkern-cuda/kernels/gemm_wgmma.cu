// flexkern-cuda: the prompt GEMM on Hopper (sm_90a): TMA copies and warpgroup MMA, replacing
// gemm_mma.cu's mma.sync kernel where the planner sets FK_GWG; same operands and epilogue.
//
// FlashAttention-3's warp specialization: one thread of warpgroup 2 (the producer) copies each
// k-tile of A and B rows into a ring of FK_GS stages with two TMA bulk copies that complete on
// the stage's `full` mbarrier (rows past m or n arrive as zeros); warpgroups 0 and 1 are
// consumers of 64 rows each, computing their 64 x FK_BN tile with wgmma m64n128k16 from shared
// memory and releasing a stage on its `empty` mbarrier once the wgmma group that read it is done
// (one group stays in flight while the next is issued). TMA writes each tile with the 128-byte
// swizzle, chunk c of row r at c ^ (r & 7), which is the layout wgmma's descriptors name.
// Copies by the producer's cp.async threads instead were 2x slower than all threads copying
// (session 13 calls d-e): TMA moves the address work off the SM.
#if FK_GWG
static_assert(FK_BM == 128 && FK_WM == 2 && FK_WN == 4, "two consumer warpgroups of 64 rows");
static_assert(FK_BN % 128 == 0 && FK_BN <= 256, "whole n128 instructions, TMA boxes of <= 256 rows");
static_assert(FK_GS >= 2, "double buffering at least");

extern "C" __global__ void __launch_bounds__(384, 1)
    fk_gemm(const __grid_constant__ FkTmap ta, const __grid_constant__ FkTmap tb, float* __restrict__ Y, int m, i64 n,
            i64 kp, i64 ldy, int mode) {
  FK_PDL_ENTER();
  extern __shared__ __align__(16) u8 fk_gsmem[];
  // Swizzle atoms repeat every 1 KiB: the host adds that much slack (and 16 bytes a stage for
  // the barriers).
  const u32 s0 = (fk_msmem(fk_gsmem) + 1023u) & ~1023u;
  const u32 full_bar = s0 + FK_GS * FK_STAGE, empty_bar = full_bar + 8 * FK_GS;
  const int warp = threadIdx.x >> 5;
  const int m0 = blockIdx.x * FK_BM, n0 = blockIdx.y * FK_BN;
  const int nk = (int)(kp / FK_BK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < FK_GS; ++s) {
      fk_bar_init(full_bar + 8 * s, 1);   // the producer's expect_tx; the copies' bytes complete it
      fk_bar_init(empty_bar + 8 * s, 8);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp >= 8) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 256) return;
    for (int t = 0; t < nk; ++t) {
      const int s = t % FK_GS;
      if (t >= FK_GS) fk_bar_wait(empty_bar + 8 * s, (t / FK_GS - 1) & 1);
      const u32 st = s0 + s * FK_STAGE, bar = full_bar + 8 * s;
      fk_bar_expect(bar, FK_STAGE);
      fk_tma_load2(st, &ta, t * FK_BK, m0, bar);
      fk_tma_load2(st + FK_BM * FK_ROWB, &tb, t * FK_BK, n0, bar);
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int wg = warp >> 2, wi = warp & 3, lane = threadIdx.x & 31;
  float d[FK_BN / 8][4];
#pragma unroll
  for (int j = 0; j < FK_BN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) d[j][e] = 0.0f;
  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % FK_GS;
    fk_bar_wait(full_bar + 8 * s, (kt / FK_GS) & 1);
    const u32 st = s0 + s * FK_STAGE;
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
    // The group of tile kt - 1 is done: its stage goes back to the producer.
    fk_wg_wait1();
    if (kt > 0 && lane == 0) fk_bar_arrive(empty_bar + 8 * ((kt - 1) % FK_GS));
  }
  fk_wg_wait();
  fk_wg_pin<FK_BN / 8>(d);
  fk_gemm_store<FK_BN / 8>(d, Y, (i64)m0 + wg * 64 + wi * 16, n0, m, n, ldy, mode);
}
#endif
