"""Builds of the kernel variants: nvcc alone, no torch headers (docs/DESIGN.md §4).

Each variant compiles with nvcc into a shared library with the C ABI of csrc/abi.h (csrc/binding.cpp
over the launcher), loaded through ctypes by workbench/kernels/native.py. Its compiler output (with
the ptxas report) is captured whole, and variants build in parallel (one nvcc per variant, its
sources compiled side by side when it has jobs to spare). Builds live in a cache folder keyed by a
hash of the sources, the flags, the target arch and the compiler's version; a repeat request loads
the cached library directly, so a cache hit takes well under a second.

Several processes may share the cache (two test runs, a TUI beside a CLI): a build holds a file
lock per variant (``filelock``), compiles into a fresh folder of its own and renames it into place
once complete, so a concurrent build of the same variant waits and then finds it built, and no
process sees a half-written library or build.log.

Everything about flags lives here: the device code is compiled with the flags torch's
cpp_extension gave nvcc when the variants were torch extensions, so their kernels stay the same.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

from filelock import FileLock, Timeout

from workbench.core.errors import BadArgument, BuildError
from workbench.core.paths import CACHE_ENV
from workbench.kernels.compiler_log import error_excerpt, kernel_ptxas, parse_ptxas
from workbench.kernels.native import ABI_VERSION, NativeModule
from workbench.kernels.sources import all_source_files, source_hashes  # noqa: F401 (API)
from workbench.kernels.specs import csrc_dir
from workbench.kernels.variants import Variant

CSRC = csrc_dir()  # the built-ins' sources at import (csrc_dir() asks again, for $WORKBENCH_CSRC)


BUILD_META = "workbench_build.json"
# What torch's cpp_extension gave nvcc for every CUDA file (its COMMON_NVCC_FLAGS, and -fPIC for
# the host side): kept, so that the kernels compile exactly as they did as torch extensions.
TORCH_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
    "--compiler-options=-fPIC",
]
# -O3 for speed; -lineinfo so ncu/compute-sanitizer can point at source lines at no runtime cost.
BASE_CUDA_FLAGS = ["-O3", "-lineinfo", "-Xptxas=-v"]
CXX_STD = "-std=c++17"  # the kernels' and launchers' standard (no torch headers need C++20)


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
    module: NativeModule | None = None

    def summary(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("module", "log")}
        d["variant"] = self.variant.name
        return d


def kernel_sources(v: Variant) -> list[Path]:
    return list(v.kernel_spec.sources)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


CUDA_ENV = ("CUDA_HOME", "CUDA_PATH")  # the variables that name the toolkit, in this order


def is_toolkit(folder: str) -> bool:
    """Whether ``folder`` holds a CUDA toolkit: bin/nvcc and include/cuda_runtime.h."""
    p = Path(folder)
    return (p / "bin" / "nvcc").exists() and (p / "include" / "cuda_runtime.h").exists()


def cuda_home() -> str | None:
    """The CUDA toolkit folder: $CUDA_HOME/$CUDA_PATH, else the first candidate that really holds
    bin/nvcc and include/cuda_runtime.h (the PATH's nvcc may be a wrapper script or a link)."""
    cands = [os.environ.get(v) for v in CUDA_ENV]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
        text = Path(nvcc).read_bytes()[:4096] if Path(nvcc).stat().st_size < 4096 else b""
        m = re.search(rb"(/\S+)/bin/nvcc", text)  # a wrapper script that execs the real nvcc
        if m:
            cands.append(m.group(1).decode())
    cands += ["/usr/local/cuda", "/opt/cuda"]
    for c in cands:
        if c and is_toolkit(c):
            return str(Path(c).resolve())
    return None


def target_arch() -> str:
    """'9.0' style: the GPU present, else the first of $TORCH_CUDA_ARCH_LIST, else 9.0 (H200).
    The GPU is asked through torch where torch is already loaded, else through the CUDA driver
    (a build need not import torch: that alone costs seconds), so the light install builds too."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    cap = None if torch is not None else _driver_capability()
    if cap is not None:
        return f"{cap[0]}.{cap[1]}"
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(";", " ").split()
    return env[0].replace("+PTX", "") if env else "9.0"


def _driver_capability() -> tuple[int, int] | None:
    """Compute capability of the first visible GPU, from the CUDA driver; None without one."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None  # no driver: no GPU
    count, dev, major, minor = (ctypes.c_int() for _ in range(4))
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return None
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
    for value, attr in ((major, 75), (minor, 76)):
        if cuda.cuDeviceGetAttribute(ctypes.byref(value), attr, dev) != 0:
            return None
    return major.value, minor.value


def cache_root() -> Path:
    from workbench.core.paths import cache_dir

    return cache_dir() / "build"


def arch_flags(arch: str) -> list[str]:
    """'9.0' -> the -gencode of sm_90 (SASS only, as torch built for TORCH_CUDA_ARCH_LIST=9.0);
    '9.0+PTX' adds the PTX."""
    num = arch.replace("+PTX", "").replace(".", "")
    out = [f"-gencode=arch=compute_{num},code=sm_{num}"]
    if arch.endswith("+PTX"):
        out.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return out


def nvcc_flags(v: Variant, arch: str) -> list[str]:
    """Every nvcc option of ``v``'s compile but the files and include folders (whose contents,
    not paths, the build name hashes): the build name hashes these. A spec's own arch option
    replaces the target's -gencode (as torch's cpp_extension did)."""
    extra = list(v.kernel_spec.cuda_flags)
    arch_opts = [] if any("arch" in f for f in extra) else arch_flags(arch)
    return [*TORCH_NVCC_FLAGS, *arch_opts, *BASE_CUDA_FLAGS, *extra, *v.defines(), CXX_STD]


_NVCC_SAYS: dict[str, str] = {}  # nvcc path -> what its --version printed
# what `nvcc --version` says of itself ("Cuda compilation tools, release 13.0, V13.0.88"): the
# one reading of it, for the build names and for doctor (workbench.kernels.toolchain)
NVCC_RELEASE = re.compile(r"release (\d+\.\d+), V\S+")


def nvcc_release(text: str) -> tuple[str, str] | None:
    """(``"13.0"``, ``"release 13.0, V13.0.88"``) from ``nvcc --version``'s output, or None."""
    m = NVCC_RELEASE.search(text)
    return (m.group(1), m.group(0)) if m else None


def nvcc_says(nvcc: str) -> str:
    """``nvcc --version``'s output, asked once per nvcc and process ("" when it cannot run):
    the build names and doctor read the same answer."""
    if nvcc not in _NVCC_SAYS:
        try:
            _NVCC_SAYS[nvcc] = subprocess.run(
                [nvcc, "--version"], capture_output=True, text=True, timeout=60
            ).stdout
        except (OSError, subprocess.SubprocessError):
            _NVCC_SAYS[nvcc] = ""
    return _NVCC_SAYS[nvcc]


def nvcc_version(home: str | None = None) -> str:
    """nvcc's 'release 13.0, V13.0.88' (asked once per toolkit), or 'no nvcc'."""
    home = home or cuda_home()
    if home is None:
        return "no nvcc"
    rel = nvcc_release(nvcc_says(str(Path(home) / "bin" / "nvcc")))
    return rel[1] if rel else "nvcc of unknown version"


def build_name(v: Variant, arch: str) -> str:
    """The module name of ``v``'s build: its spec's name plus a hash of everything that changes
    the binary (every source file of the spec's tree and include folders, the sources compiled,
    the flags with every parameter value, the arch, nvcc's version and the C ABI's). Two specs over
    different trees get different names, so both load into one process (docs/DESIGN.md §4.1)."""
    h = v.kernel_spec.tree_digest()  # headers included: any change to any kernel source rebuilds
    h.update(json.dumps([nvcc_flags(v, arch), arch, nvcc_version(), ABI_VERSION]).encode())
    calib = "_calib" if v.calib else ""
    slug = re.sub(r"[^A-Za-z0-9]", "_", v.kernel_spec.name)
    return f"wb_{v.kernel}_{slug}{calib}_{h.hexdigest()[:16]}"


_LOADED: dict[str, NativeModule] = {}
# How long a build waits for another process's build of the same variant: a cold build of one
# variant takes seconds, so an hour means that build is stuck, not slow.
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


def writable_cache() -> Path:
    """The build cache folder, made if missing; BadArgument naming it when it cannot be written
    (a read-only or misplaced WORKBENCH_CACHE), before any compile."""
    locks = cache_root() / ".locks"
    try:
        locks.mkdir(parents=True, exist_ok=True)
        for folder in (cache_root(), locks):  # os.access also sees a read-only file system
            if not os.access(folder, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
    except OSError as e:
        raise BadArgument(
            f"the build cache {str(cache_root())!r} cannot be written ({e.strerror}): "
            f"set {CACHE_ENV} to a folder you can write"
        ) from None
    return cache_root()


def cache_lock(name: str) -> FileLock:
    """The lock of one build folder: held while a process builds `name` into the cache, so that a
    second process building the same variant waits and then finds it built."""
    return FileLock(writable_cache() / ".locks" / f"{name}.lock")


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
            _LOADED[res.name] = NativeModule(res.name, res.lib_path)
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


def cached_builds(root: Path | None = None) -> int:
    """How many complete builds the cache holds: folders whose build record says ok (not its
    .locks, a .building-* folder in flight, tune's screened results or a killed build's)."""
    root = cache_root() if root is None else root
    return sum(1 for p in root.iterdir() if _cached_dir_ok(p)) if root.is_dir() else 0


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
    """Builds in parallel (one nvcc per variant at a time, MAX_JOBS shared out among them).

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
    """Compile ``v`` with nvcc into ``out`` (the library, build.log with every command and the
    compiler's whole output, the build's record) and return the build's name; the caller moves
    the folder into the cache. Up to ``max_jobs`` of its sources compile side by side."""
    home = cuda_home()
    if home is None:
        raise BuildError(
            f"build of {v.name}: no CUDA toolkit found (set CUDA_HOME to the folder holding bin/nvcc)"
        )
    name = build_name(v, arch)
    nvcc = str(Path(home) / "bin" / "nvcc")
    flags = [*(f"-I{p}" for p in v.kernel_spec.include_dirs), *nvcc_flags(v, arch)]
    sources = kernel_sources(v)
    objs = [out / f"{i}_{p.stem}.o" for i, p in enumerate(sources)]
    compiles = [
        [nvcc, *flags, "-c", str(p), "-o", str(o)] for p, o in zip(sources, objs, strict=True)
    ]
    # Linked by the host compiler against the toolkit's shared CUDA runtime, as torch linked its
    # extensions: no device-link stub, and at run time the runtime torch has loaded.
    libdir = Path(home) / "lib64"
    link = [os.environ.get("CXX", "c++"), "-shared", *(str(o) for o in objs), f"-L{libdir}"]
    link += ["-lcudart", f"-Wl,-rpath,{libdir}", "-o", str(out / f"{name}.so")]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, min(len(compiles), max_jobs or 1))) as pool:
        steps = list(pool.map(_run, compiles))
    if all(rc == 0 for _, rc in steps):
        steps.append(_run(link))
    seconds = time.perf_counter() - t0
    log = "".join(text for text, _ in steps)
    (out / "build.log").write_text(log)
    if any(rc != 0 for _, rc in steps):
        raise BuildError(
            f"build of {v.name} failed (sm_{arch.replace('.', '')}):\n{error_excerpt(log)}", log
        )
    lib = out / f"{name}.so"
    for o in objs:
        o.unlink(missing_ok=True)  # the library holds them; the cache keeps only what is loaded
    report = parse_ptxas(log)
    meta = {
        "status": "ok",
        "variant": v.name,
        "arch": arch,
        "seconds": round(seconds, 2),
        "lib_sha256": _sha256(lib.read_bytes()),
        "nvcc": nvcc_version(home),
        "ptxas": kernel_ptxas(v, report),
        "ptxas_all": report,
        "log": log[-20000:],
    }
    (out / BUILD_META).write_text(json.dumps(meta, indent=1))
    return name


def _run(cmd: list[str]) -> tuple[str, int]:
    """(the command line and everything it printed, its exit status)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        return f"$ {shlex.join(cmd)}\n{e}\n", 1
    return f"$ {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}", proc.returncode
