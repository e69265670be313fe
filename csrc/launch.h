// One launch path for both ops (graph-capturable, on the current stream). On sm_90 and newer every
// launch is a programmatic dependent launch, so it overlaps the previous kernel's tail (the kernels
// wait for it before touching memory: kernel_prologue).
#pragma once
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "checks.h"

namespace wb {

inline void cuda_ok(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw CudaError(what + cudaGetErrorString(err));
}

// Makes `device` current for one launch and restores the caller's (what c10's CUDAGuard did).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cuda_ok(cudaGetDevice(&prev_), "cannot query the current GPU: ");
    if (prev_ != device) cuda_ok(cudaSetDevice(device), "cannot select GPU " + std::to_string(device) + ": ");
  }
  ~DeviceGuard() {
    int now = prev_;
    if (cudaGetDevice(&now) == cudaSuccess && now != prev_) (void)cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

// Compute capability major of `device`, asked once per device.
inline int cc_major(int device) {
  static int cache[64] = {};
  if (device < 0 || device >= 64) return 0;
  if (cache[device] == 0) {
    int major = 0;
    cuda_ok(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
            "cannot query the GPU's compute capability: ");
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
  cuda_ok(err, std::string(op) + ": launch failed: ");
}

}  // namespace wb
