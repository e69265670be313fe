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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from workbench.core import defaults
from workbench.core.errors import BadArgument
from workbench.data.shapes import DEFAULT_PRESET, Shape, resolve_shape
from workbench.run.progress import ProgressEvent  # the runner's record, shown by the TUI

if TYPE_CHECKING:  # NumPy and the statistics load with the first session opened, not before
    from workbench.analysis.model import ComparisonResult

KERNELS = ("w13", "w2", "step")
SETS = ("hot", "rotating")
# The arms a user may put on either side of an A/B (ARCHITECTURE "Variants"); tinygemm and
# triton-moe are peers that are timed but never recommended.
ARMS = ("b3-scalar", "b3-coop", "b4-scalar", "tinygemm", "triton-moe")


def _open_checkpoint(folder: str, tp: int, rank: int) -> Any:
    """workbench.data.checkpoint.Checkpoint(folder, tp, rank), kept while its config.json and the
    folder's files are unchanged: the form validates on every keystroke, and opening reads every
    shard's header."""
    from workbench.data.checkpoint import Checkpoint

    path = Path(folder)
    try:
        stamp = tuple(
            sorted((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in path.iterdir())
        )
    except OSError:
        stamp = None  # absent or unreadable: Checkpoint names the problem
    key = (str(path.resolve()) if stamp is not None else folder, tp, rank, stamp)
    if stamp is None or key not in _OPENED:
        ckpt = Checkpoint(folder, tp=tp, rank=rank)
        if stamp is None:
            return ckpt
        _OPENED.clear()  # one form, one checkpoint at a time
        _OPENED[key] = ckpt
    return _OPENED[key]


_OPENED: dict[tuple, Any] = {}


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
class RunConfig:
    """Everything the run form sets. Shape fields left as None take the preset's value."""

    preset: str = DEFAULT_PRESET
    tp: int = 4
    hidden: int | None = None
    inter: int | None = None
    experts: int | None = None
    top_k: int | None = None
    layers: int | None = None
    kernels: tuple[str, ...] = defaults.KERNELS  # the run's defaults: workbench.core.defaults
    sets: tuple[str, ...] = defaults.SETS
    a: str = defaults.ARM_A
    b: str = defaults.ARM_B
    pairs: int = defaults.PAIRS  # ABBA pairs per block (docs/DESIGN.md §5.5)
    blocks: int = defaults.BLOCKS
    adaptive: bool = False
    target_pct: float = defaults.TARGET * 100
    calls: int = defaults.CALLS
    replays: int = defaults.REPLAYS
    seed: int = defaults.SEED
    # A real AWQ checkpoint's folder ("" = synthetic banks; docs/DESIGN.md §3.8): its config.json
    # gives the shape (only tp may be set beside it), and rank picks the tensor-parallel slice.
    checkpoint: str = ""
    rank: int = 0

    def open_checkpoint(self) -> Any:
        """The opened checkpoint (workbench.data.checkpoint.Checkpoint), or None for synthetic banks;
        BadArgument names the field or the file. Reads config.json and the safetensors headers."""
        if not self.checkpoint.strip():
            if self.rank != 0:
                raise BadArgument(
                    f"rank={self.rank} needs a checkpoint: synthetic banks have no ranks"
                )
            return None
        for name in ("hidden", "inter", "experts", "top_k", "layers"):
            if getattr(self, name) is not None:
                raise BadArgument(
                    f"{name}={getattr(self, name)} cannot be combined with a checkpoint: the shape "
                    "is read from its config.json (only tp may be set; the preset is not used)"
                )
        if not 0 <= self.rank < self.tp:
            raise BadArgument(f"rank={self.rank} must be in 0..{self.tp - 1} for tp={self.tp}")
        return _open_checkpoint(self.checkpoint.strip(), self.tp, self.rank)

    def shape(self) -> Shape:
        """The validated shape (raises BadArgument naming the dimension)."""
        ckpt = self.open_checkpoint()
        if ckpt is not None:
            return ckpt.shape
        return resolve_shape(
            preset=self.preset,
            tp=self.tp,
            hidden=self.hidden,
            inter=self.inter,
            experts=self.experts,
            top_k=self.top_k,
            layers=self.layers,
        )

    def validate(self) -> RunConfig:
        """Raise BadArgument naming the first field that cannot be run; return self."""
        self.shape()
        if not self.kernels:
            raise BadArgument("kernels=() must name at least one of w13, w2, step")
        for k in self.kernels:
            if k not in KERNELS:
                raise BadArgument(f"kernels={k!r} is not one of {', '.join(KERNELS)}")
        if not self.sets:
            raise BadArgument("sets=() must name at least one of hot, rotating")
        for s in self.sets:
            if s not in SETS:
                raise BadArgument(f"sets={s!r} is not one of {', '.join(SETS)}")
        for side in ("a", "b"):
            arm = getattr(self, side)
            if arm not in ARMS and not str(arm).endswith(".toml"):  # a user's spec file
                raise BadArgument(
                    f"{side}={arm!r} is not one of {', '.join(ARMS)} or a spec file (.toml)"
                )
        for name, low in (("pairs", 1), ("blocks", 1), ("calls", 1), ("replays", 1)):
            value = getattr(self, name)
            if value < low:
                raise BadArgument(f"{name}={value} must be at least {low}")
        if not 0.0 < self.target_pct < 50.0:
            raise BadArgument(f"target_pct={self.target_pct} must lie in (0, 50) percent")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


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
    method: str = ""  # the verdict's estimate: "blocks" or "pairs" ("" while measuring)

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

    def compare(self, a: Path, b: Path) -> str:
        """Markdown comparing two sessions (shift in ratio per comparison, warnings)."""
        ...

    def export(self, path: Path) -> ExportResult:
        """Write the session's plots and Markdown report; return what was written."""
        ...
