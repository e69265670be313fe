"""Where a run's time went, per worker process and phase (docs/DESIGN.md §5.10), from a session.

The table `workbench sessions show --phases` and benchmarks/worker_phases.py print: per worker
its round, GPU, wall time, import time, the time it then waited for its turn (imported, before
any CUDA call), its turn (told to go until its exit message: the GPU is its alone) and the
seconds of each phase of that turn (``PHASES``); then the phases summed over the run's workers.
It reads the session's ``worker`` records only (a single-process run has none: its phases are in
its summary, shown as one row). The run's own wall time (created to finished) is what a user
waits; the next worker on a GPU imports while the one before it measures, so the workers' summed
wall time exceeds it.

The parent's own steps (the build before the first worker, the analysis between rounds, each
round's span) are in the summary's ``timeline`` (wall-clock instants) of sessions made since it
was recorded; older sessions have none, and the table says so. The session is created when the
first worker says hello, so what came before (the command's imports, the GPU check, the first
worker's imports) is outside created..finished and only ``timeline`` shows it.

Torch-free, NumPy-free: it reads a loaded workbench.store.session.Session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from workbench.run.worker_proc import PHASES

# the runner's instants, in order (Runner.mark): each span ends at its mark
TIMELINE = ("start", "built", "main", "analysed", "confirm", "end")
SPANS = {
    "built": "build",
    "main": "main round",
    "analysed": "analysis",
    "confirm": "confirm round",
    "end": "finish",
}
NO_PHASES = "no seconds per phase were recorded: the session predates the phase accounting"
NO_TIMELINE = (
    "the parent's own steps (its build before the session began, the analysis between rounds, "
    "each round's span) were not recorded: the session predates the run timeline"
)


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _iso_seconds(a: Any, b: Any) -> float | None:
    try:
        return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()
    except (TypeError, ValueError):
        return None


@dataclass
class PhaseTable:
    """One session's phase table; ``rows`` one per worker (round, worker, gpu, wall_s,
    import_s, wait_s, turn_s, phases {name: s}), ``totals`` the phases summed over them."""

    session: str
    status: str
    wall_s: float | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)
    summed_wall_s: float = 0.0
    spans: dict[str, float] | None = None  # the parent's steps, None where not recorded
    single: bool = False  # a single-process run of today: no parent steps to record

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session, "status": self.status, "wall_s": self.wall_s,
            "workers": self.rows, "phases": self.totals,
            "summed_worker_wall_s": self.summed_wall_s, "spans": self.spans,
        }  # fmt: skip


def timeline_spans(timeline: Any) -> dict[str, float] | None:
    """Seconds of each of the parent's steps from its instants (``TIMELINE``); a step whose
    marks are missing (a round that did not run) is left out. None without a timeline."""
    if not isinstance(timeline, dict) or _num(timeline.get("start")) is None:
        return None
    out: dict[str, float] = {}
    last = float(timeline["start"])
    for mark in TIMELINE[1:]:
        t = _num(timeline.get(mark))
        if t is None:
            continue
        out[SPANS[mark]] = max(0.0, t - last)
        last = t
    return out


def _turn(w: dict[str, Any]) -> float | None:
    """Seconds from a worker's go to its exit message (wall-clock instants of the parent)."""
    t0, t1 = _num(w.get("started")), _num(w.get("ended"))
    return None if t0 is None or t1 is None else t1 - t0


def phase_table(s: Any) -> PhaseTable:
    """The phase table of a loaded session ``s`` (workbench.store.session.Session)."""
    workers = sorted(s.workers, key=lambda w: (w.get("round") != "main", w.get("worker") or 0))
    summary = s.meta.get("summary") or {}
    if not workers:  # one process: the summary's phases
        workers = [{"worker": 0, "round": "all", "phases": summary.get("phases") or {}}]
    rows = []
    for w in workers:
        ph = w.get("phases") or {}
        rows.append({
            "round": str(w.get("round")), "worker": w.get("worker"),
            "gpu": str(w.get("uuid") or w.get("gpu") or "-"),
            "wall_s": _num(w.get("wall_s")), "import_s": _num(w.get("import_s")),
            "wait_s": _num(w.get("wait_s")), "turn_s": _turn(w),
            "phases": {p: _num(ph.get(p)) for p in PHASES},
            "overlap": w.get("overlap") if isinstance(w.get("overlap"), dict) else None,
        })  # fmt: skip
        turn = rows[-1]["turn_s"]  # of which no phase: plan set-up, releases, the exit
        rows[-1]["rest_s"] = (
            None if turn is None else turn - sum(v or 0.0 for v in rows[-1]["phases"].values())
        )
    totals = {p: sum(r["phases"][p] or 0.0 for r in rows) for p in PHASES}
    return PhaseTable(
        session=str(s.path),
        status=s.status,
        wall_s=_iso_seconds(s.meta.get("created"), s.meta.get("finished")),
        rows=rows,
        totals=totals,
        summed_wall_s=sum(r["wall_s"] or 0.0 for r in rows),
        spans=timeline_spans(summary.get("timeline")),
        single=isinstance(summary.get("timeline"), dict) and not s.workers,
    )


def phase_lines(t: PhaseTable) -> list[str]:
    """The table as text lines (seconds, two decimals; "-" where a number is missing)."""
    wall = f": wall {t.wall_s:.1f} s (created to finished)" if t.wall_s is not None else ""
    lines = [f"{t.session} ({t.status}){wall}"]
    head = ["round", "w", "gpu", "wall", "import", "wait", "turn", *PHASES, "rest"]
    lines.append("  " + "  ".join(f"{h:>7}" for h in head))
    for r in t.rows:
        nums = (r["wall_s"], r["import_s"], r["wait_s"], r["turn_s"],
                *(r["phases"][p] for p in PHASES), r["rest_s"])  # fmt: skip
        cells = [r["round"], str(r["worker"]), r["gpu"][-7:],
                 *("-" if v is None else f"{v:.2f}" for v in nums)]  # fmt: skip
        lines.append("  " + "  ".join(f"{c:>7}" for c in cells))
    if all(v is None for r in t.rows for v in r["phases"].values()):
        lines.append(f"  {NO_PHASES}")
    summed = t.summed_wall_s or sum(t.totals.values()) or 1.0
    lines.append(
        "  total   " + "  ".join(f"{p} {v:.1f} s ({v / summed:.0%})" for p, v in t.totals.items())
    )
    turns = [r["turn_s"] for r in t.rows if r["turn_s"] is not None]
    if turns and t.wall_s:
        lines.append(
            f"  turns   {sum(turns):.1f} s summed over {len(turns)} workers, "
            f"{sum(turns) / t.wall_s:.0%} of the wall time (on one GPU; on several they overlap)"
        )
    early = [r["overlap"] for r in t.rows if r.get("overlap")]
    if early:
        before = sum(bool(o.get("before_go")) for o in early)
        secs = sum(_num(o.get("context_s")) or 0.0 for o in early)
        lines.append(
            f"  overlap {len(early)} workers made their CUDA context ahead of their turn "
            f"({secs:.1f} s in all), {before} of them before the GPU was theirs (--overlap)"
        )
    if t.single:
        lines.append("  run     one process (--single-process): its phases are the run's")
    elif t.spans is None:
        lines.append(f"  run     {NO_TIMELINE}")
    else:
        spans = "  ".join(f"{k} {v:.1f} s" for k, v in t.spans.items())
        lines.append(f"  run     {spans}  (the parent's steps, from its timeline)")
    return lines
