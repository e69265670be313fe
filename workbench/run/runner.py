"""Orchestration of a run (docs/DESIGN.md §5-§8): engine, monitor, session, and the order of work.

The device work is the engine's (workbench.measure.engine); what the results mean (the recommendation,
the calibration resolution) is the analysis model's (workbench.analysis, §7.7), the same rule
the report applies to the journal. ``Runner(cfg).run()`` measures the comparisons of a plan (workbench.measure.plan) on the GPU and keeps
everything in a session folder as it goes. The CLI (`workbench ab`, `workbench calibrate`) and the
TUI drive the same Runner; they listen through ``progress`` (abba.Progress after every sample)
and ``events`` (``events(kind, data)``: "builds", "session", "memory", "comparison", "gate",
"result", "recommendation", "note"). ``cancel`` (threading.Event) stops between samples; the
session is then kept as "interrupted" with what was measured, as on Ctrl-C.

torch is imported inside the methods that need it, so this module loads on a CPU-only machine.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.analysis.calibration import calibration_summary
from workbench.analysis.model import ComparisonResult
from workbench.analysis.recommend import Recommendation, recommendations
from workbench.core import defaults
from workbench.core.errors import (
    BadArgument,
    GPUFault,
    NoGPUError,
    WorkbenchError,
    fault_line,
    gpu_stack_hint,
    gpu_stack_module,
    is_sticky_cuda_error,
)
from workbench.core.limits import check_min_effect
from workbench.core.vocab import KERNEL_CHOICES, KERNELS, SETS
from workbench.data.shapes import Shape
from workbench.measure.abba import ProtocolConfig
from workbench.measure.plan import (
    ComparisonSpec,
    is_reader_comparison,
    parse_arm_spec,
    plan_ab,
)
from workbench.run.progress import ProgressEvent
from workbench.run.settings import RunSettings
from workbench.run.sink import Sink

NO_GPU_MESSAGE = (
    "no usable GPU ({why}). Timing needs an NVIDIA GPU with a CUDA build of torch. "
    "Without one you can still use: `workbench capacity` (memory arithmetic), "
    "`workbench sessions` / `workbench plot` / `workbench report` on saved sessions, "
    "`workbench` (the TUI, in browse mode){tests}."
)
# the tests need torch and the dev extra: named only where torch is there (not the light install)
TESTS_HINT = " and, in a checkout with the dev extra, the tests (`python3 -m pytest`)"


def require_gpu() -> None:
    """Raise NoGPUError (exit 3) with the plain message unless torch sees a CUDA device."""
    try:
        import torch
    except ImportError as e:
        module = gpu_stack_module(e)
        why = gpu_stack_hint(module) if module else f"torch is not importable: {e}"
        raise NoGPUError(NO_GPU_MESSAGE.format(why=why, tests="")) from None
    if not torch.cuda.is_available():
        why = "torch sees no CUDA device"
        if torch.version.cuda is None:
            why += f"; torch {torch.__version__} is a CPU-only build"
        raise NoGPUError(NO_GPU_MESSAGE.format(why=why, tests=TESTS_HINT))


@dataclass
class RunConfig:
    """Everything a run needs; ``comparisons`` come from workbench.measure.plan."""

    shape: Shape
    comparisons: list[ComparisonSpec]
    sets: tuple[str, ...] = defaults.SETS
    calls: int = defaults.CALLS
    replays: int = defaults.REPLAYS
    seed: int = defaults.SEED
    m: float = defaults.M
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    confirm: bool = True  # end a run over w13 and w2 with the step confirmation
    # worker processes (docs/DESIGN.md §5.10): each runs protocol.blocks blocks of every
    # comparison; 1 measures in this process (debugging: its intervals ignore process variance)
    workers: int = 1  # make_config gives defaults.WORKERS
    # a Ray cluster's address: the workers run there, one per GPU (workbench/run/ray_workers.py);
    # ray_init: more ray.init arguments (tests: a local instance with fake GPUs)
    ray: str | None = None
    ray_init: dict[str, Any] | None = None
    sessions_dir: str = defaults.SESSIONS_DIR
    slug: str = "ab"
    mode: str = "ab"  # or "calibrate"
    extra: dict[str, Any] = field(default_factory=dict)  # more config for session.json
    # An open workbench.data.checkpoint.Checkpoint: banks from its experts instead of synthetic ones
    # (docs/DESIGN.md §3.7); its record goes to the provenance, its path to extra.
    checkpoint: Any = None
    # after a complete run, Nsight Compute counters of A and B (workbench/run/counters.py); never
    # read by a verdict, so not in session_config
    counters: bool = False
    # each worker's CUDA context made before its turn, while the worker before it times
    # (`ab --overlap`, off by default until the GPU's A/A shows no effect; issue 44)
    overlap: bool = False

    def session_config(self) -> dict[str, Any]:
        p = dataclasses.asdict(self.protocol)
        return {
            "mode": self.mode,
            "shape": self.shape.to_dict(),
            "preset": self.shape.name,
            "comparisons": [c.id for c in self.comparisons],
            "sets": list(self.sets),
            "calls": self.calls,
            "replays": self.replays,
            "seed": self.seed,
            "m": self.m,
            "protocol": p,
            "confirm": self.confirm,
            "workers": self.workers,
            **({"ray": self.ray} if self.ray is not None else {}),
            **({"overlap": True} if self.overlap else {}),
            **self.extra,
        }


@dataclass
class RunResult:
    status: str  # complete | interrupted | failed
    session_path: Path | None
    summary: dict[str, Any]
    # the analysis of the finished session's journal (workbench.analysis.Analysis): what `ab`
    # prints, through the renderer of `sessions show`; None without a session
    analysis: Any = None


class Runner:
    """Runs one plan on the GPU into one session. Not reusable: make one per run."""

    def __init__(
        self,
        cfg: RunConfig,
        *,
        progress: Callable[[Any], Any] | None = None,
        events: Callable[[str, Any], Any] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.cfg = cfg
        self.progress = progress
        self._events = events
        self.cancel = cancel or threading.Event()
        # what the engine writes into (workbench.run.sink): the session, the listeners, results
        self.sink = Sink(record=self._record, emit=self.emit, progress=progress, cancel=self.cancel)
        self.recommendations: dict[str, Recommendation] = {}
        self.memory: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.session = None
        self.monitor = None
        self.nvml_status: str | None = None  # "available" or why not, as it was while measuring
        self.clock_mhz: float | None = None  # the GPU's rated SM clock (torch), for calibration
        self.phases: dict[str, float] = {}  # seconds per phase of the process's work (§5.10)
        self.fault: dict[str, Any] | None = None  # the GPU fault that ended the run, if one did
        self.workers: list[dict[str, Any]] = []  # one record per worker process (§5.10)
        self.timeline: dict[str, float] = {}  # the parent's instants of a worker run (run/phases)

    # ------------------------------------------------------------------ plumbing

    @property
    def results(self) -> list[ComparisonResult]:
        """The comparisons measured in this process, as the engine handed them over."""
        return self.sink.results

    def _record(self, type: str, **fields: Any) -> dict[str, Any] | None:
        if self.session is None:  # before the session exists (a note while building)
            return None
        return self.session.record(type, **fields)

    def emit(self, kind: str, data: Any) -> None:
        if kind == "note":
            self.notes.append(data)
        elif kind == "memory":
            self.memory.append(data)
        if self._events is not None:
            self._events(kind, data)

    def note(self, text: str) -> None:
        self.sink.note(text)

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        """Measure the plan. Raises NoGPUError, BuildError, NumericsError (the session, when one
        exists, is marked failed first); KeyboardInterrupt keeps the session as interrupted."""
        from workbench.measure.monitor import Monitor
        from workbench.store.session import SessionWriter

        require_gpu()
        if self.cfg.protocol.placement_seed is None:
            # a fresh seed per run (docs/DESIGN.md §5.5): runs must sample placements, not
            # repeat one; it is journaled, and --placement-seed replays the run's blocks
            self.cfg.protocol = dataclasses.replace(
                self.cfg.protocol, placement_seed=secrets.randbits(62)
            )
        if self.uses_workers():
            status = (self.early_workers or self.worker_run()).run()
            return self.result(status)
        self.monitor = Monitor()
        engine = self.make_engine()
        builds = engine.build()
        env = engine.environment(builds)
        self.clock_mhz = engine.clock_mhz
        prov = engine.provenance(builds)
        writer = SessionWriter(
            self.cfg.sessions_dir, self.cfg.slug, self.cfg.session_config(), prov, env
        )
        self.session = writer
        self.emit("session", writer.path)
        self.monitor.sink = writer.nvml
        self.monitor.start()
        # stop() later rewrites the monitor's reason: keep what was true while measuring
        self.nvml_status = self.monitor.reason or "available"
        if not self.monitor.available:
            self.note(self.monitor.reason)
        status, error = "complete", None
        fault: GPUFault | None = None
        try:
            self.run_plan(engine)
            if self.cancel.is_set():
                status = "interrupted"
        except KeyboardInterrupt:
            self._finish("interrupted", "interrupted (KeyboardInterrupt)")
            raise
        except BaseException as e:
            if not is_sticky_cuda_error(e):
                self._finish("failed", f"{type(e).__name__}: {e}")
                raise
            # the context is lost: keep what was measured, touch the GPU no more
            fault = (
                e
                if isinstance(e, GPUFault)
                else GPUFault(fault_line(None, None, f"{type(e).__name__}: {e}"))
            )
            status, error = "failed", str(fault)
            self.fault = {"cmp": fault.cmp, "arm": fault.arm, "error": str(fault)}
        finally:
            self.monitor.stop()
            if fault is None:
                engine.release()
        self.phases = dict(engine.phases)
        self._finish(status, error)
        return self.result(status)

    def uses_workers(self) -> bool:
        """Whether this run measures in worker processes (docs/DESIGN.md §5.10)."""
        return self.cfg.workers > 1 or self.cfg.ray is not None

    def worker_run(self, setup: Any = None) -> Any:
        """The parent of this run's workers: local processes, or Ray tasks with ``cfg.ray``."""
        if self.cfg.ray is not None:
            from workbench.run.ray_workers import RayWorkerRun

            return RayWorkerRun(self, self.cfg.ray, self.cfg.ray_init, setup)
        from workbench.run.workers import WorkerRun

        return WorkerRun(self, setup)

    early_workers: Any = None  # a started workbench.run.workers.WorkerRun (start_workers)

    def start_workers(self) -> None:
        """Spawn the run's first worker processes before the caller's GPU check, so that their
        imports overlap the parent's (docs/DESIGN.md §5.10); end_workers() if run() never comes."""
        from workbench.run.workers import WorkerRun

        self.early_workers = WorkerRun.early(self) if self.uses_workers() else None

    def end_workers(self) -> None:
        if self.early_workers is not None:
            self.early_workers.end()
            self.early_workers = None

    def run_plan(self, engine: Any) -> None:
        """The order of work: the plan's comparisons, then the recommendation, then the step
        confirmation of the recommended mix (one process; workbench.run.workers does the same
        over worker processes)."""
        plan = list(self.cfg.comparisons)
        groups = engine.run_plan(plan, keep=confirm_banks(self.cfg, plan))
        if self.cancel.is_set():
            return
        for rec in self.recommend().values():
            self.emit("recommendation", rec)
        confirm = self.confirmation_plan()
        if confirm and not self.cancel.is_set():
            engine.run_plan(confirm, first_group=groups)

    def make_engine(self) -> Any:
        """The device side of the run (`workbench tune` makes a subclass)."""
        from workbench.measure.engine import Engine

        return Engine(self.cfg, self.sink, self.monitor)

    def _finish(self, status: str, error: str | None) -> None:
        if self.session is not None and not self.session.finished:
            self.session.finish(status, self.summary(status), error=error)

    # ------------------------------------------------------------------ results

    def recommend(self) -> dict[str, Recommendation]:
        """Per-kernel recommendations from the comparisons measured so far: the analysis model's
        rule (workbench.analysis.recommend), the same one the report applies to the journal."""
        self.recommendations = recommendations(self.results)
        return self.recommendations

    def confirmation_plan(self, results: list[Any] | None = None) -> list[ComparisonSpec]:
        """The step comparisons of the recommended mix against the all-A (scalar) baseline;
        ``results`` (with ``.cmp``) name the main comparisons' A arms (default: this process's)."""
        recs = self.recommendations
        if not self.cfg.confirm or set(recs) != set(KERNELS):
            return []
        results = self.results if results is None else results
        base = parse_arm_spec("step", ",".join(f"{k}={self._main_a(k, results)}" for k in KERNELS))
        mix = parse_arm_spec("step", ",".join(f"{k}={recs[k].arm}" for k in KERNELS), "mix")
        if base.name == mix.name:
            self.note(
                f"step confirmation skipped: the recommended mix {mix.name} is the baseline itself"
            )
            return []
        return [
            ComparisonSpec(f"step/{s}/confirm", "step", s, "confirm", base, mix)
            for s in self.cfg.sets
        ]

    def _main_a(self, kernel: str, results: list[Any]) -> str:
        for r in results:
            if r.cmp["kernel"] == kernel and r.cmp["role"] == "main":
                return str(r.cmp["a"])
        raise WorkbenchError(f"no main comparison for {kernel}")

    def analysis(self) -> Any:
        """The analysis of this run's journal (workbench.analysis.analyse: what `sessions show`,
        the report and the TUI read), or None before the session exists."""
        if self.session is None:
            return None
        from workbench.analysis import analyse
        from workbench.store.session import load_session

        return analyse(load_session(self.session.path, nvml=False), self.cfg.m)

    def result(self, status: str) -> RunResult:
        """The finished run: its summary and the analysis it comes from (one reading of the
        journal, which `ab` prints as `sessions show` does)."""
        an = self.analysis()
        return RunResult(status, self.session.path, self.summary(status, an), an)

    def summary(self, status: str, an: Any = None) -> dict[str, Any]:
        """The run's summary, computed from its journal by the analysis every reader of a
        session shares (``an``, else read now; one data path: `ab` prints what `sessions
        show` prints)."""
        calls = self.cfg.calls
        an = self.analysis() if an is None else an
        # the comparisons measured so far (one that an interruption left unstarted has no pairs)
        comparisons = (
            [] if an is None else [r.to_dict() for r in an.results if r.verdict.n > 0 or r.gates]
        )
        if an is not None and an.recommendations:
            self.recommendations = an.recommendations
        out: dict[str, Any] = {
            "status": status,
            "session": None if self.session is None else str(self.session.path),
            "shape": self.cfg.shape.to_dict(),
            "calls": calls,
            "replays": self.cfg.replays,
            "m": self.cfg.m,
            "workers": self.cfg.workers,
            "comparisons": comparisons,
            "recommendations": {k: r.to_dict() for k, r in self.recommendations.items()},
            "memory": self.memory,
            "flagged": sum(c["flagged"] for c in comparisons),
            "excluded": sum(c["excluded"] for c in comparisons),
            "notes": list(self.notes),
            "nvml": self.nvml_status,
            "phases": self.phase_totals(),
            "worker_records": list(self.workers),
            "timeline": dict(self.timeline),
            "fault": self.fault,
        }
        if self.cfg.mode == "calibrate":
            out["calibration"] = calibration_summary(out["comparisons"], self.cfg.m, self.clock_mhz)
        return json_safe(out)

    def phase_totals(self) -> dict[str, float]:
        """Seconds per phase over the run's processes (docs/DESIGN.md §5.10)."""
        if not self.workers:
            return dict(self.phases)
        out: dict[str, float] = {}
        for w in self.workers:
            for k, v in (w.get("phases") or {}).items():
                if isinstance(v, (int, float)):
                    out[k] = out.get(k, 0.0) + float(v)
        return out


def confirm_banks(cfg: RunConfig, plan: list[ComparisonSpec]) -> set[tuple[str, str]]:
    """The banks (kernel, layout) the step confirmation will read after ``plan``: the b3 banks of
    both kernels, kept to the end of the plan (none when there will be no confirmation)."""
    readers = {c.kernel for c in plan if c.role == "main" and is_reader_comparison(c.a, c.b)}
    if not cfg.confirm or readers != set(KERNELS):
        return set()
    layouts = {
        c.a.parts[0][1].layout
        for c in plan
        if c.role == "main" and c.kernel != "step" and is_reader_comparison(c.a, c.b)
    }
    return {(k, lay) for k in KERNELS for lay in layouts}


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


def _positive_int(value: Any, option: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BadArgument(f"{option} {value!r} must be an integer >= {low}")
    return value


def make_config(
    shape: Shape,
    *,
    kernels: tuple[str, ...] = defaults.KERNELS,
    sets: tuple[str, ...] = defaults.SETS,
    a: str = defaults.ARM_A,
    b: str = defaults.ARM_B,
    reference: bool = True,
    confirm: bool = True,
    calls: int = defaults.CALLS,
    replays: int = defaults.REPLAYS,
    seed: int = defaults.SEED,
    m: float = defaults.M,
    protocol: ProtocolConfig | None = None,
    sessions_dir: str = defaults.SESSIONS_DIR,
    slug: str | None = None,
    extra: dict[str, Any] | None = None,
    workers: int | None = None,
    counters: bool = False,
    ray: str | None = None,
    overlap: bool = False,
) -> RunConfig:
    """A validated RunConfig for `workbench ab` (torch-free: bad input fails before GPU work).
    Errors are BadArgument naming the command-line option and its value."""
    for k in kernels:
        if k not in KERNEL_CHOICES:
            raise BadArgument(f"--kernel {k!r} is not one of {', '.join(KERNEL_CHOICES)}")
    for s in sets:
        if s not in SETS:
            raise BadArgument(f"--set {s!r} is not one of {', '.join(SETS)}")
    if not kernels or not sets:
        raise BadArgument("--kernel and --set must each name at least one choice")
    _positive_int(calls, "--calls")
    _positive_int(replays, "--replays")
    _positive_int(seed, "--seed", low=0)
    workers = defaults.WORKERS if workers is None else workers
    _positive_int(workers, "--workers")
    if overlap and (workers < 2 or ray is not None):
        raise BadArgument(
            f"--overlap needs local worker processes (--workers {workers}"
            + (", --ray" if ray is not None else "")
            + "): nothing would overlap"
        )
    check_min_effect(m, "--min-effect")
    protocol = (protocol or ProtocolConfig()).validate()
    comparisons = plan_ab(tuple(kernels), tuple(sets), a, b, reference=reference)
    if slug is None:
        slug = "aa" if all(c.role == "aa" for c in comparisons) else "ab"
    return RunConfig(
        shape=shape.validate(), comparisons=comparisons, sets=tuple(sets), calls=calls,
        replays=replays, seed=seed, m=float(m), protocol=protocol, confirm=confirm,
        sessions_dir=str(sessions_dir), slug=slug, mode="ab", workers=workers, counters=counters,
        ray=ray, overlap=bool(overlap),
        extra={"kernels": list(kernels), "a": a, "b": b, "reference": reference, **(extra or {})},
    )  # fmt: skip


def config_from_settings(
    settings: RunSettings, sessions_dir: str | Path, extra: dict[str, Any] | None = None
) -> RunConfig:
    """The runner's RunConfig derived from ``settings`` (validated: BadArgument names the field);
    a checkpoint's record goes into the session config, its experts into the banks."""
    ckpt = settings.validate().open_checkpoint()
    extra = dict(extra or {})
    if ckpt is not None:
        extra["checkpoint"] = ckpt.summary()
    cfg = make_config(
        settings.shape(), kernels=tuple(settings.kernels), sets=tuple(settings.sets),
        a=settings.a, b=settings.b, calls=settings.calls, replays=settings.replays,
        seed=settings.seed, protocol=settings.protocol(), sessions_dir=str(sessions_dir),
        extra=extra, counters=settings.counters,
    )  # fmt: skip
    cfg.checkpoint = ckpt  # banks from its experts when one is given
    return cfg


def run_session(
    config: RunSettings | Mapping[str, Any],
    root: str | Path = defaults.SESSIONS_DIR,
    progress: Callable[[Any], Any] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Path:
    """Entry point for the TUI: run its settings (a RunSettings, or a mapping of its fields) and
    return the session path.

    ``progress`` receives workbench.run.progress.ProgressEvent records; ``cancelled`` is polled
    after every sample (a cancelled run returns its session, status "interrupted"). With
    ``counters``, a missing ncu raises ncu.CountersUnavailable before any timing, and a complete
    run's counters go into its session (workbench/run/counters.py).
    """
    settings = config if isinstance(config, RunSettings) else RunSettings.from_dict(config)
    cfg = config_from_settings(settings, root, {"source": "tui"})
    proto = cfg.protocol
    cancel = threading.Event()
    ids = [x.id for x in cfg.comparisons]

    def on_progress(p: Any) -> None:
        if cancelled is not None and cancelled():
            cancel.set()
        if progress is None:
            return
        step = ids.index(p.cmp) + 1 if p.cmp in ids else len(ids)
        ci = None if p.ci_low is None else (p.ci_low, p.ci_high)
        # pairs over the comparison's blocks so far (p.complete counts the block in flight)
        done = (p.block or 0) * proto.pairs + p.complete
        progress(
            ProgressEvent(
                p.cmp, step, max(step, len(ids)), done,
                None if proto.adaptive else proto.pairs * proto.blocks, p.pair * 4 + p.slot + 1,
                p.median, ci,
                "flagged sample: re-measuring" if p.flagged_last else "",
            )
        )  # fmt: skip

    ncu_path = None
    if cfg.counters:  # before any timing: a missing ncu costs no run
        from workbench.measure.ncu import find_ncu

        ncu_path = find_ncu()
    result = Runner(cfg, progress=on_progress, cancel=cancel).run()
    assert result.session_path is not None
    if ncu_path is not None and result.status == "complete":  # the TUI's `h` shows them
        from workbench.run.counters import record

        record(cfg, result.session_path, ncu_path, say=lambda line: None)
    return result.session_path
