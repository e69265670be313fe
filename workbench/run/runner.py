"""Orchestration of a run (docs/DESIGN.md §5-§8): the order of work and the session.

``Runner(cfg, work=...).run()`` walks the rounds of a command (``Round``: data; `workbench ab`:
the plan's comparisons, then the recommendation, then its step confirmation) and calls the
hooks of its ``Work`` (workbench.run.rounds; a tune's is workbench.tune.tuner.Tune); rounds and
hooks see it only as a ``rounds.Host``. A pool (workbench.run.pool: this process, spawned
worker processes, or Ray tasks) runs each round's jobs and hands back their outcomes; the
runner alone writes the session (workbench.run.journal merges the workers' records) and
analyses it once per round. The device work is the engine's, inside each worker
(workbench.measure.engine); what the results mean (the recommendation, the calibration
resolution) is the analysis model's (workbench.analysis, §7.7), the same rule the report
applies to the journal. The CLI (`workbench ab`, `workbench calibrate`) and the TUI drive the
same Runner; they listen through ``progress`` (abba.Progress after every sample) and ``events``
(``events(kind, data)``: "builds", "session", "memory", "comparison", "gate", "result",
"recommendation", "note", "worker"). ``cancel`` (threading.Event) stops between samples; the
session is then kept as "interrupted" with what was measured, as on Ctrl-C.

torch is imported inside the methods that need it, so this module loads on a CPU-only machine.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.analysis.recommend import Recommendation
from workbench.analysis.words import look_text, undecided_text
from workbench.core import defaults
from workbench.core.errors import (
    NoGPUError,
    NumericsError,
    WorkbenchError,
    gpu_stack_hint,
    gpu_stack_module,
)
from workbench.core.sequential import SETTLED_ROLES, Look, decided
from workbench.core.vocab import KERNELS
from workbench.measure.abba import look_stop
from workbench.measure.plan import ComparisonSpec, parse_arm_spec
from workbench.run.config import RunConfig, config_from_settings
from workbench.run.journal import Merge, worker_record
from workbench.run.pool import Outcome, Pool, ProcessPool
from workbench.run.progress import ProgressEvent
from workbench.run.rounds import AB_WORK, Round, Work
from workbench.run.settings import RunSettings
from workbench.run.summary import run_summary

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
class RunResult:
    status: str  # complete | interrupted | failed
    session_path: Path | None
    summary: dict[str, Any]
    # the analysis of the finished session's journal (workbench.analysis.Analysis): what `ab`
    # prints, through the renderer of `sessions show`; None without a session
    analysis: Any = None


class Runner:
    """Runs one plan on the GPU into one session. Not reusable: make one per run.

    It owns the order of work (``work``: the command's rounds, data it walks, and its hooks;
    `ab`'s by default) and the session: a pool (workbench.run.pool) runs each round's jobs and
    hands back their outcomes, which the runner alone journals; it analyses the session once
    per round."""

    worker_setup: Any = None  # ("module:function", kwargs) first in every worker (tests)

    def __init__(
        self,
        cfg: RunConfig,
        *,
        work: Work = AB_WORK,
        progress: Callable[[Any], Any] | None = None,
        events: Callable[[str, Any], Any] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.cfg = cfg
        self.work = work
        if work.worker_setup is not None:
            self.worker_setup = work.worker_setup
        self.progress = progress
        self._events = events
        self.cancel = cancel or threading.Event()
        self.recommendations: dict[str, Recommendation] = {}
        self.memory: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.session = None
        self.nvml_status: str | None = None  # "available" or why not, as it was while measuring
        self.clock_mhz: float | None = None  # the GPU's rated SM clock (torch), for calibration
        self.phases: dict[str, float] = {}  # seconds per phase of this process's work (§5.10)
        self.fault: dict[str, Any] | None = None  # the GPU fault that ended the run, if one did
        self.workers: list[dict[str, Any]] = []  # one record per worker process (§5.10)
        self.outcomes: list[Outcome] = []  # every worker's, as the pool handed them back
        self.pool: Any = None  # the run's workbench.run.pool.Pool, once it runs
        self._pool_now: Any = None  # the pool of the round in flight
        self._merge = Merge(cfg)
        self._pending: list[Outcome] = []  # ended before the session began: journaled once it has
        self._early: list[tuple[str, dict[str, Any]]] = []  # records before it (work.keep_early)
        self._said: set[str] = set()
        self._an: Any = None  # the analysis of the journal as it stands (None: read it anew)
        self.timeline: dict[str, float] = {}  # the parent's instants of the run (run/phases)
        self.looks: list[Look] = []  # a settling round's looks (`ab --settle`)

    # ------------------------------------------------------------------ plumbing

    def emit(self, kind: str, data: Any) -> None:
        if self._events is not None:
            self._events(kind, data)

    def _say(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.notes.append(text)
            self.emit("note", text)

    def note(self, text: str) -> None:
        """A note of the run: journaled (once there is a session) and said to the listeners."""
        self.record("note", text=text)
        self._say(text)

    def record(self, type: str, **fields: Any) -> dict[str, Any] | None:
        """One record into the session; None before it exists (a note while building), when
        the record is dropped, or kept to be written once it opens (``work.keep_early``)."""
        if self.session is None:
            if self.work.keep_early:
                self._early.append((type, fields))
            return None
        self._an = None
        return self.session.record(type, **fields)

    def recommend(self, recs: Mapping[str, Recommendation]) -> None:
        """The run's recommendations (``recs``: kernel -> its recommendation), each said."""
        self.recommendations = dict(recs)
        for rec in recs.values():
            self.emit("recommendation", rec)

    def session_path(self) -> Path | None:
        return None if self.session is None else self.session.path

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        """Measure the plan. Raises NoGPUError, BuildError, NumericsError (the session, when one
        exists, is marked failed first); KeyboardInterrupt keeps the session as interrupted."""
        if self.cfg.ray is None:  # with Ray the workers run on the cluster's GPUs, not here
            require_gpu()
        if self.cfg.protocol.placement_seed is None:
            # a fresh seed per run (docs/DESIGN.md §5.5): runs must sample placements, not
            # repeat one; it is journaled, and --placement-seed replays the run's blocks
            self.cfg.protocol = dataclasses.replace(
                self.cfg.protocol, placement_seed=secrets.randbits(62)
            )
        self.mark("start")
        try:
            self.measure()
        except KeyboardInterrupt:
            self._finish("interrupted", "interrupted (KeyboardInterrupt)")
            raise
        except BaseException as e:
            self._finish("failed", f"{type(e).__name__}: {e}")
            raise
        finally:
            self.end_workers()
        if self.session is None:  # no worker ever started measuring
            raise WorkbenchError("no worker started: " + ("; ".join(self.errors()) or "unknown"))
        if self.pool is not None and self.pool.numerics is not None:
            self._finish("failed", f"NumericsError: {self.pool.numerics}")
            raise NumericsError(self.pool.numerics)
        self.mark("end")
        status, error = self.status()
        self._finish(status, error)
        return self.result(status)

    def measure(self) -> None:
        """Build every variant once (workers load them from the cache), then walk the rounds."""
        self.prepare()
        self._build()
        self.mark("built")
        self.walk(self.work.rounds)

    def walk(self, rounds: tuple[Round, ...]) -> None:
        """Each round planned from the analysis of the session so far, run on the pool,
        analysed once, concluded; until one is cancelled, faults this process or fails its
        numerics, or no worker began."""
        an = self.analysis()
        for rnd in rounds:
            if not self.go_on():
                break
            cmps = rnd.plan(self, an)
            if not cmps:
                continue
            t0 = time.monotonic()
            outcomes = self.run_round(rnd.name, cmps, rnd.numerics, rnd.split)
            if self.session is None:  # no worker began: run() says so
                break
            an = self.analysis()
            if rnd.settles and self.cfg.settle:
                outcomes, an = self.settle(rnd, cmps, outcomes, an, t0)
            rnd.done(self, an, outcomes)
            self.timeline.setdefault("analysed", time.time())  # the first round's analysis

    def settle(
        self,
        rnd: Round,
        cmps: list[ComparisonSpec],
        outcomes: tuple[Outcome, ...],
        an: Any,
        t0: float,
    ) -> tuple[tuple[Outcome, ...], Any]:
        """Look at round ``rnd`` again, as many workers more each time, while a label of its
        main (or A/A) comparisons is undecided, up to ``cfg.settle`` looks and within the
        budget (workbench.core.sequential.next_look, the rule); each look said in a note, and
        what an undecided label sits on at the end. The outcomes of every look, and the
        analysis after the last."""
        n = len(outcomes)
        while True:
            labels = {r.id: r.verdict.label for r in an.results
                      if r.role in SETTLED_ROLES and r.verdict.n > 0}  # fmt: skip
            look = look_stop(self.cfg.protocol, labels, len(self.looks) + 1, self.cfg.settle,
                             n * (len(self.looks) + 1), time.monotonic() - t0)  # fmt: skip
            self.looks.append(look)
            self.note(look_text(look, self.cfg.settle))
            if look.stop is not None or not self.go_on():
                break
            # the next look's first worker declares each comparison again, with every worker
            self._merge.declared.difference_update(c.id for c in cmps)
            more = self.run_round(rnd.name, cmps, rnd.numerics, rnd.split, first=look.workers)
            outcomes = (*outcomes, *more)
            an = self.analysis()
        for r in an.results:
            if r.id in labels and not decided(r.verdict.label):
                self.note(undecided_text(r.id, r.verdict, look))
        return outcomes, an

    def run_round(
        self,
        name: str,
        cmps: list[ComparisonSpec],
        numerics: str = "stop",
        split: bool = False,
        first: int = 0,
    ) -> tuple[Outcome, ...]:
        """One round on its pool, journaled as each worker ends; returns the outcomes.
        ``first``: its first worker's number (a settling round's next look)."""
        self._pool_now = pool = self.pool_for(name)
        pool.start()
        workers = pool.describe()  # a session begun by another pool's round: these workers too
        if (
            self.session is not None
            and workers
            and self.session.environment.get("workers") != workers
        ):
            self.session.update(environment={**self.session.environment, "workers": workers})
        outcomes = pool.run_round(name, cmps, self, numerics, split, first)
        if self.session is None:  # no worker described the run: the first hello will do
            hello = next((o.hello for o in outcomes if o.hello), None)
            if hello is not None:
                self._open_session({"provenance": {}, **hello})
                self.note("the session's provenance is missing: its worker failed first")
        self._journal_pending()
        self.outcomes.extend(outcomes)
        self.mark(name)
        return outcomes

    def mark(self, name: str) -> None:
        """The wall-clock instant of a step of this run (the summary's ``timeline``,
        workbench.run.phases)."""
        self.timeline[name] = time.time()

    def prepare(self) -> None:
        """The run's pool, started: its first worker processes import while this one builds
        (unless the work starts its pools as its rounds come: a tune's screen holds the GPUs
        first)."""
        if self.work.pool_ahead:
            self.start_workers(early=False)
            self.pool.start()

    def pool_for(self, name: str) -> Any:
        """The pool of round ``name``: the work's own for it (a tune's screen), else the run's."""
        own = self.work.pool_for(name)
        if own is not None:
            return own
        self.start_workers(early=False)
        return self.pool

    def pools(self) -> list[Any]:
        return [*self.work.pools(), *(p for p in (self.pool,) if p is not None)]

    def go_on(self) -> bool:
        """Not cancelled, no fault that lost this process's GPU, no numerics failure."""
        return (
            not self.cancel.is_set() and self.fault is None and all(p.go_on() for p in self.pools())
        )

    def _build(self) -> None:
        from workbench.kernels.build import build_many

        variants = {v for c in self.cfg.comparisons for arm in (c.a, c.b) for v in arm.variants}
        if variants:
            results = build_many(sorted(variants, key=lambda v: v.name), load=False)
            self.emit("builds", [b.summary() for b in results])

    def status(self) -> tuple[str, str | None]:
        """How the run ended, from its workers' outcomes: (status, error)."""
        for o in self.outcomes:
            # the first fault ends the run's status where faults fail it, or in this process
            if o.fault and self.fault is None and (self.work.faults_fail or o.inline):
                self.fault = o.fault if o.inline else {**o.fault, "worker": o.job.index}
        if self.fault is not None:
            return "failed", self.fault["error"]
        if self.errors():
            return "failed", "; ".join(self.errors())
        return ("interrupted" if self.cancel.is_set() else "complete"), None

    def errors(self) -> list[str]:
        """What failed workers said, each naming its worker."""
        return [o.error if o.error.startswith(f"worker {o.job.index} ")
                else f"worker {o.job.index}: {o.error}"
                for o in self.outcomes if o.status == "failed" and o.error]  # fmt: skip

    def start_workers(self, early: bool = True) -> None:
        """The run's pool. ``early``: from the command, before its GPU check, so that the first
        worker processes import while the parent does (docs/DESIGN.md §5.10); end_workers() if
        run() never comes."""
        if self.pool is not None:
            return
        if early:
            if self.cfg.workers > 1 and self.cfg.ray is None:
                self.pool = ProcessPool.early(self.cfg, self.worker_setup, self.cancel)
            return
        if self.cfg.ray is not None:  # Ray tasks
            from workbench.run.ray_workers import RayPool

            self.pool = RayPool(self.cfg, self.worker_setup, self.cancel)
        elif self.cfg.workers > 1:  # spawned processes
            self.pool = ProcessPool(self.cfg, self.worker_setup, self.cancel)
        else:  # this process (--single-process)
            self.pool = Pool(self.cfg, self.worker_setup, self.cancel)

    def end_workers(self) -> None:
        for p in self.pools():
            p.end()

    # ------------------------------------------------------------------ the pool's listener

    def has_session(self) -> bool:
        return self.session is not None

    def on_hello(self, job: Any, data: dict[str, Any]) -> None:
        if self.session is None and "provenance" in data:
            self._open_session(data)
            self._journal_pending()
        self.work.on_hello(self, job, data)

    def on_nvml(self, data: dict[str, Any]) -> None:
        if self.session is not None:
            self.session.nvml(data)

    def on_progress(self, p: Any) -> None:
        if self.progress is not None:
            self.progress(p)

    def on_event(self, kind: str, data: Any) -> None:
        """An inline worker's event, as it comes (its builds were said by _build)."""
        if kind == "note":
            self._say(data)
        elif kind != "builds":
            self.emit(kind, data)

    def on_group(self, job: Any, hello: dict[str, Any] | None, group: Any) -> None:
        """A group of a worker's share ended (a tune's candidate screened)."""
        self.work.on_group(self, job, hello, group)

    def on_ended(self, o: Outcome) -> None:
        if self.session is None:
            self._pending.append(o)
        else:
            self._journal(o)

    def _journal_pending(self) -> None:
        if self.session is not None:
            pending, self._pending = self._pending, []
            for o in pending:
                self._journal(o)

    def _open_session(self, hello: dict[str, Any]) -> None:
        """The session, once the first worker knows its GPU: its environment and provenance."""
        from workbench.store.session import SessionWriter

        workers = self._pool_now.describe()
        env = {**hello["environment"], **({"workers": workers} if workers else {})}
        self.session = SessionWriter(
            self.cfg.sessions_dir, self.cfg.slug, self.cfg.session_config(),
            hello["provenance"], env,
        )  # fmt: skip
        self.clock_mhz = hello.get("clock_mhz")
        self.nvml_status = hello.get("nvml")
        self.emit("session", self.session.path)
        if self.nvml_status != "available":
            self.note(str(self.nvml_status))
        early, self._early = self._early, []
        for type, fields in early:
            self.record(type, **fields)
        self.work.on_session(self)

    def _journal(self, o: Outcome) -> None:
        """A worker's outcome into the session (workbench.run.journal), then its worker record."""
        self._an = None
        tags = self.work.tags(o)  # more fields on each record (a tune: its GPU and host)
        for t, rec in self._merge.records(o):
            rec = {**tags, **rec}
            if t == "note":
                self._say(rec["text"])
            if t == "memory" and o.job.index == 0 and o.job.round == "main":
                self.memory.append({k: v for k, v in rec.items() if k not in ("t", "worker")})
            self.session.record(t, **rec)
        if o.inline:  # the run's own process: its phases are the run's
            for k, v in ((o.exit or {}).get("phases") or {}).items():
                self.phases[k] = self.phases.get(k, 0.0) + float(v)
            return
        rec = worker_record(o)
        self.workers.append(rec)
        self.session.record("worker", **rec)
        self.emit("worker", rec)

    def _finish(self, status: str, error: str | None) -> None:
        if self.session is not None and not self.session.finished:
            self.session.finish(status, self.summary(status), error=error)

    # ------------------------------------------------------------------ results

    def confirmation_plan(self, results: list[Any]) -> list[ComparisonSpec]:
        """The step comparisons of the recommended mix against the all-A (scalar) baseline;
        ``results`` (with ``.cmp``) name the main comparisons' A arms."""
        recs = self.recommendations
        if not self.cfg.confirm or set(recs) != set(KERNELS):
            return []
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
        the report and the TUI read), or None before the session exists; read once per change
        of the journal."""
        if self.session is None:
            return None
        if self._an is None:
            from workbench.analysis import analyse
            from workbench.store.session import load_session

            self._an = analyse(load_session(self.session.path, nvml=False), self.cfg.m)
        return self._an

    def result(self, status: str) -> RunResult:
        """The finished run: its summary and the analysis it comes from (one reading of the
        journal, which `ab` prints as `sessions show` does)."""
        an = self.analysis()
        return RunResult(status, self.session.path, self.summary(status, an), an)

    def summary(self, status: str, an: Any = None) -> dict[str, Any]:
        """The run's summary (workbench.run.summary), computed from its journal by the analysis
        every reader of a session shares (``an``, else read now; one data path: `ab` prints
        what `sessions show` prints)."""
        an = self.analysis() if an is None else an
        if an is not None and an.recommendations:
            self.recommendations = an.recommendations
        return run_summary(self, status, an)


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
