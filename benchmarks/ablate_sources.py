"""Timing-only ablations of the kernels: writes edited copies of csrc/ whose outputs are WRONG on
purpose, to locate where a call's time goes (benchmarks/results/README.md, "Ablations").

    python3 benchmarks/ablate_sources.py csrc /tmp/ablate
    WORKBENCH_CSRC=/tmp/ablate/E1_null python3 benchmarks/bench_kernels.py --arms b3-scalar

E1_null       return right after the prologue: launch, clusters and PDL with an empty body
E2_nocombine  skip the split-K combine: split 0 writes its own partial
E3_noload     weights and metadata from register constants instead of memory

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


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    src, out = Path(argv[0]), Path(argv[1])
    for name, fn in (("E1_null", _null), ("E2_nocombine", _nocombine), ("E3_noload", _noload)):
        _edit(src, out, name, fn)
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
