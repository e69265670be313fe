"""The analysis model (docs/DESIGN.md §7): from a session's journal to verdicts and decisions.

One implementation of each step, read by the runner, the report, the plots, the `sessions`
commands and the TUI:

* ``model``: per-comparison results (pair ratios, block-level verdicts through
  ``workbench.core.stats``) of one session, ``analyse(session) -> Analysis``;
* ``recommend``: which comparisons are reader comparisons, and the reader recommendation (its
  evidence as data, ``SetEvidence``, worded by ``words``);
* ``method_check``: a cell timed by two timing methods, each method's verdict side by side;
* ``calibration``: the calibration resolution (smallest injected delay detected reliably);
* ``compare``: the shift of each comparison between two sessions, and ``shifts`` its one table;
* ``pool``: verdicts pooled over replicate sessions.

Torch-free and textual-free (NumPy and SciPy only). Submodules import each other directly, never
this package, so that the import graph has no cycle.
"""

from __future__ import annotations

from workbench.analysis.calibration import calibration_summary, spin_of
from workbench.analysis.compare import SessionDiff, Shift, compare_sessions
from workbench.analysis.model import (
    TIMING_ROLES,
    Analysis,
    ComparisonResult,
    analyse,
    comparison_results,
    session_m,
)
from workbench.analysis.pool import VARIES, Pool, PooledComparison, pool_sessions
from workbench.analysis.recommend import (
    READER_KERNELS,
    Recommendation,
    combine,
    reader_comparison,
    recommendations,
    rule_text,
)

__all__ = [
    "READER_KERNELS", "TIMING_ROLES", "VARIES", "Analysis", "ComparisonResult", "Pool",
    "PooledComparison", "Recommendation", "SessionDiff", "Shift", "analyse",
    "calibration_summary", "combine", "compare_sessions", "comparison_results", "pool_sessions",
    "reader_comparison", "recommendations", "rule_text", "session_m", "spin_of",
]  # fmt: skip
