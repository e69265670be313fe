"""Do two kernel source trees give the GPU the same work? (docs/EVIDENCE.md, "Same device code").

A session is evidence for the kernel sources it recorded. When csrc/ changes in ways that cannot
change what a GPU of one architecture runs (a path for another architecture, host-side glue), the
old sessions still describe the new tree on that architecture, but only if that is shown. This
script shows it, for every built-in variant (both kernels, every reader and layout, and their
calibration builds):

* the device code: the PTX NVRTC 12 makes of the variant's kernel for ``compute_<arch>``, with
  its comments and blank lines dropped (they carry paths and versions, not code);
* the launch: grid, block and dynamic shared memory from the kernels' ``*_launch_shape``, for
  every preset at every valid tp, computed by a host program nvcc builds from each tree.

Each old tree comes from git (``git archive COMMIT csrc``; ``--from`` once per tree that cited
sessions recorded) and must hash to the sources those sessions recorded. ``--write`` stores the
fingerprints of every tree in benchmarks/results/device_code/equivalence.json;
tests/test_evidence.py accepts a session whose sources differ from the working tree only when that
file says its tree and the working tree are equal on the session's architecture and was made for
exactly these trees, and a compile-tier test makes the fingerprints again and compares them with
the file. The launchers' argument passing (host code
between the checks and the launch) is not fingerprinted: the GPU identity run owed in
benchmarks/evidence.sh compares outputs.

Usage: PYTHONPATH=. python3 benchmarks/device_code.py --from COMMIT [--from COMMIT ...] --arch 90
[--write]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "benchmarks" / "results" / "device_code" / "equivalence.json"
SCHEMA = "workbench.device-code-equivalence/2"


def tree_hashes(csrc: Path) -> dict[str, str]:
    """csrc/<path> -> sha256, as sessions record them (provenance.files)."""
    from workbench.kernels.specs import SOURCE_SUFFIXES

    return {
        f"csrc/{p.relative_to(csrc).as_posix()}": hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(csrc.rglob("*"))
        if p.is_file() and p.suffix in SOURCE_SUFFIXES
    }


def tree_at(commit: str, dest: Path) -> Path:
    """Extract csrc/ at ``commit`` into ``dest``; returns dest/csrc."""
    try:
        data = subprocess.run(
            ["git", "-C", str(REPO), "archive", commit, "csrc"],
            capture_output=True,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as e:
        raise SystemExit(
            f"git archive {commit} csrc failed (is the commit in this clone's history?): "
            f"{e.stderr.decode().strip()}"
        ) from e
    with tarfile.open(fileobj=BytesIO(data)) as t:
        t.extractall(dest, filter="data")
    return dest / "csrc"


def variants() -> list:
    from dataclasses import replace

    from workbench.kernels.variants import all_variants

    out = []
    for v in all_variants():
        if not v.user:
            out += [v, replace(v, calib=True)]  # the calibration build compiles the spin in
    return out


def strip_ptx(ptx: str) -> str:
    lines = []
    for line in ptx.splitlines():
        line = re.sub(r"//.*$", "", line).rstrip()
        if line:
            lines.append(line)
    return "\n".join(lines)


def device_ptx(csrc: Path, v, arch: str) -> str:
    from workbench.kernels import portable

    tc = portable._need(None)
    opts = [f"--gpu-architecture=compute_{arch}", "--std=c++17", f"-I{csrc / 'kernels'}",
            f"-I{tc.include}"]  # fmt: skip
    return portable._nvrtc_ptx(tc, f'#include "{v.kernel}.cuh"\n', opts + v.defines())


def launch_dims() -> list[tuple[str, int, int, int]]:
    """(kernel, K, N, top_k) of every preset at every valid tp."""
    from workbench.data.shapes import PRESETS, resolve_shape, valid_tps

    dims = set()
    for name in PRESETS:
        for tp in valid_tps(resolve_shape(name)):
            s = resolve_shape(name, tp=tp)
            for k in ("w13", "w2"):
                K, N = s.dims(k)
                dims.add((k, K, N, s.top_k))
    return sorted(dims)


def launch_shapes(csrc: Path, v, work: Path) -> str:
    """The launch of every preset shape for variant v, from a host program built from csrc."""
    from workbench.kernels.build import cuda_home

    rows = [d for d in launch_dims() if d[0] == v.kernel]
    body = "\n".join(
        f"  show({K}, {N}, {k}, wb::{v.kernel}_launch_shape({K}, {N}, {k}));" for _, K, N, k in rows
    )
    src = work / f"shapes_{v.kernel}.cu"
    src.write_text(
        "#include <cstdio>\n"
        f'#include "{v.kernel}.cuh"\n'
        "static void show(int K, int N, int k, const wb::LaunchShape& s) {\n"
        '  std::printf("%d %d %d: grid %u %u %u block %u %u %u smem %zu\\n", K, N, k, s.grid.x,'
        " s.grid.y, s.grid.z, s.block.x, s.block.y, s.block.z, s.smem);\n}\n"
        f"int main() {{\n{body}\n}}\n"
    )
    exe = work / f"shapes_{v.kernel}"
    nvcc = str(Path(cuda_home() or "/usr/local/cuda") / "bin" / "nvcc")
    subprocess.run(
        [nvcc, "-std=c++17", "-arch=sm_90", f"-I{csrc / 'kernels'}", *v.defines(), str(src),
         "-o", str(exe)],
        check=True, capture_output=True,
    )  # fmt: skip
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def fingerprint(csrc: Path, arch: str, names: set[str] | None = None) -> dict:
    """{variant: hashes of its device code and of its launches} for every variant (or those
    named)."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for v in variants():
            if names is not None and v.name not in names:
                continue
            ptx = strip_ptx(device_ptx(csrc, v, arch))
            shapes = launch_shapes(csrc, v, Path(tmp))
            out[v.name] = {
                "ptx_sha256": hashlib.sha256(ptx.encode()).hexdigest(),
                "ptx_lines": ptx.count("\n") + 1,
                "launch_sha256": hashlib.sha256(shapes.encode()).hexdigest(),
                "launches": shapes.count("\n"),
            }
    return out


def compare(old_commits: list[str], arch: str) -> dict:
    """The record: every old tree's sources and fingerprints beside the working tree's."""
    olds = []
    for commit in old_commits:
        with tempfile.TemporaryDirectory() as tmp:
            old = tree_at(commit, Path(tmp))
            olds.append((commit, tree_hashes(old), fingerprint(old, arch)))
    new = REPO / "csrc"
    new_fp, new_hashes = fingerprint(new, arch), tree_hashes(new)
    return {
        "schema": SCHEMA,
        "from": [{"commit": c, "sources": hashes} for c, hashes, _ in olds],
        "to_sources": new_hashes,
        "arch": f"compute_{arch}",
        "identical": all(fp == new_fp for _, _, fp in olds),
        "variants": {
            n: {"to": fp, "from": {c: old_fp.get(n) for c, _, old_fp in olds}}
            for n, fp in new_fp.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="old", action="append", required=True,
                    help="git commit of an old csrc/ (once per tree)")  # fmt: skip
    ap.add_argument("--arch", default="90", help="compute capability, e.g. 90 (default)")
    ap.add_argument("--write", action="store_true", help=f"store the result in {RECORD}")
    args = ap.parse_args(argv)
    rec = compare(args.old, args.arch)
    for c in args.old:
        diff = [n for n, v in rec["variants"].items() if v["from"][c] != v["to"]]
        print(
            f"{c}: {len(rec['variants'])} variants, compute_{args.arch}: "
            + (f"DIFFER: {diff}" if diff else "device code and launches identical")
        )
    if args.write:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
        print(f"wrote {RECORD.relative_to(REPO)}")
    return 0 if rec["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
