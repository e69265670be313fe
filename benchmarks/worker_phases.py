"""Where a run's time goes, per worker process and phase (docs/DESIGN.md §5.10).

    python3 benchmarks/worker_phases.py SESSION... [--json]

For each session: its wall time (created to finished), the workers per round, and per worker
its GPU, wall time, import time, the time it then waited for its turn (imported, before any
CUDA call), its turn (told to go until its exit message: the GPU is its alone) and seconds per
phase of the turn (workbench.run.worker_proc.PHASES), then the phases summed over the run's workers
and their share of the summed wall time. Read from the sessions' ``worker`` records only (a single-process run has none: its
phases are in its summary, printed as one row). The run's own wall time is what a user waits;
workers on one GPU overlap their imports with the previous worker's measuring, so the workers'
summed wall time exceeds it.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.run.worker_proc import PHASES  # noqa: E402
from workbench.store.session import load_session  # noqa: E402


def _wall(meta: dict) -> float | None:
    try:
        t0 = datetime.fromisoformat(meta["created"])
        t1 = datetime.fromisoformat(meta["finished"])
    except (KeyError, TypeError, ValueError):
        return None
    return (t1 - t0).total_seconds()


def rows(path: str) -> dict:
    s = load_session(path, nvml=False)
    workers = sorted(s.workers, key=lambda w: (w.get("round") != "main", w.get("worker", 0)))
    if not workers:  # one process: the summary's phases
        phases = (s.summary or {}).get("phases") or {}
        workers = [{"worker": 0, "round": "all", "phases": phases, "wall_s": None}]
    total = {p: sum(float((w.get("phases") or {}).get(p) or 0.0) for w in workers) for p in PHASES}
    return {
        "session": str(s.path),
        "status": s.status,
        "wall_s": _wall(s.meta),
        "workers": workers,
        "phases": total,
        "summed_worker_wall_s": sum(float(w.get("wall_s") or 0.0) for w in workers),
    }


def _turn(w: dict) -> float | None:
    """Seconds from a worker's go to its exit message (wall-clock instants of the parent)."""
    t0, t1 = w.get("started"), w.get("ended")
    return t1 - t0 if isinstance(t0, (int, float)) and isinstance(t1, (int, float)) else None


def show(r: dict) -> None:
    wall = r["wall_s"]
    print(f"{r['session']} ({r['status']}): wall {wall:.1f} s" if wall else r["session"])
    head = ["round", "w", "gpu", "wall", "import", "wait", "turn", *PHASES]
    print("  " + "  ".join(f"{h:>7}" for h in head))
    for w in r["workers"]:
        ph = w.get("phases") or {}
        cells = [
            str(w.get("round")), str(w.get("worker")), str(w.get("uuid") or w.get("gpu") or "-")[-7:],
            *(f"{float(v):7.2f}" if isinstance(v, (int, float)) else "      -"
              for v in (w.get("wall_s"), w.get("import_s"), w.get("wait_s"), _turn(w),
                        *(ph.get(p) for p in PHASES))),
        ]  # fmt: skip
        print("  " + "  ".join(f"{c:>7}" for c in cells))
    summed = r["summed_worker_wall_s"] or sum(r["phases"].values()) or 1.0
    print(
        "  total   "
        + "  ".join(f"{p} {v:.1f} s ({v / summed:.0%})" for p, v in r["phases"].items())
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sessions", nargs="+", metavar="SESSION")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = [rows(p) for p in args.sessions]
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for r in out:
            show(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
