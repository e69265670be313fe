// Argument checks shared by the launchers: every failure names the op, the argument and the bad
// value, and raises ValueError in Python before anything reaches the GPU. Torch-free: a tensor
// argument is a wb_tensor (abi.h) seen through wb::Tensor, which answers what at::Tensor did.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "abi.h"

namespace wb {

// A refused argument (ValueError in Python) and a failed CUDA call (RuntimeError): binding.cpp
// turns them into WB_VALUE_ERROR / WB_RUNTIME_ERROR at the C boundary.
struct ArgumentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The dtypes the ops take, named as torch names them in its messages.
enum class Dtype : int32_t { Other = WB_DTYPE_OTHER, Byte = WB_DTYPE_UINT8, Int = WB_DTYPE_INT32,
                             Half = WB_DTYPE_FLOAT16, Float = WB_DTYPE_FLOAT32 };
constexpr Dtype kByte = Dtype::Byte, kInt = Dtype::Int, kHalf = Dtype::Half, kFloat = Dtype::Float;

inline const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::Byte: return "Byte";
    case Dtype::Int: return "Int";
    case Dtype::Half: return "Half";
    case Dtype::Float: return "Float";
    default: return "another dtype";
  }
}

struct Sizes {  // a tensor's sizes or strides: what dims_str prints
  const int64_t* v;
  int32_t n;
};

// "[2, 64, 4]"
inline std::string dims_str(Sizes d) {
  std::string s = "[";
  for (int32_t i = 0; i < d.n; ++i) s += (i ? ", " : "") + std::to_string(d.v[i]);
  return s + "]";
}

struct Device {  // torch's device of a tensor: "cpu", "cuda:1"
  int32_t kind, index;
  const char* type;
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  std::string str() const {
    return std::string(type ? type : "?") + (index >= 0 ? ":" + std::to_string(index) : "");
  }
};

inline std::string to_s(const char* v) { return v; }
inline std::string to_s(const std::string& v) { return v; }
inline std::string to_s(Dtype v) { return dtype_name(v); }
inline std::string to_s(const Device& v) { return v.str(); }
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline std::string to_s(T v) {
  return std::to_string(v);
}
template <typename... A>
inline std::string cat(const A&... a) {
  std::string s;
  ((s += to_s(a)), ...);
  return s;
}

#define WB_CHECK(cond, op, ...) \
  do {                          \
    if (!(cond)) throw ::wb::ArgumentError(::wb::cat(op, ": ", __VA_ARGS__)); \
  } while (0)

// A read-only view of one tensor argument with the few at::Tensor methods the launchers use.
class Tensor {
 public:
  explicit Tensor(const wb_tensor& t) : t_(t) {}
  int64_t dim() const { return t_.dim; }
  int64_t size(int64_t d) const {
    if (d < 0 || d >= t_.dim) throw ArgumentError(cat("dimension ", d, " of a ", t_.dim, "-D tensor"));
    return t_.sizes[d];
  }
  Sizes sizes() const { return {t_.sizes, t_.dim}; }
  Sizes strides() const { return {t_.strides, t_.dim}; }
  int64_t numel() const {
    int64_t n = 1;
    for (int32_t i = 0; i < t_.dim; ++i) n *= t_.sizes[i];
    return n;
  }
  bool is_contiguous() const { return t_.contiguous != 0; }
  bool is_cuda() const { return t_.device == WB_DEVICE_CUDA; }
  Device device() const { return {t_.device, t_.device_index, t_.device_type}; }
  int get_device() const { return t_.device_index; }
  Dtype scalar_type() const { return static_cast<Dtype>(t_.dtype); }
  const char* scalar_type_name() const { return t_.dtype_name ? t_.dtype_name : "?"; }
  void* data_ptr() const { return t_.data; }
  template <typename T>
  T* data_ptr() const { return static_cast<T*>(t_.data); }

 private:
  const wb_tensor& t_;
};

inline void check_dtype(const char* op, const char* name, const Tensor& t, Dtype want) {
  WB_CHECK(t.scalar_type() == want, op, "argument '", name, "' must be ", want, ", got ",
           t.scalar_type_name());
}

inline void check_dim(const char* op, const char* name, const Tensor& t, int64_t want) {
  WB_CHECK(t.dim() == want, op, "argument '", name, "' must have ", want, " dimensions, got ",
           t.dim(), " (shape ", dims_str(t.sizes()), ")");
}

inline void check_size(const char* op, const char* name, const Tensor& t, int64_t d, int64_t want,
                       const char* what) {
  WB_CHECK(t.size(d) == want, op, "argument '", name, "' has size ", t.size(d), " in dimension ", d,
           ", expected ", want, " (", what, "); shape ", dims_str(t.sizes()));
}

inline void check_contiguous(const char* op, const char* name, const Tensor& t) {
  WB_CHECK(t.is_contiguous(), op, "argument '", name, "' must be contiguous, got strides ",
           dims_str(t.strides()));
}

inline void check_aligned(const char* op, const char* name, const Tensor& t, int64_t bytes) {
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  WB_CHECK(addr % bytes == 0, op, "argument '", name, "' must start ", bytes,
           "-byte aligned, got address offset ", addr % bytes, " (mod ", bytes, ")");
}

inline void check_cuda(const char* op, const char* name, const Tensor& t, const Tensor& ref) {
  WB_CHECK(t.is_cuda(), op, "argument '", name, "' must be a CUDA tensor, got device ", t.device());
  WB_CHECK(t.device() == ref.device(), op, "argument '", name, "' is on ", t.device(),
           " but the weights are on ", ref.device());
}

inline void check_numel_at_least(const char* op, const char* name, const Tensor& t, int64_t want,
                                 const char* what) {
  WB_CHECK(t.numel() >= want, op, "argument '", name, "' has ", t.numel(), " elements, needs at least ",
           want, " (", what, ")");
}

// The kernels index K, N and the activations in 32-bit arithmetic: at most 2^21 groups
// (K <= 67,108,864; W2's top_k * K / 8 then stays below 2^31) and 2^24 columns. Real models are
// far inside (workbench/data/shapes.py caps hidden and inter at 65,536).
constexpr int64_t kMaxGroups = int64_t{1} << 21;
constexpr int64_t kMaxColumns = int64_t{1} << 24;

// weights [E][K/32][N][4] int32 and meta [E][K/32][N*R] uint8 must describe the same bank.
inline void check_bank(const char* op, const Tensor& weights, const Tensor& meta,
                       int64_t record_bytes, const char* layout) {
  check_dtype(op, "weights", weights, kInt);
  check_dim(op, "weights", weights, 4);
  check_size(op, "weights", weights, 3, 4, "4 int32 words = 32 int4 values per group and column");
  WB_CHECK(weights.size(0) >= 1, op, "argument 'weights' holds ", weights.size(0), " experts, needs >= 1");
  WB_CHECK(weights.size(1) >= 1, op, "argument 'weights' holds ", weights.size(1),
           " groups (K = 0), needs >= 1");
  WB_CHECK(weights.size(1) <= kMaxGroups, op, "argument 'weights' holds ", weights.size(1), " groups (K = ",
           weights.size(1) * 32, "), more than the ", kMaxGroups, " (K = ", kMaxGroups * 32,
           ") the kernels index in 32-bit arithmetic");
  WB_CHECK(weights.size(2) >= 32, op, "argument 'weights' has N = ", weights.size(2), " columns, needs >= 32");
  WB_CHECK(weights.size(2) <= kMaxColumns, op, "argument 'weights' has N = ", weights.size(2),
           " columns, more than the ", kMaxColumns, " the kernels index in 32-bit arithmetic");
  WB_CHECK(weights.size(2) % 32 == 0, op, "argument 'weights' has N = ", weights.size(2),
           " columns, must be a multiple of 32 (one record tile per warp)");
  check_contiguous(op, "weights", weights);
  check_aligned(op, "weights", weights, 16);
  check_dtype(op, "meta", meta, kByte);
  check_dim(op, "meta", meta, 3);
  check_size(op, "meta", meta, 0, weights.size(0), "experts, as in 'weights'");
  check_size(op, "meta", meta, 1, weights.size(1), "K/32 groups, as in 'weights'");
  WB_CHECK(meta.size(2) == weights.size(2) * record_bytes, op, "argument 'meta' has ", meta.size(2),
           " bytes per group row, but this build reads ", record_bytes, "-byte records (", layout,
           "): expected N*", record_bytes, " = ", weights.size(2) * record_bytes);
  check_contiguous(op, "meta", meta);
  check_aligned(op, "meta", meta, 4);
}

inline void check_ids(const char* op, const Tensor& ids, int64_t experts, int64_t max_top_k) {
  check_dtype(op, "ids", ids, kInt);
  check_dim(op, "ids", ids, 1);
  check_contiguous(op, "ids", ids);
  WB_CHECK(ids.numel() >= 1 && ids.numel() <= experts, op, "argument 'ids' routes top_k = ",
           ids.numel(), " experts, must be in [1, ", experts, "] (experts in the bank)");
  WB_CHECK(ids.numel() <= max_top_k, op, "argument 'ids' routes top_k = ", ids.numel(),
           " experts, this build supports at most ", max_top_k);
}

inline void check_launch(const char* op, int64_t spin_cycles, bool calibration_build) {
  WB_CHECK(spin_cycles >= 0, op, "argument 'spin_cycles' = ", spin_cycles, " must be >= 0");
  WB_CHECK(spin_cycles == 0 || calibration_build, op, "argument 'spin_cycles' = ", spin_cycles,
           " needs a calibration build (this build has no spin)");
}

#ifdef WB_CALIBRATION
constexpr bool kCalibrationBuild = true;
#else
constexpr bool kCalibrationBuild = false;
#endif
constexpr int64_t kMaxTopKArgs = 64;  // W13's grid.y; real MoE routers use <= 16
// Shared memory a CTA may use without opting in: W13 stages x (plus a group of zeros) in dynamic
// shared memory, which gets this minus the kernel's static shared memory.
constexpr int64_t kMaxSmemBytes = 48 * 1024;

}  // namespace wb
