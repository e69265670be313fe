"""The one pool of a run's workers (docs/DESIGN.md §5.10): jobs in, immutable outcomes out.

A fresh process moves a reader ratio (on the H200 by an SD of 0.06-0.09 %, as much as a new
memory placement), and no block inside one process samples that: one long process gave an
interval that missed its own neighbours' runs. So the runner plans rounds, and each worker of a
round, a new process that initializes CUDA, makes its banks, places, captures, gates and times,
runs ``protocol.blocks`` blocks of every comparison of the round (worker_proc.run_job). The
interval of a comparison runs over the workers (workbench.core.stats.block_ci).

The pool knows nothing of sessions or of the order of work. ``run_round`` runs one round's jobs
and hands back one ``Outcome`` per worker: its records as measured, its hello, its end. What
comes while a worker measures (its hello, NVML readings, progress, the pool's notes) and each
outcome as its worker ends go to the round's listener, the runner, which alone writes the
session. Three back ends run the same ``run_job``:

* ``Pool`` (inline): in this process, one worker per round (``--single-process``: debugging;
  its intervals ignore process variance; its records name no worker);
* ``ProcessPool``: spawned processes, one lane per GPU of one model, the lanes at once; each lane
  keeps one spare process that has done its imports, so no worker waits for Python and torch;
* ``RayPool`` (workbench.run.ray_workers): Ray tasks of one GPU on a cluster.

A worker whose arm faults the GPU (a sticky CUDA error loses the context) ends alone; the pool
leaves the comparisons it names out of the workers after it. Torch-free.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from workbench.core.errors import WorkbenchError
from workbench.run import messages as msg
from workbench.run import setup as run_setup
from workbench.run.gpus import GPU, check_one_model, visible_gpus
from workbench.run.worker_proc import WorkerJob, run_job, worker_main

ROUND_GROUP = {
    "main": 0,
    "confirm": 1000,
    "tune": 2000,
    "reader": 3000,
    "screen": 4000,
}  # group numbers of a round's placements


def round_workers(workers: int, round_: str) -> int:
    """Workers of a round: all of them, but half (at least two) for "confirm", whose verdict
    confirms the recommended mix on step and decides nothing (docs/DESIGN.md §5.10); one in
    a single-process run."""
    return workers if round_ != "confirm" or workers <= 1 else max(2, (workers + 1) // 2)


def fault_ids(fault: dict[str, Any]) -> list[str]:
    """The comparisons a fault record names (one, or a placement's, joined by ", ")."""
    return [c.strip() for c in str(fault.get("cmp") or "").split(", ") if c.strip()]


def worker_seed(seed: int, worker: int, round_: str) -> int:
    """The placement seed of one worker's blocks: distinct per worker and round, replayable."""
    return (seed * 1_000_003 + 7_919 * (worker + 1) + ROUND_GROUP[round_] * 104_729) % (1 << 62)


@dataclass(frozen=True)
class Outcome:
    """One worker's job as it ended: what it measured, as its engine journaled it (records in
    order, each with its "type"), and how it ended. ``started``/``ended``: monotonic instants
    of this process; ``excluded``: (comparisons, why) a failed gate left out ("exclude")."""

    job: WorkerJob
    status: str  # complete, interrupted, failed, fault, numerics, skipped
    records: tuple[dict[str, Any], ...] = ()
    hello: dict[str, Any] | None = None
    exit: dict[str, Any] | None = None
    error: str | None = None
    fault: dict[str, Any] | None = None
    excluded: tuple[tuple[tuple[str, ...], str], ...] = ()
    spawned: float = 0.0
    started: float | None = None
    ended: float | None = None
    inline: bool = False  # measured in the run's own process (its records name no worker)


class Listener(Protocol):
    """What a round tells its owner (the runner) while it runs."""

    def has_session(self) -> bool: ...
    def on_hello(self, job: WorkerJob, data: dict[str, Any]) -> None: ...
    def on_nvml(self, data: dict[str, Any]) -> None: ...
    def on_progress(self, p: Any) -> None: ...
    def on_event(self, kind: str, data: Any) -> None: ...
    def on_group(self, job: WorkerJob, hello: dict[str, Any] | None, group: msg.Group) -> None: ...
    def note(self, text: str) -> None: ...
    def on_ended(self, outcome: Outcome) -> None: ...


@dataclass
class _Worker:
    """A worker of the round in flight, as its messages arrive (frozen into an Outcome)."""

    job: WorkerJob
    proc: Any = None
    go: Any = None
    jobs: Any = None
    records: list[dict[str, Any]] = field(default_factory=list)
    status: str = "pending"
    error: str | None = None
    fault: dict[str, Any] | None = None
    excluded: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    hello: dict[str, Any] | None = None
    exit: dict[str, Any] | None = None
    spawned: float = 0.0
    started: float | None = None
    ended: float | None = None
    told: bool = False  # its outcome went to the listener


class Pool:
    """The inline back end, and the pool's bookkeeping every back end shares: the round's
    jobs, the messages of its workers, the comparisons a fault or a failed gate excluded.

    ``cfg``: the run's RunConfig; ``setup``: ("module:function", kwargs) run first in each
    worker (tests install the simulated device); ``cancel``: the run's Ctrl-C."""

    inline = True

    def __init__(self, cfg: Any, setup: Any = None, cancel: threading.Event | None = None) -> None:
        self.cfg = cfg
        self.setup = setup
        self.cancel = cancel or threading.Event()
        self.excluded: set[str] = set()  # comparisons a fault or a failed gate ended
        self.numerics: str | None = None  # a numerics failure that ends the run
        self.dead = False  # a fault lost this process's CUDA context: nothing more runs here
        self.started = False
        self.gpus: list[GPU] = []
        self._describing = False  # a worker was asked for the session's environment
        self._round: list[Any] = []  # the comparisons of the round in flight
        self._listener: Any = None
        self.expect_gpu: str | None = None  # a worker on another GPU model measures nothing
        self._groups: list[list[str]] = []  # a split round's groups not handed out yet
        self.handover: dict[str, Any] = {}  # set up once, for the next workers (run/setup.py)

    # -------------------------------------------------------------- the back end

    def start(self, gpus: list[GPU] | None = None) -> None:
        """The GPUs the pool may use. Once only."""
        if not self.started:
            self.gpus = gpus or [GPU(os.environ.get("CUDA_VISIBLE_DEVICES") or "0", 0)]
            self.started = True

    def end(self) -> None:
        """Release what start() spawned (a no-op inline)."""

    def workers_of(self, round_: str) -> int:
        return 1

    def describe(self) -> dict[str, Any] | None:
        """The session environment's ``workers`` (None inline: the run's own process)."""
        return None

    def job_cfg(self, i: int, round_: str, todo: list[Any]) -> Any:
        """Worker ``i``'s RunConfig: the round's comparisons; inline, the run's placement seed."""
        return dataclasses.replace(self.cfg, comparisons=todo)

    def go_on(self) -> bool:
        return not self.cancel.is_set() and self.numerics is None and not self.dead

    def _lanes(
        self, round_: str, todo: list[Any], numerics: str, split: bool, first: int = 0
    ) -> dict[int, list[_Worker]]:
        """The round's workers per GPU lane: each measures every comparison of the round, or,
        ``split``, the groups handed out one at a time (``_hand``); numbered from ``first``."""
        n = self.workers_of(round_)
        keys = list(dict.fromkeys(c.group for c in todo))
        self._groups = [[c.id for c in todo if c.group == k] for k in keys] if split else []
        if split:
            n = max(1, min(n, len(keys)))
        lanes: dict[int, list[_Worker]] = {}
        for i in range(first, first + n):
            g = i % len(self.gpus)
            job = WorkerJob(i, round_, self.job_cfg(i, round_, todo), self.gpus[g],
                            ROUND_GROUP[round_], numerics=numerics, inline=self.inline,
                            replicas=1 if split else first + n, expect_gpu=self.expect_gpu,
                            split=split, lane=g)  # fmt: skip
            lanes.setdefault(g, []).append(_Worker(job))
        return lanes

    def _drive(self, lanes: dict[int, list[_Worker]]) -> None:
        """Inline: the round's one job, here and now, its messages handled as they come."""
        (w,) = [w for lane in lanes.values() for w in lane]
        w.job = self._job(w)
        w.spawned = w.started = time.monotonic()
        w.status = "running"
        sink = _Handler(self, w)
        try:
            run_job(w.job, sink, self.cancel, {"import_s": 0.0, "wait_s": 0.0}, w.started,
                    inbox=sink)  # fmt: skip
        finally:
            if w.exit is None:  # run_job says "exit" last; a KeyboardInterrupt skips nothing
                w.ended = time.monotonic()
            self._tell(w)

    # -------------------------------------------------------------- one round

    def run_round(
        self,
        round_: str,
        comparisons: list[Any],
        listener: Listener,
        numerics: str = "stop",
        split: bool = False,
        first: int = 0,
    ) -> tuple[Outcome, ...]:
        """Every worker of the round (one at a time per GPU, all GPUs at once), less the
        comparisons excluded before; ``numerics`` "exclude" leaves a group that fails its gate
        out instead of stopping (WorkerJob); ``split``: the groups are shared out, each measured
        by one worker; ``first``: the number of its first worker (a settling run's next look
        goes on from the workers before it). Each outcome goes to ``listener.on_ended`` as its
        worker ends; all of them come back, in the workers' order."""
        self.start()
        self._listener = listener
        todo = self._round = [c for c in comparisons if c.id not in self.excluded]
        lanes = self._lanes(round_, todo, numerics, split, first)
        workers = [w for lane in lanes.values() for w in lane]
        try:
            self._drive(lanes)
        finally:
            self._join(workers)
            for w in workers:  # what a worker killed mid-way sent is kept too
                if w.status == "pending":
                    w.status = "skipped"
                self._tell(w)
        return tuple(self._outcome(w) for w in workers)

    def _join(self, workers: list[_Worker]) -> None:
        """Wait for the round's processes (none inline)."""

    def _job(self, w: _Worker) -> WorkerJob:
        """``w``'s job as it starts: less what a fault or a failed gate excluded meanwhile, and
        asked to describe the session when none has been asked yet."""
        cfg = w.job.cfg
        cfg = dataclasses.replace(cfg, comparisons=[c for c in cfg.comparisons
                                                    if c.id not in self.excluded])  # fmt: skip
        describe = not self._listener.has_session() and not self._describing
        job = dataclasses.replace(w.job, cfg=cfg, describe=describe, setup=self.handover or None)
        self._describing = self._describing or describe
        return job

    def _outcome(self, w: _Worker) -> Outcome:
        return Outcome(
            job=w.job, status=w.status, records=tuple(w.records), hello=w.hello, exit=w.exit,
            error=w.error, fault=w.fault, excluded=tuple(w.excluded), spawned=w.spawned,
            started=w.started, ended=w.ended, inline=self.inline,
        )  # fmt: skip

    def _tell(self, w: _Worker) -> None:
        if not w.told and (w.records or w.hello or w.status not in ("pending", "skipped")):
            w.told = True
            self._listener.on_ended(self._outcome(w))

    def _message(self, w: _Worker, m: msg.Message) -> None:
        """Handle worker ``w``'s message ``m`` by its type (``HANDLERS``)."""
        handler = self.HANDLERS.get(type(m))
        if handler is None:
            raise WorkbenchError(f"the pool has no handler for a worker's {m.kind!r} message")
        handler(self, w, m)

    def _on_record(self, w: _Worker, m: msg.Record) -> None:
        w.records.append(m.record)

    def _on_nvml(self, w: _Worker, m: msg.Nvml) -> None:
        self._listener.on_nvml(m.reading)

    def _on_progress(self, w: _Worker, m: msg.Progress) -> None:
        self._listener.on_progress(self._progress(w, m.progress))

    def _on_event(self, w: _Worker, m: msg.Event) -> None:
        self._listener.on_event(m.name, m.data)

    def _on_group(self, w: _Worker, m: msg.Group) -> None:
        self._listener.on_group(w.job, w.hello, m)
        if w.job.split and not self.inline:  # inline, the worker asks (_Handler.get)
            self._hand(w)

    def _on_hello(self, w: _Worker, m: msg.Hello) -> None:
        w.hello = m.facts
        self._listener.on_hello(w.job, m.facts)

    def _on_done(self, w: _Worker, m: msg.Done) -> None:
        w.status = m.status

    def _on_fault(self, w: _Worker, m: msg.Fault) -> None:
        w.status, w.fault = "fault", m.as_record()
        self.excluded.update(self._faulted(w.fault))
        self.dead = self.dead or self.inline
        self._listener.note(f"worker {w.job.index}: {m.error}")

    def _on_excluded(self, w: _Worker, m: msg.Excluded) -> None:
        """A group's gate failed in this worker; it went on."""
        self.excluded.update(m.cmps)
        w.excluded.append((tuple(m.cmps), m.error))
        self._listener.note(f"worker {w.job.index}: {', '.join(m.cmps)} left out: {m.error}")

    def _on_numerics(self, w: _Worker, m: msg.Numerics) -> None:
        w.status, w.error = "numerics", m.error
        self.numerics = m.error

    def _on_failed(self, w: _Worker, m: msg.Failed | msg.BuildFailed) -> None:
        w.status, w.error = "failed", m.error
        if not self.inline:  # inline, the exception itself reaches the runner
            self._listener.note(f"worker {w.job.index} failed: {m.error}")

    def _on_exit(self, w: _Worker, m: msg.Exit) -> None:
        w.exit = msg.fields(m)
        w.ended = time.monotonic()
        run_setup.merge(self.handover, m.handover)
        if w.job.describe and w.hello is None:  # it never described: the next one will
            self._describing = False

    # every kind of workbench.run.messages, handled (tests/test_messages.py)
    HANDLERS: ClassVar[dict[type[msg.Message], Callable[[Any, _Worker, Any], None]]] = {
        msg.Record: _on_record, msg.Nvml: _on_nvml, msg.Progress: _on_progress,
        msg.Event: _on_event, msg.Group: _on_group, msg.Hello: _on_hello, msg.Done: _on_done,
        msg.Fault: _on_fault, msg.Excluded: _on_excluded, msg.Numerics: _on_numerics,
        msg.Failed: _on_failed, msg.BuildFailed: _on_failed, msg.Exit: _on_exit,
    }  # fmt: skip

    def _next_group(self) -> list[str] | None:
        """The next group of a split round for a worker that is free, or None: no more (or the
        run stops: the groups not handed out stay unmeasured)."""
        return self._groups.pop(0) if self._groups and self.go_on() else None

    def _hand(self, w: _Worker) -> None:
        w.jobs.put(self._next_group())

    def _faulted(self, fault: dict[str, Any]) -> set[str]:
        """The comparisons a fault rules out for the workers after it: those it names, and
        every comparison of the round that runs the arm that faulted on the same kernel."""
        ids = set(fault_ids(fault))
        kernels = {c.kernel for c in self._round if c.id in ids}
        arm = fault.get("arm")
        return ids | {c.id for c in self._round
                      if arm and c.kernel in kernels and arm in (c.a.name, c.b.name)}  # fmt: skip

    def _progress(self, w: _Worker, p: Any) -> Any:
        """A worker's progress as the run's: its block among every worker's blocks."""
        if getattr(p, "block", None) is None:
            return p
        stride = max(1, self.cfg.protocol.block_goal)
        return dataclasses.replace(p, block=w.job.index * stride + p.block)


class _Handler:
    """The inline worker's outbox: each message decoded and handled as it is put."""

    def __init__(self, pool: Pool, w: _Worker) -> None:
        self.pool, self.w = pool, w

    def put(self, item: tuple[str, int, Any]) -> None:
        self.pool._message(self.w, msg.decode(item))

    def get(self, timeout: float | None = None) -> list[str] | None:
        """A split round's next group, straight from the pool."""
        return self.pool._next_group()


@dataclass
class _Proc:
    """A spawned worker process of one GPU lane, imported and waiting for a job."""

    proc: Any
    go: Any
    jobs: Any
    spawned: float


class ProcessPool(Pool):
    """Workers as spawned processes: one lane per GPU (of one model, or BadArgument before
    anything runs), the lanes at once, the workers of a lane one after another; the next
    worker on a GPU does its imports while the one before it measures, and makes its first
    CUDA call only once that one has sent its last message (its banks freed, its blocks
    timed). The first spares start before the parent's own GPU check (``early``) or at the
    first round, the next one whenever a worker says hello."""

    inline = False

    def __init__(self, cfg: Any, setup: Any = None, cancel: threading.Event | None = None) -> None:
        super().__init__(cfg, setup, cancel)
        self.spares: dict[int, _Proc] = {}  # GPU lane -> its waiting process
        self.procs: list[Any] = []  # every process spawned, joined at the end

    @classmethod
    def early(cls, cfg: Any, setup: Any, cancel: threading.Event) -> ProcessPool | None:
        """A started pool when NVML names every visible GPU, else None: its first processes
        then import while the parent does its own (torch for the GPU check), not after."""
        gpus = visible_gpus()
        if not all(g.name for g in gpus):
            return None
        pool = cls(cfg, setup, cancel)
        pool.start(gpus)
        return pool

    def start(self, gpus: list[GPU] | None = None) -> None:
        import multiprocessing as mp

        if self.started:
            return
        self.gpus = visible_gpus() if gpus is None else gpus
        check_one_model(self.gpus)
        self.ctx = mp.get_context("spawn")  # a forked CUDA context is unusable in the child
        self.out, self.stop = self.ctx.Queue(), self.ctx.Event()
        self.started = True
        try:
            for g in range(min(len(self.gpus), self.cfg.workers)):
                self._spare(g)
        except BaseException:
            self.end()
            raise

    def workers_of(self, round_: str) -> int:
        return round_workers(self.cfg.workers, round_)

    def describe(self) -> dict[str, Any]:
        return {
            "planned": self.cfg.workers,
            "confirm": round_workers(self.cfg.workers, "confirm"),
            "gpus": [dataclasses.asdict(g) for g in self.gpus],
        }

    def job_cfg(self, i: int, round_: str, todo: list[Any]) -> Any:
        seed = worker_seed(self.cfg.protocol.placement_seed or 0, i, round_)
        return dataclasses.replace(
            self.cfg, comparisons=todo,
            protocol=dataclasses.replace(self.cfg.protocol, placement_seed=seed),
        )  # fmt: skip

    def end(self) -> None:
        """End the spares and join every process (what a killed worker sent is kept). A spare
        was given no job: it is still importing, or waits on its own ``go``, having touched
        nothing of the run's (worker_main), so it is ended at once rather than given a job to
        refuse once its imports are done (1.5 s a run on the 2-core machine)."""
        if not self.started:
            return
        for p in self.spares.values():
            p.proc.terminate()
        self.stop.set()
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.spares.clear()
        self.started = False  # ended: a second end() is a no-op

    def _spare(self, g: int) -> None:
        """Start lane ``g``'s next process (CUDA_VISIBLE_DEVICES names its GPU) unless one waits."""
        if g in self.spares:
            return
        ctx = self.ctx
        go, jobs = ctx.Event(), ctx.Queue()
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = self.gpus[g].visible  # inherited by the child
        # Ctrl-C is the parent's to decide: a child started with SIGINT ignored keeps it ignored
        # from its first instruction, its imports included (worker_main ignores it too)
        main = threading.current_thread() is threading.main_thread()
        handler = signal.getsignal(signal.SIGINT) if main else None
        if handler is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            overlap = bool(getattr(self.cfg, "overlap", False))
            proc = ctx.Process(target=worker_main,
                               args=(self.setup, self.out, go, self.stop, jobs, overlap),
                               name=f"workbench-worker-gpu{g}")  # fmt: skip
            proc.start()
        finally:
            if handler is not None:
                signal.signal(signal.SIGINT, handler)
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
        self.procs.append(proc)
        self.spares[g] = _Proc(proc, go, jobs, time.monotonic())

    def _start(self, w: _Worker, g: int) -> None:
        """Give lane ``g``'s spare process the job of ``w`` and let it measure."""
        self._spare(g)
        p = self.spares[g]
        w.job = self._sendable(self._job(w))
        self.spares.pop(g)
        w.proc, w.go, w.jobs, w.spawned = p.proc, p.go, p.jobs, p.spawned  # held: the child
        # unpickles them only once it has started
        p.jobs.put(w.job)
        p.go.set()
        w.started = time.monotonic()
        w.status = "running"
        if w.job.split:  # its first group (the job goes first through the same queue)
            self._hand(w)

    @staticmethod
    def _sendable(job: WorkerJob) -> WorkerJob:
        try:  # here, not in a queue's feeder thread, which would print a traceback and hang
            pickle.dumps(job)
        except Exception as e:
            raise WorkbenchError(
                f"the run's settings cannot be sent to a worker process ({type(e).__name__}: "
                f"{e}); --single-process measures in this process"
            ) from None
        return job

    def _join(self, workers: list[_Worker]) -> None:
        for w in workers:  # each exits after its job
            if w.proc is not None:
                w.proc.join(timeout=30)

    def _drive(self, lanes: dict[int, list[_Worker]]) -> None:
        for g, lane in lanes.items():
            self._start(lane[0], g)
        by_index = {w.job.index: w for lane in lanes.values() for w in lane}
        pos = {g: 0 for g in lanes}  # the lane's worker that has the GPU now
        live = len(lanes)
        while live:
            if self.cancel.is_set():
                self.stop.set()
            try:
                m = msg.decode(self.out.get(timeout=0.2))
            except queue.Empty:
                for g, lane in lanes.items():  # a worker that died without a word
                    w = lane[pos[g]] if pos[g] < len(lane) else None
                    if w is None or w.proc is None or w.exit is not None or w.proc.is_alive():
                        continue
                    try:  # let its last messages arrive first
                        m = msg.decode(self.out.get(timeout=1.0))
                    except queue.Empty:
                        w.exit = {"phases": {}, "wall_s": time.monotonic() - w.spawned}
                        w.ended = time.monotonic()
                        w.status = "failed"
                        w.error = f"worker {w.job.index} died (exit code {w.proc.exitcode})"
                        self._listener.note(w.error)
                        live -= self._next(lane, g, pos)
                        break
                    self._message(by_index[m.worker], m)
                    break
                continue
            w = by_index[m.worker]
            self._message(w, m)
            g = next(k for k, lane in lanes.items() if w in lane)
            if isinstance(m, msg.Hello) and self.go_on():  # the next imports while this measures
                self._spare(g)
            if isinstance(m, msg.Exit):
                live -= self._next(lanes[g], g, pos)

    def _next(self, lane: list[_Worker], g: int, pos: dict[int, int]) -> int:
        """Give the lane's GPU to its next worker; 1 when the lane is done, else 0."""
        done = lane[pos[g]]
        pos[g] += 1
        if pos[g] >= len(lane) or not self.go_on():
            for w in lane[pos[g] :]:
                w.status = "skipped"
            self._tell(done)
            return 1
        self._start(lane[pos[g]], g)  # the GPU first, then the journal
        self._tell(done)
        return 0
