"""Timing whole commands for the benchmark scripts (bench_browse.py, bench_plots.py): one run's
wall and CPU seconds, their summary, and the record's head and tail (the machine is shared, so a
record says how busy it was at the start and at the end)."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import time
from pathlib import Path


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system of the command and its children) and stdout of
    one run; a failed run stops the benchmark with its stderr's end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-400:]}")
    return dt, cpu, r.stdout


def summary(walls: list[float], cpus: list[float]) -> dict[str, float]:
    return {
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "cpu_median_s": statistics.median(cpus),
    }


def start(label: str, repeats: int) -> dict[str, object]:
    return {
        "label": label,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "repeats": repeats,
        "loadavg_start": os.getloadavg(),
    }


def finish(res: dict, out: Path | None) -> int:
    """The load at the end, printed beside the start's, and the record written to ``out``."""
    res["loadavg_end"] = os.getloadavg()
    print(
        f"load average: {res['loadavg_start'][0]:.1f} at the start, "
        f"{res['loadavg_end'][0]:.1f} at the end"
    )
    if out:
        out.write_text(json.dumps(res, indent=2) + "\n")
    return 0
