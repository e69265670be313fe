"""Worker processes (docs/DESIGN.md §5.10): every block of a run measured in fresh processes.

A fresh process moves a reader ratio (on the H200 by an SD of 0.06-0.09 %, as much as a new
memory placement), and no block inside one process samples that: one long process gave an
interval that missed its own neighbours' runs. So the parent plans, and each worker, a new
process that initializes CUDA, makes its banks, places, captures, gates and times, runs
``protocol.blocks`` blocks of every comparison of a round. The interval of a comparison runs
over the workers (workbench.core.stats.block_ci).

The parent owns the order of work: round "main" (the plan's comparisons) on every worker, then
the recommendation from the merged journal, then round "confirm" (the step confirmation of the
recommended mix) on half of them; a tune (workbench.tune.tuner) runs its confirmation as round
"tune" into its open session. Workers run one after another on one GPU and in parallel, one
per GPU, on several GPUs of one model; the next worker on a GPU does its imports while the one
before it measures, and makes its first CUDA call only once that one has sent its last message
(its banks freed, its blocks timed).

Every record a worker makes travels to the parent, which journals it into the one session, with
the worker's number and with pair and block numbers made unique across workers. A worker whose
arm faults the GPU (a sticky CUDA error loses the context) ends alone: the parent keeps every
record, names the arm, and leaves that comparison out of the workers after it.

The child's side is workbench.run.worker_proc; the GPUs are workbench.run.gpus; a Ray cluster's
GPUs, workbench.run.ray_workers. Torch-free.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from workbench.core.errors import NumericsError, WorkbenchError
from workbench.run import setup as run_setup
from workbench.run.gpus import GPU, check_one_model, visible_gpus
from workbench.run.worker_proc import PHASES, WorkerJob, call_setup, worker_main

__all__ = ["GPU", "PHASES", "WorkerRun", "call_setup", "check_one_model", "visible_gpus"]

ROUND_GROUP = {
    "main": 0,
    "confirm": 1000,
    "tune": 2000,
    "reader": 3000,
}  # group numbers of a round's placements


def round_workers(workers: int, round_: str) -> int:
    """Workers of a round: all of them, but half (at least two) for "confirm", whose verdict
    confirms the recommended mix on step and decides nothing (docs/DESIGN.md §5.10)."""
    return workers if round_ != "confirm" else max(2, (workers + 1) // 2)


def fault_ids(fault: dict[str, Any]) -> list[str]:
    """The comparisons a fault record names (one, or a placement's, joined by ", ")."""
    return [c.strip() for c in str(fault.get("cmp") or "").split(", ") if c.strip()]


def worker_seed(seed: int, worker: int, round_: str) -> int:
    """The placement seed of one worker's blocks: distinct per worker and round, replayable."""
    return (seed * 1_000_003 + 7_919 * (worker + 1) + ROUND_GROUP[round_] * 104_729) % (1 << 62)


def _wall(mono: float | None) -> float | None:
    """A monotonic instant of this process as wall-clock time (journal times are wall-clock)."""
    return None if mono is None else time.time() - (time.monotonic() - mono)


@dataclass
class _Proc:
    """A spawned worker process of one GPU lane, imported and waiting for a job."""

    proc: Any
    go: Any
    jobs: Any
    spawned: float


@dataclass
class _Worker:
    job: WorkerJob
    proc: Any = None
    go: Any = None
    jobs: Any = None
    records: list[dict[str, Any]] = field(default_factory=list)
    status: str = "pending"  # running, complete, interrupted, failed, fault, numerics
    error: str | None = None
    fault: dict[str, Any] | None = None
    hello: dict[str, Any] | None = None
    exit: dict[str, Any] | None = None
    spawned: float = 0.0
    started: float | None = None  # when it was told to go (monotonic)
    ended: float | None = None  # when its exit arrived (monotonic)
    flushed: bool = False


class WorkerRun:
    """The parent of a run's worker processes, for a workbench.run.runner.Runner whose config
    asks for workers. Writes the runner's session; run() returns its status.

    Each GPU lane keeps one spare process that has done its imports and waits for a job: the
    first spares start before the parent's own GPU check (early(), from the command) or at
    run(), and the next one whenever a worker says hello, so no worker waits for Python and
    torch to import once the run has begun (docs/DESIGN.md §5.10)."""

    def __init__(self, runner: Any, setup: tuple[str, dict[str, Any]] | None = None) -> None:
        self.r = runner
        self.cfg = runner.cfg
        self.setup = setup if setup is not None else getattr(runner, "worker_setup", None)
        self._pair_next: dict[str, int] = {}
        self._declared: set[str] = set()
        self._notes: set[str] = set()
        self._block_stride = max(1, self.cfg.protocol.block_goal)
        self.faults: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.numerics: str | None = None
        self.excluded: set[str] = set()  # comparisons a fault ended: no later worker runs them
        self.dropped: dict[str, str] = {}  # comparison -> why a worker left it out (numerics)
        self.spares: dict[int, _Proc] = {}  # GPU lane -> its waiting process
        self.procs: list[Any] = []  # every process spawned, joined at the end
        self._pending: list[_Worker] = []  # ended before the session began: flushed once it has
        self.started = False  # start() has spawned the first processes
        self.handover: dict[str, Any] = {}  # set up once, for the next workers (run/setup.py)

    # -------------------------------------------------------------- the run

    @classmethod
    def early(cls, runner: Any) -> WorkerRun | None:
        """A started WorkerRun for ``runner`` when its run has workers and NVML names every
        visible GPU, else None: its first processes then import while the parent does its own
        (torch for the GPU check), not after. Where NVML cannot tell, run() starts them."""
        if not runner.uses_workers() or runner.cfg.ray is not None:
            return None  # a Ray run's workers start on the cluster, at run()
        gpus = visible_gpus()
        if not all(g.name for g in gpus):
            return None
        run = cls(runner)
        run.start(gpus)
        return run

    def start(self, gpus: list[GPU] | None = None) -> None:
        """The run's GPUs (one model, or BadArgument before anything runs), then each GPU
        lane's first process, spawned to do its imports and wait for a job. Once only."""
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
            self._end()
            raise

    def run(self) -> str:
        """Measure every round; returns the run's status (the runner makes its result)."""
        r, cfg = self.r, self.cfg
        self.start()  # a no-op where early() did it
        status, error = "complete", None
        mark = self._mark  # the parent's instants, the phase table's spans (run/phases.py)
        mark("start")
        try:
            self._build()
            mark("built")
            self.run_round("main", list(cfg.comparisons))
            mark("main")
            if self._go_on() and r.session is not None:  # else no worker began: said below
                an = self.analysis()
                r.recommendations = an.recommendations
                for rec in an.recommendations.values():
                    r.emit("recommendation", rec)
                confirm = r.confirmation_plan(an.results)
                mark("analysed")
                if confirm and self._go_on():
                    self.run_round("confirm", confirm)
                    mark("confirm")
        except KeyboardInterrupt:
            r._finish("interrupted", "interrupted (KeyboardInterrupt)")
            raise
        except BaseException as e:
            r._finish("failed", f"{type(e).__name__}: {e}")
            raise
        finally:
            self._end()
        if r.session is None:  # no worker ever started measuring
            raise WorkbenchError("no worker started: " + ("; ".join(self.errors) or "unknown"))
        if self.numerics is not None:
            r._finish("failed", f"NumericsError: {self.numerics}")
            raise NumericsError(self.numerics)
        if r.cancel.is_set():
            status = "interrupted"
        mark("end")
        if self.faults:
            status, error = "failed", self.faults[0]["error"]
            r.fault = self.faults[0]
        elif self.errors:
            status, error = "failed", "; ".join(self.errors)
        r._finish(status, error)
        return status

    def _mark(self, name: str) -> None:
        """The wall-clock instant of a step of this run (the summary's ``timeline``)."""
        timeline = getattr(self.r, "timeline", None)
        if isinstance(timeline, dict):
            timeline[name] = time.time()

    def _go_on(self) -> bool:
        return not self.r.cancel.is_set() and self.numerics is None

    def _build(self) -> None:
        """Build every variant once here, so that workers load them from the cache."""
        from workbench.kernels.build import build_many

        cfg = self.cfg
        variants = {v for c in cfg.comparisons for arm in (c.a, c.b) for v in arm.variants}
        if variants:
            results = build_many(sorted(variants, key=lambda v: v.name), load=False)
            self.r.emit("builds", [b.summary() for b in results])

    def analysis(self) -> Any:
        """The analysis of the merged journal so far (the one every reader of a session uses)."""
        from workbench.analysis import analyse
        from workbench.store.session import load_session

        return analyse(load_session(self.r.session.path, nvml=False), self.cfg.m)

    # -------------------------------------------------------------- processes

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
        p = self.spares.pop(g)
        w.proc, w.go, w.jobs, w.spawned = p.proc, p.go, p.jobs, p.spawned  # held: the child
        # unpickles them only once it has started
        w.job = self._job(w)
        p.jobs.put(w.job)
        p.go.set()
        w.started = time.monotonic()
        w.status = "running"

    def _job(self, w: _Worker) -> WorkerJob:
        """``w``'s job as it starts: less what a fault or a failed gate excluded meanwhile, and
        asked to describe the session when none has been asked yet."""
        cfg = w.job.cfg
        cfg = dataclasses.replace(cfg, comparisons=[c for c in cfg.comparisons
                                                    if c.id not in self.excluded])  # fmt: skip
        job = dataclasses.replace(
            w.job, cfg=cfg, describe=self.r.session is None and not self._describing,
            setup=getattr(self, "handover", None) or None,
        )  # fmt: skip
        self._describing = self._describing or job.describe
        try:  # here, not in a queue's feeder thread, which would print a traceback and hang
            pickle.dumps(job)
        except Exception as e:
            raise WorkbenchError(
                f"the run's settings cannot be sent to a worker process ({type(e).__name__}: "
                f"{e}); --single-process measures in this process"
            ) from None
        return job

    _round: list[Any] = []  # the comparisons of the round in flight
    _describing = False  # a worker was asked for the session's environment and provenance

    def end(self) -> None:
        """Release what start() spawned, for a run that will not run (the GPU check failed)."""
        if self.started:
            self._end()

    def _end(self) -> None:
        """Release the spares and join every process (what a killed worker sent is kept)."""
        for p in self.spares.values():
            p.jobs.put(WorkerJob(-1, "none", None, self.gpus[0]))
            p.go.set()
        self.stop.set()
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.spares.clear()

    # -------------------------------------------------------------- one round

    def run_round(self, round_: str, comparisons: list[Any], numerics: str = "stop") -> None:
        """Every worker of the round, one at a time per GPU, all GPUs at once; ``numerics``
        "exclude" leaves a group that fails its gate out instead of stopping (WorkerJob)."""
        cfg, n = self.cfg, round_workers(self.cfg.workers, round_)
        todo = self._round = [c for c in comparisons if c.id not in self.excluded]
        lanes: dict[int, list[_Worker]] = {}
        for i in range(n):
            seed = worker_seed(cfg.protocol.placement_seed or 0, i, round_)
            wcfg = dataclasses.replace(
                cfg,
                comparisons=todo,
                protocol=dataclasses.replace(cfg.protocol, placement_seed=seed),
            )
            g = i % len(self.gpus)
            job = WorkerJob(i, round_, wcfg, self.gpus[g], ROUND_GROUP[round_],
                            numerics=numerics)  # fmt: skip
            lanes.setdefault(g, []).append(_Worker(job))
        workers = [w for lane in lanes.values() for w in lane]
        try:
            for g, lane in lanes.items():
                self._start(lane[0], g)
            self._drain(lanes)
        finally:
            for w in workers:  # wait for the round's processes: each exits after its job
                if w.proc is not None:
                    w.proc.join(timeout=30)
            if self.r.session is None:  # no worker described the run: the first hello will do
                hello = next((w.hello for w in workers if w.hello), None)
                if hello is not None:
                    self._open_session({"provenance": {}, **hello})
                    self.r.note("the session's provenance is missing: its worker failed first")
            for w in [*self._pending, *workers]:  # what a worker killed mid-way sent is kept too
                if not w.flushed and (w.records or w.hello):
                    self._flush(w)
            self._pending = []

    def _drain(self, lanes: dict[int, list[_Worker]]) -> None:
        out = self.out
        by_index = {w.job.index: w for lane in lanes.values() for w in lane}
        pos = {g: 0 for g in lanes}  # the lane's worker that has the GPU now
        live = len(lanes)
        while live:
            if self.r.cancel.is_set():
                self.stop.set()
            try:
                kind, idx, data = out.get(timeout=0.2)
            except queue.Empty:
                for g, lane in lanes.items():  # a worker that died without a word
                    w = lane[pos[g]] if pos[g] < len(lane) else None
                    if (
                        w is not None
                        and w.proc is not None
                        and w.exit is None
                        and not w.proc.is_alive()
                    ):
                        # let its last messages arrive first
                        try:
                            kind, idx, data = out.get(timeout=1.0)
                        except queue.Empty:
                            w.exit = {"phases": {}, "wall_s": time.monotonic() - w.spawned}
                            w.ended = time.monotonic()
                            w.status = "failed"
                            w.error = f"worker {w.job.index} died (exit code {w.proc.exitcode})"
                            self.errors.append(w.error)
                            self.r.note(w.error)
                            live -= self._next(lane, g, pos)
                            break
                        self._message(by_index[idx], kind, data)
                        break
                continue
            w = by_index[idx]
            self._message(w, kind, data)
            if kind == "hello" and self._go_on():  # the next process imports while this measures
                g = next(k for k, lane in lanes.items() if w in lane)
                self._spare(g)
            if kind == "exit":
                g = next(k for k, lane in lanes.items() if w in lane)
                live -= self._next(lanes[g], g, pos)

    def _next(self, lane: list[_Worker], g: int, pos: dict[int, int]) -> int:
        """Give the lane's GPU to its next worker; 1 when the lane is done, else 0."""
        done = lane[pos[g]]
        pos[g] += 1
        if pos[g] >= len(lane) or not self._go_on():
            for w in lane[pos[g] :]:
                w.status = "skipped"
            self._flush(done)
            return 1
        self._start(lane[pos[g]], g)  # the GPU first, then the journal
        self._flush(done)
        return 0

    def _message(self, w: _Worker, kind: str, data: Any) -> None:
        r = self.r
        if kind == "record":
            w.records.append(data)
        elif kind == "nvml":
            if r.session is not None:
                r.session.nvml(data)
        elif kind == "progress":
            if r.progress is not None:
                r.progress(self._progress(w, data))
        elif kind == "hello":
            w.hello = data
            if r.session is None and "provenance" in data:
                self._open_session(data)
                for p in self._pending:  # workers that ended before the session began
                    self._flush(p)
                self._pending = []
        elif kind == "done":
            w.status = data
        elif kind == "fault":
            w.status, w.fault = "fault", data
            self.faults.append({**data, "worker": w.job.index})
            self.excluded.update(self._faulted(data))
            r.note(f"worker {w.job.index}: {data['error']}")
        elif kind == "excluded":  # a group's gate failed in this worker; it went on
            self.excluded.update(data["cmps"])
            for c in data["cmps"]:
                self.dropped.setdefault(c, data["error"])
            r.note(f"worker {w.job.index}: {', '.join(data['cmps'])} left out: {data['error']}")
        elif kind == "numerics":
            w.status, w.error = "numerics", data
            self.numerics = data
        elif kind in ("error", "build"):
            w.status, w.error = "failed", data
            self.errors.append(f"worker {w.job.index}: {data}")
            r.note(f"worker {w.job.index} failed: {data}")
        elif kind == "exit":
            w.exit = data
            w.ended = time.monotonic()
            run_setup.merge(self.handover, data.get("handover"))
            if w.job.describe and w.hello is None:  # it never described: the next one will
                self._describing = False

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
        return dataclasses.replace(p, block=w.job.index * self._block_stride + p.block)

    def describe(self) -> dict[str, Any]:
        """The session environment's ``workers``: how many, on which GPUs (after start())."""
        return {
            "planned": self.cfg.workers,
            "confirm": round_workers(self.cfg.workers, "confirm"),
            "gpus": [dataclasses.asdict(g) for g in self.gpus],
        }

    def _open_session(self, hello: dict[str, Any]) -> None:
        """The session, once the first worker knows its GPU: its environment and provenance."""
        from workbench.store.session import SessionWriter

        r = self.r
        env = {**hello["environment"], "workers": self.describe()}
        writer = SessionWriter(
            self.cfg.sessions_dir, self.cfg.slug, self.cfg.session_config(),
            hello["provenance"], env,
        )  # fmt: skip
        r.session = writer
        r.clock_mhz = hello.get("clock_mhz")
        r.nvml_status = hello.get("nvml")
        r.emit("session", writer.path)
        if r.nvml_status != "available":
            r.note(str(r.nvml_status))

    # -------------------------------------------------------------- merging

    def _flush(self, w: _Worker) -> None:
        """Journal a worker's records, tagged with its number, pairs and blocks renumbered so
        that they are unique across the run's workers; then its worker record."""
        r = self.r
        if w.flushed:
            return
        if r.session is None:
            if w not in self._pending:
                self._pending.append(w)
            return
        w.flushed = True
        base_block = w.job.index * self._block_stride
        pair_base: dict[str, int] = {}
        top: dict[str, int] = {}
        for rec in w.records:
            rec = dict(rec)
            t = rec.pop("type")
            rec["worker"] = w.job.index
            if t == "comparison":
                if rec["id"] in self._declared:
                    continue
                self._declared.add(rec["id"])
                n = round_workers(self.cfg.workers, w.job.round)
                rec.update(blocks=self.cfg.protocol.block_goal * n, workers=n,
                           placement_seed=self.cfg.protocol.placement_seed)  # fmt: skip
                del rec["worker"]
            if t == "note":
                if rec["text"] in self._notes:
                    continue
                self._notes.add(rec["text"])
                r.notes.append(rec["text"])
                r.emit("note", rec["text"])
            if "block" in rec and isinstance(rec["block"], int):
                rec["block"] = base_block + rec["block"]
            if t == "sample":
                cmp = rec["cmp"]
                base = pair_base.setdefault(cmp, self._pair_next.get(cmp, 0))
                rec["pair"] = base + int(rec["pair"])
                top[cmp] = max(top.get(cmp, base), rec["pair"] + 1)
            if t == "memory" and w.job.index == 0 and w.job.round == "main":
                r.memory.append({k: v for k, v in rec.items() if k not in ("t", "worker")})
            r.session.record(t, **rec)
        self._pair_next.update(top)
        w.records = []
        exit_ = w.exit or {}
        env = (w.hello or {}).get("environment") or {}
        gpu = env.get("gpu") or {}
        phases = dict(exit_.get("phases") or {})
        if w.started is not None and w.hello is not None:
            phases.setdefault("startup", 0.0)
        rec = {
            "worker": w.job.index, "round": w.job.round, "status": w.status,
            "gpu": (w.hello or {}).get("gpu") or w.job.gpu.visible,
            "uuid": w.job.gpu.uuid or gpu.get("uuid"),
            "name": w.job.gpu.name or gpu.get("name"), "pid": (w.hello or {}).get("pid"),
            "started": _wall(w.started), "ended": _wall(w.ended),
            "placement_seed": w.job.cfg.protocol.placement_seed,
            "blocks": w.job.cfg.protocol.block_goal, "phases": phases,
            "import_s": exit_.get("import_s"), "wait_s": exit_.get("wait_s"),
            "wall_s": exit_.get("wall_s"), "setup": exit_.get("setup"),
            "error": w.error or (w.fault or {}).get("error"),
        }  # fmt: skip
        if exit_.get("overlap"):  # its CUDA context made before its turn (--overlap)
            rec["overlap"] = exit_["overlap"]
        if (w.hello or {}).get("host"):  # a Ray worker: its host and node
            rec["host"], rec["ray_node"] = w.hello["host"], w.hello.get("ray_node")
        if w.fault is not None:
            rec["fault_cmp"], rec["fault_arm"] = w.fault.get("cmp"), w.fault.get("arm")
        r.workers.append(rec)
        r.session.record("worker", **rec)
        r.emit("worker", rec)
