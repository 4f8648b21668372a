// Does where a quantized row's scales lie change how fast a decode GEMV can stream it? A study
// for issue 14, outside flexkern. Every warp owns consecutive rows of 4-bit codes (16 bytes a
// 32-weight unit, a lane's units 32 apart, as the streamed GEMV reads them) and each unit's
// side entry: Q4_0's 2-byte d, or MLX's 4-byte (scale, bias) word per 32 weights (group 32) or
// per 64 (group 64, two lanes reading one word). Layouts of the side entries:
//   planar: every row's codes, then every row's side entries (flexkern's planar upload);
//   row:    each row's codes, then its own side entries (rows padded to 16 bytes).
// The kernel only loads and folds the bytes (no dot), two rows' units in flight a lane, the
// grid two blocks of eight warps an SM; enough copies of the matrix are cycled to miss L2.
// Rated against the weight bytes and a device-to-device copy (read + write).
// Build and run (device): nvcc -O3 -std=c++17 -arch=sm_90a -o ss side_stream.cu && ./ss
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>

#include "micro.cuh"

constexpr int NW = 8, SUN = 4;  // warps a block; units a lane per row (k 4096)

struct Mat {
  const unsigned char* codes;  // row r's codes at codes + r * stride
  const unsigned char* side;   // row r's side entries at side + r * side_stride
  long stride, side_stride;
};

// SB bytes a side entry, one per (1 << SH) units.
template <int SB, int SH>
__global__ void __launch_bounds__(NW * 32, 2) k_stream(Mat m, int n, unsigned* out) {
  const int lane = threadIdx.x & 31;
  const long warps = (long)gridDim.x * NW, gw = (long)blockIdx.x * NW + (threadIdx.x >> 5);
  const long r0 = gw * n / warps, r1 = (gw + 1) * n / warps;
  unsigned acc = 0;
  for (long r = r0; r < r1; r += 2) {
    uint4 c[2][SUN];
    unsigned s[2][SUN];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long row = r + h < r1 ? r + h : r;
#pragma unroll
      for (int j = 0; j < SUN; ++j) {
        const int u = lane + 32 * j;
        c[h][j] = __ldg((const uint4*)(m.codes + row * m.stride) + u);
        const unsigned char* sp = m.side + row * m.side_stride + (long)(u >> SH) * SB;
        s[h][j] = SB == 2 ? (unsigned)__ldg((const unsigned short*)sp) : __ldg((const unsigned*)sp);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < SUN; ++j) acc ^= c[h][j].x ^ c[h][j].y ^ c[h][j].z ^ c[h][j].w ^ s[h][j];
  }
  if (acc == 0x12345678u) out[0] = acc;  // keeps the loads
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int grid = prop.multiProcessorCount * 2;
  unsigned* out;
  CK(cudaMalloc(&out, 4));
  auto time = [&](auto launch, int reps) { return median_ms_on(0, launch, reps); };
  const double copy_gbs = ::copy_gbs(0);
  printf("%s, %d SMs; copy %.0f GB/s (read + write)\n", prop.name, prop.multiProcessorCount, copy_gbs);
  const int k = 4096, units = k / 32;
  for (int n : {14336, 4096}) {
    struct Way {
      const char* name;
      int sb, sh;
      bool row;
    };
    const Way ways[] = {{"q4_0 d, planar", 2, 0, false},  {"q4_0 d, row", 2, 0, true},
                        {"mlx g32, planar", 4, 0, false}, {"mlx g32, row", 4, 0, true},
                        {"mlx g64, planar", 4, 1, false}, {"mlx g64, row", 4, 1, true}};
    for (int round = 0; round < 2; ++round)
      for (const Way& w : ways) {
        const long code_row = units * 16, side_row = (long)(units >> w.sh) * w.sb;
        const long useful = (long)n * (code_row + side_row);
        const long stride = w.row ? (code_row + side_row + 15) / 16 * 16 : code_row;
        const long mat_bytes = w.row ? (long)n * stride : useful;
        const int copies = (int)std::max(2L, (400L << 20) / mat_bytes);
        std::vector<Mat> mats;
        std::vector<void*> bufs;
        for (int c = 0; c < copies; ++c) {
          unsigned char* b;
          CK(cudaMalloc(&b, mat_bytes + 256));
          CK(cudaMemset(b, c + 1, mat_bytes + 256));
          bufs.push_back(b);
          mats.push_back(w.row ? Mat{b, b + code_row, stride, stride}
                               : Mat{b, b + (long)n * code_row, code_row, side_row});
        }
        auto launch = [&] {
          for (const Mat& m : mats) {
            if (w.sb == 2) k_stream<2, 0><<<grid, NW * 32>>>(m, n, out);
            else if (w.sh == 0) k_stream<4, 0><<<grid, NW * 32>>>(m, n, out);
            else k_stream<4, 1><<<grid, NW * 32>>>(m, n, out);
          }
        };
        const float ms = time(launch, 9) / copies;
        printf("n %5d round %d %-16s %7.2f us  %5.1f %% of copy\n", n, round, w.name, ms * 1e3,
               100.0 * useful / (ms * 1e6) / copy_gbs);
        for (void* b : bufs) CK(cudaFree(b));
      }
  }
  CK(cudaGetLastError());
  return 0;
}
