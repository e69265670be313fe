"""The floor probe (benchmarks/floor_kernel.cuh) timed inside bench_kernels.py's process.

The standalone `floor_probe.cu` ran in its own process with its own buffers; timing the same kernel
here, with the bench's graph geometry (calls per graph, graph sets alternated on the rotating set)
and its `time_graphs`, makes "kernel / floor" a side-by-side ratio. Only the launch shapes that were
best in the standalone runs (benchmarks/results/h200_floor_probe.txt, and `floor_probe sweep` for
264 x 256) are timed; the floor of a (kernel, set) is the fastest of them, and with arithmetic the
fastest over shapes and structures (``kinds``), hot and rotating each on its own.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
# grid x block of the standalone sweep's fastest rows for W13's and W2's bytes (PDL on, no
# clusters), and 264 x 256, the arithmetic's best in `floor_probe sweep`: every (kernel, set)
# takes the fastest of all of them
SHAPES = ((300, 256), (264, 512), (264, 256), (132, 1024), (132, 512), (80, 640), (160, 320))
# the arithmetic mode's structures (floor_ext_binding.cpp `kind`): floor+math is the fastest of "u8" (eight
# loads per round, up to 800 threads), "u4x2" and "u2x2" (four or two per round, two CTAs per SM);
# "arith" is the arithmetic alone, no loads
MATH_KINDS = ("u8", "u4x2", "u2x2")


def load_extension():
    """Build (or reuse) the probe extension; the name hashes its sources, so edits rebuild it."""
    from workbench.kernels.build import cache_root, cuda_home

    home = cuda_home()  # as workbench's own builds find the toolkit (the PATH's nvcc may be a link)
    ldflags, includes = [], []
    if home:
        os.environ.setdefault("CUDA_HOME", home)
        # torch fixes its CUDA_HOME when cpp_extension is first imported, which may be before this
        # (it then guesses the parent of the PATH's nvcc link, and the link step misses cudart)
        ldflags = [f"-L{d}" for d in (Path(home) / "lib64", Path(home) / "lib") if d.is_dir()]
        # the binding is compiled by the host compiler, which needs the toolkit's headers named
        includes = [str(Path(home) / "include")]
    from torch.utils.cpp_extension import load

    kernels = HERE.parent / "csrc" / "kernels"  # floor_kernel.cuh includes the kernels' arithmetic
    sources = [  # the two compiled first; the rest are included
        HERE / "floor_ext.cu",
        HERE / "floor_ext_binding.cpp",
        HERE / "floor_ext.h",
        HERE / "floor_kernel.cuh",
        kernels / "awq_meta.cuh",
        kernels / "layout.h",
    ]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    name = f"wb_floor_probe_{digest}"
    build_dir = cache_root() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    return load(
        name,
        [str(sources[0]), str(sources[1])],
        extra_cflags=["-O2", f"-I{HERE}"],
        extra_cuda_cflags=["-O3", f"-I{HERE}"],
        extra_ldflags=ldflags,
        extra_include_paths=includes,
        build_directory=str(build_dir),
        verbose=False,
    )


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
