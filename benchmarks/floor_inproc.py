"""The floor probe (benchmarks/floor_kernel.cuh) timed inside bench_kernels.py's process.

The standalone `floor_probe.cu` ran in its own process with its own buffers; timing the same kernel
here, with the bench's graph geometry (calls per graph, graph sets alternated on the rotating set)
and its `time_graphs`, makes "kernel / floor" a side-by-side ratio. Only the launch shapes that were
best in the standalone runs (benchmarks/results/h200_floor_probe.txt, and `floor_probe sweep` for
264 x 256) are timed; the floor of a (kernel, set) is the fastest of them, and with arithmetic the
fastest over shapes and structures (``kinds``), hot and rotating each on its own.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
# grid x block of the standalone sweep's fastest rows for W13's and W2's bytes (PDL on, no
# clusters), and 264 x 256, the arithmetic's best in `floor_probe sweep`: every (kernel, set)
# takes the fastest of all of them
SHAPES = ((300, 256), (264, 512), (264, 256), (132, 1024), (132, 512), (80, 640), (160, 320))
# the arithmetic mode's structures (``FloorProbe.launch``'s ``kind``): floor+math is the fastest of "u8" (eight
# loads per round, up to 800 threads), "u4x2" and "u2x2" (four or two per round, two CTAs per SM);
# "arith" is the arithmetic alone, no loads
MATH_KINDS = ("u8", "u4x2", "u2x2")


KINDS = ("u8", "u4x2", "u2x2", "arith")  # floor_ext.cu's FloorKind, in its order


def load_probe() -> FloorProbe:
    """Build (or reuse) the probe's library with nvcc alone, as workbench builds its variants
    (workbench/kernels/build.py: the same nvcc flags and target arch, linked against the toolkit's
    shared CUDA runtime); the name hashes the sources, the command and the compiler's version, so
    an edit rebuilds it. A second process building the same name waits on its lock."""
    from workbench.kernels import build

    home = build.cuda_home()
    if home is None:
        raise RuntimeError("floor probe: no CUDA toolkit found (set CUDA_HOME to its folder)")
    kernels = HERE.parent / "csrc" / "kernels"  # floor_kernel.cuh includes the kernels' arithmetic
    sources = [HERE / "floor_ext.cu", HERE / "floor_kernel.cuh"]  # the first compiled, all hashed
    sources += [kernels / "awq_meta.cuh", kernels / "layout.h"]
    flags = [*build.TORCH_NVCC_FLAGS, *build.arch_flags(build.target_arch()), "-O3", build.CXX_STD]
    libdir = Path(home) / "lib64"
    # the toolkit's shared CUDA runtime: at run time, the one torch has loaded
    link = ["-shared", "--cudart=shared", f"-L{libdir}", f"--linker-options=-rpath,{libdir}"]
    digest = hashlib.sha256(
        b"".join(p.read_bytes() for p in sources)
        + " ".join([*flags, *link]).encode()
        + build.nvcc_version(home).encode()
    ).hexdigest()[:12]
    name = f"wb_floor_probe_{digest}"
    lib = build.writable_cache() / name / f"{name}.so"
    with build.cache_lock(name):
        if not lib.exists():
            lib.parent.mkdir(exist_ok=True)
            tmp = lib.with_name(f".{lib.name}.{os.getpid()}")
            cmd = [str(Path(home) / "bin" / "nvcc"), *flags, f"-I{HERE}", *link, str(sources[0])]
            cmd += ["-o", str(tmp)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tmp.unlink(missing_ok=True)
                log = f"$ {shlex.join(cmd)}\n{proc.stderr[-4000:]}"
                raise RuntimeError(f"floor probe: the build failed:\n{log}")
            os.replace(tmp, lib)  # whole or not at all
    return FloorProbe(lib)


class FloorProbe:
    """The probe's library (floor_ext.cu) through ctypes: its launch bounds, and ``launch``, which
    checks every argument with a message that names it, then launches on torch's current stream."""

    def __init__(self, path: Path) -> None:
        self.__file__ = str(path)
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        lib.wb_floor_error_string.restype = ctypes.c_char_p
        lib.wb_floor_error_string.argtypes = [ctypes.c_int]
        lib.wb_floor_launch.restype = ctypes.c_int
        lib.wb_floor_launch.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int,
            ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p,
        ]  # fmt: skip
        self._lib = lib
        self.MATH_THREADS = lib.wb_floor_math_threads()  # the largest block of kind "u8"
        self.MATH2_THREADS = lib.wb_floor_math2_threads()  # ... of "u4x2", "u2x2" and "arith"

    def launch(self, src, ids, out, grid: int, block: int, pdl: bool, math16: int = 0,
               kind: str = "u8") -> None:  # fmt: skip
        """Stream src's bytes (16-byte loads after one id load); the first ``math16`` elements also
        go through the kernels' dequantize and tensor-core products, in the structure ``kind``
        names ("arith": the arithmetic on words made from the index, no loads). ValueError names
        the argument it cannot launch with: the launch's own first (they need no device), then
        the tensors'."""
        if not (1 <= grid <= 4096 and 32 <= block <= 1024 and block % 32 == 0):
            raise ValueError("floor_launch: grid in 1..4096, block a multiple of 32 in 32..1024")
        if kind not in KINDS:
            raise ValueError(
                f"floor_launch: kind must be 'u8', 'u4x2', 'u2x2' or 'arith', not {kind!r}"
            )
        if math16 <= 0 and kind != "u8":
            raise ValueError(
                f"floor_launch: kind {kind!r} needs math16 > 0 (with math16 == 0 the probe only "
                "streams: leave kind at 'u8')"
            )
        bound = self.MATH_THREADS if kind == "u8" else self.MATH2_THREADS
        if math16 and block > bound:
            raise ValueError(
                f"floor_launch: with math16 > 0, block must be <= {bound} (the launch bound of the "
                f"arithmetic mode's kind {kind!r})"
            )
        n = src.numel()
        if n % 16 or not (0 <= math16 <= n // 16 and math16 % 32 == 0):
            raise ValueError(
                "floor_launch: math16 must be a multiple of 32 in 0..src's 16-byte elements"
            )
        if math16 and n % 512:
            raise ValueError(
                "floor_launch: with math16 > 0, src must be a multiple of 512 bytes (32 16-byte "
                "elements: the arithmetic mode's loop must be warp-uniform)"
            )
        if not (src.is_cuda and src.is_contiguous() and src.dtype == torch.uint8):
            raise ValueError(
                "floor_launch: src must be a contiguous CUDA uint8 tensor of a multiple of 16 bytes"
            )
        if not (ids.is_cuda and ids.dtype == torch.int32 and ids.numel() >= 8):
            raise ValueError("floor_launch: ids must be a CUDA int32 tensor of >= 8 zeros")
        if not (out.is_cuda and out.dtype == torch.int32 and out.numel() >= grid):
            raise ValueError("floor_launch: out must be a CUDA int32 tensor of >= grid words")
        stream = torch.cuda.current_stream(src.device).cuda_stream
        err = self._lib.wb_floor_launch(
            src.data_ptr(), ids.data_ptr(), out.data_ptr(), n // 16, grid, block, int(bool(pdl)),
            math16, KINDS.index(kind), stream,
        )  # fmt: skip
        if err:
            raise RuntimeError(f"floor_launch: {self._lib.wb_floor_error_string(err).decode()}")


def time_floor(
    ext,
    call_bytes: int,
    calls: int,
    n_sets: int,
    replays: int,
    time_issues: Callable[[list, int], float],
    math16: int = 0,
    kinds: tuple[str, ...] = MATH_KINDS,
) -> dict:
    """µs per call of the probe streaming ``call_bytes`` per call, hot and rotating, per shape.
    With ``math16`` > 0 the first ``math16`` 16-byte elements (the call's weight words) also go
    through the kernels' dequantize and tensor-core products (floor_kernel.cuh, arithmetic mode),
    in each structure of ``kinds`` (``("arith",)``: the arithmetic with no loads).

    Hot: every call reads the same slice. Rotating: each call of each of ``n_sets`` graphs reads
    its own slice, as the bench's rotating set reads its own banks. ``time_issues(issues,
    replays)`` is the bench's timer: it captures one graph per issue function and returns the
    median ms per replay."""
    if math16 and not kinds:
        raise ValueError("time_floor: math16 > 0 needs at least one structure in kinds")
    n16 = -(-call_bytes // 16)
    if math16:  # the arithmetic mode's loop is warp-uniform: whole 32-element (512-byte) rows
        n16 = -(-n16 // 32) * 32
    slices = calls * n_sets
    buf = torch.randint(0, 256, (slices, n16 * 16), dtype=torch.uint8, device="cuda")
    ids = torch.zeros(64, dtype=torch.int32, device="cuda")
    out = torch.zeros(4096, dtype=torch.int32, device="cuda")
    rows = {}
    for (grid, block), kind in ((sh, k) for sh in SHAPES for k in (kinds if math16 else ("",))):
        if math16 and block > (ext.MATH_THREADS if kind == "u8" else ext.MATH2_THREADS):
            continue
        row = {}
        for set_name in ("hot", "rotating"):
            issues = []
            for s in range(n_sets if set_name == "rotating" else 1):
                idx = [s * calls + c if set_name == "rotating" else 0 for c in range(calls)]

                def issue(idx=idx, grid=grid, block=block, kind=kind):
                    for i in idx:
                        ext.launch(buf[i], ids, out, grid, block, True, math16, kind or "u8")

                issues.append(issue)
            row[set_name] = round(time_issues(issues, replays) * 1000 / calls, 3)
        rows[f"{grid}x{block}" + (f" {kind}" if kind else "")] = row
    best = {s: min(r[s] for r in rows.values()) for s in ("hot", "rotating")}
    return {"shapes": rows, "best": best}
