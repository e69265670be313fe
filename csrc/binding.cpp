// The one binding file: the library's C ABI (abi.h) over the launcher the -D flags of the build
// pick. No torch and no Python headers: Python loads the library with ctypes
// (workbench/kernels/native.py), so nvcc alone builds a variant.
#include <cstring>
#include <exception>
#include <string>

#include "abi.h"
#include "checks.h"
#include "kernels/layout.h"

struct CUstream_st;  // cudaStream_t, without the CUDA headers in this host-only file

#if defined(WB_KERNEL_W13)
void w13_forward(const wb::Tensor& x, const wb::Tensor& weights, const wb::Tensor& meta,
                 const wb::Tensor& ids, const wb::Tensor& out, int64_t spin_cycles, CUstream_st* stream);
constexpr int kTensorArgs = 5;  // x, weights, meta, ids, out
#define WB_KERNEL_NAME "w13"
#elif defined(WB_KERNEL_W2)
void w2_forward(const wb::Tensor& inter, const wb::Tensor& weights, const wb::Tensor& meta,
                const wb::Tensor& ids, const wb::Tensor& rw, const wb::Tensor& out, int64_t spin_cycles,
                CUstream_st* stream);
constexpr int kTensorArgs = 6;  // inter, weights, meta, ids, rw, out
#define WB_KERNEL_NAME "w2"
#else
#error "define WB_KERNEL_W13 or WB_KERNEL_W2"
#endif

namespace {

int fail(int code, const std::string& msg, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) {
    const size_t n = msg.size() < err_len - 1 ? msg.size() : err_len - 1;
    std::memcpy(err, msg.data(), n);
    err[n] = '\0';
  }
  return code;
}

}  // namespace

extern "C" {

int wb_abi_version(void) { return WB_ABI_VERSION; }
const char* wb_kernel(void) { return WB_KERNEL_NAME; }
const char* wb_layout(void) { return wb::kLayoutName; }
const char* wb_reader(void) {
#ifdef WB_READER_COOP
  return "coop";
#else
  return "scalar";
#endif
}
int wb_calibration(void) { return wb::kCalibrationBuild ? 1 : 0; }

// forward(tensors in the op contract's order, spin_cycles, stream): checks every argument, then
// launches once on `stream`. Returns WB_OK, or WB_VALUE_ERROR / WB_RUNTIME_ERROR with the message
// in err (nothing launched on WB_VALUE_ERROR). `stream` is only used once every check passed.
int wb_forward(const wb_tensor* args, int nargs, int64_t spin_cycles, void* stream, char* err,
               size_t err_len) {
  try {
    if (args == nullptr || nargs != kTensorArgs)
      throw wb::ArgumentError(wb::cat(WB_KERNEL_NAME ": forward takes ", kTensorArgs,
                                      " tensors, got ", nargs));
    auto* s = static_cast<CUstream_st*>(stream);
#if defined(WB_KERNEL_W13)
    w13_forward(wb::Tensor(args[0]), wb::Tensor(args[1]), wb::Tensor(args[2]), wb::Tensor(args[3]),
                wb::Tensor(args[4]), spin_cycles, s);
#else
    w2_forward(wb::Tensor(args[0]), wb::Tensor(args[1]), wb::Tensor(args[2]), wb::Tensor(args[3]),
               wb::Tensor(args[4]), wb::Tensor(args[5]), spin_cycles, s);
#endif
    return WB_OK;
  } catch (const wb::ArgumentError& e) {
    return fail(WB_VALUE_ERROR, e.what(), err, err_len);
  } catch (const std::exception& e) {
    return fail(WB_RUNTIME_ERROR, e.what(), err, err_len);
  } catch (...) {
    return fail(WB_RUNTIME_ERROR, WB_KERNEL_NAME ": unknown C++ exception", err, err_len);
  }
}

}  // extern "C"
