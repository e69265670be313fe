"""The kernels: specs and variants, their builds and compiler reports, the Python ops that call
them, the invalid-argument cases, the Triton peer and the test-side models of the CUDA."""
