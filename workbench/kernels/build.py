"""Builds of the kernel variants: the one caller of torch.utils.cpp_extension.load (docs/DESIGN.md §4).

Each variant compiles in a child process (`python -m workbench.kernels.build VARIANT`) so that its compiler
output (with the ptxas report) is captured whole and builds can run in parallel; the parent then
imports the built library. Builds live in a cache folder keyed by a hash of the sources, the flags,
the target arch and the torch/CUDA versions; a repeat request imports the cached library directly,
without torch's build machinery, so a cache hit takes well under a second.

Several processes may share the cache (two test runs, a TUI beside a CLI): a build holds a file
lock per variant (``filelock``), compiles into a fresh folder of its own and renames it into place
once complete, so a concurrent build of the same variant waits and then finds it built, and no
process sees a half-written library or build.log.
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
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType

from filelock import FileLock, Timeout

from workbench.core.errors import BuildError
from workbench.kernels.compiler_log import error_excerpt, kernel_ptxas, parse_ptxas
from workbench.kernels.sources import all_source_files, source_hashes  # noqa: F401 (API)
from workbench.kernels.specs import REPO, load_spec
from workbench.kernels.variants import Variant, parse_arm

CSRC = REPO / "csrc"


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


def kernel_sources(v: Variant) -> list[Path]:
    return list(v.kernel_spec.sources)


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
    extra = list(v.kernel_spec.cuda_flags)
    return [*BASE_CUDA_FLAGS, *extra, *v.defines()], [*BASE_CXX_FLAGS, *v.defines()]


def build_name(v: Variant, arch: str) -> str:
    """The module name of ``v``'s build: its spec's name plus a hash of everything that changes
    the binary (every source file of the spec's tree and include folders, the sources compiled,
    the flags with every parameter value, the arch, torch and CUDA versions). Two specs over
    different trees get different names, so both import into one process (docs/DESIGN.md §4.1)."""
    import torch

    cuda_flags, cxx_flags = _flags(v)
    h = v.kernel_spec.tree_digest()  # headers included: any change to any kernel source rebuilds
    h.update(
        json.dumps([cuda_flags, cxx_flags, arch, torch.__version__, torch.version.cuda]).encode()
    )
    calib = "_calib" if v.calib else ""
    slug = re.sub(r"[^A-Za-z0-9]", "_", v.kernel_spec.name)
    return f"wb_{v.kernel}_{slug}{calib}_{h.hexdigest()[:16]}"


def _import_library(name: str, lib_path: str) -> ModuleType:
    import torch  # noqa: F401  (the extension links against torch's libraries)

    loader = importlib.machinery.ExtensionFileLoader(name, lib_path)
    spec = importlib.util.spec_from_file_location(name, lib_path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_LOADED: dict[str, ModuleType] = {}
# How long a build waits for another process's build of the same variant: a cold build of one
# variant takes a minute or two, so an hour means that build is stuck, not slow.
LOCK_WAIT_S = 3600.0


@dataclass(frozen=True)
class BuildEvent:
    """One step of a variant's build, for progress displays (the CLI's, the TUI's variant matrix).

    Sent from build_many's worker threads: a UI must hand it to its own thread (a Textual app:
    ``App.call_from_thread``)."""

    variant: str  # e.g. "w13:b3-coop"
    state: str  # "started" (compiling), "waiting" (another process builds it), "cached", "built",
    # or "failed"
    seconds: float  # since this variant was asked for
    message: str = ""  # "waiting": the lock file; "failed": the error's first line


Progress = Callable[[BuildEvent], None]


def _cached(v: Variant, arch: str, name: str | None = None) -> BuildResult | None:
    name = name or build_name(v, arch)
    bdir = cache_root() / name
    try:
        meta = json.loads((bdir / BUILD_META).read_text())
    except (OSError, ValueError):
        return None  # missing or unreadable: not a usable build, so build it (again)
    lib = bdir / f"{name}.so"
    if not isinstance(meta, dict) or meta.get("status") != "ok" or not lib.exists():
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


def cache_lock(name: str) -> FileLock:
    """The lock of one build folder: held while a process builds `name` into the cache, so that a
    second process building the same variant waits and then finds it built."""
    locks = cache_root() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    return FileLock(locks / f"{name}.lock")


def build_variant(
    v: Variant,
    *,
    load: bool = True,
    max_jobs: int | None = None,
    progress: Progress | None = None,
) -> BuildResult:
    """Build (or find in the cache) one variant; import it when `load`. Raises BuildError.

    ``progress`` receives this variant's BuildEvents (from the calling thread)."""
    t0 = time.perf_counter()

    def emit(state: str, message: str = "") -> None:
        if progress is not None:
            progress(BuildEvent(v.name, state, time.perf_counter() - t0, message))

    arch = target_arch()
    name = build_name(v, arch)
    try:
        res = _cached(v, arch, name) or _build_locked(v, arch, name, max_jobs, emit)
    except BuildError as e:
        emit("failed", str(e).splitlines()[0] if str(e) else "")
        raise
    emit("cached" if res.cache_hit else "built")
    if load:
        if res.name not in _LOADED:
            _LOADED[res.name] = _import_library(res.name, res.lib_path)
        res.module = _LOADED[res.name]
    res.load_seconds = time.perf_counter() - t0
    return res


def _build_locked(
    v: Variant, arch: str, name: str, max_jobs: int | None, emit: Callable[..., None]
) -> BuildResult:
    """Compile `v` under its cache lock, into a fresh folder renamed into place when complete:
    a concurrent build waits, and no process ever sees a half-written build or build.log."""
    lock = cache_lock(name)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        emit("waiting", str(lock.lock_file))
        try:
            lock.acquire(timeout=LOCK_WAIT_S)
        except Timeout:
            raise BuildError(
                f"build of {v.name}: another build has held {lock.lock_file} for "
                f"{LOCK_WAIT_S:.0f} s; if none is running, delete that file"
            ) from None
    try:
        res = _cached(v, arch, name)  # built by the process we waited for
        if res is not None:
            return res
        emit("started")
        tmp = Path(tempfile.mkdtemp(prefix=f".building-{name}-", dir=cache_root()))
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache folder it becomes is not
        try:
            # The child names what it built: if csrc/ changed meanwhile, the older sources' build.
            built = _build_in_child(v, arch, max_jobs, tmp)
            _install(tmp, cache_root() / built)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # failed or interrupted: leave nothing
        res = _cached(v, arch, built)
        if res is None:
            raise BuildError(
                f"build of {v.name} finished but left no library in {cache_root() / built}"
            )
        res.cache_hit = False
        return res
    finally:
        lock.release()


def _install(tmp: Path, final: Path) -> None:
    """Move a finished build folder into place with one rename (atomic on one file system)."""
    if final.exists():
        if _cached_dir_ok(final):
            return  # a complete build of the same name is already there: keep it
        shutil.rmtree(final)  # an incomplete folder (a build killed before the cache had locks)
    os.rename(tmp, final)


def _cached_dir_ok(bdir: Path) -> bool:
    try:
        meta = json.loads((bdir / BUILD_META).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("status") == "ok"


def build_many(
    variants: list[Variant],
    max_jobs: int | None = None,
    load: bool = True,
    *,
    progress: Progress | None = None,
) -> list[BuildResult]:
    """Builds in parallel (one child process per variant, ninja's MAX_JOBS shared out).

    ``progress`` receives every variant's BuildEvents, from the worker threads. On a failure or
    Ctrl-C, builds not yet started are dropped; finished ones stay in the cache."""
    jobs = max_jobs or int(os.environ.get("MAX_JOBS", os.cpu_count() or 1))
    workers = max(1, min(len(variants), jobs))
    per_child = max(1, jobs // workers)
    pool = ThreadPoolExecutor(workers)
    try:
        futures = [
            pool.submit(build_variant, v, load=False, max_jobs=per_child, progress=progress)
            for v in variants
        ]
        results = [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if load:
        results = [build_variant(r.variant) if r.module is None else r for r in results]
    return results


def _build_in_child(v: Variant, arch: str, max_jobs: int | None, out: Path) -> str:
    home = cuda_home()
    if home is None:
        raise BuildError(
            f"build of {v.name}: no CUDA toolkit found (set CUDA_HOME to the folder holding bin/nvcc)"
        )
    env = dict(os.environ, CUDA_HOME=home, TORCH_CUDA_ARCH_LIST=arch)
    if max_jobs:
        env["MAX_JOBS"] = str(max_jobs)
    cmd = [
        sys.executable,
        "-m",
        "workbench.kernels.build",
        v.name,
        "--arch",
        arch,
        "--out",
        str(out),
    ]
    if v.spec is not None:
        cmd += ["--spec", v.spec.origin]
    cmd += [f"--param={n}={val}" for n, val in v.params]
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


def _child_main(argv: list[str]) -> int:
    """Runs inside the child process: compile with torch's JIT + ninja into --out, record the
    result there; the parent moves the folder into the cache."""
    ap = argparse.ArgumentParser(prog="python -m workbench.kernels.build")
    ap.add_argument("variant", help="like w13:b3-coop or w2:b3-scalar+calib")
    ap.add_argument("--arch", required=True)
    ap.add_argument("--out", required=True, help="empty folder to build in (the parent renames it)")
    ap.add_argument("--spec", help="the spec file of a user's variant")
    ap.add_argument("--param", action="append", default=[], help="NAME=VALUE of a parameter")
    a = ap.parse_args(argv)
    kernel, rest = a.variant.split(":")
    calib = rest.endswith("+calib")
    params = {k: int(x) for k, _, x in (p.partition("=") for p in a.param)}
    if a.spec:
        v = Variant.of_spec(load_spec(a.spec), calib=calib, params=params)
    else:
        base = parse_arm(kernel, rest.removesuffix("+calib").split("[")[0], calib=calib)
        v = Variant.of_spec(base.kernel_spec, calib=calib, params=params)

    from torch.utils.cpp_extension import load

    name = build_name(v, a.arch)
    bdir = Path(a.out)
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
                sources=[str(p) for p in kernel_sources(v)],
                extra_cflags=cxx_flags,
                extra_cuda_cflags=cuda_flags,
                extra_include_paths=[str(p) for p in v.kernel_spec.include_dirs],
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
