"""Runs the GPU test tier (marker ``gpu``) once and appends one line to its log: the commit, the
GPU, the counts and the wall time (issue 54: every GPU session runs it first, and the log is
committed under benchmarks/results/).

    PYTHONPATH=. python3 benchmarks/gpu_tier.py [--workers 6] [--log benchmarks/results/gpu_tier.jsonl]

pytest's own output goes to stdout as usual; the counts come from its JUnit XML, not from its
text. Exit code: pytest's (0 when the tier is green).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _gpu() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,uuid", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown (nvidia-smi gave nothing)"


def _commit() -> str:
    env = os.environ.get("WORKBENCH_COMMIT")
    if env:
        return env
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _counts(junit: Path) -> dict[str, int]:
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    keys = ("tests", "failures", "errors", "skipped")
    total = {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}
    total["passed"] = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
    total["failed_ids"] = [  # type: ignore[assignment]
        f"{c.get('classname')}::{c.get('name')}"
        for c in root.iter("testcase")
        if c.find("failure") is not None or c.find("error") is not None
    ]
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--workers", type=int, default=6, help="pytest-xdist processes (0: one process)"
    )
    ap.add_argument("--log", type=Path, default=REPO / "benchmarks/results/gpu_tier.jsonl")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (e.g. a test id)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            str(a.workers),
            "-p",
            "no:cacheprovider",
            "-m",
            "gpu",
            "--durations=10",
            f"--junitxml={junit}",
            *(a.pytest_args or ["tests/"]),
        ]
        t0 = time.monotonic()
        rc = subprocess.run(cmd, cwd=REPO).returncode
        wall = time.monotonic() - t0
        counts = _counts(junit) if junit.exists() else {"error": "pytest wrote no JUnit XML"}
    line = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _commit(), "gpu": _gpu(), "command": " ".join(cmd[1:]).replace(str(junit), "…"),
        "rc": rc, "wall_s": round(wall, 1), **counts,
    }  # fmt: skip
    a.log.parent.mkdir(parents=True, exist_ok=True)
    with a.log.open("a") as f:
        f.write(json.dumps(line) + "\n")
    print(
        f"== GPU tier: rc {rc}, {counts.get('passed')} passed, {counts.get('failures')} failed, "
        f"{counts.get('errors')} errors, {counts.get('skipped')} skipped in {wall:.0f} s -> {a.log}"
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
