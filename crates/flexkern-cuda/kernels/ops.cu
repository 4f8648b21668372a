// flexkern-cuda: the forward pass's small kernels, each the CPU's formula (backend/cpu/
// tensor_ops.rs) in the same operation order; products that the CPU rounds separately use
// __fmul_rn / __fadd_rn so nothing is fused into an FMA the CPU does not do. Each starts with
// FK_PDL_ENTER (they launch with programmatic dependent launch on Hopper).

// RMSNorm: one block of up to 1024 threads per row; the sum of squares in f64 as on the CPU.
// Decode normalizes one row, so the row's loads must all be in flight at once: unrolled, with
// 1024 threads (a 4096-wide row is four loads per thread; the loop as written took 14 us).
// Rows of up to FK_NORM_REG * 1024 elements stay in registers, and the weights (which never
// depend on the previous kernel) are loaded before its wait: the scaling pass then reads
// nothing (8B F16 step trace: 4.5 us a norm after the wait, two round trips after the sum).
constexpr int FK_NORM_REG = 8;
extern "C" __global__ void __launch_bounds__(1024) fk_rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                                               float* __restrict__ out, i64 rows, int d, float eps) {
  const bool held = d <= FK_NORM_REG * (int)blockDim.x;
  float wr[FK_NORM_REG];
#pragma unroll
  for (int c = 0; c < FK_NORM_REG; ++c) {
    const int i = threadIdx.x + c * (int)blockDim.x;
    wr[c] = held && i < d ? w[i] : 0.f;
  }
  FK_PDL_ENTER();
  __shared__ double part[32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * d;
    float xv[FK_NORM_REG];
    double ss = 0.0;
    if (held) {
#pragma unroll
      for (int c = 0; c < FK_NORM_REG; ++c) {
        const int i = threadIdx.x + c * (int)blockDim.x;
        xv[c] = i < d ? xr[i] : 0.f;
      }
      // The same order of sums as the loop below (the zeros past the row change nothing).
#pragma unroll
      for (int c = 0; c < FK_NORM_REG; ++c) ss += (double)xv[c] * (double)xv[c];
    } else {
#pragma unroll 8
      for (int i = threadIdx.x; i < d; i += blockDim.x) ss += (double)xr[i] * (double)xr[i];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
    __syncthreads();
    double tot = 0.0;
    for (int i = 0; i < (int)(blockDim.x >> 5); ++i) tot += part[i];
    const float scale = (float)(1.0 / sqrt(tot / (double)d + (double)eps));
    if (held) {
#pragma unroll
      for (int c = 0; c < FK_NORM_REG; ++c) {
        const int i = threadIdx.x + c * (int)blockDim.x;
        if (i < d) out[r * d + i] = __fmul_rn(__fmul_rn(xv[c], scale), wr[c]);
      }
    } else {
#pragma unroll 8
      for (int i = threadIdx.x; i < d; i += blockDim.x) out[r * d + i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
    }
    __syncthreads();  // `part` is rewritten by the next row
  }
}

// RoPE in place: one thread per (token, head, pair). Normal pairs (2i, 2i+1), NeoX (i, i+half);
// the rotation is kv_store.cuh's, which the fused KV write and QKV epilogue share.
extern "C" __global__ void fk_rope(float* __restrict__ x, const u32* __restrict__ pos, const float* __restrict__ inv_freq,
                                   i64 tokens, int heads, int head_dim, int half, int neox, float mscale) {
  FK_PDL_ENTER();
  const i64 total = tokens * heads * half;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    const i64 th = i / half;
    fk_rope_pair(x + th * head_dim, (int)(i % half), pos[th / heads], inv_freq, half, neox, mscale);
  }
}

// acc[i] += x[i].
extern "C" __global__ void fk_add(float* __restrict__ acc, const float* __restrict__ x, i64 len) {
  FK_PDL_ENTER();
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < len; i += (i64)gridDim.x * blockDim.x)
    acc[i] += x[i];
}

// x[r, :] += bias for the first rows rows.
extern "C" __global__ void fk_add_bias(float* __restrict__ x, const float* __restrict__ bias, i64 rows, int d) {
  FK_PDL_ENTER();
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < rows * d; i += (i64)gridDim.x * blockDim.x)
    x[i] += bias[i % d];
}

// out[i] = x[i] rounded to nearest even: to 1 f16, 2 bf16 (the prompt attention's Q).
extern "C" __global__ void fk_convert(const float* __restrict__ x, u16* __restrict__ out, i64 len, int to) {
  FK_PDL_ENTER();
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < len; i += (i64)gridDim.x * blockDim.x)
    out[i] = fk_to16(x[i], to);
}
