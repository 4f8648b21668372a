// flexkern-cuda: the tensor-core kernels' join of a row tile's few partitions by its last
// block (no merge launch), after attention_tc.cu.
#if FK_MMA
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
#endif  // FK_MMA
