"""How long `workbench build` takes, as a user meets it: cold, after one edit, and for the example.

Runs the public CLI (``python3 -m workbench build ... --json``) of a checkout in fresh processes,
each with its own empty build cache, and repeats every measurement:

- ``cold``: every built-in variant (plain and calibration builds) into an empty cache;
- ``example``: ``examples/w13_unroll4/variant.toml`` into an empty cache;
- ``edit``: a user's copy of that example, built once, then edited (one comment line appended to
  its .cu, so its hash changes) and built again: the edit-build loop of one variant;
- ``hit``: the same build again, a cache hit (for scale).

Usage (from anywhere; ``--repo`` is the checkout to measure, default this one)::

    python3 benchmarks/build_speed.py --repeat 3 --out benchmarks/results/build_speed_after.json
    python3 benchmarks/build_speed.py --repo /tmp/wb_35df7ad --label 35df7ad --repeat 1 \
        --only cold,example,edit --out benchmarks/results/build_speed_before.json

Every run's wall time and CPU time (of the build's processes: the machine may be shared), the
machine's load average around it and the toolchain go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
KINDS = ("cold", "example", "edit", "hit")


def _children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far, compilers included."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_build(
    repo: Path, cache: Path, args: list[str], cwd: Path
) -> tuple[float, float, list[dict]]:
    env = dict(os.environ, PYTHONPATH=str(repo), WORKBENCH_CACHE=str(cache))
    env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # the H200's arch, as the compile tests build
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "build", *args, "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"build {args} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, cpu, json.loads(proc.stdout)


def _user_copy(repo: Path, dest: Path) -> Path:
    """The example spec copied out of the checkout, its relative paths into csrc/ made absolute."""
    src = repo / "examples" / "w13_unroll4"
    shutil.copytree(src, dest)
    spec = dest / "variant.toml"
    spec.write_text(spec.read_text().replace("../../csrc", str(repo / "csrc")))
    return spec


def measure(repo: Path, kind: str, work: Path, i: int) -> dict:
    cache = work / f"cache-{kind}-{i}"
    load0 = os.getloadavg()
    if kind == "cold":
        wall, cpu, rows = _run_build(repo, cache, [], work)
    elif kind == "example":
        example = [str(repo / "examples/w13_unroll4/variant.toml")]
        wall, cpu, rows = _run_build(repo, cache, example, work)
    else:
        spec = _user_copy(repo, work / f"user-{kind}-{i}")
        _run_build(repo, cache, [str(spec)], work)  # the build before the edit (not timed)
        if kind == "edit":
            cu = spec.parent / "w13_unroll4.cu"
            cu.write_text(cu.read_text() + f"// edit {i}: a change the build must see\n")
        wall, cpu, rows = _run_build(repo, cache, [str(spec)], work)
    want = "hit" if kind == "hit" else "built"
    if any(r["cache"] != want for r in rows):
        raise SystemExit(f"{kind}: expected every row {want!r}, got {[r['cache'] for r in rows]}")
    shutil.rmtree(cache, ignore_errors=True)
    return {
        "kind": kind,
        "run": i,
        "wall_s": round(wall, 2),
        # the machine is shared: CPU seconds of the build's processes say what it costs whatever
        # else runs (on an idle 2-core machine a parallel build's wall time is about half)
        "cpu_s": round(cpu, 2),
        "variants": [r["variant"] for r in rows],
        "build_seconds": [r["build_seconds"] for r in rows],
        "loadavg_1min_before": round(load0[0], 2),
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
    }


def _tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return "not found"
    m = re.search(r"release \S+, V\S+", out)
    return m.group(0) if m else out.strip().splitlines()[-1] if out.strip() else "?"


def _commit(repo: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return "?"
    return out.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=HERE, help="the checkout to measure")
    ap.add_argument("--label", help="what --repo is (default: its git commit)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    ap.add_argument("--only", default=",".join(KINDS), help=f"comma list of {', '.join(KINDS)}")
    ap.add_argument("--out", type=Path, help="JSON file for the runs")
    a = ap.parse_args(argv)
    kinds = [k for k in a.only.split(",") if k]
    bad = [k for k in kinds if k not in KINDS]
    if bad or a.repeat < 1:
        ap.error(f"--only {bad[0]!r} is not one of {', '.join(KINDS)}" if bad else "--repeat < 1")
    repo = a.repo.resolve()
    info = {
        "repo": str(repo),
        "label": a.label or _commit(repo),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "nvcc": _tool_version(["nvcc", "--version"]),
        "torch": _tool_version([sys.executable, "-c", "import torch; print(torch.__version__)"]),
        "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"),
    }
    runs = []
    with tempfile.TemporaryDirectory(prefix="wb-build-speed-") as tmp:
        for kind in kinds:
            for i in range(a.repeat):
                r = measure(repo, kind, Path(tmp), i)
                runs.append(r)
                print(
                    f"{kind:8s} run {i}: {r['wall_s']:7.2f} s wall, {r['cpu_s']:7.2f} s CPU  "
                    f"({len(r['variants'])} variant(s), "
                    f"load {r['loadavg_1min_before']:.1f} -> {r['loadavg_1min_after']:.1f})",
                    flush=True,
                )
    summary = {}
    for kind in kinds:
        walls = [r["wall_s"] for r in runs if r["kind"] == kind]
        cpus = [r["cpu_s"] for r in runs if r["kind"] == kind]
        summary[kind] = {
            "median_s": statistics.median(walls),
            "min_s": min(walls),
            "runs": walls,
            "median_cpu_s": statistics.median(cpus),
        }
        print(
            f"{kind:8s} median {summary[kind]['median_s']:.2f} s wall, "
            f"{summary[kind]['median_cpu_s']:.2f} s CPU over {len(walls)} run(s)"
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({**info, "summary": summary, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
