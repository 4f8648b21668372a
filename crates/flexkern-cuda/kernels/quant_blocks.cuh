// flexkern-cuda: the weight formats as "units" for the GEMV and embedding kernels. Plain C++
// that compiles for the device (NVRTC) and the host (g++, the decode test in quant.rs), so
// every format's decoding is checked bit for bit against flexkern-quant without a GPU.
//
// A unit is UE consecutive weights of one row (a 32- or 64-weight slice of a block, a 32-weight
// slice of an MLX group, 8 plain floats), decoded as G groups of UE/G codes q with one scale s
// and, when OFF, one offset o per group: weight = s * q + o, which is exactly how
// flexkern-quant's `dequantize` computes it (same operations, same order). The dot product
// factors the scale out: s * sum(q x) + o * sum(x), in f32 against f32 activations (no 8-bit
// activation rounding: the weights are widened in registers).
//
// Block byte offsets come from the generated layout header (FK_<FMT>_<FIELD>, from the Rust
// structs); loads use the widest access the block's alignment allows (16 bytes for Q4_K, Q5_K
// and aligned plain rows, 8 / 4 / 2 / 1 bytes elsewhere).
#pragma once

#if defined(__CUDACC__)
#define FK_HD __device__ __forceinline__
#else
#include <cstdint>
#include <cstring>
#include <cmath>
#define FK_HD inline
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
#endif

// ---- bit casts, conversions, loads (device intrinsics or their exact host equivalents) ----
FK_HD float fk_bits_f(u32 b) {
#if defined(__CUDACC__)
  return __uint_as_float(b);
#else
  float f;
  memcpy(&f, &b, 4);
  return f;
#endif
}

FK_HD float fk_half(u32 h) {
#if defined(__CUDACC__)
  float f;
  unsigned short s = (unsigned short)h;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(s));
  return f;
#else
  const u32 sign = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 0x3ffu;
  if (e == 0u) {
    const float v = (float)m * 5.9604644775390625e-08f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31u) return fk_bits_f(sign | 0x7f800000u | (m << 13));
  return fk_bits_f(sign | ((e + 112u) << 23) | (m << 13));
#endif
}
FK_HD float fk_bhalf(u32 h) { return fk_bits_f((h & 0xffffu) << 16); }

// Small unsigned integer (< 2^23) to float with one OR and one add (exact; I2F is slow).
FK_HD float fk_u2f(u32 q) { return fk_bits_f(0x4b000000u | q) - 8388608.0f; }
// q - OFF for q, OFF < 2^22, still one OR and one add (the constant folds at compile time).
template <int OFF>
FK_HD float fk_u2f_off(u32 q) { return fk_bits_f(0x4b000000u | q) - (8388608.0f + (float)OFF); }

// Multiply / add that the device compiler may not fuse: the exact dequantization.
FK_HD float fk_mul_rn(float a, float b) {
#if defined(__CUDACC__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FK_HD float fk_add_rn(float a, float b) {
#if defined(__CUDACC__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// The largest power of two (<= 16) dividing both a and b: the alignment of field b of blocks
// of a bytes laid end to end from an aligned base.
constexpr int fk_align_of(int a, int b) {
  return ((a | b) & 1) ? 1 : ((a | b) & 2) ? 2 : ((a | b) & 4) ? 4 : ((a | b) & 8) ? 8 : 16;
}

// FK_STAGED / FK_STREAM (the staged and streamed GEMVs): units read bytes a warp copied into
// shared memory, through generic loads; otherwise they read global memory through the
// read-only path.
// FK_SREG (the streamed GEMV over planar formats) loads from global memory again.
#if defined(__CUDACC__) && ((!defined(FK_STAGED) && !defined(FK_STREAM)) || (defined(FK_SREG) && FK_SREG))
#define FK_LDG 1
#else
#define FK_LDG 0
#endif

FK_HD u32 fk_ld8(const u8* p) {
#if FK_LDG
  return (u32)__ldg(p);
#else
  return *p;
#endif
}
FK_HD u32 fk_ld16(const u8* p) {
#if FK_LDG
  return (u32)__ldg((const unsigned short*)p);
#elif defined(__CUDACC__)
  return *(const unsigned short*)p;
#else
  u16 v;
  memcpy(&v, p, 2);
  return v;
#endif
}

#if defined(__CUDACC__)
// 16, 8 and 4 aligned bytes at p as words: the read-only path, or generic loads (FK_STAGED).
__device__ __forceinline__ void fk_ld_v4(const u8* p, u32* w) {
#if FK_LDG
  asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p));
#else
  const uint4 v = *(const uint4*)p;
  w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
#endif
}
__device__ __forceinline__ void fk_ld_v2(const u8* p, u32* w) {
#if FK_LDG
  asm("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
#else
  const uint2 v = *(const uint2*)p;
  w[0] = v.x, w[1] = v.y;
#endif
}
__device__ __forceinline__ u32 fk_ld32(const u8* p) {
#if FK_LDG
  return __ldg((const unsigned int*)p);
#else
  return *(const u32*)p;
#endif
}
#endif

// NB bytes (a multiple of 4) at p, known to be A-aligned, as little-endian words.
template <int NB, int A>
FK_HD void fk_words(const u8* p, u32* w) {
  static_assert(NB % 4 == 0, "whole words");
#if defined(__CUDACC__)
  if constexpr (A >= 16 && NB % 16 == 0) {
#pragma unroll
    for (int i = 0; i < NB / 16; ++i) fk_ld_v4(p + 16 * i, w + 4 * i);
  } else if constexpr (A >= 8 && NB % 8 == 0) {
#pragma unroll
    for (int i = 0; i < NB / 8; ++i) fk_ld_v2(p + 8 * i, w + 2 * i);
  } else if constexpr (A >= 4) {
#pragma unroll
    for (int i = 0; i < NB / 4; ++i) w[i] = fk_ld32(p + 4 * i);
  } else if constexpr (A == 2) {
#pragma unroll
    for (int i = 0; i < NB / 4; ++i) w[i] = fk_ld16(p + 4 * i) | (fk_ld16(p + 4 * i + 2) << 16);
  } else {
#pragma unroll
    for (int i = 0; i < NB / 4; ++i)
      w[i] = fk_ld8(p + 4 * i) | (fk_ld8(p + 4 * i + 1) << 8) | (fk_ld8(p + 4 * i + 2) << 16) |
             (fk_ld8(p + 4 * i + 3) << 24);
  }
#else
  memcpy(w, p, NB);
#endif
}

FK_HD u32 fk_byte(const u32* w, int i) { return (w[i >> 2] >> (8 * (i & 3))) & 0xffu; }

// One matrix: `w` the blocks (or MLX's packed weights), rows `row_bytes` apart; planar formats
// and MLX also have side entries at `s` (a planar block's scale fields, MLX's (scale, bias)
// words), `groups` entries per row.
struct FkMat {
  const u8* w;
  const u8* s;
  i64 row_bytes;
  i64 groups;
};

// ---- the 32-weight legacy formats ----
// Planar formats (layout.rs): a row's codes at m.w, FK_<FMT>P_BB bytes a block and 16-byte
// aligned; each block's other fields in its side entry at m.s (FK_<FMT>P_SB bytes, m.groups
// entries a row). Windows of the codes copied elsewhere (staged GEMV) keep reading their side
// entries in place (`fk_window_mat`).
FK_HD const u8* fk_side(const FkMat& m, i64 row, i64 blk, int sb) { return m.s + (row * m.groups + blk) * sb; }

// A unit's words and 16-bit fields from global memory (the read-only path) or, SH, from the
// streamed GEMV's copy of a span in shared memory (its bulk ring: the same bytes, 16-byte
// aligned), so that each format's load_at names its offsets once for both.
template <bool SH, int NB, int A>
FK_HD void fk_words_at(const u8* p, u32* w) {
#if defined(__CUDACC__)
  if constexpr (SH) {
    static_assert(NB % 16 == 0 && A >= 16, "a ring's units are whole 16-byte words");
#pragma unroll
    for (int i = 0; i < NB / 16; ++i) {
      const uint4 v = *(const uint4*)(p + 16 * i);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
    return;
  }
#endif
  fk_words<NB, A>(p, w);
}
template <bool SH>
FK_HD u32 fk_ld16_at(const u8* p) {
  if constexpr (SH) return *(const unsigned short*)p;
  return fk_ld16(p);
}

// acc plus the dot of a's four bytes, signed (fk_dp4a) or unsigned (fk_dp4a_u: dp4a.u32.s32),
// with x's four signed bytes; on the host (the g++ harness) the same sum in plain integers, so
// the integer dots below are checked there without a GPU.
FK_HD int fk_dp4a(u32 a, int x, int acc) {
#if defined(__CUDACC__)
  return __dp4a((int)a, x, acc);
#else
  for (int i = 0; i < 4; ++i) acc += (int)(signed char)(a >> (8 * i)) * (int)(signed char)((u32)x >> (8 * i));
  return acc;
#endif
}
FK_HD int fk_dp4a_u(u32 a, int x, int acc) {
#if defined(__CUDACC__)
  asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(acc) : "r"(a), "r"(x));
  return acc;
#else
  for (int i = 0; i < 4; ++i) acc += (int)((a >> (8 * i)) & 0xffu) * (int)(signed char)((u32)x >> (8 * i));
  return acc;
#endif
}
// The high nibbles' dot without shifting them down: the bytes of w & 0xf0f0f0f0, read unsigned,
// are 16 q, so this adds 16 * (q . x) to acc. Callers shift the sum back once (exact: a
// multiple of 16), one instruction a unit rather than a shift per word.
FK_HD int fk_dp4a_hi16(u32 w, int x, int acc) { return fk_dp4a_u(w & 0xf0f0f0f0u, x, acc); }

struct FkQ4_0P {
  static constexpr int UE = 32, G = 1, QK = 32, SB = FK_Q4_0P_SB;
  static constexpr bool OFF = false;
  // A unit's bytes in registers (the streamed GEMV loads a batch of them before computing any):
  // its code words and d's bits.
  struct Raw {
    u32 w[4];
    u32 d;
  };
  // A unit from its codes at `c` and its side entry at `side()`: in global memory, or SH in
  // the bulk ring's copy (`load_sh`). The entry's address is worked out after the codes' load
  // is issued, as the streamed kernel's register batches were tuned with (worked out first,
  // ptxas scheduled them otherwise: the 8B Q4_0 step lost 1.5 %).
  template <bool SH, class Side>
  FK_HD static void load_at(const u8* c, Side side, Raw& r) {
    fk_words_at<SH, 16, 16>(c, r.w);
    r.d = fk_ld16_at<SH>(side() + FK_Q4_0P_D);
  }
  FK_HD static void load(const FkMat& m, i64 row, i64 u, Raw& r) {
    load_at<false>(m.w + row * m.row_bytes + u * FK_Q4_0P_BB, [&] { return fk_side(m, row, u, SB); }, r);
  }
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    Raw r;
    load(m, row, u, r);
    s[0] = fk_half(r.d);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const u32 b = fk_byte(r.w, j);
      q[j] = fk_u2f_off<8>(b & 15u);
      q[j + 16] = fk_u2f_off<8>(b >> 4);
    }
  }
#if defined(__CUDACC__)
  // The same from the bulk ring: unit u of a span whose codes start at `w` (SH_UB bytes a
  // unit) and side entries at `s` (SH_USB bytes).
  static constexpr int SH_UB = FK_Q4_0P_BB, SH_USB = SB, SH_UPS = 1;
  FK_HD static void load_sh(const u8* w, const u8* s, int u, Raw& r) {
    load_at<true>(w + SH_UB * u, [&] { return s + SH_USB * u; }, r);
  }
#endif
  // Against Q8_0 activations (int8 words xq, scale dx, code sum sx): the integer dot of the
  // CPU's default path, sum (q - 8) x = sum q x - 8 sum x, exact; then isum * d * dx as the
  // CPU rounds it.
  FK_HD static float dot_raw(const Raw& r, i64, const int* xq, float dx, int sx) {
    int lo = 0, hi = 0;  // two chains of four (integer sums: exact in any order)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo = fk_dp4a(r.w[i] & 0x0f0f0f0fu, xq[i], lo);
      hi = fk_dp4a_hi16(r.w[i], xq[i + 4], hi);
    }
    return (float)(lo + (hi >> 4) - 8 * sx) * fk_half(r.d) * dx;
  }
  FK_HD static float dot_q8(const FkMat& m, i64 row, i64 u, const int* xq, float dx, int sx) {
    Raw r;
    load(m, row, u, r);
    return dot_raw(r, u, xq, dx, sx);
  }
};

struct FkQ4_1 {
  static constexpr int UE = 32, G = 1, QK = 32;
  static constexpr bool OFF = true;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float* o) {
    const u8* p = m.w + row * m.row_bytes + u * FK_Q4_1_BYTES;
    u32 w[4];
    fk_words<16, fk_align_of(FK_Q4_1_BYTES, FK_Q4_1_QS)>(p + FK_Q4_1_QS, w);
    s[0] = fk_half(fk_ld16(p + FK_Q4_1_D));
    o[0] = fk_half(fk_ld16(p + FK_Q4_1_M));
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const u32 b = fk_byte(w, j);
      q[j] = fk_u2f(b & 15u);
      q[j + 16] = fk_u2f(b >> 4);
    }
  }
};

template <bool MIN>
FK_HD void fk_q5_codes(const u32* w, u32 qh, float* q) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const u32 b = fk_byte(w, j);
    const u32 q0 = (b & 15u) | (((qh >> j) & 1u) << 4);
    const u32 q1 = (b >> 4) | (((qh >> (j + 16)) & 1u) << 4);
    q[j] = fk_u2f_off<MIN ? 0 : 16>(q0);
    q[j + 16] = fk_u2f_off<MIN ? 0 : 16>(q1);
  }
}

struct FkQ5_0 {
  static constexpr int UE = 32, G = 1, QK = 32;
  static constexpr bool OFF = false;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    const u8* p = m.w + row * m.row_bytes + u * FK_Q5_0_BYTES;
    u32 w[4], qh;
    fk_words<16, fk_align_of(FK_Q5_0_BYTES, FK_Q5_0_QS)>(p + FK_Q5_0_QS, w);
    fk_words<4, fk_align_of(FK_Q5_0_BYTES, FK_Q5_0_QH)>(p + FK_Q5_0_QH, &qh);
    s[0] = fk_half(fk_ld16(p + FK_Q5_0_D));
    fk_q5_codes<false>(w, qh, q);
  }
};

struct FkQ5_1 {
  static constexpr int UE = 32, G = 1, QK = 32;
  static constexpr bool OFF = true;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float* o) {
    const u8* p = m.w + row * m.row_bytes + u * FK_Q5_1_BYTES;
    u32 w[4], qh;
    fk_words<16, fk_align_of(FK_Q5_1_BYTES, FK_Q5_1_QS)>(p + FK_Q5_1_QS, w);
    fk_words<4, fk_align_of(FK_Q5_1_BYTES, FK_Q5_1_QH)>(p + FK_Q5_1_QH, &qh);
    s[0] = fk_half(fk_ld16(p + FK_Q5_1_D));
    o[0] = fk_half(fk_ld16(p + FK_Q5_1_M));
    fk_q5_codes<true>(w, qh, q);
  }
};

struct FkQ8_0P {
  static constexpr int UE = 32, G = 1, QK = 32, SB = FK_Q8_0P_SB;
  static constexpr bool OFF = false;
  struct Raw {  // as FkQ4_0P's
    u32 w[8];
    u32 d;
  };
  template <bool SH, class Side>
  FK_HD static void load_at(const u8* c, Side side, Raw& r) {  // as FkQ4_0P's
    fk_words_at<SH, 32, 16>(c, r.w);
    r.d = fk_ld16_at<SH>(side() + FK_Q8_0P_D);
  }
  FK_HD static void load(const FkMat& m, i64 row, i64 u, Raw& r) {
    load_at<false>(m.w + row * m.row_bytes + u * FK_Q8_0P_BB, [&] { return fk_side(m, row, u, SB); }, r);
  }
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    Raw r;
    load(m, row, u, r);
    s[0] = fk_half(r.d);
#pragma unroll
    for (int j = 0; j < 32; ++j) q[j] = fk_u2f_off<128>(fk_byte(r.w, j) ^ 0x80u);  // int8
  }
#if defined(__CUDACC__)
  static constexpr int SH_UB = FK_Q8_0P_BB, SH_USB = SB, SH_UPS = 1;  // as FkQ4_0P's
  FK_HD static void load_sh(const u8* w, const u8* s, int u, Raw& r) {
    load_at<true>(w + SH_UB * u, [&] { return s + SH_USB * u; }, r);
  }
#endif
  // Against Q8_0 activations: the CPU default path's integer dot, then isum * d * dx.
  FK_HD static float dot_raw(const Raw& r, i64, const int* xq, float dx, int) {
    int acc[2] = {0, 0};  // two chains of four (integer sums: exact in any order)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i & 1] = fk_dp4a(r.w[i], xq[i], acc[i & 1]);
    return (float)(acc[0] + acc[1]) * fk_half(r.d) * dx;
  }
  FK_HD static float dot_q8(const FkMat& m, i64 row, i64 u, const int* xq, float dx, int sx) {
    Raw r;
    load(m, row, u, r);
    return dot_raw(r, u, xq, dx, sx);
  }
};

// The 16-entry table formats: codes index a table of int8 (IQ4's grid, or e2m1 doubled), held
// as four little-endian words; the device selects with one byte permute per half (no local
// memory array).
constexpr u32 fk_pack4(int a, int b, int c, int d) {
  return (u32)(u8)a | ((u32)(u8)b << 8) | ((u32)(u8)c << 16) | ((u32)(u8)d << 24);
}
template <bool MX>
FK_HD float fk_lut(u32 c) {
  constexpr u32 w0 = MX ? fk_pack4(0, 1, 2, 3) : fk_pack4(-127, -104, -83, -65);
  constexpr u32 w1 = MX ? fk_pack4(4, 6, 8, 12) : fk_pack4(-49, -35, -22, -10);
  constexpr u32 w2 = MX ? fk_pack4(0, -1, -2, -3) : fk_pack4(1, 13, 25, 38);
  constexpr u32 w3 = MX ? fk_pack4(-4, -6, -8, -12) : fk_pack4(53, 69, 89, 113);
#if defined(__CUDACC__)
  const u32 lo = __byte_perm(w0, w1, c & 7u), hi = __byte_perm(w2, w3, c & 7u);
  const u32 b = (c & 8u ? hi : lo) & 0xffu;
#else
  const u32 w[4] = {w0, w1, w2, w3};
  const u32 b = (w[c >> 2] >> (8 * (c & 3u))) & 0xffu;
#endif
  return (float)(int)(signed char)b;
}

template <bool MX>
FK_HD void fk_lut_codes(const u32* w, float* q) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const u32 b = fk_byte(w, j);
    q[j] = fk_lut<MX>(b & 15u);
    q[j + 16] = fk_lut<MX>(b >> 4);
  }
}

struct FkIQ4NL {
  static constexpr int UE = 32, G = 1, QK = 32;
  static constexpr bool OFF = false;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    const u8* p = m.w + row * m.row_bytes + u * FK_IQ4_NL_BYTES;
    u32 w[4];
    fk_words<16, fk_align_of(FK_IQ4_NL_BYTES, FK_IQ4_NL_QS)>(p + FK_IQ4_NL_QS, w);
    s[0] = fk_half(fk_ld16(p + FK_IQ4_NL_D));
    fk_lut_codes<false>(w, q);
  }
};

struct FkMXFP4 {
  static constexpr int UE = 32, G = 1, QK = 32;
  static constexpr bool OFF = false;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    const u8* p = m.w + row * m.row_bytes + u * FK_MXFP4_BYTES;
    u32 w[4];
    fk_words<16, fk_align_of(FK_MXFP4_BYTES, FK_MXFP4_QS)>(p + FK_MXFP4_QS, w);
    const u32 e = fk_ld8(p + FK_MXFP4_E);
    s[0] = fk_bits_f(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));  // 2^(e - 128)
    fk_lut_codes<true>(w, q);
  }
};

// ---- the 256-weight K-quants ----
// Q2_K and Q3_K's 2-bit codes of unit u (weights 32u..32u+32): qs[32 (u/4) + l] >> 2 (u%4).
template <int QS, int BYTES>
FK_HD void fk_q2_words(const u8* p, i64 u, u32* w) {
  fk_words<32, fk_align_of(BYTES, QS)>(p + QS + 32 * (u >> 2), w);
}

struct FkQ2K {
  static constexpr int UE = 32, G = 2, QK = 256;
  static constexpr bool OFF = true;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float* o) {
    const u8* p = m.w + row * m.row_bytes + (u >> 3) * FK_Q2_K_BYTES;
    const int uu = (int)(u & 7);
    u32 w[8];
    fk_q2_words<FK_Q2_K_QS, FK_Q2_K_BYTES>(p, uu, w);
    const float d = fk_half(fk_ld16(p + FK_Q2_K_D)), dmin = fk_half(fk_ld16(p + FK_Q2_K_DMIN));
    const u32 sc = fk_ld16(p + FK_Q2_K_SCALES + 2 * uu);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const u32 b = (sc >> (8 * g)) & 0xffu;
      s[g] = d * fk_u2f(b & 15u);
      o[g] = -(dmin * fk_u2f(b >> 4));
    }
    const int sh = 2 * (uu & 3);
#pragma unroll
    for (int l = 0; l < 32; ++l) q[l] = fk_u2f((fk_byte(w, l) >> sh) & 3u);
  }
};

struct FkQ3K {
  static constexpr int UE = 32, G = 2, QK = 256;
  static constexpr bool OFF = false;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    const u8* p = m.w + row * m.row_bytes + (u >> 3) * FK_Q3_K_BYTES;
    const int uu = (int)(u & 7);
    u32 w[8], hm[8], a[3];
    fk_q2_words<FK_Q3_K_QS, FK_Q3_K_BYTES>(p, uu, w);
    fk_words<32, fk_align_of(FK_Q3_K_BYTES, FK_Q3_K_HMASK)>(p + FK_Q3_K_HMASK, hm);
    fk_words<12, fk_align_of(FK_Q3_K_BYTES, FK_Q3_K_SCALES)>(p + FK_Q3_K_SCALES, a);
    const float d = fk_half(fk_ld16(p + FK_Q3_K_D));
    // Scale j (of 16) = 6 bits: low 4 from a0/a1 nibbles, high 2 from a2 (unpack_q3_scales).
    const int kw = uu >> 1;  // word k holds scales 4k..4k+3; unit uu needs 2uu, 2uu+1
    const u32 lo = kw == 0 ? a[0] : kw == 1 ? a[1] : kw == 2 ? (a[0] >> 4) : (a[1] >> 4);
    const u32 word = (lo & 0x0f0f0f0fu) | (((a[2] >> (2 * kw)) & 0x03030303u) << 4);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const int sc = (int)((word >> (8 * (2 * (uu & 1) + g))) & 0xffu) - 32;
      s[g] = d * (float)sc;
    }
    const int sh = 2 * (uu & 3);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const u32 low = (fk_byte(w, l) >> sh) & 3u;
      const u32 high = (fk_byte(hm, l) >> uu) & 1u;
      q[l] = fk_u2f_off<4>(low + 4u * high);  // low - (high ? 0 : 4)
    }
  }
};

// Q4_K / Q5_K's eight 6-bit (scale, min) pairs: pair j of the 12 bytes at p.
template <int BYTES, int OFFS>
FK_HD void fk_scale_min_k4(const u8* p, int j, u32& sc, u32& mn) {
  u32 a[3];
  fk_words<12, fk_align_of(BYTES, OFFS)>(p + OFFS, a);
  if (j < 4) {
    sc = fk_byte(a, j) & 63u;
    mn = fk_byte(a, j + 4) & 63u;
  } else {
    sc = (fk_byte(a, j + 4) & 0xfu) | ((fk_byte(a, j - 4) >> 6) << 4);
    mn = (fk_byte(a, j + 4) >> 4) | ((fk_byte(a, j) >> 6) << 4);
  }
}

// __byte_perm: byte n of the result is byte (s >> 4n) & 7 of {x, y} (x the low four).
FK_HD u32 fk_perm(u32 x, u32 y, u32 s) {
#if defined(__CUDACC__)
  return __byte_perm(x, y, s);
#else
  const u64 b = (u64)x | ((u64)y << 32);
  u32 r = 0;
  for (int n = 0; n < 4; ++n) r |= (u32)((b >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
  return r;
#endif
}

// Q4_K sub-blocks 2i and 2i + 1's scales and mins as the bytes (sc0, sc1, mn0, mn1), from the
// scale words a0..a2, without branches or byte indexing that depend on i: the streamed GEMV's
// lanes hold different i (SASS: fk_scale_min_k4 per unit branched per lane and loaded
// the 12 bytes as three words twice).
FK_HD u32 fk_q4k_scales(u32 a0, u32 a1, u32 a2, int i) {
  const u32 c = (u32)i & 1u;
  const u32 h = fk_perm(a0, a1, c ? 0x7632u : 0x5410u);  // a[2c], a[2c+1], a[2c+4], a[2c+5]
  const u32 l = fk_perm(a2, a2, c ? 0x3232u : 0x1010u);  // a[8+2c], a[9+2c], twice
  const u32 hi = (l & 0x00000f0fu) | ((l >> 4) & 0x0f0f0000u) | ((h >> 2) & 0x30303030u);
  return i < 2 ? h & 0x3f3f3f3fu : hi;
}

struct FkQ4K {
  // Unit i (of 4) = weights 64i..64i+64: low nibbles of qs[32i..32i+32], then high nibbles.
  static constexpr int UE = 64, G = 2, QK = 256;
  static constexpr bool OFF = true;
  // The head (d, dmin, the 12 scale bytes) is the block's first 16 bytes: one aligned load.
  static_assert(FK_Q4_K_D == 0 && FK_Q4_K_DMIN == 2 && FK_Q4_K_SCALES == 4 && FK_Q4_K_QS == 16 &&
                    FK_Q4_K_BYTES % 16 == 0,
                "Q4_K's head is one 16-byte word");
  // A unit's bytes in registers: the head words and the 32 code bytes.
  struct Raw {
    u32 h[4];
    u32 w[8];
  };
  // Unit `sub` (0-3) of the block at `p` (global memory, or SH the bulk ring's copy): the
  // block's head and the unit's 32 code bytes.
  template <bool SH, class I>
  FK_HD static void load_at(const u8* p, I sub, Raw& r) {
    fk_words_at<SH, 16, 16>(p, r.h);
    fk_words_at<SH, 32, 16>(p + FK_Q4_K_QS + 32 * sub, r.w);
  }
  FK_HD static void load(const FkMat& m, i64 row, i64 u, Raw& r) {
    load_at<false>(m.w + row * m.row_bytes + (u >> 2) * FK_Q4_K_BYTES, u & 3, r);
  }
#if defined(__CUDACC__)
  // From the bulk ring (FkQ4_0P::load_sh): no side entries; unit u of the span (its first unit
  // a block's first) in block u / 4.
  static constexpr int SH_UB = FK_Q4_K_BYTES / 4, SH_USB = 0, SH_UPS = 1;
  FK_HD static void load_sh(const u8* w, const u8*, int u, Raw& r) {
    load_at<true>(w + (u >> 2) * FK_Q4_K_BYTES, u & 3, r);
  }
#endif
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float* o) {
    Raw r;
    load(m, row, u, r);
    const float d = fk_half(r.h[0] & 0xffffu), dmin = fk_half(r.h[0] >> 16);
    const u32 sm = fk_q4k_scales(r.h[1], r.h[2], r.h[3], (int)(u & 3));
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      s[g] = d * fk_u2f((sm >> (8 * g)) & 0xffu);
      o[g] = -(dmin * fk_u2f((sm >> (8 * g + 16)) & 0xffu));
    }
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const u32 b = fk_byte(r.w, l);
      q[l] = fk_u2f(b & 15u);
      q[l + 32] = fk_u2f(b >> 4);
    }
  }
  // Against Q8_K activations (the CPU default path's): 64 codes xq, the block scale dx and the
  // codes' sums per 16 (s16[4]); the integer sums of ggml's vec_dot_q4_K_q8_K, then
  // dx * (d * sum sc * q.x - dmin * sum m * sum x).
  FK_HD static float dot_raw(const Raw& r, i64 u, const int* xq, float dx, const int* s16) {
    int lo = 0, hi = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      lo = fk_dp4a(r.w[j] & 0x0f0f0f0fu, xq[j], lo);
      hi = fk_dp4a_hi16(r.w[j], xq[j + 8], hi);
    }
    hi >>= 4;
    const u32 sm = fk_q4k_scales(r.h[1], r.h[2], r.h[3], (int)(u & 3));
    const int isum = lo * (int)(sm & 0xffu) + hi * (int)((sm >> 8) & 0xffu);
    const int imin = (int)((sm >> 16) & 0xffu) * (s16[0] + s16[1]) + (int)(sm >> 24) * (s16[2] + s16[3]);
    const float d = fk_half(r.h[0] & 0xffffu), dmin = fk_half(r.h[0] >> 16);
    return dx * (d * (float)isum - dmin * (float)imin);
  }
  FK_HD static float dot_q8k(const FkMat& m, i64 row, i64 u, const int* xq, float dx, const int* s16) {
    Raw r;
    load(m, row, u, r);
    return dot_raw(r, u, xq, dx, s16);
  }
};

struct FkQ5K {
  static constexpr int UE = 64, G = 2, QK = 256;
  static constexpr bool OFF = true;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float* o) {
    const u8* p = m.w + row * m.row_bytes + (u >> 2) * FK_Q5_K_BYTES;
    const int i = (int)(u & 3);
    u32 w[8], h[8];
    fk_words<32, fk_align_of(FK_Q5_K_BYTES, FK_Q5_K_QS)>(p + FK_Q5_K_QS + 32 * i, w);
    fk_words<32, fk_align_of(FK_Q5_K_BYTES, FK_Q5_K_QH)>(p + FK_Q5_K_QH, h);
    const float d = fk_half(fk_ld16(p + FK_Q5_K_D)), dmin = fk_half(fk_ld16(p + FK_Q5_K_DMIN));
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      u32 sc, mn;
      fk_scale_min_k4<FK_Q5_K_BYTES, FK_Q5_K_SCALES>(p, 2 * i + g, sc, mn);
      s[g] = d * fk_u2f(sc);
      o[g] = -(dmin * fk_u2f(mn));
    }
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const u32 b = fk_byte(w, l), hb = fk_byte(h, l);
      q[l] = fk_u2f((b & 15u) | (((hb >> (2 * i)) & 1u) << 4));
      q[l + 32] = fk_u2f((b >> 4) | (((hb >> (2 * i + 1)) & 1u) << 4));
    }
  }
};

// Q6_K, planar (layout.rs): a block's codes and 16 scale bytes in the row (208 bytes, whole
// 16-byte words), its d in the side entry. The codes lie in units of 32 weights (layout.rs,
// `q6k_units`): unit uu's low four bits in the 16 bytes at 16 uu (weight j in the low nibble of
// byte j, j + 16 in its high one), its high two bits in the 8 bytes at 128 + 8 uu (weight
// 16 w + 4 i + b at bit 2 i of byte b of word w), its two scales at 192 + 2 uu.
struct FkQ6KP {
  static constexpr int UE = 32, G = 2, QK = 256, SB = FK_Q6_KP_SB;
  static constexpr bool OFF = false;
  static_assert(FK_Q6_KP_BB % 16 == 0 && FK_Q6_KP_QL % 16 == 0 && FK_Q6_KP_QH % 16 == 0,
                "Q6_K's planar codes are 16-byte words");
  // A unit's bytes in registers (the streamed GEMV loads a batch of them before computing any):
  // its low and high code words, its two scale bytes and d's bits.
  struct Raw {
    u32 w[4];
    u32 h[2];
    u32 sc;
    u32 d;
  };
  // The block's offset (u / 8) BB is written as u BB / 8 less a multiple of u % 8, so that a
  // lane's units 32 apart (u % 8 the same) lie a constant offset apart and share one address.
  FK_HD static void load(const FkMat& m, i64 row, i64 u, Raw& r) {
    static_assert(FK_Q6_KP_BB % 8 == 0, "whole bytes a unit");
    const int uu = (int)(u & 7);
    const u8* p = m.w + row * m.row_bytes + u * (FK_Q6_KP_BB / 8) - uu * (FK_Q6_KP_BB / 8);
    fk_words<16, 16>(p + FK_Q6_KP_QL + 16 * uu, r.w);
    fk_words<8, 8>(p + FK_Q6_KP_QH + 8 * uu, r.h);
    r.sc = fk_ld16(p + FK_Q6_KP_SCALES + 2 * uu);
    r.d = fk_ld16(m.s + (row * m.groups) * SB + ((u - uu) >> 3) * SB + FK_Q6_KP_D);
  }
#if defined(__CUDACC__)
  // From the bulk ring (FkQ4_0P::load_sh): unit u of a span of whole blocks, its codes at `w`
  // (BB bytes a block), its block's d in the side entries at `s` (one a block).
  static constexpr int SH_UB = FK_Q6_KP_BB / 8, SH_USB = SB, SH_UPS = 8;
  FK_HD static void load_sh(const u8* w, const u8* s, int u, Raw& r) {
    const int uu = u & 7;
    const u8* p = w + (u >> 3) * FK_Q6_KP_BB;
    const uint4 q = *(const uint4*)(p + FK_Q6_KP_QL + 16 * uu);
    const uint2 h = *(const uint2*)(p + FK_Q6_KP_QH + 8 * uu);
    r.w[0] = q.x, r.w[1] = q.y, r.w[2] = q.z, r.w[3] = q.w;
    r.h[0] = h.x, r.h[1] = h.y;
    r.sc = *(const unsigned short*)(p + FK_Q6_KP_SCALES + 2 * uu);
    r.d = *(const unsigned short*)(s + (u >> 3) * SB + FK_Q6_KP_D);
  }
#endif
  // Weight j's high two bits (j < 32).
  FK_HD static u32 high(const Raw& r, int j) { return (r.h[j >> 4] >> (8 * (j & 3) + 2 * ((j >> 2) & 3))) & 3u; }
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    Raw r;
    load(m, row, u, r);
    const float d = fk_half(r.d);
#pragma unroll
    for (int g = 0; g < 2; ++g) s[g] = d * (float)(int)(signed char)((r.sc >> (8 * g)) & 0xffu);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const u32 b = fk_byte(r.w, j);
      q[j] = fk_u2f_off<32>((b & 15u) | (high(r, j) << 4));
      q[j + 16] = fk_u2f_off<32>((b >> 4) | (high(r, j + 16) << 4));
    }
  }
  // Against Q8_K activations: 32 codes xq, the block scale dx, the codes' sums per 16 (s16[2]);
  // per group of 16, sc * (sum q.x - 32 sum x) exactly, then dx * d * the total. Each word's
  // four 6-bit codes are assembled in place and dotted unsigned (dp4a.u32.s32): the first
  // group's low nibbles with their high bits shifted to bits 4-5; the second's high nibbles
  // shifted to bits 2-5 with their high bits at 6-7, four times the code, the sum shifted back
  // once (exact). About three instructions a word where separate dots of the low and high bits
  // took four, and 24 bytes a unit loaded where the file's order needed 64.
  FK_HD static float dot_raw(const Raw& r, i64, const int* xq, float dx, const int* s16) {
    int a = 0, b = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const u32 ha = i < 2 ? r.h[0] << (4 - 2 * i) : r.h[0] >> (2 * i - 4);
      const u32 ca = (r.w[i] & 0x0f0f0f0fu) | (ha & 0x30303030u);
      const u32 cb = ((r.w[i] >> 2) & 0x3c3c3c3cu) | ((r.h[1] << (6 - 2 * i)) & 0xc0c0c0c0u);
      a = fk_dp4a_u(ca, xq[i], a);
      b = fk_dp4a_u(cb, xq[i + 4], b);
    }
    const int isum = (int)(signed char)(r.sc & 0xffu) * (a - 32 * s16[0]) +
                     (int)(signed char)((r.sc >> 8) & 0xffu) * ((b >> 2) - 32 * s16[1]);
    return dx * (fk_half(r.d) * (float)isum);
  }
  FK_HD static float dot_q8k(const FkMat& m, i64 row, i64 u, const int* xq, float dx, const int* s16) {
    Raw r;
    load(m, row, u, r);
    return dot_raw(r, u, xq, dx, s16);
  }
};

struct FkIQ4XS {
  static constexpr int UE = 32, G = 1, QK = 256;
  static constexpr bool OFF = false;
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    const u8* p = m.w + row * m.row_bytes + (u >> 3) * FK_IQ4_XS_BYTES;
    const int ib = (int)(u & 7);
    u32 w[4];
    fk_words<16, fk_align_of(FK_IQ4_XS_BYTES, FK_IQ4_XS_QS)>(p + FK_IQ4_XS_QS + 16 * ib, w);
    const float d = fk_half(fk_ld16(p + FK_IQ4_XS_D));
    const u32 lo = (fk_ld8(p + FK_IQ4_XS_SCALES_L + ib / 2) >> (4 * (ib % 2))) & 0xfu;
    const u32 hi = (fk_ld16(p + FK_IQ4_XS_SCALES_H) >> (2 * ib)) & 3u;
    s[0] = d * (float)((int)(lo | (hi << 4)) - 32);
    fk_lut_codes<false>(w, q);
  }
};

// ---- plain floats: 8 per unit; A is the rows' alignment (16 when k * size % 16 == 0) ----
template <int T, int A>  // T: 0 f32, 1 f16, 2 bf16
struct FkFloat {
  static constexpr int UE = 8, G = 1, QK = 1;
  static constexpr bool OFF = false;
  static constexpr int SIZE = T == 0 ? 4 : 2;
  FK_HD static float cvt(u32 bits) {
    if constexpr (T == 0) return fk_bits_f(bits);
    else if constexpr (T == 1) return fk_half(bits);
    else return fk_bhalf(bits);
  }
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float*) {
    const u8* p = m.w + row * m.row_bytes + u * 8 * SIZE;
    u32 w[2 * SIZE];
    fk_words<8 * SIZE, A>(p, w);
    s[0] = 1.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) q[j] = cvt(SIZE == 4 ? w[j] : (w[j / 2] >> (16 * (j % 2))) & 0xffffu);
  }
  // Element e of the row (the tail past the last whole unit).
  FK_HD static float elem(const FkMat& m, i64 row, i64 e) {
    const u8* p = m.w + row * m.row_bytes + e * SIZE;
    if constexpr (SIZE == 4) {
      u32 w;
      fk_words<4, 4>(p, &w);
      return cvt(w);
    } else {
      return cvt(fk_ld16(p));
    }
  }
};

// ---- MLX affine: 32 weights of a group per unit ----
// Device layout (layout.rs, `to_device`): each row's codes as the file packs them, except that
// a 4-bit unit's 16 bytes hold weight j in the low nibble of byte j and weight j + 16 in its
// high nibble (Q4_0's order: the integer dot masks and shifts words, no byte permutes); then
// one 32-bit word per group, its scale's bits low and its bias's high (one load for both).
template <int BITS, int GROUP, bool BF>
struct FkMlx {
  // SB: a group's side entry, its (scale, bias) word (a staged window of codes finds its
  // groups' words in place: fk_window_mat).
  static constexpr int UE = 32, G = 1, QK = GROUP, SB = 4;
  static constexpr bool OFF = true;
  FK_HD static float bits_to_f(u32 h) { return BF ? fk_bhalf(h) : fk_half(h); }
  // The (scale, bias) word of unit u's group (u >= 0: a shift, not a signed division).
  FK_HD static u32 pair(const FkMat& m, i64 row, i64 u) {
    static_assert(GROUP % 32 == 0 && (GROUP & (GROUP - 1)) == 0, "groups of 32, 64, 128");
    constexpr int SH = GROUP == 32 ? 0 : GROUP == 64 ? 1 : 2;
    u32 w;
    fk_words<4, 4>(m.s + 4 * (row * m.groups + (i64)((u64)u >> SH)), &w);
    return w;
  }
  FK_HD static void unit(const FkMat& m, i64 row, i64 u, float* q, float* s, float* o) {
    // 32 weights span 4 * BITS bytes; a row spans k * BITS / 8, a multiple of 4 * BITS.
    u32 w[BITS + 1];
    fk_words<4 * BITS, fk_align_of(4 * BITS, 4 * BITS)>(m.w + row * m.row_bytes + u * 4 * BITS, w);
    w[BITS] = 0;
    const u32 sb = pair(m, row, u);
    s[0] = bits_to_f(sb & 0xffffu);
    o[0] = bits_to_f(sb >> 16);
    if constexpr (BITS == 4) {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const u32 b = fk_byte(w, j);
        q[j] = fk_u2f(b & 15u);
        q[j + 16] = fk_u2f(b >> 4);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 32; ++j) {  // the file's little-endian bit stream
        const int bit = j * BITS, wi = bit >> 5, sh = bit & 31;
        const u64 two = (u64)w[wi] | ((u64)w[wi + 1] << 32);
        q[j] = fk_u2f((u32)(two >> sh) & ((1u << BITS) - 1u));
      }
    }
  }
  // 4 and 8 bits against Q8_0 activations, as the CPU's default path runs them (mlx::q8): the
  // streamed GEMV's pipelined batches hold a unit's code words (16-byte aligned in every row)
  // and its group's (scale, bias) word.
  struct Raw {
    u32 w[BITS];
    u32 sb;
  };
  FK_HD static void load(const FkMat& m, i64 row, i64 u, Raw& r) {
    static_assert(BITS == 4 || BITS == 8, "the integer dot takes 4- and 8-bit codes");
    fk_words<4 * BITS, 16>(m.w + row * m.row_bytes + u * 4 * BITS, r.w);
    r.sb = pair(m, row, u);
  }
  // sum (s q + b) dx c = dx (s sum q c + b sum c): the codes' dot is exact in integers (sx is
  // the activation codes' sum); 8-bit codes are unsigned bytes (dp4a.u32.s32). (Converting the
  // sums with two adds instead of I2F measured the same: session 35 call b.)
  FK_HD static float dot_raw(const Raw& r, i64, const int* xq, float dx, int sx) {
    int a[2] = {0, 0};  // two chains of four (integer sums: exact in any order)
    if constexpr (BITS == 4) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[0] = fk_dp4a(r.w[i] & 0x0f0f0f0fu, xq[i], a[0]);
        a[1] = fk_dp4a_hi16(r.w[i], xq[i + 4], a[1]);
      }
      a[1] >>= 4;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) a[i & 1] = fk_dp4a_u(r.w[i], xq[i], a[i & 1]);
    }
    const int acc = a[0] + a[1];
    return dx * fmaf(bits_to_f(r.sb & 0xffffu), (float)acc, bits_to_f(r.sb >> 16) * (float)sx);
  }
  // The staged kernel's batches (a window of codes in shared memory).
  FK_HD static float dot_q8(const FkMat& m, i64 row, i64 u, const int* xq, float dx, int sx) {
    Raw r;
    load(m, row, u, r);
    return dot_raw(r, u, xq, dx, sx);
  }
};

// ---- the dot and the exact decode, shared by the kernels and the host test ----
struct FkF4 {
  float a, b, c, d;
};

// An activation held in memory the caller can read directly (the host test).
struct FkXArr {
  const float* x;
  FK_HD FkF4 ld4(int e) const { return FkF4{x[e], x[e + 1], x[e + 2], x[e + 3]}; }
};

// sum over the unit of (s q + o) x with the scale factored out of each group; `x.ld4(e)` gives
// the unit's activation elements e..e+4.
template <class F, class L>
FK_HD float fk_unit_dot(const float* q, const float* s, const float* o, const L& x) {
  constexpr int GE = F::UE / F::G;
  static_assert(GE % 4 == 0, "groups of whole float4s");
  float acc = 0.0f;
#pragma unroll
  for (int g = 0; g < F::G; ++g) {
    float t = 0.0f, xs = 0.0f;
#pragma unroll
    for (int e = 0; e < GE; e += 4) {
      const FkF4 v = x.ld4(g * GE + e);
      const float* w = q + g * GE + e;
      t += w[0] * v.a;
      t += w[1] * v.b;
      t += w[2] * v.c;
      t += w[3] * v.d;
      if constexpr (F::OFF) xs += (v.a + v.b) + (v.c + v.d);
    }
    acc += s[g] * t;
    if constexpr (F::OFF) acc += o[g] * xs;
  }
  return acc;
}

// The unit's weights as flexkern-quant's `dequantize` computes them: s * q (+ o), unfused.
template <class F>
FK_HD void fk_unit_decode(const float* q, const float* s, const float* o, float* y) {
  constexpr int GE = F::UE / F::G;
#pragma unroll
  for (int e = 0; e < F::UE; ++e) {
    const float v = fk_mul_rn(s[e / GE], q[e]);
    if constexpr (F::OFF) y[e] = fk_add_rn(v, o[e / GE]);
    else y[e] = v;
  }
}

// Whether F has a per-element tail (plain floats: any k).
template <class F> struct FkHasTail { static constexpr bool value = F::QK == 1; };
// Side-entry bytes of a planar unit type (0: the file's layout, no side array).
template <class F, class = void> struct FkSideBytes { static constexpr int value = 0; };
template <class F> struct FkSideBytes<F, decltype((void)F::SB)> { static constexpr int value = F::SB; };
// The FkMat of a copy at `win` of row `row`'s codes from block `blk` on (row 0, units counted
// from there): planar units still find their side entries in `m`.
template <class F>
FK_HD FkMat fk_window_mat(const u8* win, const FkMat& m, i64 row, i64 blk) {
  constexpr int SB = FkSideBytes<F>::value;
  return FkMat{win, SB > 0 ? m.s + (row * m.groups + blk) * SB : nullptr, 0, 0};
}
