// floor_probe: what a launch configuration costs before any AWQ work, on this GPU.
//
// Times 48-node CUDA Graphs (one node per "call", as bench_kernels.py does) of a streaming kernel
// that has the shape of a decode kernel but none of its arithmetic: optional programmatic dependent
// launch (PDL) with griddepcontrol.wait before any global access, optional thread-block clusters
// with the two cluster barriers a split-K combine needs, one L2 load of a routed id that every
// weight address depends on (as in the real kernels), then `bytes` of 16-byte loads spread over all
// threads, folded into one word per CTA and written out (so nothing is optimised away).
// Rotating: 8 graphs, each call of each graph reads its own slice (8 x 48 x bytes >> L2), replayed
// round robin, so every replay streams from DRAM. Hot: every call reads the same slice.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o floor_probe benchmarks/floor_probe.cu
//   ./floor_probe                 # the built-in table of configurations (W2- and W13-sized)
//   ./floor_probe scatter         # contiguous slices vs 10 random experts of a 512-expert bank
//   ./floor_probe math            # the arithmetic mode (floor+math) on the kernels' grids and others
//   ./floor_probe sweep           # floor+math's structure varied: loads per round, double buffering,
//                                 # two CTAs per SM, no loads (results: h200_kernel_speed/floor_sweep_*)
//   ./floor_probe BYTES GRID BLOCK CLUSTER PDL CHAIN   # one configuration (CHAIN 2: scatter)
//
// Output: µs per call, hot and rotating, and the GB/s the rotating number implies. Not a kernel of
// the workbench: a yardstick for what the kernels' launch structure can reach at best.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.h"
#include "floor_kernel.cuh"

using floor_probe::Args;
using floor_probe::kChunks;
using floor_probe::probe;
using floor_probe::probe_body;

// `sweep`'s other variants of the arithmetic mode (floor_kernel.cuh, probe_body's kU and kFeed)
__global__ void __launch_bounds__(800) lab_u4(const Args a) { probe_body<true, 4, 0>(a); }
__global__ void __launch_bounds__(512, 2) lab_pipe2_lb2(const Args a) { probe_body<true, 2, 1>(a); }
__global__ void __launch_bounds__(800) lab_pipe4(const Args a) { probe_body<true, 4, 1>(a); }
__global__ void __launch_bounds__(800) lab_only(const Args a) { probe_body<true, 8, 2>(a); }

using Kernel = void (*)(const Args);

static double time_config(Kernel kernel, long long bytes, int grid, int block, int cluster, int pdl, int chain,
                          long long math16, bool hot, const uint4* buf, const int* ids, unsigned* out,
                          cudaStream_t st) {
  const int calls = 48, graphs = hot ? 1 : 8;
  std::vector<cudaGraphExec_t> execs;
  // Scatter mode: the experts of every (graph, call), drawn before capture (no allocation inside).
  long long* d_offs = nullptr;
  if (chain == 2) {
    const long long chunk16 = bytes / 16 / kChunks;
    std::vector<long long> offs;
    for (int g = 0; g < graphs; ++g)
      for (int c = 0; c < calls; ++c) {
        unsigned seed = hot ? 12345u : 12345u + 977u * g + 131u * c;
        std::vector<int> picked;
        while (static_cast<int>(picked.size()) < kChunks) {
          seed = seed * 1664525u + 1013904223u;
          const int e = static_cast<int>((seed >> 8) % 512);
          if (std::find(picked.begin(), picked.end(), e) == picked.end()) picked.push_back(e);
        }
        for (int i = 0; i < kChunks; ++i) offs.push_back(picked[i] * chunk16);
      }
    CUDA_CHECK(cudaMalloc(&d_offs, offs.size() * sizeof(long long)));
    CUDA_CHECK(cudaMemcpy(d_offs, offs.data(), offs.size() * sizeof(long long), cudaMemcpyHostToDevice));
  }
  for (int g = 0; g < graphs; ++g) {
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int c = 0; c < calls; ++c) {
      Args a{};
      a.src = buf + (hot ? 0 : static_cast<long long>(g * calls + c) * (bytes / 16));
      a.chunk16 = static_cast<int>(bytes / 16 / kChunks);
      a.chunk_off = nullptr;
      if (chain == 2) {  // call c reads 10 distinct random experts of layer c's bank of 512
        a.src = buf + (hot ? 0 : c * 512LL * a.chunk16);
        a.chunk_off = d_offs + (static_cast<long long>(g) * calls + c) * kChunks;
      }
      a.ids = ids;
      a.out = out;
      a.n16 = bytes / 16;
      a.chain = chain;
      a.cluster = cluster;
      a.math16 = math16;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(grid);
      cfg.blockDim = dim3(block);
      cfg.stream = st;
      cudaLaunchAttribute at[2];
      int n = 0;
      at[n].id = cudaLaunchAttributeClusterDimension;
      at[n].val.clusterDim.x = cluster;
      at[n].val.clusterDim.y = 1;
      at[n].val.clusterDim.z = 1;
      ++n;
      if (pdl) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n].val.programmaticStreamSerializationAllowed = 1;
        ++n;
      }
      cfg.attrs = at;
      cfg.numAttrs = n;
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a));
    }
    cudaGraph_t gr;
    CUDA_CHECK(cudaStreamEndCapture(st, &gr));
    cudaGraphExec_t ex;
    CUDA_CHECK(cudaGraphInstantiate(&ex, gr, 0));
    CUDA_CHECK(cudaGraphDestroy(gr));
    execs.push_back(ex);
  }
  for (int w = 0; w < 3 * graphs; ++w) CUDA_CHECK(cudaGraphLaunch(execs[w % graphs], st));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 9; ++r) {  // median of 9 samples of 8*graphs replays
    CUDA_CHECK(cudaEventRecord(e0, st));
    for (int k = 0; k < 8 * graphs; ++k) CUDA_CHECK(cudaGraphLaunch(execs[k % graphs], st));
    CUDA_CHECK(cudaEventRecord(e1, st));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float m;
    CUDA_CHECK(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m / (8 * graphs));
  }
  std::sort(ms.begin(), ms.end());
  for (auto ex : execs) CUDA_CHECK(cudaGraphExecDestroy(ex));
  if (d_offs) CUDA_CHECK(cudaFree(d_offs));
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  return ms[ms.size() / 2] * 1000.0 / calls;  // µs per call
}

int main(int argc, char** argv) {
  struct Cfg {
    std::string name;
    long long bytes;
    int grid, block, cluster, pdl, chain;
    long long math16 = 0;  // > 0: probe_math over this many leading weight words
    Kernel kernel = nullptr;  // null: probe, or probe_math when math16 > 0
  };
  std::vector<Cfg> cfgs;
  const long long w2 = 2430000, w13 = 4860000;
  // the arithmetic mode's sizes: the bytes rounded up to whole 512-byte rows (its loop is
  // warp-uniform), and the weight words that go through dot_group (top_k x groups x columns)
  const long long w13m = (w13 + 511) / 512 * 512, w2m = (w2 + 511) / 512 * 512;
  const long long w13w = 10LL * 80 * 320, w2w = 10LL * 5 * 2560;
  if (argc == 7) {
    cfgs.push_back({"cli", atoll(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6])});
  } else if (argc == 2 && std::string(argv[1]) == "scatter") {
    // contiguous slices vs 10 random experts of a 512-expert bank per call (chain 2), same bytes
    cfgs.push_back({"w2-contig", w2, 80, 640, 1, 1, 1});
    cfgs.push_back({"w2-scatter", w2, 80, 640, 1, 1, 2});
    cfgs.push_back({"w2-contig", w2, 132, 512, 1, 1, 1});
    cfgs.push_back({"w2-scatter", w2, 132, 512, 1, 1, 2});
    cfgs.push_back({"w13-contig", w13, 100, 512, 1, 1, 1});
    cfgs.push_back({"w13-scatter", w13, 100, 512, 1, 1, 2});
    cfgs.push_back({"w13-contig", w13, 300, 256, 1, 1, 1});
    cfgs.push_back({"w13-scatter", w13, 300, 256, 1, 1, 2});
  } else if (argc == 2 && std::string(argv[1]) == "math") {
    // floor+math: the call's bytes rounded up to whole 512-byte rows (the arithmetic mode's loop is
    // warp-uniform), the weight words through dot_group; beside the plain probe on the same grids.
    // The kernels' own grids: W13 100 CTAs x 512 threads, W2 80 CTAs x 800 (and 80 x 640).
    for (int g : {100, 132}) {
      cfgs.push_back({"w13-bytes", w13m, g, 512, 1, 1, 1, 0});
      cfgs.push_back({"w13-math", w13m, g, 512, 1, 1, 1, w13w});
    }
    cfgs.push_back({"w13-math", w13m, 300, 256, 1, 1, 1, w13w});
    for (auto [g, b] : {std::pair{80, 800}, std::pair{80, 640}, std::pair{132, 512}}) {
      cfgs.push_back({"w2-bytes", w2m, g, b, 1, 1, 1, 0});
      cfgs.push_back({"w2-math", w2m, g, b, 1, 1, 1, w2w});
    }
    cfgs.push_back({"w2-math", w2m, 300, 256, 1, 1, 1, w2w});
  } else if (argc == 2 && std::string(argv[1]) == "sweep") {
    // floor+math's structure varied: loads per round, register double buffering, two CTAs per SM,
    // and the arithmetic with no loads at all (benchmarks/results/h200_kernel_speed/floor_sweep_*)
    struct K {
      const char* name;
      Kernel k;
      std::vector<std::pair<int, int>> shapes;
    };
    const std::vector<std::pair<int, int>> one = {{132, 512}, {100, 512}, {80, 800}};
    const std::vector<std::pair<int, int>> two = {{132, 512}, {264, 512}, {264, 256}, {100, 512}};
    const std::vector<K> ks = {
        {"bytes", probe, one},       {"math-u8", floor_probe::probe_math, one},
        {"math-u4", lab_u4, one},    {"math-u4-2cta", floor_probe::probe_math4, two},
        {"math-u2-2cta", floor_probe::probe_math2, two}, {"pipe-u2-2cta", lab_pipe2_lb2, two},
        {"pipe-u4", lab_pipe4, one}, {"only-u8", lab_only, one},
        {"only-u2-2cta", floor_probe::probe_arith, two},
    };
    for (const auto& k : ks) {
      cudaFuncAttributes fa;
      CUDA_CHECK(cudaFuncGetAttributes(&fa, k.k));
      std::printf("# %-14s %3d registers, %zu bytes local\n", k.name, fa.numRegs, fa.localSizeBytes);
      for (auto [g, b] : k.shapes) {
        if (b > fa.maxThreadsPerBlock) continue;
        cfgs.push_back({std::string("w13 ") + k.name, w13m, g, b, 1, 1, 1, k.k == probe ? 0 : w13w, k.k});
        cfgs.push_back({std::string("w2 ") + k.name, w2m, g, b, 1, 1, 1, k.k == probe ? 0 : w2w, k.k});
      }
    }
  } else {
    for (long long b : {0LL, w2}) {
      const char* t = b ? "w2-bytes" : "null";
      cfgs.push_back({t, b, 400, 128, 5, 1, 1});   // current W2: 80 tiles x 5 splits, clusters of 5
      cfgs.push_back({t, b, 400, 128, 5, 0, 1});
      cfgs.push_back({t, b, 400, 128, 1, 1, 1});
      cfgs.push_back({t, b, 160, 320, 2, 1, 1});
      cfgs.push_back({t, b, 160, 320, 1, 1, 1});
      cfgs.push_back({t, b, 80, 320, 1, 1, 1});
      cfgs.push_back({t, b, 80, 640, 1, 1, 1});
      cfgs.push_back({t, b, 80, 1024, 1, 1, 1});
      cfgs.push_back({t, b, 132, 512, 1, 1, 1});
      cfgs.push_back({t, b, 132, 1024, 1, 1, 1});
      cfgs.push_back({t, b, 264, 512, 1, 1, 1});
      cfgs.push_back({t, b, 80, 640, 1, 1, 0});
      cfgs.push_back({t, b, 80, 640, 1, 0, 1});
      cfgs.push_back({t, b, 1, 32, 1, 1, 0});
      cfgs.push_back({t, b, 1, 32, 1, 0, 0});
    }
    for (long long b : {0LL, w13}) {
      const char* t = b ? "w13-bytes" : "null";
      cfgs.push_back({t, b, 300, 256, 6, 1, 1});   // current W13: 5 tiles x 10 slots x 6 splits
      cfgs.push_back({t, b, 300, 256, 1, 1, 1});
      cfgs.push_back({t, b, 200, 256, 4, 1, 1});
      cfgs.push_back({t, b, 200, 512, 4, 1, 1});
      cfgs.push_back({t, b, 100, 512, 2, 1, 1});
      cfgs.push_back({t, b, 400, 256, 8, 1, 1});
      cfgs.push_back({t, b, 400, 128, 8, 1, 1});
      cfgs.push_back({t, b, 132, 1024, 1, 1, 1});
      cfgs.push_back({t, b, 264, 512, 1, 1, 1});
      cfgs.push_back({t, b, 528, 256, 1, 1, 1});
    }
  }
  long long maxb = 0, maxscatter = 0;
  for (auto& c : cfgs) {
    maxb = c.bytes > maxb ? c.bytes : maxb;
    if (c.chain == 2) maxscatter = c.bytes > maxscatter ? c.bytes : maxscatter;
  }
  const long long total = std::max(8LL * 48 * (maxb + 4096), 48LL * 512 * (maxscatter / kChunks + 16)) + 4096;
  uint4* buf;
  CUDA_CHECK(cudaMalloc(&buf, total));
  CUDA_CHECK(cudaMemset(buf, 0x5a, total));
  int* ids;
  CUDA_CHECK(cudaMalloc(&ids, 64 * sizeof(int)));
  CUDA_CHECK(cudaMemset(ids, 0, 64 * sizeof(int)));
  unsigned* out;
  CUDA_CHECK(cudaMalloc(&out, 4096 * sizeof(unsigned)));
  CUDA_CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; 48-call graphs; us per call (median of 9)\n", prop.name, prop.multiProcessorCount);
  std::printf("%-18s %9s %5s %5s %7s %3s %5s %8s %8s %8s\n", "what", "bytes", "grid", "block", "cluster", "pdl",
              "chain", "hot", "rotating", "GB/s");
  for (auto& c : cfgs) {
    const Kernel k = c.kernel ? c.kernel : c.math16 > 0 ? floor_probe::probe_math : probe;
    const double h = time_config(k, c.bytes, c.grid, c.block, c.cluster, c.pdl, c.chain, c.math16, true, buf, ids, out, st);
    const double r = time_config(k, c.bytes, c.grid, c.block, c.cluster, c.pdl, c.chain, c.math16, false, buf, ids, out, st);
    std::printf("%-18s %9lld %5d %5d %7d %3d %5d %8.3f %8.3f %8.0f\n", c.name.c_str(), c.bytes, c.grid, c.block, c.cluster,
                c.pdl, c.chain, h, r, c.bytes / (r * 1e3));
    std::fflush(stdout);
  }
  return 0;
}
