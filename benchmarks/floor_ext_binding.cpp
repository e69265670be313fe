// The floor probe as a torch extension (floor_ext.cu holds the launcher and its kernels): checks
// every argument with a message that names it, then launches on torch's current stream.
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include "floor_ext.h"

namespace {

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
  const int bound = kind == "u8" ? floor_ext::math_threads() : floor_ext::math2_threads();
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
  const floor_ext::Kind k = kind == "u8"     ? floor_ext::kU8
                            : kind == "u4x2" ? floor_ext::kU4x2
                            : kind == "u2x2" ? floor_ext::kU2x2
                                             : floor_ext::kArith;
  const cudaError_t err = floor_ext::launch(src.data_ptr(), ids.data_ptr<int>(),
                                            reinterpret_cast<unsigned*>(out.data_ptr<int>()), src.numel() / 16,
                                            static_cast<int>(grid), static_cast<int>(block), pdl, math16, k,
                                            c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "floor_launch: ", cudaGetErrorString(err));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.attr("MATH_THREADS") = floor_ext::math_threads();    // the largest block of kind "u8"
  m.attr("MATH2_THREADS") = floor_ext::math2_threads();  // ... of kinds "u4x2", "u2x2" and "arith"
  m.def("launch", &floor_launch,
        "floor probe: stream src's bytes (16-byte loads after one id load); the first math16 "
        "elements also go through the kernels' dequantize and tensor-core products, in the structure "
        "`kind` names ('arith': the arithmetic on words made from the index, no loads)",
        py::arg("src"), py::arg("ids"), py::arg("out"), py::arg("grid"), py::arg("block"), py::arg("pdl"),
        py::arg("math16") = 0, py::arg("kind") = "u8");
}
