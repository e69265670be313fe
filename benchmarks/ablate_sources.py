"""Timing-only ablations of the kernels: writes edited copies of csrc/ whose outputs are WRONG on
purpose, to locate where a call's time goes (benchmarks/results/README.md, "Ablations").

    python3 benchmarks/ablate_sources.py csrc /tmp/ablate
    WORKBENCH_CSRC=/tmp/ablate/E1_null       return right after the prologue: the launch (grid, block, PDL) with an empty body
E2_noload     weights and metadata from register constants instead of memory
E3_nocompute  E2, and no dequantize / tensor-core work either (the constants feed one add)
E4_noids      routed ids taken as 0, 1, 2, ... instead of loaded: weight addresses need no load
E5_loadonly   real loads, but no dequantize / tensor-core work (the loaded words feed one add)
E7_nosum      no CTA column sum: warp 0 writes its own partial (no shared memory, no barrier)
E8_norecords  records from a register constant, weights loaded: what the metadata loads cost
E9_noweights  weights from register constants, records loaded (E2 is both)
E10_noquad    no quad shuffles: each lane uses its own record for its quad's four columns
(E6_prefetch, which loaded W2's ids, router weights, weights and records before
griddepcontrol.wait, is retired: since e3bd5da W2 loads each unit's inter with its weights, so no
edit can move those loads ahead of the wait without moving inter, the previous kernel's output,
too. Its result on the earlier kernels, no gain, is run 8 in benchmarks/results/README.md.)

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
    for kernel in KERNELS.get(name, ("w13", "w2")):
        p = d / "kernels" / f"{kernel}.cuh"
        text = p.read_text()
        edited = fn(kernel, text)
        if edited == text:
            raise SystemExit(f"{name}: nothing to edit in {p} (the kernel source changed?)")
        p.write_text(edited)


def _null(kernel: str, s: str) -> str:
    return s.replace("  kernel_prologue();\n", "  kernel_prologue();\n  if (p.K > 0) return;\n")


def _noload(kernel: str, s: str) -> str:
    s = re.sub(
        r"w\[(u|k)\] = __ldg\([^;]*;",
        lambda m: f"w[{m[1]}] = make_uint4(lane * 3 + {m[1]}, lane ^ 5, 0x12345678u + lane, 7u);",
        s,
    )
    return re.sub(r"m\[(u|k)\] = read_meta2?\([^;]*;", lambda m: f"m[{m[1]}] = 0x1c002c00u;", s)


def _nocompute(kernel: str, s: str) -> str:
    return _loadonly(kernel, _noload(kernel, s))


def _noids(kernel: str, s: str) -> str:
    return re.sub(r"const int id = __ldg\(p\.ids \+ (j|jc)\);", r"const int id = \1;", s)


def _loadonly(kernel: str, s: str) -> str:
    return re.sub(
        r"dot_group\(w\[(u|k)\], [^;]*, (acc|part)\);",
        lambda m: (
            f"{m[2]}.d[0][0] += __uint_as_float("
            f"w[{m[1]}].x ^ w[{m[1]}].y ^ w[{m[1]}].z ^ w[{m[1]}].w ^ m[{m[1]}]);"
        ),
        s,
    )


def _norecords(kernel: str, s: str) -> str:
    return re.sub(
        r"m\[(u|k)\] = read_meta2?\([^;]*;", lambda m: f"m[{m[1]}] = 0x1c002c00u ^ (lane << 3);", s
    )


def _noweights(kernel: str, s: str) -> str:
    return re.sub(
        r"w\[(u|k)\] = __ldg\([^;]*;",
        lambda m: f"w[{m[1]}] = make_uint4(lane * 3 + {m[1]}, lane ^ 5, 0x12345678u + lane, 7u);",
        s,
    )


def _noquad(kernel: str, s: str) -> str:
    return re.sub(
        r"quad_meta\(m\[(u|k)\], lane\)",
        lambda m: f"QuadMeta{{{{m[{m[1]}], m[{m[1]}], m[{m[1]}], m[{m[1]}]}}}}",
        s,
    )


def _nosum(kernel: str, s: str) -> str:
    return s.replace(
        "cta_column_sum(red, acc_of_lane(acc, lane), warp, lane)", "acc_of_lane(acc, lane)"
    )


KERNELS: dict[str, tuple[str, ...]] = {}  # ablations that edit one kernel only (none today)

ABLATIONS = (
    ("E1_null", _null),
    ("E2_noload", _noload),
    ("E3_nocompute", _nocompute),
    ("E4_noids", _noids),
    ("E5_loadonly", _loadonly),
    ("E7_nosum", _nosum),
    ("E8_norecords", _norecords),
    ("E9_noweights", _noweights),
    ("E10_noquad", _noquad),
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
