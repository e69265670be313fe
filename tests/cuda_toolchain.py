"""Whether this machine can build the CUDA extensions: the one check of the compile-tier tests.

Building needs a CUDA build of torch (its cpp_extension) and a CUDA toolkit with nvcc; no GPU.
The reason names what is missing, so a skipped compile test says why in its skip message.
"""

from __future__ import annotations


def cuda_build_skip_reason() -> str | None:
    """None when torch is a CUDA build and nvcc is found, else why extensions cannot be built."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if torch.version.cuda is None:
        return "torch is a CPU build (no CUDA extension builds)"
    from workbench.kernels.build import cuda_home

    return None if cuda_home() else "no CUDA toolkit (nvcc) found"
