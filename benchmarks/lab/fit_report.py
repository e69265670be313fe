"""What limits how many CTAs of a lab tree's kernels share an SM, from ptxas alone (no GPU):
per tree, op and variant, the registers and static shared memory ptxas reports, the launch
shape the tree's own ``*_launch_shape`` gives on the default shape, and from them the CTAs per
SM each limit allows on an sm_90 SM (the occupancy calculator's arithmetic: 65,536 registers
allocated 256 at a time per warp, 64 warps, 32 CTAs, 228 KiB of shared memory), the binding
limit, the grid's CTAs and its waves on 132 SMs (an H100 SXM; the H200 has as many).

    python3 benchmarks/lab/fit_report.py ref=csrc s2x=benchmarks/lab/trees/slots@-DWB_W13_SLOTS=2 ...

Trees are named as benchmarks/lab/build.sh names them. Writes a Markdown table to stdout. The
calculator's per-SM arithmetic ignores how a CTA's warps spread over the SM's four schedulers,
each with a quarter of the registers: where it allows a CTA that the quarter does not, the
runtime's own occupancy query (on a GPU) is the authority.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLAGS = ["-O3", "-std=c++17", "-arch=sm_90", "-D__CUDA_NO_HALF_OPERATORS__",
         "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]  # fmt: skip
# the default shape (qwen3.8-flash-next, tp 4), as benchmarks/lab/lab.cu runs it
SHAPES = {"W13": (2560, 320, 10), "W2": (160, 2560, 10)}
VARIANTS = (("B4", "SCALAR"), ("B3", "SCALAR"), ("B3", "COOP"))
SM90 = {"regs": 65536, "reg_unit": 256, "warps": 64, "ctas": 32, "smem": 228 * 1024, "sms": 132}

SHAPE_MAIN = r"""
#include <cstdio>
#include "kernels/%(header)s"
int main() {
  const auto s = wb::%(fn)s(%(K)d, %(N)d, %(top_k)d);
  std::printf("%%u %%u %%u %%u %%zu\n", s.grid.x, s.grid.y, s.grid.z, s.block.x, s.smem);
}
"""


def _tree(arg: str) -> tuple[str, Path, list[str]]:
    name, _, spec = arg.partition("=")
    spec, _, defs = spec.partition("@")
    return name, Path(spec).resolve(), [d for d in defs.split(",") if d]


def _ptxas(tree: Path, defs: list[str], op: str, layout: str, reader: str, tmp: Path) -> dict:
    out = subprocess.run(
        ["nvcc", *FLAGS, *defs, f"-I{HERE}", f"-I{tree}", '-DLAB_TREE="t"', "-DLAB_NS=lab_t",
         f"-DLAB_{op}", f"-DWB_LAYOUT_{layout}", f"-DWB_READER_{reader}", "-cubin",
         "-Xptxas", "-v", "-o", str(tmp / "v.cubin"), str(HERE / "variant.cu")],
        capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    kernel = "w13_kernel" if op == "W13" else "w2_kernel"
    # ptxas prints a "Compiling entry function" line, then the entry's usage
    part = out[out.index(kernel) :]
    regs = int(re.search(r"Used (\d+) registers", part).group(1))
    smem = re.search(r"(\d+) bytes smem", part)
    spill = re.search(r"(\d+) bytes spill stores", part)
    return {"regs": regs, "smem": int(smem.group(1)) if smem else 0,
            "spills": int(spill.group(1)) if spill else 0}  # fmt: skip


def _shape(tree: Path, defs: list[str], op: str, tmp: Path) -> tuple[int, int, int]:
    K, N, top_k = SHAPES[op]
    src = tmp / "shape.cu"
    header, fn = ("w13.cuh", "w13_launch_shape") if op == "W13" else ("w2.cuh", "w2_launch_shape")
    src.write_text(SHAPE_MAIN % {"header": header, "fn": fn, "K": K, "N": N, "top_k": top_k})
    exe = tmp / "shape"
    subprocess.run(["nvcc", *FLAGS, *defs, "-DWB_LAYOUT_B3", "-DWB_READER_SCALAR", f"-I{tree}",
                    str(src), "-o", str(exe)], check=True, capture_output=True)  # fmt: skip
    gx, gy, gz, threads, dyn = map(
        int, subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    )
    return gx * gy * gz, threads, dyn


def limits(regs: int, threads: int, smem: int) -> dict[str, int]:
    """CTAs per SM each resource allows (sm_90, the occupancy calculator's arithmetic)."""
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(regs * 32 / SM90["reg_unit"]) * SM90["reg_unit"]
    return {
        "registers": SM90["regs"] // (per_warp * warps),
        "warps": SM90["warps"] // warps,
        "CTA slots": SM90["ctas"],
        "shared memory": SM90["smem"] // smem if smem else SM90["ctas"],
    }


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    rows = ["| tree | op | variant | regs | spills | smem B | CTAs | threads | CTAs/SM (binds) | waves |",
            "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for arg in argv:
            name, tree, defs = _tree(arg)
            for op in SHAPES:
                ctas, threads, dyn = _shape(tree, defs, op, tmp)
                for layout, reader in VARIANTS:
                    p = _ptxas(tree, defs, op, layout, reader, tmp)
                    lim = limits(p["regs"], threads, p["smem"] + dyn)
                    per_sm = min(lim.values())
                    binds = ", ".join(k for k, v in lim.items() if v == per_sm)
                    waves = ctas / (per_sm * SM90["sms"]) if per_sm else math.inf
                    rows.append(
                        f"| {name} | {op.lower()} | {layout.lower()}-{reader.lower()} | {p['regs']} "
                        f"| {p['spills']} | {p['smem'] + dyn} | {ctas} | {threads} "
                        f"| {per_sm} ({binds}) | {waves:.2f} |"
                    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
