// The C ABI between a variant's library and Python (workbench/kernels/native.py, through ctypes):
// no torch, no Python headers, so nvcc alone builds a variant. Plain C: the Python side declares
// the same struct with ctypes, and WB_ABI_VERSION must match workbench/kernels/native.py ABI_VERSION.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define WB_ABI_VERSION 1
#define WB_MAX_DIMS 8  // a tensor argument of more dimensions is refused in Python, naming it

// One tensor argument as Python sees it: what the checks need and nothing else.
typedef struct {
  void* data;                    // data_ptr(): the first element's address
  const char* dtype_name;        // torch's name of its dtype ("Float", "Long", ...): for messages
  const char* device_type;       // torch's device type, "cpu", "cuda", ...: for messages
  int64_t sizes[WB_MAX_DIMS];    // sizes of its `dim` dimensions
  int64_t strides[WB_MAX_DIMS];  // strides, in elements
  int32_t dim;
  int32_t dtype;                 // WB_DTYPE_*: the dtypes the ops take, else WB_DTYPE_OTHER
  int32_t device;                // WB_DEVICE_*
  int32_t device_index;          // -1 where torch has none (the CPU)
  int32_t contiguous;            // torch's is_contiguous()
  int32_t reserved;              // keeps the struct a multiple of 8 bytes on every ABI
} wb_tensor;

enum { WB_DTYPE_OTHER = 0, WB_DTYPE_UINT8 = 1, WB_DTYPE_INT32 = 2, WB_DTYPE_FLOAT16 = 3, WB_DTYPE_FLOAT32 = 4 };
enum { WB_DEVICE_OTHER = 0, WB_DEVICE_CPU = 1, WB_DEVICE_CUDA = 2 };

// What wb_forward returns: WB_VALUE_ERROR is a refused argument (Python raises ValueError),
// WB_RUNTIME_ERROR a failed launch (RuntimeError); the message is in the caller's buffer.
enum { WB_OK = 0, WB_VALUE_ERROR = 1, WB_RUNTIME_ERROR = 2 };
