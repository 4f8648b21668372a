// flexkern-cuda: shared device helpers. No CUDA headers: NVRTC finds none without the toolkit,
// so the few conversions the kernels need are written here with bit operations and inline PTX.
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define FK_NEG_INF __int_as_float(0xff800000)

// A step's timeline (FLEXKERN_CUDA_TRACE=step, runtime/step_trace.rs): the runtime defines
// FK_STEP_TRACE as the address of a device buffer (a counter, then records) and FK_TRACE_MODULE
// as the module's number. Each block's thread 0 records its start, when its wait for the
// previous kernel returned, its end, its SM, the kernel (module and source line of the scope)
// and the grid's size. FK_TRACE_SCOPE() opens the record at a kernel's start,
// FK_TRACE_RELEASED() marks the wait's return.
#ifdef FK_STEP_TRACE
__device__ __forceinline__ u64 fk_gtime() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
struct FkStepTrace {
  u64 t0, t1;
  u32 line;
  __device__ explicit FkStepTrace(u32 l) : t0(fk_gtime()), t1(0), line(l) {}
  __device__ void released() { t1 = fk_gtime(); }
  __device__ ~FkStepTrace() {
    if (threadIdx.x | threadIdx.y | threadIdx.z) return;
    u64* const buf = (u64*)FK_STEP_TRACE;
    const u32 slot = atomicAdd((u32*)buf, 1u);
    if (slot >= FK_STEP_TRACE_N) return;
    u32 sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    u64* const r = buf + 2 + 5 * (u64)slot;
    r[0] = t0;
    r[1] = t1 ? t1 : t0;
    r[2] = fk_gtime();
    r[3] = (u64)FK_TRACE_MODULE << 48 | (u64)line << 16 | sm;
    r[4] = (u64)gridDim.x * gridDim.y * gridDim.z;
  }
};
#define FK_TRACE_SCOPE() FkStepTrace fk_step_trace(__LINE__)
#define FK_TRACE_RELEASED() fk_step_trace.released()
#else
#define FK_TRACE_SCOPE() \
  do {                   \
  } while (0)
#define FK_TRACE_RELEASED() \
  do {                      \
  } while (0)
#endif

// FLEXKERN_CUDA_TRACE=step,at=N: thread 0's time at the prologue's point N (FK_TRACE_POINT)
// replaces the wait's return as the block's "released" stamp, so timelines taken at several
// points split the prologue into its phases. `v`: a value computed by then (an empty asm that
// reads it keeps the clock read after it).
#if defined(FK_STEP_TRACE) && defined(FK_TRACE_AT)
__device__ __forceinline__ u64* fk_trace_at_slot() {
  __shared__ u64 t;
  return &t;
}
__device__ __forceinline__ void fk_trace_dep(float v) { asm volatile("" ::"f"(v)); }
__device__ __forceinline__ void fk_trace_dep(double v) { asm volatile("" ::"d"(v)); }
__device__ __forceinline__ void fk_trace_dep(int v) { asm volatile("" ::"r"(v)); }
#define FK_TRACE_POINT(n, v)                                 \
  do {                                                       \
    if (FK_TRACE_AT == (n) && threadIdx.x == 0) {            \
      fk_trace_dep(v);                                       \
      *fk_trace_at_slot() = fk_gtime();                      \
    }                                                        \
  } while (0)
#else
#define FK_TRACE_POINT(n, v) \
  do {                       \
  } while (0)
#endif

// Programmatic dependent launch (runtime::launch sets it on Hopper): let the next kernel begin
// launching now, and wait for the previous kernel's writes before touching memory. The first
// statement of every kernel launched that way; a no-op when launched without it.
#if __CUDA_ARCH__ >= 900
#define FK_PDL_ENTER()                                \
  FK_TRACE_SCOPE();                                   \
  asm volatile("griddepcontrol.launch_dependents;");  \
  asm volatile("griddepcontrol.wait;" ::: "memory");  \
  FK_TRACE_RELEASED()
#else
#define FK_PDL_ENTER() \
  FK_TRACE_SCOPE();    \
  FK_TRACE_RELEASED()
#endif

// mbarriers (Hopper): init, arrive, wait for a phase, and arrive expecting bulk-copy bytes;
// `bar` is a shared-memory address (the prefill's and prompt GEMM's TMA pipelines, the
// streamed GEMV's bulk ring).
#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void fk_bar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void fk_bar_arrive(u32 bar) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(bar) : "memory");
}
// Waits for the completion of the barrier's phase of the given parity.
__device__ __forceinline__ void fk_bar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}
// Arrives on `bar` and adds `bytes` to the transfers its phase waits for.
__device__ __forceinline__ void fk_bar_expect(u32 bar, u32 bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(bar), "r"(bytes)
               : "memory");
}
// One contiguous bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from
// global memory into shared memory at `dst`, completing on mbarrier `bar`.
__device__ __forceinline__ void fk_bulk_g2s(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
#endif

// A block timeline for profiling (FLEXKERN_CUDA_TRACE=1; no profiler reads one inside a CUDA
// graph here): slot b holds block b's start (ns, %globaltimer) and (end - start) << 16 | SM.
#ifndef FK_TRACE
#define FK_TRACE 0
#endif
#if FK_TRACE
constexpr u32 FK_TRACE_SLOTS = 8192;
__device__ u64 fk_trace[2 * FK_TRACE_SLOTS];
__device__ __forceinline__ u64 fk_now() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void fk_trace_block(u32 slot, u64 t0) {
  if (threadIdx.x != 0 || slot >= FK_TRACE_SLOTS) return;
  u32 sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  fk_trace[2 * slot] = t0;
  fk_trace[2 * slot + 1] = (fk_now() - t0) << 16 | sm;
}
// Phase marks of a block (the tensor-core kernels': Q ready, first tile landed, loop done, ns
// after its start, so a short block's fixed costs show beside its loop; then one warp's loop in
// SM cycles: waiting for tiles, for its turn or queueing copies, in its MMA, in softmax).
constexpr int FK_TRACE_MARKS = 7;
__device__ u32 fk_trace_ph[FK_TRACE_MARKS * FK_TRACE_SLOTS];
__device__ __forceinline__ void fk_trace_mark(u32 slot, int i, u64 t0) {
  if (threadIdx.x == 0 && slot < FK_TRACE_SLOTS) fk_trace_ph[FK_TRACE_MARKS * slot + i] = (u32)(fk_now() - t0);
}
// A kernel's phase accounting: FK_PHASES() opens block `slot`'s clocks, FK_MARK(i) records mark
// i, FK_PHASE(i) adds the SM cycles since the last FK_PHASE to loop phase i, FK_PHASES_STORE()
// writes the loop phases after the marks.
// FK_TRACE_LOOP 0 (a kernel's wide heads, attention_mma.cu) keeps the marks and leaves the
// loop phases out: their five registers spilled the D 256 decode kernel's trace build.
#ifndef FK_TRACE_LOOP
#define FK_TRACE_LOOP 1
#endif
#define FK_PHASES(slot)                                 \
  const u64 trace_t0 = fk_now();                        \
  const u32 trace_slot = (slot);                        \
  u32 tc_at = FK_TRACE_LOOP ? (u32)clock() : 0u, tc[4] = {0, 0, 0, 0}
#define FK_MARK(i) fk_trace_mark(trace_slot, i, trace_t0)
#define FK_PHASE(i)                  \
  do {                               \
    if constexpr (FK_TRACE_LOOP) {   \
      const u32 now_ = (u32)clock(); \
      tc[i] += now_ - tc_at;         \
      tc_at = now_;                  \
    }                                \
  } while (0)
#define FK_PHASES_STORE()                                                                            \
  do {                                                                                               \
    if (FK_TRACE_LOOP && threadIdx.x == 0 && trace_slot < FK_TRACE_SLOTS)                            \
      for (int i_ = 0; i_ < 4; ++i_) fk_trace_ph[FK_TRACE_MARKS * trace_slot + 3 + i_] = tc[i_]; \
  } while (0)
#else
#define FK_PHASES(slot) \
  do {                  \
  } while (0)
#define FK_MARK(i) \
  do {             \
  } while (0)
#define FK_PHASE(i) \
  do {              \
  } while (0)
#define FK_PHASES_STORE() \
  do {                    \
  } while (0)
#endif

// x rounded to nearest even to a 16-bit float: `to` 2 bf16, else f16 (fk_convert, and the
// 16-bit Q that fk_rope_kv_write can write beside f32 Q: the same bits).
__device__ __forceinline__ u16 fk_to16(float x, int to) {
  unsigned short h;
  if (to == 2) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  else asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}

// Variables a variant hook reads (expr.rs `Var`).
struct FkVars {
  i64 b, h, q_pos, kv_pos, q_len, kv_len, q_token;
};

// i64 with the CPU's semantics: wrapping arithmetic, x / 0 = x % 0 = 0, MIN / -1 = MIN,
// shifts outside 0..64 give 0, >> is arithmetic.
__device__ __forceinline__ i64 fk_add_i(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ i64 fk_sub_i(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
__device__ __forceinline__ i64 fk_mul_i(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
__device__ __forceinline__ i64 fk_neg_i(i64 a) { return (i64)(0ull - (u64)a); }
__device__ __forceinline__ i64 fk_abs_i(i64 a) { return a < 0 ? fk_neg_i(a) : a; }
__device__ __forceinline__ i64 fk_div_i(i64 a, i64 b) { return b == 0 ? 0 : (b == -1 ? fk_neg_i(a) : a / b); }
__device__ __forceinline__ i64 fk_rem_i(i64 a, i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ i64 fk_min_i(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 fk_max_i(i64 a, i64 b) { return a > b ? a : b; }
__device__ __forceinline__ i64 fk_shl_i(i64 a, i64 b) { return (b >= 0 && b < 64) ? (i64)((u64)a << b) : 0; }
__device__ __forceinline__ i64 fk_shr_i(i64 a, i64 b) { return (b >= 0 && b < 64) ? (a >> b) : 0; }

// i64 -> f32, for values the code generator proved within +-2^22 while every hook variable is
// below 2^21 (FK_SMALL_VARS, which the host sets from the call's lengths): the integer lands in
// the mantissa of 1.5 * 2^23 and a float subtraction removes the bias, exactly, on full-rate
// pipes (I2F.S64 runs at a quarter of the rate, on the pipe of the softmax's exponentials).
__device__ __forceinline__ float fk_i2f_small(i64 x) {
#if FK_SMALL_VARS
  return __int_as_float(0x4B400000 + (int)x) - 12582912.0f;
#else
  return __ll2float_rn(x);
#endif
}

// The hooks' tanh, branch-free (a branch per element would serialize the unrolled softmax on
// latency). 16-bit kernels: 1 - 2 / (1 + e^{2|x|}) with the sign put back, from ex2 and rcp on
// the MUFU pipe (about 2e-6 relative), and an odd Taylor polynomial below |x| = 1/8, where the
// subtraction cancels; NaN takes the polynomial and stays NaN, e^{2|x|} = inf gives exactly 1.
// f32 kernels keep the library's tanhf: their 1e-5 tolerance leaves no room.
__device__ __forceinline__ float fk_tanh(float x) {
#if defined(FK_QT) && FK_QT != 0
  const float a = fabsf(x);
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(a * 2.8853900817779268f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
  const float big = copysignf(fmaf(-2.f, r, 1.f), x);
  const float x2 = x * x;
  const float small = fmaf(x * x2, fmaf(x2, fmaf(x2, -0.053968254f, 0.13333334f), -0.33333334f), x);
  return a >= 0.125f ? big : small;
#else
  return tanhf(x);
#endif
}

// Element types (the host's `elem_code`): 0 f32, 1 f16, 2 bf16, 3 fp8 e4m3fn, 4 fp8 e5m2, 5 i8.
template <int T> struct FkSize { static constexpr int value = T == 0 ? 4 : (T <= 2 ? 2 : 1); };

__device__ __forceinline__ float fk_f16(u32 h) {
  float f;
  unsigned short s = (unsigned short)h;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
  return f;
}
__device__ __forceinline__ float fk_bf16(u32 h) { return __uint_as_float((h & 0xffffu) << 16); }
// e5m2 is the top byte of an f16.
__device__ __forceinline__ float fk_e5m2(u32 x) { return fk_f16((x & 0xffu) << 8); }
// e4m3fn: bias 7, no infinities, 0x7f / 0xff are NaN, subnormals m * 2^-9.
__device__ __forceinline__ float fk_e4m3(u32 x) {
  const u32 s = (x & 0x80u) << 24, e = (x >> 3) & 0xfu, m = x & 7u;
  if (e == 15u && m == 7u) return __uint_as_float(0x7fc00000u | s);
  if (e == 0u) {
    const float v = (float)m * 0.001953125f;
    return s ? -v : v;
  }
  return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}
__device__ __forceinline__ float fk_i8(u32 x) { return (float)(signed char)(x & 0xffu); }

template <int T> __device__ __forceinline__ float fk_cvt(u32 bits) {
  if constexpr (T == 0) return __uint_as_float(bits);
  else if constexpr (T == 1) return fk_f16(bits);
  else if constexpr (T == 2) return fk_bf16(bits);
  else if constexpr (T == 3) return fk_e4m3(bits);
  else if constexpr (T == 4) return fk_e5m2(bits);
  else return fk_i8(bits);
}

// N elements of type T as raw words (one load of N * size bytes: 1, 2, 4, 8 or 16).
template <int T, int N> struct FkRaw {
  static constexpr int BYTES = N * FkSize<T>::value;
  static constexpr int WORDS = BYTES < 4 ? 1 : BYTES / 4;
  u32 w[WORDS];
};

// Read-only loads that skip L1 allocation: KV is streamed once.
template <int T, int N>
__device__ __forceinline__ void fk_ld(FkRaw<T, N>& r, const void* p) {
  constexpr int B = FkRaw<T, N>::BYTES;
  if constexpr (B == 16) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
  } else if constexpr (B == 8) {
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(r.w[0]), "=r"(r.w[1]) : "l"(p));
  } else if constexpr (B == 4) {
    r.w[0] = __ldg((const unsigned int*)p);
  } else if constexpr (B == 2) {
    r.w[0] = (u32)__ldg((const unsigned short*)p);
  } else {
    r.w[0] = (u32)__ldg((const unsigned char*)p);
  }
}

template <int T, int N>
__device__ __forceinline__ void fk_unpack(const FkRaw<T, N>& r, float* out) {
  constexpr int S = FkSize<T>::value;
#if __CUDA_ARCH__ >= 890
  // Ada/Hopper convert two fp8 codes to two f16 in one instruction (exact: every e4m3 and
  // e5m2 value is an f16), then each f16 to f32.
  if constexpr ((T == 3 || T == 4) && N % 2 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      const unsigned short b = (unsigned short)((r.w[i / 4] >> (8 * (i % 4))) & 0xffffu);
      u32 h2;
      if constexpr (T == 3) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(b));
      else asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"(b));
      out[i] = fk_f16(h2 & 0xffffu);
      out[i + 1] = fk_f16(h2 >> 16);
    }
    return;
  }
#endif
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (S == 4) out[i] = fk_cvt<T>(r.w[i]);
    else if constexpr (S == 2) out[i] = fk_cvt<T>(r.w[i / 2] >> (16 * (i % 2)));
    else out[i] = fk_cvt<T>(r.w[i / 4] >> (8 * (i % 4)));
  }
}

// One element of type T at element index i of p.
template <int T> __device__ __forceinline__ float fk_load1(const void* p, i64 i) {
  FkRaw<T, 1> r;
  fk_ld<T, 1>(r, (const u8*)p + i * FkSize<T>::value);
  float f;
  fk_unpack<T, 1>(r, &f);
  return f;
}

__device__ __forceinline__ float fk_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float fk_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// SwiGLU's activation with the accurate expf, as the CPU computes it. Not inlined: inlined at
// every (activation row, unit element) of the down-with-SwiGLU GEMV, it took ptxas over a minute
// for Q4_K at MB 16 (under 2 s as a call).
__device__ __noinline__ float fk_silu(float x) { return x / (1.0f + expf(-x)); }

constexpr int fk_pow2ceil(int n) { return n <= 1 ? 1 : 2 * fk_pow2ceil((n + 1) / 2); }
