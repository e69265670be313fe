// The kernels' own metadata readers (csrc/kernels/awq_meta.cuh, unmodified) run on the host, so that
// tests/test_coop_model.py can hold them to the NumPy model lane by lane. 32 std::threads stand for
// the lanes of one warp; the few warp intrinsics the readers use are emulated below (a shuffle is a
// store, a barrier, a load, a barrier). Built with g++ against the CUDA include folder (cuda_fp16.h
// has host half arithmetic) with one -DWB_LAYOUT_* and one -DWB_READER_*; __CUDA_ARCH__ is set to
// 900 while the header is read, so only the sm_80+ code paths are compiled (none of the
// sm_70/75 paths is exercised here).
//
// Usage: warp_host META_FILE LO HI ...   reads the metadata bytes, and for every pair of byte
// offsets (LO, HI) of two 16-record half tiles prints one line per lane:
//   rec LANE RECORD Q0 Q1 Q2 Q3     read_meta2(LO, HI, lane) and the four records quad_meta hands on
// then, once, `acc LANE MB I` for acc_of_lane's choice of accumulator.
#include <cuda_fp16.h>
#include <vector_types.h>

#include <barrier>
#include <math.h>  // ::fmaf, which the kernels call as device code does
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#undef __device__
#undef __host__
#undef __global__
#undef __forceinline__
#define __device__
#define __host__
#define __global__
#define __forceinline__ inline

namespace emu {
constexpr int kWarp = 32;
thread_local int lane_id = 0;
std::barrier<>* sync_point = nullptr;
unsigned slots[kWarp];
}  // namespace emu

thread_local uint3 threadIdx = {0, 0, 0};
uint3 blockDim = {32, 1, 1};

template <class T>
T __ldg(const T* p) { return *p; }
inline unsigned __shfl_sync(unsigned, unsigned v, int src) {
  emu::slots[emu::lane_id] = v;
  emu::sync_point->arrive_and_wait();
  const unsigned r = emu::slots[src & (emu::kWarp - 1)];  // the source lane modulo the warp, as CUDA
  emu::sync_point->arrive_and_wait();
  return r;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>(((static_cast<unsigned long long>(hi) << 32) | lo) >> (shift & 31));
}
inline void __syncthreads() { emu::sync_point->arrive_and_wait(); }
// Declared so that the header compiles; the functions that use them are not run here.
[[noreturn]] inline __half2 __hfma2(__half2, __half2, __half2) { std::abort(); }
[[noreturn]] inline long long clock64() { std::abort(); }

#define __CUDA_ARCH__ 900
#include "awq_meta.cuh"
#undef __CUDA_ARCH__

int main(int argc, char** argv) {
  if (argc < 4 || argc % 2) {
    std::fprintf(stderr, "usage: %s META_FILE LO HI [LO HI ...]\n", argv[0]);
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  const std::vector<unsigned char> meta((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (int a = 2; a + 1 < argc; a += 2) {
    const long lo = std::atol(argv[a]), hi = std::atol(argv[a + 1]);
    unsigned rec[emu::kWarp], quad[emu::kWarp][4];
    std::barrier<> bar(emu::kWarp);
    emu::sync_point = &bar;
    std::vector<std::thread> lanes;
    for (int l = 0; l < emu::kWarp; ++l)
      lanes.emplace_back([&, l] {
        emu::lane_id = l;
        threadIdx.x = l;
        rec[l] = wb::read_meta2(meta.data() + lo, meta.data() + hi, l);
        const wb::QuadMeta q = wb::quad_meta(rec[l], l);
        for (int c = 0; c < 4; ++c) quad[l][c] = q.r[c];
      });
    for (auto& t : lanes) t.join();
    for (int l = 0; l < emu::kWarp; ++l)
      std::printf("rec %d %u %u %u %u %u\n", l, rec[l], quad[l][0], quad[l][1], quad[l][2], quad[l][3]);
  }
  wb::Acc acc{};
  for (int mb = 0; mb < 2; ++mb)
    for (int i = 0; i < 4; ++i) acc.d[mb][i] = static_cast<float>(10 * mb + i);  // marks the slot
  for (int l = 0; l < emu::kWarp; ++l) {
    const int slot = static_cast<int>(wb::acc_of_lane(acc, l));
    std::printf("acc %d %d %d\n", l, slot / 10, slot % 10);
  }
  return 0;
}
