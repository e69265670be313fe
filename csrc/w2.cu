// W2 launcher: every argument check, then one launch on the caller's stream (graph-capturable).
#include "checks.h"
#include "launch.h"
#include "kernels/w2.cuh"

void w2_forward(const wb::Tensor& inter, const wb::Tensor& weights, const wb::Tensor& meta,
                const wb::Tensor& ids, const wb::Tensor& rw, const wb::Tensor& out, int64_t spin_cycles,
                cudaStream_t stream) {
  constexpr const char* op = "w2";
  wb::check_bank(op, weights, meta, wb::kRecordBytes, wb::kLayoutName);
  const int64_t experts = weights.size(0), G = weights.size(1), N = weights.size(2), K = G * 32;
  wb::check_ids(op, ids, experts, wb::kMaxTopKArgs);
  const int64_t top_k = ids.numel();
  wb::check_dtype(op, "inter", inter, wb::kHalf);
  wb::check_dim(op, "inter", inter, 2);
  wb::check_size(op, "inter", inter, 0, top_k, "top_k rows, one per routed expert");
  wb::check_size(op, "inter", inter, 1, K, "K = 32 * groups of 'weights'");
  wb::check_contiguous(op, "inter", inter);
  wb::check_aligned(op, "inter", inter, 16);
  wb::check_dtype(op, "rw", rw, wb::kFloat);
  WB_CHECK(rw.dim() == 1 && rw.numel() == top_k, op, "argument 'rw' must have shape [top_k] = [",
           top_k, "], got ", wb::dims_str(rw.sizes()));
  wb::check_contiguous(op, "rw", rw);
  wb::check_dtype(op, "out", out, wb::kHalf);
  WB_CHECK(out.numel() == N && (out.dim() == 1 || (out.dim() == 2 && out.size(0) == 1)), op,
           "argument 'out' must have shape [1, N] or [N] with N = ", N, ", got ", wb::dims_str(out.sizes()));
  wb::check_contiguous(op, "out", out);
  wb::check_launch(op, spin_cycles, wb::kCalibrationBuild);
  const wb::LaunchShape shape = wb::w2_launch_shape(static_cast<int>(K), static_cast<int>(N), static_cast<int>(top_k));
  // No shared-memory bound: the kernel reads inter from global memory (shape.smem is 0).
  for (auto [name, t] : {std::pair{"inter", &inter}, {"meta", &meta}, {"ids", &ids}, {"rw", &rw},
                         {"out", &out}, {"weights", &weights}})
    wb::check_cuda(op, name, *t, weights);

  const wb::DeviceGuard guard(weights.get_device());
  wb::W2Params p{};
  p.inter = reinterpret_cast<const __half*>(inter.data_ptr());
  p.weights = reinterpret_cast<const uint4*>(weights.data_ptr());
  p.meta = meta.data_ptr<uint8_t>();
  p.ids = ids.data_ptr<int>();
  p.rw = rw.data_ptr<float>();
  p.y = reinterpret_cast<__half*>(out.data_ptr());
  p.K = static_cast<int>(K);
  p.N = static_cast<int>(N);
  p.experts = static_cast<int>(experts);
  p.top_k = static_cast<int>(top_k);
  p.spin_cycles = spin_cycles;
  wb::launch(op, wb::w2_kernel, shape.grid, shape.block, shape.smem, stream,
             weights.get_device(), p);
}
