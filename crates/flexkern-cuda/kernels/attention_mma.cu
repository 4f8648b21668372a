// flexkern-cuda: the mma.sync attention kernel (the layout and helpers: attention_tc.cu; K/V
// staging: attention_stage.cu; the join: attention_join.cu).
#if FK_MMA
// The Hopper kernel (attention_wgmma.cu) replaces this one in its modules.
#if !FK_WGMMA
#if FK_DK > 128 || FK_DV > 128
#undef FK_TRACE_LOOP
#define FK_TRACE_LOOP 0  // the trace build's loop phases (fk_common.cuh) spill wide heads
#endif
#if FK_MMA_MINB > 1
#define FK_MMA_BOUNDS __launch_bounds__(FK_NWARPS * 32, FK_MMA_MINB)
#else
#define FK_MMA_BOUNDS __launch_bounds__(FK_NWARPS * 32)
#endif
extern "C" __global__ void FK_MMA_BOUNDS fk_attention_mma(const FkArgs a) {
  extern __shared__ __align__(16) u8 fk_mstages[];
  constexpr float L2E = 1.4426950408889634f;
  FK_TRACE_SCOPE();
  // Warp 0's loop in SM cycles: waiting for tiles, queueing copies, Q K^T, softmax and P V.
  FK_PHASES(blockIdx.y * gridDim.x + blockIdx.x);
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

  FkPageWindow pw(a, seq, k0, k1);
#pragma unroll
  for (int s = 0; s < FK_MMA_STAGES - 1; ++s)
    fk_missue(a, sq, seq, kvh, pw, fk_mstages + s * FK_MSTAGE, k0 + (i64)s * FK_MTILE, s < ntiles ? k1 : k0,
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
  FK_MARK(0);
  FK_PHASE(1);

  for (int t = 0; t < ntiles; ++t) {
    asm volatile("cp.async.wait_group %0;" ::"n"(FK_MMA_STAGES - 2));
    __syncthreads();
    FK_PHASE(0);
    if (t == 0) FK_MARK(1);
    // Every warp is past tile t - 1: its stage takes the tile FK_MMA_STAGES - 1 ahead.
    const int ahead = t + FK_MMA_STAGES - 1;
    fk_missue(a, sq, seq, kvh, pw, fk_mstages + (ahead % FK_MMA_STAGES) * FK_MSTAGE, k0 + (i64)ahead * FK_MTILE,
              ahead < ntiles ? k1 : k0, visible0);
    FK_PHASE(1);
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
          fk_mma(s[nt], qf[kk], fk_mcodes<FK_KT>(w), fk_mcodes_hi<FK_KT>(w));
        }
      }
    }

    FK_PHASE(2);
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

    FK_PHASE(3);
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
            // Byte tt of two rows' words as one pair (one PRMT; shifts and masks took five).
            const u32 lo = __byte_perm(w[0], w[1], tt | (tt + 4) << 4);
            const u32 hi = __byte_perm(w[2], w[3], tt | (tt + 4) << 4);
            fk_mma(o[grp * FK_VG + tt], pa, fk_mcodes<FK_VT>(lo), fk_mcodes<FK_VT>(hi));
          }
        }
      }
    }
  }
  FK_PHASE(2);
  asm volatile("cp.async.wait_group 0;");
  __syncthreads();
  FK_MARK(2);
  FK_PHASES_STORE();

  // Each warp leaves its rows' (max, sum, O) in the free stage memory; the block joins the key
  // splits row by row and writes the partial in fk_write_partial's format.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  // Rows padded so the stores of a warp's fragments hit distinct banks: 8 floats where a lane's
  // two columns are adjacent (64-bit stores), 1 where fp8 V spreads them (ncu, the 8B decode
  // step's attention: 7.2-way conflicts on every store of a DV-float pitch).
  constexpr int RP = FK_V8 ? FK_DV + 1 : FK_DV + 8;
  float* red_o = (float*)fk_mstages;  // [warp][16][RP]
  float* red_m = red_o + FK_NWARPS * 16 * RP;
  float* red_l = red_m + FK_NWARPS * 16;
#pragma unroll
  for (int ot = 0; ot < FK_NO; ++ot)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      red_o[(warp * 16 + g + 8 * (e >> 1)) * RP + fk_mvcol(ot, 2 * c4 + (e & 1))] = o[ot][e];
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
      for (int k = 0; k < FK_MKS; ++k) O = fmaf(red_o[(r + k * FK_MMT * 16) * RP + d], w[k], O);
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
#endif  // FK_MMA
