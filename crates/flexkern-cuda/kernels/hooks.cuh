// flexkern-cuda: the static part of every variant's hooks, included by codegen after the
// generated FkParams and FK_MASK_LOADS and before fk_mask / fk_score.
//
// The hooks' integer type and capture loads. `fk_n` holds the integers the facts prove to fit 32
// bits: an int where the host promises small variables (FK_SMALL_VARS) in the strided Hopper
// kernel, whose branch-free edge tiles need the registers; an i64 elsewhere (same values), so
// the other kernels and capture-reading masks keep the code they were measured with.
// Capture loads give 0 outside the capture (a guard; bounds are proven before launch). In the
// Hopper kernel the read itself is unconditional, at index 0 when out of range (the host uploads
// an empty capture as one element), so equal loads of a tile's elements merge into one; the
// other kernels and masks that read captures (their loads per element, behind branches) keep the
// guarded read, which costs them fewer registers.
#if FK_SMALL_VARS && FK_WGMMA && !FK_PAGED && !FK_MASK_LOADS
typedef int fk_n;
#else
typedef long long fk_n;
#endif
#if FK_WGMMA && !FK_MASK_LOADS
__device__ __forceinline__ long long fk_load_i(const FkParams& P, int c, long long i) {
  const bool in = (unsigned long long)i < (unsigned long long)P.cap_len[c];
  const long long v = __ldg((const long long*)P.cap[c] + (in ? i : 0));
  return in ? v : 0;
}
__device__ __forceinline__ float fk_load_f(const FkParams& P, int c, long long i) {
  const bool in = (unsigned long long)i < (unsigned long long)P.cap_len[c];
  const float v = __ldg((const float*)P.cap[c] + (in ? i : 0));
  return in ? v : 0.0f;
}
#else
__device__ __forceinline__ long long fk_load_i(const FkParams& P, int c, long long i) {
  return (i >= 0 && i < P.cap_len[c]) ? ((const long long*)P.cap[c])[i] : 0;
}
__device__ __forceinline__ float fk_load_f(const FkParams& P, int c, long long i) {
  return (i >= 0 && i < P.cap_len[c]) ? ((const float*)P.cap[c])[i] : 0.0f;
}
#endif
