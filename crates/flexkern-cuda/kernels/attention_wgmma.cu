// flexkern-cuda: prefill attention on Hopper warpgroup MMA (wgmma, sm_90a): FlashAttention-3's
// warp specialization with cp.async gathers (so paged KV is the same code as contiguous).
//
// Same blocks, rows, partials and joins as fk_attention_mma (attention_mma.cu; the helpers this
// uses are attention_tc.cu's and attention_join.cu's): one block = one KV head x one work item
// of FK_ROWS rows. Warps 0 .. FK_NWARPS - 1 are FK_WGS consumer warpgroups of 64 rows each (two,
// or three at D 64, FA3's 192-row tile); the last four warps are the producer warpgroup, which
// hands most of its registers to the consumers (setmaxnreg: the register file is split per
// scheduler, so even a single producer warp would cost the consumers a warpgroup's share). The
// producer copies each tile of FK_MMA_TILE keys (K and V rows) into a ring of FK_MMA_STAGES
// shared-memory stages and signals the stage's `full` mbarrier; consumers compute S = Q K^T and
// O += P V with wgmma (Q from shared memory or registers, P from registers, K and V by
// descriptor) and release the stage on its `empty` mbarrier. The warpgroups take turns in a
// ring (named barriers, FA3's ping-pong): one issues P V of its last tile and Q K^T of the next
// while the others run their softmax, so the tensor cores and the exponentials overlap. The
// stage layout and the copies: attention_wgmma_copy.cu.
#if FK_WGMMA

// fk_mma_score for the tiles at a mask's edges, branch-free: the mask (and score) hooks run for
// every element and a select drops what they, the tile end or a padding row exclude. Branching
// per element, as the mma.sync kernels do, serializes the unrolled softmax on latency; these
// tiles are a causal row's last, both ends of a window, a document's diagonal. (Masks that read
// captures spilled here until session 21 (Q by cp.async, the two-row softmax); they keep their
// guarded loads, FK_MASK_LOADS. Not for paged K/V: its kernel measured 6 % slower with it,
// session 15 call e.)
__device__ __forceinline__ float fk_wg_masked(const FkParams& P, const FkSeq& sq, u32 seq, const FkMRows& q, int h,
                                              float s, float kscale, bool key_ok, i64 pos, bool tile_true) {
  FkVars V;
  V.b = seq; V.h = q.head[h]; V.q_pos = sq.q_pos0 + q.qi[h]; V.kv_pos = pos;
  V.q_len = sq.q_len; V.kv_len = sq.kv_len; V.q_token = sq.q_start + q.qi[h];
  const float x = fk_score(P, V, s * kscale);
  const bool keep = key_ok & q.ok[h] & (tile_true | fk_mask(P, V));
  return keep ? x : FK_NEG_INF;
}

// A compile-time bool for generic lambdas (NVRTC has no <type_traits>).
template <bool B> struct FkB {
  static constexpr bool v = B;
};

#if FK_WTMA
// Strided K/V whose whole tiles the producer copies with TMA (tma.rs builds the maps: [tokens,
// heads, d], boxes of 64 columns x 1 head x FK_WT keys, 128-byte swizzle).
extern "C" __global__ void __launch_bounds__(FK_NWARPS * 32 + FK_WPROD, 1)
    fk_attention_mma(const FkArgs a, const __grid_constant__ FkTmap tk, const __grid_constant__ FkTmap tv) {
#else
extern "C" __global__ void __launch_bounds__(FK_NWARPS * 32 + FK_WPROD, 1) fk_attention_mma(const FkArgs a) {
#endif
  extern __shared__ __align__(16) u8 fk_wsmem[];
  const u32 item = blockIdx.x;
  const i64 kvh = blockIdx.y;
  // A consumer's loop in SM cycles: waiting for tiles, for its turn, for its MMA, in softmax.
  FK_PHASES(blockIdx.y * gridDim.x + blockIdx.x);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Swizzle atoms repeat every 1024 bytes: the stages start on such a boundary (the host adds
  // 1 KiB of slack), the barriers follow them.
  const u32 smem = (fk_msmem(fk_wsmem) + 1023u) & ~1023u;
  const u32 sq_smem = smem + FK_WST * FK_WSTAGE;
  const u32 full_bar = sq_smem + FK_WQ, empty_bar = full_bar + 8 * FK_WST;
  if (threadIdx.x == 0) {
    for (int s = 0; s < FK_WST; ++s) {
      fk_bar_init(full_bar + 8 * s, FK_WPROD);    // every producer thread
      fk_bar_init(empty_bar + 8 * s, FK_NWARPS);  // one arrival per consumer warp
    }
  }
  __syncthreads();
  const uint4 it = ((const uint4*)(a.step + a.off_items))[item];
  const u32 seq = it.x;
  const i64 k0 = it.z, k1 = it.w;
  const int ntiles = (int)((k1 - k0 + FK_WT - 1) / FK_WT);
  const i64 visible0 = fk_first_visible(a, seq);

  if (warp >= FK_NWARPS) {
    // Producer (the budgets sum to the registers the block starts with, 168 x 384 or 128 x 512:
    // setmaxnreg.inc waits until the pool has them). A stage is signalled once its own copies landed
    // (wait_group 1 keeps the next tile's in flight meanwhile), after a proxy fence: wgmma reads
    // shared memory through the async proxy, cp.async wrote it through the generic one.
    if constexpr (FK_WGS == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 32;");
    const int pt = threadIdx.x - FK_NWARPS * 32;
    const i64* rec = (const i64*)(a.step + a.off_seqs) + 8 * (u64)seq;
    const u8* kb = a.k + (rec[4] + kvh * a.k_head_stride) * 2;
    const u8* vb = a.v + (rec[5] + kvh * a.v_head_stride) * 2;
#if FK_PAGED
    const u64 pbase = (u64)a.cu_pages[seq] - a.first_page[seq];
#else
    const u64 pbase = 0;
#endif
#if FK_WTMA
    // The sequence's first token in the maps' token coordinate (its base is a whole token).
    const int ktok = (int)(rec[4] / a.k_tok_stride), vtok = (int)(rec[5] / a.v_tok_stride);
#endif
    // A tile copied with TMA completes its `full` phase by the copies' bytes (thread 0 expects
    // them, the others arrive at once); a cp.async tile's threads arrive once its copies landed.
    bool prev_tma = false;
    for (int t = 0; t <= ntiles; ++t) {
      bool tma = false;
      if (t < ntiles) {
        const int s = t % FK_WST;
        if (t >= FK_WST) fk_bar_wait(empty_bar + 8 * s, (t / FK_WST - 1) & 1);
        const i64 t0 = k0 + (i64)t * FK_WT;
#if FK_WTMA
        tma = t0 >= visible0 && t0 + FK_WT <= k1;
        if (tma) {
          const u32 dst = smem + s * FK_WSTAGE, bar = full_bar + 8 * s;
          if (pt == 0) {
            fk_bar_expect(bar, FK_WSTAGE);
#pragma unroll
            for (int cb = 0; cb < FK_DK / 64; ++cb) fk_tma_load3(dst + cb * FK_WCOL, &tk, cb * 64, (int)kvh, ktok + (int)t0, bar);
#pragma unroll
            for (int cb = 0; cb < FK_DV / 64; ++cb)
              fk_tma_load3(dst + FK_WKB + cb * FK_WCOL, &tv, cb * 64, (int)kvh, vtok + (int)t0, bar);
          } else {
            fk_bar_arrive(bar);
          }
        }
#endif
        if (!tma) fk_wrows(a, kb, vb, seq, kvh, smem + s * FK_WSTAGE, t0, k1, visible0, pt, pbase);
        asm volatile("cp.async.commit_group;");
        asm volatile("cp.async.wait_group 1;" ::: "memory");
      } else {
        asm volatile("cp.async.wait_group 0;" ::: "memory");
      }
      if (t > 0 && !prev_tma) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        fk_bar_arrive(full_bar + 8 * ((t - 1) % FK_WST));
      }
      prev_tma = tma;
    }
    return;  // the join below is the consumers' (it would not fit the producer's registers)
  } else {
    // Consumers: warpgroup wg owns rows 64 wg .. 64 wg + 63, warp wi of it 16 of them.
    if constexpr (FK_WGS == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 160;");
    const FkSeq sq = fk_seq(a, seq);
    const int g = lane >> 2, c4 = lane & 3, wg = warp >> 2, wi = warp & 3;
    FkParams P;
    fk_params_load(P, a.step + a.off_params);
    const float kscale = ((const float*)(a.step + a.off_kscale))[kvh] * a.scale;
    const float vscale = ((const float*)(a.step + a.off_vscale))[kvh];
    const uint2 full = ((const uint2*)(a.step + a.off_item_full))[item];
    const u32 row_tile = it.y & FK_ROW_TILE_BITS;
#if FK_WG_S == 2
    // Q as register A operands: no shared-memory reads of Q at all, 32 more registers (D 128).
    u32 qf[FK_DK / 16][4];
    const FkMRows q = fk_mma_q<FK_DK / 16>(a, sq, row_tile, kvh, wg * 64 + wi * 16, g, c4, qf);
#else
    const FkMRows q = fk_wq(a, sq, row_tile, kvh, wg, wi * 16 + g, sq_smem);
#endif
    FK_MARK(0);
    float o[FK_WNO * 8][4];
#pragma unroll
    for (int i = 0; i < FK_WNO * 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][e] = 0.f;
    float m[2] = {FK_NEG_INF, FK_NEG_INF}, l[2] = {0.f, 0.f};
    float sc[FK_WNB * 8][4];
    u32 pa[FK_WT / 16][4];
    // Without a score hook and in tiles the mask keeps whole, scores need no per-element work:
    // the scale folds into the exponent (kscale > 0).
    const bool lean_ok = !FK_HAS_SCORE && kscale > 0.f;
    // Turns go round the warpgroups: barrier 2 + w is w's, the one before it arrives there.
    const bool last_wg = wg == FK_WGS - 1;
    const u32 my_turn = 2 + wg, their_turn = last_wg ? 2 : 3 + wg;
    if (last_wg) fk_named_arrive(2, 256);  // warpgroup 0 goes first
    // Each turn issues P V of tile t - 1 and Q K^T of tile t, then runs tile t's softmax; the
    // first and last turns have one of the two (peeled: ptxas serializes wgmma under branches).
    // The last warpgroup passes no turn on after its last: the barriers balance.
    auto issue_pv = [&](int t) {
      // O += P V: V's k16 step kc is 16 rows (2 KiB) on, n64 block ob a column block further.
      // Dv 128: one n128 instruction per k16 step (P read once; LBO steps to the second
      // column block).
      const u32 sv = smem + (t % FK_WST) * FK_WSTAGE + FK_WKB;
#pragma unroll
      for (int kc = 0; kc < FK_WT / 16; ++kc) {
        if constexpr (FK_WNO == 2) {
          fk_wgmma128<1>(o, pa[kc], fk_wdesc(sv + kc * 16 * 128, FK_WCOL, 1024), 1);
        } else {
#pragma unroll
          for (int ob = 0; ob < FK_WNO; ++ob)
            fk_wgmma<1>(o + ob * 8, pa[kc], fk_wdesc(sv + ob * FK_WCOL + kc * 16 * 128, FK_WCOL, 1024), 1);
        }
      }
    };
    auto issue_s = [&](int t) {
      // S = Q K^T: k16 step kk sits 32 bytes into its 128-byte column block (of Q and K); this
      // warpgroup's Q rows start 64 rows (8 KiB) in, n64 block nb of K as far.
      const u32 sk = smem + (t % FK_WST) * FK_WSTAGE;
#pragma unroll
      for (int kk = 0; kk < FK_DK / 16; ++kk) {
        const u32 kb = (kk / 4) * FK_WCOL + (kk % 4) * 32;
#if FK_WG_S == 2
        if constexpr (FK_WNB == 2) {
          fk_wgmma128<0>(sc, qf[kk], fk_wdesc(sk + kb, 16, 1024), kk > 0);
        } else {
#pragma unroll
          for (int nb = 0; nb < FK_WNB; ++nb)
            fk_wgmma<0>(sc + nb * 8, qf[kk], fk_wdesc(sk + kb + nb * 64 * 128, 16, 1024), kk > 0);
        }
#else
        const u64 dq = fk_wdesc(sq_smem + (kk / 4) * FK_WQCOL + wg * 64 * 128 + (kk % 4) * 32, 16, 1024);
        if constexpr (FK_WG_S == 1 && FK_WNB == 2) {
          fk_wgmma_ss128(sc, dq, fk_wdesc(sk + kb, 16, 1024), kk > 0);
        } else {
#pragma unroll
          for (int nb = 0; nb < FK_WNB; ++nb)
            fk_wgmma_ss(sc + nb * 8, dq, fk_wdesc(sk + kb + nb * 64 * 128, 16, 1024), kk > 0);
        }
#endif
      }
    };
    auto release = [&](int t) {
      __syncwarp();
      if (lane == 0) fk_bar_arrive(empty_bar + 8 * (t % FK_WST));
    };
    // Tile t's probabilities in sc (hooks, mask, max, exponentials, sums), and the factor for O
    // in alpha; neither O nor P is touched, so this may run while P V of tile t - 1 does.
    auto probs = [&](int t, float* alpha) {
      const i64 t0 = k0 + (i64)t * FK_WT;
      const int n = (int)fk_min_i((i64)FK_WT, k1 - t0);
      // Keys [jlo, n) of the tile exist and are visible (jlo > 0 only at a paged sequence's
      // first visible page; jlo <= n, so a range wholly before it is empty): one 32-bit range
      // check a score, none where the tile is whole.
      const int jlo = (int)fk_min_i((i64)n, fk_max_i(0, visible0 - t0));
      const bool whole = n == FK_WT && jlo == 0;
      const bool tile_true = t0 >= full.x && t0 + n <= full.y;
      const bool lean = lean_ok && tile_true && whole;
      // Variant hooks and mask; fragment (nt, e) is row g + 8 (e / 2), key 8 nt + 2 c4 + e % 2.
      // A score hook in a whole tile the mask keeps runs unchecked and branch-free. (Behind the
      // preprocessor: even a dead `if (FK_HAS_SCORE ...)` changed the code of variants without
      // one, 2 % more instructions, session 15.)
#if FK_HAS_SCORE
      if (tile_true && whole) {
#pragma unroll
        for (int nt = 0; nt < FK_WNB * 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = nt * 8 + 2 * c4 + (e & 1);
            sc[nt][e] = fk_mma_score(P, sq, seq, q, e >> 1, sc[nt][e], kscale, true, t0 + j, true, false);
          }
      } else
#endif
      if (!lean) {
        // The scores of a tile the mask cuts (its diagonal, a window's ends): the key checks
        // compiled out where every key exists (a uniform branch), so a score costs its mask
        // and a select (ptxas packed 128 such predicates into bit masks otherwise: a causal
        // diagonal tile took 881 instructions a warp, now 294).
        auto cut = [&](auto whole_c) {
          constexpr bool all_keys = decltype(whole_c)::v;
#pragma unroll
          for (int nt = 0; nt < FK_WNB * 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int j = nt * 8 + 2 * c4 + (e & 1);
              const bool key_ok = all_keys || (u32)(j - jlo) < (u32)(n - jlo);
#if FK_PAGED
              sc[nt][e] = fk_mma_score(P, sq, seq, q, e >> 1, sc[nt][e], kscale, key_ok, t0 + j, tile_true);
#else
              sc[nt][e] = fk_wg_masked(P, sq, seq, q, e >> 1, sc[nt][e], kscale, key_ok, t0 + j, tile_true);
#endif
            }
        };
        // (Only masks without loads of captures: a document mask's loads and compares cost
        // ~20 instructions a score, the checks nothing, and the second copy 1-4 % in I-cache;
        // without a mask a cut tile is never whole.)
        if (FK_HAS_MASK && !FK_MASK_LOADS && whole) cut(FkB<true>{});
        else cut(FkB<false>{});
      }
      fk_mma_softmax_rows<FK_WNB * 8>(sc, m, l, lean ? kscale : 1.f, alpha);
    };
    // O to the new running max; P into wgmma's register A of the next turn's P V.
    auto rescale = [&](const float* alpha) {
#pragma unroll
      for (int ot = 0; ot < FK_WNO * 8; ++ot)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[ot][e] *= alpha[e >> 1];
    };
    auto pack = [&]() {
#pragma unroll
      for (int kc = 0; kc < FK_WT / 16; ++kc) {
        pa[kc][0] = fk_mpack(sc[2 * kc][0], sc[2 * kc][1]);
        pa[kc][1] = fk_mpack(sc[2 * kc][2], sc[2 * kc][3]);
        pa[kc][2] = fk_mpack(sc[2 * kc + 1][0], sc[2 * kc + 1][1]);
        pa[kc][3] = fk_mpack(sc[2 * kc + 1][2], sc[2 * kc + 1][3]);
      }
    };
    auto softmax = [&](int t) {
      float alpha[2];
      probs(t, alpha);
      rescale(alpha);
      pack();
    };

    if (ntiles > 0) {
      fk_bar_wait(full_bar, 0);
      FK_MARK(1);
      FK_PHASE(0);
      fk_named_sync(my_turn, 256);
      FK_PHASE(1);
      fk_wg_fence();
      issue_s(0);
      fk_wg_commit();
      fk_named_arrive(their_turn, 256);
      fk_wg_wait();
      fk_wg_pin<FK_WNB * 8>(sc);
      FK_PHASE(2);
#if FK_WG_OVERLAP
      // FlashAttention-3's intra-warpgroup overlap: a turn issues Q K^T of tile t and P V of
      // tile t - 1 as two groups and runs tile t's softmax once the first is done, while the
      // second runs. O's rescale and P's packing, which must wait for the second, open the next
      // turn: kept in the same block as the wait, ptxas sank the softmax below it.
      float alpha[2];
      // The last turn's P V done: its stage (tile `done`, none where negative) is free, O and P
      // are the softmax's again.
      auto retire = [&](int done) {
        fk_wg_wait();
        fk_wg_pin<FK_WNO * 8>(o);
        fk_wg_pin<FK_WNB * 8>(sc);
        if (done >= 0) release(done);
        rescale(alpha);
        pack();
      };
      probs(0, alpha);
      FK_PHASE(3);
      for (int t = 1; t < ntiles; ++t) {
        fk_bar_wait(full_bar + 8 * (t % FK_WST), (t / FK_WST) & 1);
        FK_PHASE(0);
        retire(t - 2);
        FK_PHASE(2);
        fk_named_sync(my_turn, 256);
        FK_PHASE(1);
        fk_wg_pin<FK_WNO * 8>(o);
        fk_wg_fence();
        issue_s(t);
        fk_wg_commit();
        issue_pv(t - 1);
        fk_wg_commit();
        fk_named_arrive(their_turn, 256);
        fk_wg_wait1();
        fk_wg_pin<FK_WNB * 8>(sc);
        FK_PHASE(2);
        probs(t, alpha);
        FK_PHASE(3);
      }
      retire(ntiles - 2);
#else
      softmax(0);
      FK_PHASE(3);
      for (int t = 1; t < ntiles; ++t) {
        fk_bar_wait(full_bar + 8 * (t % FK_WST), (t / FK_WST) & 1);
        FK_PHASE(0);
        fk_named_sync(my_turn, 256);
        FK_PHASE(1);
        fk_wg_pin<FK_WNO * 8>(o);
        fk_wg_fence();
        issue_pv(t - 1);
        issue_s(t);
        fk_wg_commit();
        fk_named_arrive(their_turn, 256);
        fk_wg_wait();
        fk_wg_pin<FK_WNO * 8>(o);
        fk_wg_pin<FK_WNB * 8>(sc);
        FK_PHASE(2);
        release(t - 1);
        softmax(t);
        FK_PHASE(3);
      }
#endif
      fk_named_sync(my_turn, 256);
      FK_PHASE(1);
      fk_wg_pin<FK_WNO * 8>(o);
      fk_wg_fence();
      issue_pv(ntiles - 1);
      fk_wg_commit();
      if (!last_wg) fk_named_arrive(their_turn, 256);
      fk_wg_wait();
      fk_wg_pin<FK_WNO * 8>(o);
      release(ntiles - 1);
      FK_PHASE(2);
      FK_MARK(2);
      FK_PHASES_STORE();
    } else {
      fk_named_sync(my_turn, 256);
      if (!last_wg) fk_named_arrive(their_turn, 256);
    }

    // Epilogue: each thread's two rows straight from registers (no key splits to join).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    // The rows' item and sequence read again, not kept from the start: ptxas computed the
    // output offsets before the loop and kept them through it, which spilled with three
    // warpgroups' 160 registers (the loop's barriers order these loads after it).
    const uint4 ite = ((const uint4*)(a.step + a.off_items))[item];
    const FkSeq sqe = fk_seq(a, ite.x);
    const FkMRows qe = fk_wrows_of(a, sqe, ite.y & FK_ROW_TILE_BITS, kvh, wg * 64 + wi * 16 + g);
    const u64 base = ((u64)item * a.num_kv_heads + kvh) * FK_ROWS;
    const bool sole = ((ite.y >> 30) & 1u) && !a.has_sinks;
    const i64 hq = a.num_kv_heads * a.group;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wg * 64 + wi * 16 + g + 8 * h;
      const float2 f = fk_mma_final(m[h], l[h], vscale);
      const bool kept = l[h] > 0.f;
      float* dst;
      if (sole) {
        // The only partition of its rows and no sinks: the merge would copy it; write it here.
        if (!qe.ok[h]) continue;
        const i64 token = sqe.q_start + qe.qi[h];
        dst = a.out + (token * hq + qe.head[h]) * FK_DV;
        if (c4 == 0 && a.has_lse) a.lse[token * hq + qe.head[h]] = f.y;
      } else {
        dst = a.part_o + (base + r) * FK_DV;
        if (c4 == 0) a.part_lse[base + r] = f.y;
      }
#pragma unroll
      for (int ot = 0; ot < FK_WNO * 8; ++ot) {
        const float x0 = kept ? o[ot][2 * h] * f.x : f.x, x1 = kept ? o[ot][2 * h + 1] * f.x : f.x;
        *(float2*)(dst + ot * 8 + 2 * c4) = make_float2(x0, x1);
      }
    }
#if FK_TRACE
    if (trace_slot < FK_TRACE_SLOTS / 4 * 3) fk_trace_block(trace_slot, trace_t0);
#endif
  }
  if (((it.y >> 30) & 1u) && !a.has_sinks) return;
  if (a.off_counters == 0) return;
  fk_mma_join_last(a, item, kvh);
}
#endif
