// kernel_lab: times kernel source trees without torch (benchmarks/lab/README.md). Each tree's
// kernel is compiled once per layout and reader (variant.cu) under its own namespace and registers
// itself here; lab.cu builds the banks, checks outputs bit for bit and times CUDA-Graph replays.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace lab {

// One call's operands; a kernel reads the ones its op contract names (docs/DESIGN.md §4.1).
struct Args {
  const __half* x;  // W13: x [K]; W2: inter [top_k][K]
  const uint4* weights;
  const unsigned char* meta;
  const int* ids;
  const float* rw;               // W2 only
  __half* out;                   // W13: [top_k][N/2]; W2: [N]
  unsigned long long* slots;     // W13 only, when the kernel has them
  int K, N, experts, top_k;
};

struct Kernel {
  std::string tree, op, layout, reader;  // op: "w13" | "w2"
  void (*launch)(const Args&, cudaStream_t);
  const void* func;  // the __global__ function, for cudaFuncGetAttributes
  std::string name() const { return tree + ":" + op + ":" + layout + "-" + reader; }
};

inline std::vector<Kernel>& registry() {
  static std::vector<Kernel> r;
  return r;
}
inline bool add(const Kernel& k) {
  registry().push_back(k);
  return true;
}

// The workbench's launch (csrc/launch.h): a programmatic dependent launch when the binary is for
// sm_90 or newer (it then waits with griddepcontrol.wait; an older build must launch plainly).
template <typename Params>
void launch_pdl(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem, cudaStream_t st, const Params& p) {
  cudaFuncAttributes fa{};
  CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  if (fa.binaryVersion >= 90) {
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
}

// Sets p.slots where the kernel's params have them (trees may differ).
template <typename P>
auto set_slots(P& p, unsigned long long* s, int) -> decltype(p.slots = s, void()) {
  p.slots = s;
}
template <typename P>
void set_slots(P&, unsigned long long*, long) {}

}  // namespace lab
