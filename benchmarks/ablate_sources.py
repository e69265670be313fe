"""Timing-only ablations of the kernels: writes edited copies of csrc/ whose outputs are WRONG on
purpose, to locate where a call's time goes (benchmarks/results/README.md, "Ablations").

    python3 benchmarks/ablate_sources.py csrc /tmp/ablate
    WORKBENCH_CSRC=/tmp/ablate/E1_null python3 benchmarks/bench_kernels.py --arms b3-scalar

E1_null       return right after the prologue: launch, clusters and PDL with an empty body
E2_nocombine  skip the split-K combine: split 0 writes its own partial
E3_noload     weights and metadata from register constants instead of memory
E4_nocompute  E3, and no dequantize / tensor-core work either (the constants feed one add)
E5_bare       E4 without the split-K combine
E6_noinputs   E5 without the global loads of ids, router weights and activations

Never time these against the real kernels in `workbench ab`: they fail the numerics gate by design.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path


def _edit(src: Path, out: Path, name: str, fn) -> None:
    d = out / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d)
    for kernel in ("w13", "w2"):
        p = d / "kernels" / f"{kernel}.cuh"
        text = p.read_text()
        edited = fn(kernel, text)
        if edited == text:
            raise SystemExit(f"{name}: nothing to edit in {p} (the kernel source changed?)")
        p.write_text(edited)


def _null(kernel: str, s: str) -> str:
    return s.replace("  kernel_prologue();\n", "  kernel_prologue();\n  if (p.K > 0) return;\n")


def _nocombine(kernel: str, s: str) -> str:
    split = "blockIdx.z" if kernel == "w13" else "blockIdx.y"
    return re.sub(r"if \(!combine_splits<[^;]*;", f"if ({split} != 0) return;", s, flags=re.S)


def _noload(kernel: str, s: str) -> str:
    s = re.sub(
        r"w\[(u|k)\] = __ldg\([^;]*;",
        lambda m: f"w[{m[1]}] = make_uint4(lane * 3 + {m[1]}, lane ^ 5, 0x12345678u + lane, 7u);",
        s,
    )
    return re.sub(r"m\[(u|k)\] = read_meta\([^;]*;", lambda m: f"m[{m[1]}] = 0x1c002c00u;", s)


def _nocompute(kernel: str, s: str) -> str:
    s = _noload(kernel, s)
    if kernel == "w13":
        return s.replace(
            "if (g < gend) dot_group(w[u], quad_meta(m[u], lane), load_xfrag(xs, g - gbeg, lane), acc);",
            "if (g < gend) acc.d[0][0] += __uint_as_float(w[u].x ^ m[u]);",
        )
    return s.replace(
        "dot_group(w[k], quad_meta(m[k], lane), load_xfrag(xs, ub + k - ubeg, lane), part);",
        "part.d[0][0] = __uint_as_float(w[k].x ^ m[k]);",
    )


def _bare(kernel: str, s: str) -> str:
    return _nocombine(kernel, _nocompute(kernel, s))


def _noinputs(kernel: str, s: str) -> str:
    s = _bare(kernel, s)
    s = re.sub(r"  stage_activations\([^;]*;\n", "", s)
    s = s.replace("const int e = __ldg(p.ids + j);", "const int e = j;")
    s = s.replace(
        "ids[threadIdx.x] = __ldg(p.ids + threadIdx.x);", "ids[threadIdx.x] = threadIdx.x;"
    )
    return s.replace("rws[threadIdx.x] = __ldg(p.rw + threadIdx.x);", "rws[threadIdx.x] = 0.5f;")


ABLATIONS = (
    ("E1_null", _null),
    ("E2_nocombine", _nocombine),
    ("E3_noload", _noload),
    ("E4_nocompute", _nocompute),
    ("E5_bare", _bare),
    ("E6_noinputs", _noinputs),
)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    src, out = Path(argv[0]), Path(argv[1])
    for name, fn in ABLATIONS:
        _edit(src, out, name, fn)
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
