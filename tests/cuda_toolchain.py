"""Whether this machine can run the compile tier: the one check of the compile-tier tests.

Building needs nvcc alone (a CUDA toolkit); the tests also need torch (any build, CPU tensors
suffice) to call the built libraries' argument checks. No GPU. The reason names what is missing,
so a skipped compile test says why in its skip message; in CI (CI=true) such a skip fails
(tests/conftest.py).
"""

from __future__ import annotations


def cuda_build_skip_reason() -> str | None:
    """None when nvcc is found and torch imports, else why the compile tier cannot run."""
    from workbench.kernels.build import cuda_home

    if cuda_home() is None:
        return "no CUDA toolkit (nvcc) found"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed (the compile tests call the builds with torch tensors)"
    return None
