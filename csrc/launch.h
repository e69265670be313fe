// One launch path for both ops (graph-capturable, on the current stream). On sm_90 and newer the
// split-K CTAs of an output row form a thread-block cluster (the kernels combine through
// distributed shared memory) and the launch is a programmatic dependent launch, so it overlaps the
// previous kernel's tail (the kernels wait for it before touching memory: kernel_prologue).
#pragma once
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace wb {

// Compute capability major of `device`, asked once per device.
inline int cc_major(int device) {
  static int cache[64] = {};
  if (device < 0 || device >= 64) return 0;
  if (cache[device] == 0) {
    int major = 0;
    const cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    TORCH_CHECK(err == cudaSuccess, std::string("cannot query the GPU's compute capability: ") +
                                        cudaGetErrorString(err));
    cache[device] = major;
  }
  return cache[device];
}

// WORKBENCH_PDL=0 in the environment turns programmatic dependent launch off (to measure what it
// buys); read once per process.
inline bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("WORKBENCH_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// `cluster` is the grid extent of one cluster (the split-K dimension); used on sm_90+ only.
template <typename Params>
void launch(const char* op, void (*kernel)(Params), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            int device, dim3 cluster, const Params& p) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2];
  if (cc_major(device) >= 9) {
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = cluster.x;
    attrs[0].val.clusterDim.y = cluster.y;
    attrs[0].val.clusterDim.z = cluster.z;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attrs;
    cfg.numAttrs = pdl_enabled() ? 2 : 1;
  }
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, p);
  if (err == cudaSuccess) err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, std::string(op) + ": launch failed: " + cudaGetErrorString(err));
}

}  // namespace wb
