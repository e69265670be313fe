// The floor probe as a torch extension: bench_kernels.py captures it in CUDA Graphs beside the
// kernels, in the same process and on the same buffers' allocator, so "kernel / floor" is a
// side-by-side ratio (issue: the floor probe re-run in the bench's process).
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include "floor_kernel.cuh"

// kind (with math16 > 0): "u8" probe_math, "u4x2" probe_math4, "u2x2" probe_math2, "arith" probe_arith
// (floor_kernel.cuh)
void floor_launch(const at::Tensor& src, const at::Tensor& ids, const at::Tensor& out, int64_t grid,
                  int64_t block, bool pdl, int64_t math16, const std::string& kind) {
  // the launch's own arguments first (they need no device), then the tensors
  TORCH_CHECK(grid >= 1 && grid <= 4096 && block >= 32 && block <= 1024 && block % 32 == 0,
              "floor_launch: grid in 1..4096, block a multiple of 32 in 32..1024");
  TORCH_CHECK(kind == "u8" || kind == "u4x2" || kind == "u2x2" || kind == "arith",
              "floor_launch: kind must be 'u8', 'u4x2', 'u2x2' or 'arith', not '", kind, "'");
  TORCH_CHECK(math16 > 0 || kind == "u8", "floor_launch: kind '", kind,
              "' needs math16 > 0 (with math16 == 0 the probe only streams: leave kind at 'u8')");
  const int bound = kind == "u8" ? floor_probe::kMathThreads : floor_probe::kMath2Threads;
  TORCH_CHECK(math16 == 0 || block <= bound, "floor_launch: with math16 > 0, block must be <= ", bound,
              " (the launch bound of the arithmetic mode's kind '", kind, "')");
  TORCH_CHECK(src.numel() % 16 == 0 && math16 >= 0 && math16 % 32 == 0 && math16 <= src.numel() / 16,
              "floor_launch: math16 must be a multiple of 32 in 0..src's 16-byte elements");
  TORCH_CHECK(math16 == 0 || src.numel() % 512 == 0,
              "floor_launch: with math16 > 0, src must be a multiple of 512 bytes (32 16-byte elements: "
              "the arithmetic mode's loop must be warp-uniform)");
  TORCH_CHECK(src.is_cuda() && src.is_contiguous() && src.numel() % 16 == 0 && src.scalar_type() == at::kByte,
              "floor_launch: src must be a contiguous CUDA uint8 tensor of a multiple of 16 bytes");
  TORCH_CHECK(ids.is_cuda() && ids.scalar_type() == at::kInt && ids.numel() >= 8,
              "floor_launch: ids must be a CUDA int32 tensor of >= 8 zeros");
  TORCH_CHECK(out.is_cuda() && out.scalar_type() == at::kInt && out.numel() >= grid,
              "floor_launch: out must be a CUDA int32 tensor of >= grid words");
  floor_probe::Args a{};
  a.src = reinterpret_cast<const uint4*>(src.data_ptr());
  a.ids = ids.data_ptr<int>();
  a.out = reinterpret_cast<unsigned*>(out.data_ptr<int>());
  a.n16 = src.numel() / 16;
  a.chain = 1;  // addresses depend on an id load, as in the kernels
  a.cluster = 1;
  a.math16 = math16;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(static_cast<unsigned>(block));
  cfg.stream = c10::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attr;
  if (pdl) {
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  void (*kernel)(const floor_probe::Args) = floor_probe::probe;
  if (math16 > 0)
    kernel = kind == "u8"     ? floor_probe::probe_math
             : kind == "u4x2" ? floor_probe::probe_math4
             : kind == "u2x2" ? floor_probe::probe_math2
                              : floor_probe::probe_arith;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a);
  if (err == cudaSuccess) err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "floor_launch: ", cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.attr("MATH_THREADS") = floor_probe::kMathThreads;    // the largest block of kind "u8"
  m.attr("MATH2_THREADS") = floor_probe::kMath2Threads;  // ... of kinds "u4x2", "u2x2" and "arith"
  m.def("launch", &floor_launch,
        "floor probe: stream src's bytes (16-byte loads after one id load); the first math16 "
        "elements also go through the kernels' dequantize and tensor-core products, in the structure "
        "`kind` names ('arith': the arithmetic on words made from the index, no loads)",
        py::arg("src"), py::arg("ids"), py::arg("out"), py::arg("grid"), py::arg("block"), py::arg("pdl"),
        py::arg("math16") = 0, py::arg("kind") = "u8");
}
