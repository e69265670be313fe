// The metadata layout of this build, from its one WB_LAYOUT_* macro: record size and name in one
// place (the Python twin is the layout registry in workbench/data/layouts.py, docs/DESIGN.md §3.7).
// Plain C++, no CUDA: binding.cpp (host compiler), the launchers and awq_meta.cuh include it.
#pragma once

namespace wb {

#if defined(WB_LAYOUT_B3)
constexpr int kRecordBytes = 3;
constexpr const char* kLayoutName = "b3";
#elif defined(WB_LAYOUT_B4)
constexpr int kRecordBytes = 4;
constexpr const char* kLayoutName = "b4";
#else
#error "define one WB_LAYOUT_* macro (a layout of workbench/data/layouts.py LAYOUTS)"
#endif

}  // namespace wb
