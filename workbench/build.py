"""Builds of the kernel variants: the one caller of torch.utils.cpp_extension.load (docs/DESIGN.md §4).

Each variant compiles in a child process (`python -m workbench.build VARIANT`) so that its compiler
output (with the ptxas report) is captured whole and builds can run in parallel; the parent then
imports the built library. Builds live in a cache folder keyed by a hash of the sources, the flags,
the target arch and the torch/CUDA versions; a repeat request imports the cached library directly,
without torch's build machinery, so a cache hit takes well under a second.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType

from workbench.errors import BuildError
from workbench.variants import Variant, parse_arm

REPO = Path(__file__).resolve().parent.parent
CSRC = REPO / "csrc"


def csrc_dir() -> Path:
    """Kernel sources: csrc/ of this checkout, or $WORKBENCH_CSRC (tests build a broken copy)."""
    return Path(os.environ.get("WORKBENCH_CSRC", CSRC))


BUILD_META = "workbench_build.json"
# -O3 for speed; -lineinfo so ncu/compute-sanitizer can point at source lines at no runtime cost.
# The C++ standard is left to torch (2.14 needs C++20 for its own headers, older torch uses C++17).
BASE_CUDA_FLAGS = ["-O3", "-lineinfo", "-Xptxas=-v"]
BASE_CXX_FLAGS = ["-O3"]


@dataclass
class BuildResult:
    variant: Variant
    name: str
    build_dir: str
    lib_path: str
    lib_sha256: str
    seconds: float  # compile time of the build (as recorded when it was made)
    cache_hit: bool
    load_seconds: float
    arch: str
    ptxas: dict = field(default_factory=dict)  # registers, spill_stores, spill_loads, stack, smem
    log: str = ""
    module: ModuleType | None = None

    def summary(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("module", "log")}
        d["variant"] = self.variant.name
        return d


def kernel_sources(kernel: str) -> list[Path]:
    return [csrc_dir() / f"{kernel}.cu", csrc_dir() / "binding.cpp"]


def all_source_files() -> list[Path]:
    d = csrc_dir()
    return sorted([*d.glob("*.cu"), *d.glob("*.cpp"), *d.glob("*.h"), *d.glob("kernels/*.cuh")])


def source_hashes() -> dict[str, str]:
    """Relative path -> SHA-256 of every kernel source (for provenance)."""
    d = csrc_dir()
    return {f"csrc/{p.relative_to(d)}": _sha256(p.read_bytes()) for p in all_source_files()}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cuda_home() -> str | None:
    """The CUDA toolkit folder: $CUDA_HOME/$CUDA_PATH, else the first candidate that really holds
    bin/nvcc and include/cuda_runtime.h (the PATH's nvcc may be a wrapper script or a link)."""
    cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
        text = Path(nvcc).read_bytes()[:4096] if Path(nvcc).stat().st_size < 4096 else b""
        m = re.search(rb"(/\S+)/bin/nvcc", text)  # a wrapper script that execs the real nvcc
        if m:
            cands.append(m.group(1).decode())
    cands += ["/usr/local/cuda", "/opt/cuda"]
    for c in cands:
        if (
            c
            and (Path(c) / "bin" / "nvcc").exists()
            and (Path(c) / "include" / "cuda_runtime.h").exists()
        ):
            return str(Path(c).resolve())
    return None


def target_arch() -> str:
    """'9.0' style: the GPU present, else the first of $TORCH_CUDA_ARCH_LIST, else 9.0 (H200)."""
    import torch

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(";", " ").split()
    return env[0].replace("+PTX", "") if env else "9.0"


def cache_root() -> Path:
    return Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "workbench")) / "build"


def _flags(v: Variant) -> tuple[list[str], list[str]]:
    return [*BASE_CUDA_FLAGS, *v.defines()], [*BASE_CXX_FLAGS, *v.defines()]


def build_name(v: Variant, arch: str) -> str:
    import torch

    cuda_flags, cxx_flags = _flags(v)
    h = hashlib.sha256()
    for p in all_source_files():  # headers included: any change to any kernel source rebuilds
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    h.update(
        json.dumps([cuda_flags, cxx_flags, arch, torch.__version__, torch.version.cuda]).encode()
    )
    calib = "_calib" if v.calib else ""
    return f"wb_{v.kernel}_{v.layout}_{v.reader}{calib}_{h.hexdigest()[:16]}"


_PTXAS_FN = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_PTXAS_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per kernel entry point: registers, smem, stack frame and spill bytes from `ptxas -v`."""
    out: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        if m := _PTXAS_FN.search(line):
            current = out.setdefault(m.group(1), {"arch": m.group(2)})
        elif current is not None and (m := _PTXAS_FRAME.search(line)):
            current.update(
                stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3))
            )
        elif current is not None and (m := _PTXAS_USED.search(line)):
            current.update(registers=int(m.group(1)), smem=int(m.group(2) or 0))
    return out


def kernel_ptxas(v: Variant, report: dict[str, dict]) -> dict:
    for fn, info in report.items():
        if f"{v.kernel}_kernel" in fn:
            return {"function": fn, **info}
    return {}


def _import_library(name: str, lib_path: str) -> ModuleType:
    import torch  # noqa: F401  (the extension links against torch's libraries)

    loader = importlib.machinery.ExtensionFileLoader(name, lib_path)
    spec = importlib.util.spec_from_file_location(name, lib_path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_LOADED: dict[str, ModuleType] = {}


def _cached(v: Variant, arch: str, name: str | None = None) -> BuildResult | None:
    name = name or build_name(v, arch)
    bdir = cache_root() / name
    meta_path = bdir / BUILD_META
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    lib = bdir / f"{name}.so"
    if meta.get("status") != "ok" or not lib.exists():
        return None
    return BuildResult(
        variant=v,
        name=name,
        build_dir=str(bdir),
        lib_path=str(lib),
        lib_sha256=meta["lib_sha256"],
        seconds=meta["seconds"],
        cache_hit=True,
        load_seconds=0.0,
        arch=arch,
        ptxas=meta.get("ptxas", {}),
        log=meta.get("log", ""),
    )


def cached_build(v: Variant) -> BuildResult | None:
    """The cached build of `v` for the current sources and target, if there is one (no compiling,
    no loading): what a variant list shows as "cached"."""
    return _cached(v, target_arch())


def build_variant(v: Variant, *, load: bool = True, max_jobs: int | None = None) -> BuildResult:
    """Build (or find in the cache) one variant; import it when `load`. Raises BuildError."""
    t0 = time.perf_counter()
    arch = target_arch()
    res = _cached(v, arch)
    if res is None:
        # The child names what it built: if csrc/ changed meanwhile, that is the older sources' build.
        built = _build_in_child(v, arch, max_jobs)
        res = _cached(v, arch, built)
        if res is None:
            raise BuildError(
                f"build of {v.name} finished but left no library in {cache_root() / built}"
            )
        res.cache_hit = False
    if load:
        if res.name not in _LOADED:
            _LOADED[res.name] = _import_library(res.name, res.lib_path)
        res.module = _LOADED[res.name]
    res.load_seconds = time.perf_counter() - t0
    return res


def build_many(
    variants: list[Variant], max_jobs: int | None = None, load: bool = True
) -> list[BuildResult]:
    """Builds in parallel (one child process per variant, ninja's MAX_JOBS shared out)."""
    jobs = max_jobs or int(os.environ.get("MAX_JOBS", os.cpu_count() or 1))
    workers = max(1, min(len(variants), jobs))
    per_child = max(1, jobs // workers)
    with ThreadPoolExecutor(workers) as pool:
        results = list(
            pool.map(lambda v: build_variant(v, load=False, max_jobs=per_child), variants)
        )
    if load:
        results = [build_variant(r.variant) if r.module is None else r for r in results]
    return results


def _build_in_child(v: Variant, arch: str, max_jobs: int | None) -> str:
    home = cuda_home()
    if home is None:
        raise BuildError(
            f"build of {v.name}: no CUDA toolkit found (set CUDA_HOME to the folder holding bin/nvcc)"
        )
    env = dict(os.environ, CUDA_HOME=home, TORCH_CUDA_ARCH_LIST=arch)
    if max_jobs:
        env["MAX_JOBS"] = str(max_jobs)
    cmd = [sys.executable, "-m", "workbench.build", v.name, "--arch", arch]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        log = proc.stdout + proc.stderr
        raise BuildError(
            f"build of {v.name} failed (sm_{arch.replace('.', '')}):\n{error_excerpt(log)}", log
        )
    built = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("WB_BUILT ")]
    if not built:
        raise BuildError(
            f"build of {v.name}: the build process did not say what it built", proc.stdout
        )
    return built[-1]


def error_excerpt(log: str, limit: int = 25) -> str:
    """The compiler's error lines (with a line of context), not the whole traceback wall."""
    lines = log.splitlines()
    keep = [i for i, ln in enumerate(lines) if re.search(r"\berror\b|Error:|FAILED", ln)]
    picked: list[str] = []
    for i in keep:
        for ln in lines[i : i + 2]:
            if ln not in picked:
                picked.append(ln)
    return "\n".join(picked[:limit] or lines[-limit:])


def _child_main(argv: list[str]) -> int:
    """Runs inside the child process: compile with torch's JIT + ninja, record the result."""
    ap = argparse.ArgumentParser(prog="python -m workbench.build")
    ap.add_argument("variant", help="like w13:b3-coop or w2:b3-scalar+calib")
    ap.add_argument("--arch", required=True)
    a = ap.parse_args(argv)
    kernel, rest = a.variant.split(":")
    calib = rest.endswith("+calib")
    v = parse_arm(kernel, rest.removesuffix("+calib"), calib=calib)

    from torch.utils.cpp_extension import load

    name = build_name(v, a.arch)
    bdir = cache_root() / name
    bdir.mkdir(parents=True, exist_ok=True)
    cuda_flags, cxx_flags = _flags(v)
    t0 = time.perf_counter()
    logf = bdir / "build.log"
    # ninja's output (nvcc's ptxas report included) goes to fd 1 when verbose: capture it in a file.
    saved = os.dup(1)
    with open(logf, "w") as fh:
        os.dup2(fh.fileno(), 1)
        try:
            load(
                name=name,
                sources=[str(p) for p in kernel_sources(v.kernel)],
                extra_cflags=cxx_flags,
                extra_cuda_cflags=cuda_flags,
                extra_include_paths=[str(csrc_dir())],
                build_directory=str(bdir),
                verbose=True,
            )
        except Exception:
            sys.stdout.flush()
            os.dup2(saved, 1)
            sys.stderr.write(logf.read_text())  # the compiler's own words go back to the parent
            return 1
        sys.stdout.flush()
        os.dup2(saved, 1)
    seconds = time.perf_counter() - t0
    log = logf.read_text()
    lib = bdir / f"{name}.so"
    report = parse_ptxas(log)
    meta = {
        "status": "ok",
        "variant": v.name,
        "arch": a.arch,
        "seconds": round(seconds, 2),
        "lib_sha256": _sha256(lib.read_bytes()),
        "ptxas": kernel_ptxas(v, report),
        "ptxas_all": report,
        "log": log[-20000:],
    }
    (bdir / BUILD_META).write_text(json.dumps(meta, indent=1))
    print(f"WB_BUILT {name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_child_main(sys.argv[1:]))
