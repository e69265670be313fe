"""What the TUI asks of the engine: the `Backend` protocol and the plain records it trades in.

The app only ever holds these records; it never imports torch, CUDA or the engine. Every call
that may block (build, run, export, GPU probing) is made from a thread worker, so a backend may
take its time. Long calls receive a ``progress`` callback (called from the worker thread) and a
``cancelled`` predicate they poll between units of work; a cancelled run returns the path of
its session, which then holds the samples measured so far and the status "interrupted".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

# the run form's choices
from workbench.core.vocab import KERNEL_CHOICES as KERNELS  # noqa: F401
from workbench.core.vocab import SETS  # noqa: F401
from workbench.run.progress import ProgressEvent  # the runner's record, shown by the TUI
from workbench.run.settings import ARMS  # noqa: F401

if TYPE_CHECKING:  # NumPy and the statistics load with the first session opened, not before
    from workbench.analysis.model import ComparisonResult
    from workbench.analysis.shifts import ShiftTable

# what the run form edits: the runner's settings, in their one form
from workbench.run.settings import RunSettings as RunConfig  # noqa: E402


@dataclass(frozen=True)
class GpuStatus:
    """Whether runs are possible here, and why not when they are not."""

    available: bool
    reason: str
    name: str = ""


@dataclass(frozen=True)
class BuildStatus:
    """Whether variants can be compiled here: nvcc, no GPU and no torch needed."""

    available: bool
    reason: str


@dataclass(frozen=True)
class VariantRow:
    """One row of the variant matrix: a (kernel, layout, reader) build and its ptxas report."""

    name: str
    kernel: str
    layout: str
    reader: str
    state: str = "not built"  # not built | building | cached | built | failed
    seconds: float | None = None
    registers: int | None = None
    spills: int | None = None
    smem: int | None = None
    log: str = ""


@dataclass(frozen=True)
class SessionInfo:
    """One line of the session browser. ``error`` is set when the folder cannot be read."""

    path: Path
    name: str
    status: str
    created: str = ""
    gpu: str = ""
    shape: str = ""
    kernels: str = ""
    samples: int = 0
    error: str = ""
    commit: str = ""
    sources: str = ""  # short digest of the recorded csrc/ hashes ("" when none)
    stale: tuple[str, ...] | None = None  # csrc/ files that differ from the working tree
    recommendation: str = ""  # "w13 cooperative, w2 scalar", from the stored summary


@dataclass(frozen=True)
class Recommendation:
    """The reader chosen for one kernel (or "inconclusive") and the evidence behind it."""

    kernel: str
    choice: str
    reason: str
    evidence: tuple[str, ...] = ()


def _finite_or_none(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


@dataclass(frozen=True)
class RatioPoint:
    """One comparison on the ratio chart: median ratio B/A, its CI, the minimum effect m and the
    verdict ("" while still measuring). None: not known (no pair yet, too few for a CI)."""

    label: str
    median: float | None
    ci_low: float | None
    ci_high: float | None
    m: float
    verdict: str = ""
    note: str = ""  # e.g. "8/12 pairs" during a run
    method: str = ""  # the verdict's method: "workers", "blocks" or "pairs" ("" while measuring)

    @classmethod
    def from_verdict(cls, label: str, verdict: Mapping[str, Any], note: str = "") -> RatioPoint:
        """From a `stats.Verdict` dict (``to_dict()``): reads median, ci_low, ci_high, m and
        verdict only (shown as its words, ``stats.verdict_words``); non-finite figures (JSON
        nulls) become None."""
        from workbench.core.stats import verdict_words

        m = _finite_or_none(verdict.get("m"))
        lo, hi = _finite_or_none(verdict.get("ci_low")), _finite_or_none(verdict.get("ci_high"))
        label_v = str(verdict.get("verdict") or "")
        return cls(
            label,
            _finite_or_none(verdict.get("median")),
            _finite_or_none(verdict.get("ci_low")),
            _finite_or_none(verdict.get("ci_high")),
            m if m is not None and m > 0 else 0.0,
            verdict_words(label_v, lo, hi) if label_v else "",
            note,
            str(verdict.get("method") or ""),
        )


@dataclass(frozen=True)
class SessionView:
    """A session opened for the results view."""

    info: SessionInfo
    # the comparisons with pairs: the analysis model's records, shown through its one table
    rows: tuple[ComparisonResult, ...]
    recommendations: tuple[Recommendation, ...]
    rule: str
    notes: tuple[str, ...] = ()
    config: dict = field(default_factory=dict)
    chart: tuple[RatioPoint, ...] = ()  # the rows' ratios, CIs and ±m band, for the chart


@dataclass(frozen=True)
class CompareView:
    """Two sessions compared, for the compare screen (`tui.analysis.compare_view`): the
    analysis's shift table as data, every column of `analysis.shifts.COLUMNS` (None where the
    sessions have no comparison in common), the Markdown shown before it (the sessions, the
    warnings and notes) and after it (the legend, the method), and each comparison's role by
    id, by which the screen puts the main comparisons first."""

    head: str
    table: ShiftTable | None
    tail: str = ""
    roles: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportResult:
    plots: tuple[Path, ...]
    report: Path


class Backend(Protocol):
    """The engine as the TUI sees it. Methods may block; the app calls them from workers."""

    def gpu_status(self) -> GpuStatus:
        """Can this machine build and time kernels? The reason is shown in browse mode."""
        ...

    def build_status(self) -> BuildStatus:
        """Can this machine compile the variants (and so show their ptxas report)?"""
        ...

    def variants(self) -> list[VariantRow]:
        """Every variant with its current build state (cache lookups only, no compiling)."""
        ...

    def build(
        self,
        names: Sequence[str],
        progress: Callable[[VariantRow], None],
        cancelled: Callable[[], bool],
    ) -> list[VariantRow]:
        """Build ``names`` (all when empty), reporting each row as it starts and ends."""
        ...

    def run(
        self,
        config: RunConfig,
        progress: Callable[[ProgressEvent], None],
        cancelled: Callable[[], bool],
    ) -> Path:
        """Time ``config``; return its session folder (status "interrupted" if cancelled)."""
        ...

    def monitor_reading(self) -> dict | None:
        """The latest NVML reading (keys as in nvml.jsonl), or None when NVML is unavailable."""
        ...

    def monitor_note(self) -> str:
        """Why NVML is unavailable ("" when it is available)."""
        ...

    def sessions(self) -> list[SessionInfo]:
        """Saved sessions, newest first, complete and interrupted alike."""
        ...

    def open_session(self, path: Path) -> SessionView:
        """Load and analyse one session; raises a WorkbenchError with a clear message."""
        ...

    def compare(self, a: Path, b: Path) -> CompareView:
        """Two sessions compared (shift in ratio per comparison, warnings)."""
        ...

    def export(self, path: Path) -> ExportResult:
        """Write the session's plots and Markdown report; return what was written."""
        ...
