// W2 launcher: every argument check, then one launch on the current stream (graph-capturable).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "checks.h"
#include "launch.h"
#include "kernels/w2.cuh"

void w2_forward(const at::Tensor& inter, const at::Tensor& weights, const at::Tensor& meta,
                const at::Tensor& ids, const at::Tensor& rw, const at::Tensor& out,
                const at::Tensor& ws, const at::Tensor& counters, int64_t splits,
                int64_t spin_cycles) {
  constexpr const char* op = "w2";
  wb::check_bank(op, weights, meta, wb::kRecordBytes, wb::kLayoutName);
  const int64_t experts = weights.size(0), G = weights.size(1), N = weights.size(2), K = G * 32;
  wb::check_ids(op, ids, experts, wb::kMaxTopKArgs);
  const int64_t top_k = ids.numel(), T = N / 32;
  wb::check_dtype(op, "inter", inter, at::kHalf);
  wb::check_dim(op, "inter", inter, 2);
  wb::check_size(op, "inter", inter, 0, top_k, "top_k rows, one per routed expert");
  wb::check_size(op, "inter", inter, 1, K, "K = 32 * groups of 'weights'");
  wb::check_contiguous(op, "inter", inter);
  wb::check_aligned(op, "inter", inter, 16);
  wb::check_dtype(op, "rw", rw, at::kFloat);
  WB_CHECK(rw.dim() == 1 && rw.numel() == top_k, op, "argument 'rw' must have shape [top_k] = [",
           top_k, "], got ", wb::dims_str(rw.sizes()));
  wb::check_contiguous(op, "rw", rw);
  wb::check_dtype(op, "out", out, at::kHalf);
  WB_CHECK(out.numel() == N && (out.dim() == 1 || (out.dim() == 2 && out.size(0) == 1)), op,
           "argument 'out' must have shape [1, N] or [N] with N = ", N, ", got ", wb::dims_str(out.sizes()));
  wb::check_contiguous(op, "out", out);
  wb::check_launch(op, splits, std::min<int64_t>(top_k * G, wb::kMaxSplits), spin_cycles, wb::kCalibrationBuild);
  wb::check_dtype(op, "ws", ws, at::kFloat);
  wb::check_contiguous(op, "ws", ws);
  wb::check_numel_at_least(op, "ws", ws, T * splits * 32, "N/32 * splits * 32");
  wb::check_dtype(op, "counters", counters, at::kInt);
  wb::check_contiguous(op, "counters", counters);
  wb::check_numel_at_least(op, "counters", counters, T, "N/32");
  for (auto [name, t] : {std::pair{"inter", &inter}, {"meta", &meta}, {"ids", &ids}, {"rw", &rw},
                         {"out", &out}, {"ws", &ws}, {"counters", &counters}, {"weights", &weights}})
    wb::check_cuda(op, name, *t, weights);

  const c10::cuda::CUDAGuard guard(weights.device());
  wb::W2Params p{};
  p.inter = reinterpret_cast<const __half*>(inter.data_ptr());
  p.weights = reinterpret_cast<const uint4*>(weights.data_ptr());
  p.meta = meta.data_ptr<uint8_t>();
  p.ids = ids.data_ptr<int>();
  p.rw = rw.data_ptr<float>();
  p.y = reinterpret_cast<__half*>(out.data_ptr());
  p.ws = ws.data_ptr<float>();
  p.counters = reinterpret_cast<unsigned*>(counters.data_ptr<int>());
  p.K = static_cast<int>(K);
  p.N = static_cast<int>(N);
  p.experts = static_cast<int>(experts);
  p.top_k = static_cast<int>(top_k);
  p.splits = static_cast<int>(splits);
  p.spin_cycles = spin_cycles;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(splits));
  const size_t smem = static_cast<size_t>((top_k * G + splits - 1) / splits + 1) * 32 * sizeof(__half);
  WB_CHECK(smem <= 48 * 1024, op, "argument 'splits' = ", splits, " leaves ", smem,
           " bytes of activations per CTA (max 49152): use more splits");
  wb::launch(op, wb::w2_kernel, grid, dim3(wb::kWarps * 32), smem, c10::cuda::getCurrentCUDAStream(),
             weights.get_device(), dim3(1, static_cast<unsigned>(splits), 1), p);
}
