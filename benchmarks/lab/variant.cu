// One op of one source tree for one layout and reader, in its own namespace (benchmarks/lab/lab.h).
//   nvcc -DLAB_TREE='"name"' -DLAB_NS=ns -DLAB_W13|-DLAB_W2 -DWB_LAYOUT_B3 -DWB_READER_SCALAR -I<tree> -c
#include "lab.h"

#define wb LAB_NS
#if defined(LAB_W13)
#include "kernels/w13.cuh"
#else
#include "kernels/w2.cuh"
#endif
#undef wb

namespace {

#if defined(WB_LAYOUT_B3)
constexpr const char* kLayout = "b3";
#else
constexpr const char* kLayout = "b4";
#endif
#if defined(WB_READER_SCALAR)
constexpr const char* kReader = "scalar";
#else
constexpr const char* kReader = "coop";
#endif

void launch(const lab::Args& a, cudaStream_t st) {
#if defined(LAB_W13)
  LAB_NS::W13Params p{};
  p.x = a.x;
  p.weights = a.weights;
  p.meta = a.meta;
  p.ids = a.ids;
  p.inter = a.out;
  lab::set_slots(p, a.slots, 0);
  p.K = a.K;
  p.N = a.N;
  p.experts = a.experts;
  const auto s = LAB_NS::w13_launch_shape(a.K, a.N, a.top_k);
  lab::launch_pdl(LAB_NS::w13_kernel, s.grid, s.block, s.smem, st, p);
#else
  LAB_NS::W2Params p{};
  p.inter = a.x;
  p.weights = a.weights;
  p.meta = a.meta;
  p.ids = a.ids;
  p.rw = a.rw;
  p.y = a.out;
  p.K = a.K;
  p.N = a.N;
  p.experts = a.experts;
  p.top_k = a.top_k;
  const auto s = LAB_NS::w2_launch_shape(a.K, a.N, a.top_k);
  lab::launch_pdl(LAB_NS::w2_kernel, s.grid, s.block, s.smem, st, p);
#endif
}

#if defined(LAB_W13)
const bool kAdded = lab::add({LAB_TREE, "w13", kLayout, kReader, launch, reinterpret_cast<const void*>(LAB_NS::w13_kernel)});
#else
const bool kAdded = lab::add({LAB_TREE, "w2", kLayout, kReader, launch, reinterpret_cast<const void*>(LAB_NS::w2_kernel)});
#endif

}  // namespace
