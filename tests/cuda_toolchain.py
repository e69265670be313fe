"""Whether this machine can run the compile tier: the one check of the compile-tier tests.

Building needs nvcc alone (a CUDA toolkit); the tests also need torch (any build, CPU tensors
suffice) to call the built libraries' argument checks. No GPU. The reason names what is missing,
so a skipped compile test says why in its skip message; in CI (CI=true) such a skip fails
(tests/conftest.py). The warp emulator (tests/warp_host.cpp) needs only g++ and the toolkit's
include folder.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "csrc" / "kernels"
WARP_HOST = REPO / "tests" / "warp_host.cpp"


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


def warp_host_skip_reason() -> str | None:
    """None when tests/warp_host.cpp can be built (g++ and the CUDA headers), else why not."""
    if shutil.which("g++") is None:
        return "no g++ to build tests/warp_host.cpp"
    from workbench.kernels.build import cuda_home

    home = cuda_home()
    if home is None or not (Path(home) / "include" / "cuda_fp16.h").is_file():
        return "no CUDA toolkit headers (cuda_fp16.h) found"
    return None


@functools.cache
def _builds() -> Path:
    """One folder per test process for the warp emulator's builds, removed at exit."""
    import atexit

    d = Path(tempfile.mkdtemp(prefix="warp_host_"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


@functools.cache
def _warp_host(layout: str, reader: str, kernels: Path) -> Path:
    from workbench.kernels.build import cuda_home

    exe = _builds() / f"warp_host_{layout}_{reader}_{abs(hash(str(kernels)))}"
    cmd = ["g++", "-std=c++20", "-O1", "-pthread", f"-I{Path(cuda_home()) / 'include'}",
           f"-I{kernels}", f"-DWB_LAYOUT_{layout.upper()}", f"-DWB_READER_{reader.upper()}",
           str(WARP_HOST), "-o", str(exe)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}"
    return exe


def run_warp(
    layout: str,
    reader: str,
    meta: np.ndarray,
    halves: list[tuple[int, int]],
    kernels: Path = KERNELS,
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """The kernels' ``read_meta2`` and ``quad_meta`` (csrc/kernels/awq_meta.cuh as found in
    ``kernels``), built for ``layout``/``reader`` and run by the host warp of tests/warp_host.cpp on
    the uint8 buffer ``meta`` for each (lo, hi) pair of half-tile byte offsets.

    Returns records uint32 [pairs, 32] (lane L: the decoded ``scale | bias << 16`` of column L),
    quads uint32 [pairs, 32, 4] (the four records ``quad_meta`` hands lane L) and, per lane, the
    (m-block, slot) of the accumulator ``acc_of_lane`` returns."""
    exe = _warp_host(layout, reader, kernels)
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(np.ascontiguousarray(meta, dtype=np.uint8).tobytes())
        f.flush()
        args = [str(exe), f.name] + [str(x) for pair in halves for x in pair]
        out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout
    recs, acc = [], []
    for line in out.splitlines():
        kind, *nums = line.split()
        if kind == "rec":
            recs.append([int(n) for n in nums[1:]])
        elif kind == "acc":
            acc.append((int(nums[1]), int(nums[2])))
    table = np.array(recs, dtype=np.uint64).reshape(len(halves), 32, 5).astype(np.uint32)
    return table[:, :, 0], table[:, :, 1:], acc
