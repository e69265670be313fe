"""Compile checks of the torch-free kernels for older GPUs, without their toolkit.

CUDA 13 cannot target Volta (sm_70), where this work began. The registries still carry the
CUDA 12.9 pieces as wheels (dev extra): NVRTC 12 (`nvidia-cuda-nvrtc-cu12`) turns the headers in
csrc/kernels/ into PTX for compute_70 and ptxas 12 (`nvidia-cuda-nvcc-cu12`) assembles it for
sm_70 with its register/spill report. This proves the kernels are NVRTC-clean and use nothing newer
than sm_70 (an sm_70 build fails on any instruction that needs a newer GPU).
"""

from __future__ import annotations

import ctypes
import importlib.util
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import BuildError
from workbench.kernels.compiler_log import parse_ptxas
from workbench.kernels.sources import csrc_dir
from workbench.kernels.variants import Variant


@dataclass
class Toolchain12:
    nvrtc: Path  # libnvrtc.so.12
    ptxas: Path  # ptxas 12.x
    include: Path  # cuda_fp16.h and friends


def _pkg_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_toolchain12() -> Toolchain12 | None:
    """The CUDA 12 NVRTC, ptxas and headers from the nvidia-*-cu12 wheels, if installed."""
    nvrtc, nvcc, rt = (_pkg_dir(f"nvidia.{n}") for n in ("cuda_nvrtc", "cuda_nvcc", "cuda_runtime"))
    if not (nvrtc and nvcc and rt):
        return None
    lib, ptxas, inc = nvrtc / "lib" / "libnvrtc.so.12", nvcc / "bin" / "ptxas", rt / "include"
    if lib.exists() and ptxas.exists() and (inc / "cuda_fp16.h").exists():
        return Toolchain12(lib, ptxas, inc)
    return None


def _nvrtc_ptx(tc: Toolchain12, source: str, options: list[str]) -> str:
    nv = ctypes.CDLL(str(tc.nvrtc))
    prog = ctypes.c_void_p()

    def ok(rc: int, what: str) -> None:
        if rc != 0:
            nv.nvrtcGetErrorString.restype = ctypes.c_char_p
            raise BuildError(f"NVRTC {what} failed: {nv.nvrtcGetErrorString(rc).decode()}")

    ok(
        nv.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"wb.cu", 0, None, None),
        "create",
    )
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = nv.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nv.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            raise BuildError(
                "NVRTC compile for compute_70 failed", log.value.decode(errors="replace")
            )
        nv.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        ok(nv.nvrtcGetPTX(prog, ptx), "get PTX")
        return ptx.value.decode()
    finally:
        nv.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_sm70(v: Variant, tc: Toolchain12 | None = None, arch: str = "70") -> dict:
    """NVRTC 12 -> PTX (compute_XX) -> ptxas 12 (sm_XX); returns the kernel's ptxas report."""
    tc = tc or find_toolchain12()
    if tc is None:
        raise BuildError(
            "CUDA 12 NVRTC/ptxas wheels not found: pip install nvidia-cuda-nvrtc-cu12 "
            "nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12"
        )
    source = f'#include "{v.kernel}.cuh"\n'
    opts = [
        f"--gpu-architecture=compute_{arch}",
        "--std=c++17",
        f"-I{csrc_dir() / 'kernels'}",
        f"-I{tc.include}",
    ]
    ptx = _nvrtc_ptx(tc, source, opts + v.defines())
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        proc = subprocess.run(
            [str(tc.ptxas), f"-arch=sm_{arch}", "-v", str(src), "-o", str(Path(d) / "k.cubin")],
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise BuildError(f"ptxas 12 for sm_{arch} failed on {v.name}", proc.stderr)
    report = parse_ptxas(proc.stdout + proc.stderr)
    for fn, info in report.items():
        if f"{v.kernel}_kernel" in fn:
            return {"variant": v.name, "function": fn, **info}
    raise BuildError(f"ptxas 12 reported no {v.kernel}_kernel for {v.name}", proc.stderr)
