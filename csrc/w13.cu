// W13 launcher: every argument check, then one launch on the caller's stream (graph-capturable).
#include "checks.h"
#include "launch.h"
#include "kernels/w13.cuh"

void w13_forward(const wb::Tensor& x, const wb::Tensor& weights, const wb::Tensor& meta,
                 const wb::Tensor& ids, const wb::Tensor& out, int64_t spin_cycles,
                 cudaStream_t stream) {
  constexpr const char* op = "w13";
  wb::check_bank(op, weights, meta, wb::kRecordBytes, wb::kLayoutName);
  const int64_t experts = weights.size(0), G = weights.size(1), N = weights.size(2), K = G * 32;
  WB_CHECK(N % 64 == 0, op, "argument 'weights' has N = ", N,
           " columns; W13 needs N/2 (gate = up columns) to be a multiple of 32");
  wb::check_dtype(op, "x", x, wb::kHalf);
  WB_CHECK(x.numel() == K && (x.dim() == 1 || (x.dim() == 2 && x.size(0) == 1)), op,
           "argument 'x' must have shape [1, K] or [K] with K = ", K, ", got ", wb::dims_str(x.sizes()));
  wb::check_contiguous(op, "x", x);
  wb::check_aligned(op, "x", x, 16);
  wb::check_ids(op, ids, experts, wb::kMaxTopKArgs);
  const int64_t top_k = ids.numel();
  wb::check_dtype(op, "out", out, wb::kHalf);
  wb::check_dim(op, "out", out, 2);
  wb::check_size(op, "out", out, 0, top_k, "top_k rows, one per routed expert");
  wb::check_size(op, "out", out, 1, N / 2, "N/2 SwiGLU outputs");
  wb::check_contiguous(op, "out", out);
  wb::check_launch(op, spin_cycles, wb::kCalibrationBuild);
  const wb::LaunchShape shape = wb::w13_launch_shape(static_cast<int>(K), static_cast<int>(N), static_cast<int>(top_k));
  const int64_t smem = static_cast<int64_t>(shape.smem);
  const int64_t room = wb::kMaxSmemBytes - static_cast<int64_t>(sizeof(float)) * wb::kMaxWarps * wb::kTileCols;
  WB_CHECK(smem <= room, op, "argument 'weights' has K = ", K, ": x needs ", smem,
           " bytes of shared memory per CTA, more than the ", room, " this kernel has for it");
  for (auto [name, t] : {std::pair{"x", &x}, {"meta", &meta}, {"ids", &ids}, {"out", &out},
                         {"weights", &weights}})
    wb::check_cuda(op, name, *t, weights);

  const wb::DeviceGuard guard(weights.get_device());
  wb::W13Params p{};
  p.x = reinterpret_cast<const __half*>(x.data_ptr());
  p.weights = reinterpret_cast<const uint4*>(weights.data_ptr());
  p.meta = meta.data_ptr<uint8_t>();
  p.ids = ids.data_ptr<int>();
  p.inter = reinterpret_cast<__half*>(out.data_ptr());
  p.K = static_cast<int>(K);
  p.N = static_cast<int>(N);
  p.experts = static_cast<int>(experts);
  p.spin_cycles = spin_cycles;
  wb::launch(op, wb::w13_kernel, shape.grid, shape.block, shape.smem, stream,
             weights.get_device(), p);
}
