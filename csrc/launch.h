// One launch path for both ops (graph-capturable, on the current stream). On sm_90 and newer every
// launch is a programmatic dependent launch, so it overlaps the previous kernel's tail (the kernels
// wait for it before touching memory: kernel_prologue).
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

template <typename Params>
void launch(const char* op, void (*kernel)(Params), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            int device, const Params& p) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  // PDL needs the kernel's griddepcontrol.wait, which only an sm_90+ binary has: a build for an
  // older arch running on a newer GPU must launch without it (its next kernel would not wait).
  static const int binary = [&] {
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, kernel) == cudaSuccess) return a.binaryVersion;
    (void)cudaGetLastError();  // not sticky: clear it so the launch check below does not see it
    return 0;
  }();
  cudaLaunchAttribute attr;
  if (cc_major(device) >= 9 && binary >= 90 && pdl_enabled()) {
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, p);
  if (err == cudaSuccess) err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, std::string(op) + ": launch failed: " + cudaGetErrorString(err));
}

}  // namespace wb
