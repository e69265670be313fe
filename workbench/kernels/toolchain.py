"""What this machine can build and run (`workbench doctor`, docs/DESIGN.md §4.3.1).

Three sources are asked, each on its own so that one missing piece never hides the others:

* the GPU, through NVML (pynvml): name, compute capability, driver and the CUDA version the driver
  supports; the L2 size from torch's device properties where a CUDA torch sees the GPU, else from
  the public spec of a known GPU (the name says which);
* torch: its version, its CUDA version and ``torch.cuda.get_arch_list()`` (answers without a GPU);
* nvcc: its version and ``nvcc --list-gpu-arch``; the CUDA_HOME the builds use; the build cache.

``diagnose(facts)`` is pure: it turns the facts into findings, each naming a mismatch and what to
install. Everything here is torch-free at import time.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.core.errors import GPU_EXTRA, extra_install
from workbench.core.paths import CACHE_ENV

MIB = 1 << 20
# L2 sizes of the GPUs the docs name, from the vendors' public specs (the H200's is also measured,
# docs/DESIGN.md §5.3); used only when no CUDA torch can ask the device itself.
KNOWN_L2 = (("H200", 60 * MIB), ("H100", 50 * MIB), ("A100", 40 * MIB), ("V100", 6 * MIB))

# What to install where the stack cannot serve a GPU (docs/DESIGN.md §4.3.1, README "On a V100").
# torch 2.10.0 is the newest PyPI wheel with sm_70 kernels (a CUDA 12.8 build); 2.11 and later are
# CUDA 13 builds, and CUDA 13 cannot target sm_70 (benchmarks/results/torch_sm70.txt, from the
# wheels' metadata and the ELF images of their libtorch_cuda.so).
VOLTA_TORCH = "torch==2.10.0"
VOLTA_NVCC = "a CUDA 12 toolkit (12.8, as torch 2.10.0; 12.x still targets sm_70, CUDA 13 cannot)"
GPU_INSTALL = extra_install(GPU_EXTRA)


@dataclass
class Gpu:
    index: int
    name: str
    cc: tuple[int, int]
    l2_bytes: int | None = None
    l2_source: str | None = None  # "torch" (the device's own answer) or "spec" (KNOWN_L2)

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


@dataclass
class Facts:
    gpus: list[Gpu] = field(default_factory=list)
    driver: str | None = None
    driver_cuda: str | None = None  # e.g. "13.0": the newest CUDA the driver runs
    nvml_error: str | None = None
    nvml_missing: bool = False  # pynvml itself is not installed: the GPU was not asked at all
    torch_version: str | None = None
    torch_cuda: str | None = None
    torch_arch_list: list[str] = field(default_factory=list)
    torch_error: str | None = None
    nvcc: str | None = None  # path
    nvcc_version: str | None = None  # e.g. "13.0"
    nvcc_archs: list[str] = field(default_factory=list)  # compute_75, ... (--list-gpu-arch)
    nvcc_error: str | None = None
    cuda_home: str | None = None
    # $CUDA_HOME / $CUDA_PATH where set to a folder that is no CUDA toolkit: {variable: value}
    cuda_env_bad: dict[str, str] = field(default_factory=dict)
    build_cache: str | None = None
    build_cache_entries: int | None = None
    build_cache_error: str | None = None  # the cache cannot be written (e.g. $WORKBENCH_CACHE)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for g, gd in zip(self.gpus, d["gpus"], strict=True):
            gd["cc"] = f"{g.cc[0]}.{g.cc[1]}"
            gd["sm"] = g.sm
        return d


@dataclass(frozen=True)
class Finding:
    level: str  # "error": runs or builds cannot go ahead; "warning": they can, with a caveat
    what: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


# ------------------------------------------------------------------------------- gathering


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def spec_l2(name: str) -> int | None:
    """The public-spec L2 of a GPU the docs know, by its name ("Tesla V100-SXM2-32GB" -> 6 MiB)."""
    for key, size in KNOWN_L2:
        if key in name.upper():
            return size
    return None


def gather_nvml(facts: Facts, nvml: Any = None) -> None:
    """GPUs, driver and its CUDA version from NVML (``nvml``: a pynvml-like module, for tests)."""
    try:
        if nvml is None:
            import pynvml as nvml
    except ImportError as e:  # a missing package, not a missing GPU: said apart (diagnose)
        facts.nvml_error, facts.nvml_missing = f"{type(e).__name__}: {e}", True
        return
    try:
        nvml.nvmlInit()
    except Exception as e:  # no driver, no GPU: both say the same to the user
        facts.nvml_error = f"{type(e).__name__}: {e}"
        return
    try:
        facts.driver = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            v = int(nvml.nvmlSystemGetCudaDriverVersion())
            facts.driver_cuda = f"{v // 1000}.{(v % 1000) // 10}"
        except Exception:
            facts.driver_cuda = None
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(nvml.nvmlDeviceGetName(h))
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
            l2 = spec_l2(name)
            facts.gpus.append(Gpu(i, name, (int(major), int(minor)), l2, "spec" if l2 else None))
    except Exception as e:
        facts.nvml_error = f"{type(e).__name__}: {e}"
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def gather_torch(facts: Facts) -> None:
    """torch's version, CUDA and arch list; the GPUs' own L2 where torch sees them."""
    try:
        import torch
    except Exception as e:
        facts.torch_error = f"{type(e).__name__}: {e}"
        return
    facts.torch_version = torch.__version__
    facts.torch_cuda = torch.version.cuda
    try:
        facts.torch_arch_list = list(torch.cuda.get_arch_list())
    except Exception as e:
        facts.torch_error = f"get_arch_list: {type(e).__name__}: {e}"
    try:
        if facts.gpus and torch.cuda.is_available():
            for g in facts.gpus:
                if g.index < torch.cuda.device_count():
                    g.l2_bytes = int(torch.cuda.get_device_properties(g.index).L2_cache_size)
                    g.l2_source = "torch"
    except Exception:
        pass  # the spec's L2 stays; the torch findings say why torch cannot see the GPU


def gather_nvcc(facts: Facts, nvcc: str | None = None) -> None:
    """nvcc's version and the architectures it targets; the CUDA_HOME the builds would use."""
    from workbench.kernels.build import CUDA_ENV, cuda_home, is_toolkit, nvcc_release, nvcc_says

    facts.cuda_home = cuda_home()
    facts.cuda_env_bad = {
        var: value for var in CUDA_ENV if (value := os.environ.get(var)) and not is_toolkit(value)
    }
    nvcc = nvcc or (str(Path(facts.cuda_home) / "bin" / "nvcc") if facts.cuda_home else None)
    nvcc = nvcc or shutil.which("nvcc")
    if not nvcc or not Path(nvcc).exists():
        facts.nvcc_error = "nvcc not found (set CUDA_HOME or put nvcc on the PATH)"
        return
    facts.nvcc = nvcc
    try:
        says = nvcc_says(nvcc)  # the answer the build names read: nvcc runs once
        rel = nvcc_release(says)
        facts.nvcc_version = rel[0] if rel else None
        archs = subprocess.run(
            [nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60
        )
        facts.nvcc_archs = re.findall(r"compute_\d+[a-z]?", archs.stdout)
        if facts.nvcc_version is None:
            facts.nvcc_error = f"{nvcc} --version printed no release: {says[-200:]!r}"
    except (OSError, subprocess.SubprocessError) as e:
        facts.nvcc_error = f"{nvcc}: {type(e).__name__}: {e}"


def gather_cache(facts: Facts) -> None:
    from workbench.core.errors import WorkbenchError
    from workbench.kernels.build import cache_root, cached_builds, writable_cache

    root = cache_root()
    facts.build_cache = str(root)
    try:
        writable_cache()  # what a build checks first: a bad $WORKBENCH_CACHE shows here
    except WorkbenchError as e:  # BadArgument, or MissingDependency without platformdirs
        facts.build_cache_error = str(e).partition(": set ")[0]  # the fix is the finding's
    facts.build_cache_entries = cached_builds(root)  # builds, never the .locks folder


def gather(nvml: Any = None) -> Facts:
    facts = Facts()
    gather_nvml(facts, nvml)
    gather_torch(facts)
    gather_nvcc(facts)
    gather_cache(facts)
    return facts


# ------------------------------------------------------------------------------- diagnosis


def _num(arch: str) -> tuple[int, int]:
    """ "sm_90" / "compute_90a" / "sm_120" -> (9, 0) / (9, 0) / (12, 0)."""
    digits = re.search(r"(\d+)", arch).group(1)
    return int(digits[:-1]), int(digits[-1])


def torch_runs_on(arch_list: list[str], cc: tuple[int, int]) -> bool:
    """Whether a torch built for ``arch_list`` has kernels a GPU of ``cc`` can run: a cubin of the
    same major and no higher minor, or PTX (compute_XY) of no higher capability for the driver's
    JIT."""
    for a in arch_list:
        major, minor = _num(a)
        if a.startswith("sm_") and major == cc[0] and minor <= cc[1]:
            return True
        if a.startswith("compute_") and (major, minor) <= cc:
            return True
    return False


def _version(v: str | None) -> tuple[int, ...] | None:
    if not v:
        return None
    m = re.match(r"(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else None


def install_hint(cc: tuple[int, int]) -> tuple[str, str]:
    """(torch, nvcc) to install for a GPU of compute capability ``cc``."""
    if cc < (7, 5):
        return VOLTA_TORCH, VOLTA_NVCC
    return "a CUDA build of torch (the gpu extra: " + GPU_INSTALL + ")", "a CUDA 12 or 13 toolkit"


def diagnose(f: Facts) -> list[Finding]:
    """Every mismatch between the GPU, torch and nvcc, each with what to install."""
    out: list[Finding] = []
    if f.nvml_missing:
        out.append(
            Finding(
                "error",
                "pynvml (nvidia-ml-py) is not installed: NVML, which names the GPU, cannot be "
                "asked, so whether a GPU is here is unknown",
                f"install the {GPU_EXTRA!r} extra: {GPU_INSTALL}",
            )
        )
    elif f.nvml_error or not f.gpus:
        out.append(
            Finding(
                "error",
                "no NVIDIA GPU visible through NVML"
                + (f" ({f.nvml_error})" if f.nvml_error else ""),
                "runs need an NVIDIA GPU and its driver; builds, browsing, reports and plots "
                "work without one",
            )
        )
    if f.torch_version is None:
        out.append(Finding("error", f"torch is not installed ({f.torch_error})", GPU_INSTALL))
    elif f.torch_cuda is None:
        out.append(
            Finding(
                "error",
                f"torch {f.torch_version} is a CPU build: it can neither run nor build kernels",
                f"install a CUDA build of torch ({GPU_INSTALL})",
            )
        )
    for var, value in f.cuda_env_bad.items():
        instead = f"builds use {f.cuda_home} instead" if f.cuda_home else "no toolkit was found"
        out.append(
            Finding(
                "warning" if f.cuda_home else "error",
                f"{var}={value} is not a CUDA toolkit (no bin/nvcc and include/cuda_runtime.h "
                f"there): {instead}",
                f"point {var} at the toolkit's folder (the one holding bin/nvcc), or unset it",
            )
        )
    if f.build_cache_error:
        out.append(
            Finding("error", f.build_cache_error, f"set {CACHE_ENV} to a folder you can write")
        )
    if f.nvcc is None:
        out.append(
            Finding(
                "error",
                f.nvcc_error or "nvcc not found",
                "install a CUDA toolkit and set CUDA_HOME to its folder (the one holding bin/nvcc)",
            )
        )
    for g in f.gpus:
        torch_pkg, nvcc_pkg = install_hint(g.cc)
        if f.torch_cuda and f.torch_arch_list and not torch_runs_on(f.torch_arch_list, g.cc):
            out.append(
                Finding(
                    "error",
                    f"GPU {g.index} ({g.name}) is {g.sm}, but torch {f.torch_version} (CUDA "
                    f"{f.torch_cuda}) carries kernels for {', '.join(f.torch_arch_list)} only",
                    f"install {torch_pkg}",
                )
            )
        if f.nvcc and f.nvcc_archs:
            targets = [_num(a) for a in f.nvcc_archs]
            if not any(t <= g.cc for t in targets):
                out.append(
                    Finding(
                        "error",
                        f"nvcc {f.nvcc_version} ({f.nvcc}) cannot target GPU {g.index} "
                        f"({g.name}, {g.sm}): its lowest target is {min(f.nvcc_archs, key=_num)}",
                        f"install {nvcc_pkg} and point CUDA_HOME at it",
                    )
                )
        if g.l2_bytes is None:
            out.append(
                Finding(
                    "warning",
                    f"L2 size of GPU {g.index} ({g.name}) unknown: neither torch nor the spec "
                    "table knows it",
                    "runs check rotating and hot sets against the L2 only when torch can ask "
                    "the device; install a CUDA torch that runs on it",
                )
            )
    drv, nv = _version(f.driver_cuda), _version(f.nvcc_version)
    if drv and nv and nv > drv:
        out.append(
            Finding(
                "error",
                f"the driver {f.driver} runs CUDA up to {f.driver_cuda}, older than nvcc "
                f"{f.nvcc_version}: it cannot load what nvcc builds",
                f"update the NVIDIA driver, or use a CUDA {f.driver_cuda} toolkit",
            )
        )
    tc = _version(f.torch_cuda)
    if tc and nv and tc[0] != nv[0]:
        out.append(
            Finding(
                "warning",
                f"torch is built with CUDA {f.torch_cuda} but nvcc is {f.nvcc_version}: "
                "different major versions",
                "use an nvcc of the same major CUDA version as torch (torch.version.cuda)",
            )
        )
    return out
