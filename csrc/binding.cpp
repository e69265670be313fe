// The one binding file: declarations and the Python module; the -D flags of the build pick the op.
#include <torch/extension.h>

#include "kernels/layout.h"

#if defined(WB_KERNEL_W13)
void w13_forward(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& meta,
                 const at::Tensor& ids, const at::Tensor& out, int64_t spin_cycles);
#define WB_FORWARD w13_forward
#define WB_KERNEL_NAME "w13"
#define WB_DOC "w13(x f16[1,K], weights i32[E,K/32,N,4], meta u8[E,K/32,N*R], ids i32[top_k], out f16[top_k,N/2], spin_cycles)"
#elif defined(WB_KERNEL_W2)
void w2_forward(const at::Tensor& inter, const at::Tensor& weights, const at::Tensor& meta,
                const at::Tensor& ids, const at::Tensor& rw, const at::Tensor& out,
                int64_t spin_cycles);
#define WB_FORWARD w2_forward
#define WB_KERNEL_NAME "w2"
#define WB_DOC "w2(inter f16[top_k,K], weights i32[E,K/32,N,4], meta u8[E,K/32,N*R], ids i32[top_k], rw f32[top_k], out f16[1,N], spin_cycles)"
#else
#error "define WB_KERNEL_W13 or WB_KERNEL_W2"
#endif

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &WB_FORWARD, WB_DOC);
  m.attr("kernel") = WB_KERNEL_NAME;
  m.attr("layout") = wb::kLayoutName;
#ifdef WB_READER_COOP
  m.attr("reader") = "coop";
#else
  m.attr("reader") = "scalar";
#endif
#ifdef WB_CALIBRATION
  m.attr("calibration") = true;
#else
  m.attr("calibration") = false;
#endif
}
