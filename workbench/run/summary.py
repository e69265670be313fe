"""A run's summary (docs/DESIGN.md §5.10, §7.7): what `ab --json` prints and the session's end
record keeps, from the runner's state and the analysis of its journal (the one every reader of
a session shares). ``Runner.summary`` calls ``run_summary``; a command's work adds its own keys
(``Work.summary``: a tune's sweep)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workbench.analysis.calibration import calibration_summary


def run_summary(runner: Any, status: str, an: Any) -> dict[str, Any]:
    """The summary of ``runner``'s run as it stands (a workbench.run.runner.Runner, not
    imported: it imports this module), ``status`` its ending, ``an`` the analysis of its journal
    (None before the session exists), as strict JSON (``json_safe``)."""
    cfg = runner.cfg
    # the comparisons measured so far (one that an interruption left unstarted has no pairs)
    comparisons = (
        [] if an is None else [r.to_dict() for r in an.results if r.verdict.n > 0 or r.gates]
    )
    out: dict[str, Any] = {
        "status": status,
        "session": None if runner.session is None else str(runner.session.path),
        "shape": cfg.shape.to_dict(),
        "calls": cfg.calls,
        "replays": cfg.replays,
        "m": cfg.m,
        "workers": cfg.workers,
        "comparisons": comparisons,
        "recommendations": {k: r.to_dict() for k, r in runner.recommendations.items()},
        "memory": runner.memory,
        "flagged": sum(c["flagged"] for c in comparisons),
        "excluded": sum(c["excluded"] for c in comparisons),
        "notes": list(runner.notes),
        "nvml": runner.nvml_status,
        "phases": phase_totals(runner.phases, runner.workers),
        "worker_records": list(runner.workers),
        "timeline": dict(runner.timeline),
        "fault": runner.fault,
    }
    checks = [] if an is None else an.method_checks()
    if checks:  # the hot cells timed by a second method (docs/DESIGN.md §5.11)
        out["method_checks"] = [c.to_dict() for c in checks]
    if runner.looks:  # `ab --settle`: each look's workers, labels and why it stopped
        out["settle"] = [look._asdict() for look in runner.looks]
    if cfg.mode == "calibrate":
        out["calibration"] = calibration_summary(comparisons, cfg.m, runner.clock_mhz)
    out.update(runner.work.summary(runner))  # a tune's sweep
    return json_safe(out)


def phase_totals(
    phases: Mapping[str, float], workers: Iterable[Mapping[str, Any]]
) -> dict[str, float]:
    """Seconds per phase over the run's processes (docs/DESIGN.md §5.10): this process's
    ``phases`` plus each worker record's."""
    out = dict(phases)
    for w in workers:
        for k, v in (w.get("phases") or {}).items():
            if isinstance(v, (int, float)):
                out[k] = out.get(k, 0.0) + float(v)
    return out


def json_safe(x: Any) -> Any:
    """``x`` with non-finite floats as None and tuples as lists (strict JSON for --json)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    return x
