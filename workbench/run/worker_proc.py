"""One worker of a run (docs/DESIGN.md §5.10): the child's side of workbench.run.pool.

A worker imports first (that overlaps the worker before it on its GPU), waits for its job, then
initializes CUDA, makes its banks, places, captures, gates and times its share of blocks of every
comparison of its round. Every record, reading and outcome goes to ``out`` as a message
(workbench.run.messages: a dataclass per kind, encoded); the last is ``Exit``. ``run_job`` is
the measuring part alone, which a Ray task (workbench.run.ray_workers) runs too, in the fresh
process Ray gives it, and the inline pool in the run's own process.

Torch-free at module level: a worker imports torch only after its CUDA_VISIBLE_DEVICES is set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import queue
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any

from workbench.core.errors import (
    BuildError,
    GPUFault,
    NumericsError,
    WorkbenchError,
    fault_line,
    is_sticky_cuda_error,
)
from workbench.run import messages as msg
from workbench.run.gpus import GPU
from workbench.run.messages import send
from workbench.run.sink import Sink

PHASES = (
    "startup",
    "build",
    "describe",
    "banks",
    "peers",
    "warmup",
    "capture",
    "gate",
    "timing",
    "results",
    "release",
)


@dataclass(frozen=True)
class WorkerJob:
    index: int
    round: str  # "main", "confirm", a tune's "tune" or "reader" (pool.ROUND_GROUP)
    cfg: Any  # the RunConfig of this worker: its comparisons and its placement seed
    gpu: GPU
    first_group: int = 0
    describe: bool = False  # send the session's environment and provenance in its hello
    # "stop": a numerics failure ends the run (exit 5); "exclude": it leaves that group's
    # comparisons out ("excluded") and the worker goes on (a tune's candidates, a group each)
    numerics: str = "stop"
    # in the run's own process (the inline pool): the engine's events ("comparison", "gate",
    # "result", ...) are sent as they come, for listeners that show them live, and an error is
    # raised again after it is reported, so the run fails with it as it is
    inline: bool = False
    # workers that measure each comparison of the round: all of the round's, or 1 where the
    # round splits its groups over the workers (a tune's screen: each candidate measured once)
    replicas: int = 1
    # a worker on another GPU model than this one says so after its hello and measures nothing
    # (a tune's screen on Ray: its ratios rank within one model)
    expect_gpu: str | None = None
    # the round's groups are handed out one at a time (``inbox``): each measured by one worker,
    # the next one given only once the parent has seen the last one end (Ctrl-C then stops it)
    split: bool = False
    # what the run set up once and hands over (workbench.run.setup): None for the first worker
    setup: dict[str, Any] | None = None
    lane: int = 0  # its GPU's index among its pool's GPUs (the pool's lane it runs in)


def call_setup(setup: tuple[str, dict[str, Any]] | None) -> None:
    """Run ``("module:function", kwargs)`` first thing in a worker (tests install the simulated
    device this way; a real run passes None)."""
    if setup is not None:
        import importlib

        mod, _, fn = setup[0].partition(":")
        getattr(importlib.import_module(mod), fn)(**setup[1])


def early_context() -> float:
    """This process's CUDA context, made ahead of its turn (``ab --overlap``): the seconds it
    took. The device is the engine's (a test's simulated device is the CPU)."""
    import torch

    from workbench.measure import bankstore

    t = time.monotonic()
    torch.cuda.init()
    torch.empty(1, device=bankstore.DEVICE)  # the context and the allocator's first segment
    return time.monotonic() - t


def worker_main(setup: Any, out: Any, go: Any, stop: Any, jobs: Any, overlap: bool = False) -> None:
    """One worker process: imports first (they overlap the worker before it on the GPU), then
    waits for its job (``jobs``, with ``go``) and measures its round (run_job). ``overlap``
    (default off until an A/A on the GPU shows it changes nothing, issue 44): it also makes its
    CUDA context before its turn, while the worker before it may still be timing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it sets ``stop``
    t0 = time.monotonic()
    early: BaseException | None = None
    try:
        call_setup(setup)
        import torch  # noqa: F401

        import workbench.measure.engine
        import workbench.measure.monitor  # noqa: F401
    except BaseException as e:  # reported once there is a job to report it for
        early = e
    if early is None:
        # What the imports made lives as long as this process: frozen, a full collection (one
        # per bank batch and per placement) walks only what the run made since, not the ~190k
        # objects of torch and its kin (benchmarks/gc_freeze.py; issue 44). Spawned workers
        # only: the inline pool's process is the caller's.
        gc.freeze()
    info: dict[str, Any] = {"import_s": time.monotonic() - t0}
    if overlap and early is None:
        before_go, at = not go.is_set(), time.time()
        try:
            info["overlap"] = {"context_s": early_context(), "before_go": before_go, "at": at}
        except BaseException as e:  # reported once there is a job, as a failed import is
            early = e
    # Until its job comes this process touches only what is its own (``go``, ``jobs``), never
    # the run's shared ``stop`` or ``out``: a spare the run does not need is ended by the
    # parent at once (ProcessPool.end), which must not leave a shared lock held.
    job: WorkerJob | None = None
    while job is None:
        if go.wait(0.1):
            try:
                job = jobs.get(timeout=5.0)
            except queue.Empty:
                return
        elif not _parent_alive():
            return
    info["wait_s"] = time.monotonic() - t0 - info["import_s"]  # imported, waiting for its turn
    if job.index < 0:  # a spare the run did not need
        return
    run_job(job, out, stop, info, t0, early, inbox=jobs)


def run_job(
    job: WorkerJob,
    out: Any,
    stop: Any,
    info: dict[str, Any],
    t0: float,
    early: BaseException | None = None,
    hello_extra: dict[str, Any] | None = None,
    inbox: Any = None,
) -> None:
    """Measure ``job`` in this process (its imports done, ``info`` their seconds): CUDA, the
    engine, its blocks; every message to ``out`` (workbench.run.messages), ``Exit`` last.
    ``hello_extra``: more facts of where it runs (a Ray worker's host); ``inbox``: where a split
    job's groups come from (the comparison ids of one group at a time, None when there are no
    more)."""
    from workbench.run import setup as run_setup

    idx = job.index
    engine = monitor = None
    given: dict[str, int] = {}
    fault = False

    def record(type: str, **fields: Any) -> dict[str, Any]:
        rec = {"type": type, "t": fields.pop("t", time.time()), **fields}
        send(out, msg.Record(idx, rec))
        return rec

    def progress(p: Any) -> None:
        send(out, msg.Progress(idx, p))

    try:
        if early is not None:
            raise early
        import torch

        from workbench.measure.engine import Engine
        from workbench.measure.monitor import Monitor

        t1 = time.monotonic()
        sink = Sink(record=record, progress=progress, cancel=stop)
        if job.inline:
            sink.emit = lambda kind, data: send(out, msg.Event(idx, kind, data))
        monitor = Monitor(device_index=job.gpu.nvml)
        monitor.sink = lambda r: send(out, msg.Nvml(
            idx, {"t": time.time(), **(dataclasses.asdict(r) if dataclasses.is_dataclass(r)
                                       else dict(r))}
        ))  # fmt: skip
        torch.cuda.init()  # the CUDA context: what every fresh process pays first
        engine = Engine(job.cfg, sink, monitor)
        given = run_setup.install(job.setup, engine)
        info["startup_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        builds = engine.build()
        info["build_s"] = time.monotonic() - t2
        t3 = time.monotonic()
        hello: dict[str, Any] = {"pid": os.getpid(), "nvml": monitor.reason or "available",
                                 "environment": engine.environment(builds),
                                 **(hello_extra or {})}  # fmt: skip
        if job.describe:  # the session's provenance (sources hashed): asked of one worker
            hello["provenance"] = engine.provenance(builds)
        hello["clock_mhz"] = engine.clock_mhz
        info["describe_s"] = time.monotonic() - t3
        monitor.start()
        send(out, msg.Hello(idx, hello))
        name = (hello["environment"].get("gpu") or {}).get("name")
        if job.expect_gpu and name != job.expect_gpu:
            where = f"host {hello.get('host') or socket.gethostname()} GPU {job.gpu.visible}"
            raise WorkbenchError(
                f"{where} is a {name}, not the driver's {job.expect_gpu}: not used "
                "(screening ratios rank within one GPU model)"
            )
        if job.numerics == "exclude":
            _each_group(engine, job, out, stop, inbox)
        else:
            engine.run_plan(list(job.cfg.comparisons), first_group=job.first_group)
        send(out, msg.Done(idx, "interrupted" if stop.is_set() else "complete"))
    except GPUFault as e:
        fault = True
        send(out, msg.Fault(idx, e.cmp, e.arm, str(e)))
    except NumericsError as e:
        send(out, msg.Numerics(idx, str(e)))
    except KeyboardInterrupt:  # only in the run's own process (a worker ignores SIGINT)
        send(out, msg.Done(idx, "interrupted"))
        raise
    except BaseException as e:  # reported to the parent, which names the worker
        if is_sticky_cuda_error(e):
            fault = True
            text = fault_line(None, None, f"{type(e).__name__}: {e}")
            send(out, msg.Fault(idx, None, None, text))
        else:
            failed = msg.BuildFailed if isinstance(e, BuildError) else msg.Failed
            send(out, failed(idx, f"{type(e).__name__}: {e}"))
            if job.inline:
                raise
    finally:
        t_release = time.monotonic()
        if monitor is not None:
            monitor.stop()
        if engine is not None and not fault:
            with contextlib.suppress(Exception):  # what it holds goes with the process anyway
                engine.release()
        phases = dict(engine.phases) if engine is not None else {}
        if engine is not None:  # the sampler's stop and the banks' release, after the last block
            phases["release"] = phases.get("release", 0.0) + time.monotonic() - t_release
        for k in ("startup_s", "build_s", "describe_s"):
            if k in info:
                phases[k[:-2]] = info[k]
        handed = None
        if engine is not None and not fault:
            with contextlib.suppress(Exception):  # a hand-over is a saving, never a failure
                handed = run_setup.collect(engine)
        send(out, msg.Exit(idx, phases, import_s=info.get("import_s"),
                           wait_s=info.get("wait_s"), wall_s=time.monotonic() - t0,
                           handover=handed,
                           setup=run_setup.counts(given, engine) if engine else None,
                           overlap=info.get("overlap")))  # fmt: skip


def _handed(job: WorkerJob, inbox: Any, stop: Any) -> Any:
    """The groups the parent hands out, one at a time, until it says there are no more."""
    while True:
        try:
            ids = inbox.get(timeout=0.2)
        except queue.Empty:
            if stop.is_set():
                return
            continue
        if ids is None:
            return
        yield [c for c in job.cfg.comparisons if c.id in set(ids)]


def _each_group(engine: Any, job: WorkerJob, out: Any, stop: Any, inbox: Any = None) -> None:
    """The job's groups one by one (a tune: one group per candidate): a numerics failure leaves
    that group's comparisons out, said to the parent as "excluded", and the worker goes on.
    Each group's outcome goes to the parent as it ends (``Group``: its status, seconds and, per
    set, the ratio of its comparison as the engine judged it)."""
    from workbench.measure.engine import plan_groups

    groups = plan_groups(list(job.cfg.comparisons))
    g = job.first_group
    for i, part in enumerate(_handed(job, inbox, stop) if job.split else groups):
        if stop.is_set():
            break
        later = [] if job.split else [c for p in groups[i + 1 :] for c in p]
        before, t0 = len(engine.sink.results), time.monotonic()
        ids = [c.id for c in part]
        try:
            g = engine.run_plan(part, keep=engine.banks_needed(later), first_group=g)
        except NumericsError as e:  # passed its screening gate, failed on this placement
            send(out, msg.Excluded(job.index, ids, str(e)))
            send(out, msg.Group(job.index, ids, "excluded", {}, reason=f"numerics: {e}"))
            g += 1
            continue
        sets = {}
        for res in engine.sink.results[before:]:
            v = res.verdict
            sets[res.set] = {
                "cmp": res.id, "ratio": v.median if v.n else None,
                "ci": [v.ci_low, v.ci_high], "pairs": v.n,
                "a_us": res.a_us_per_call, "b_us": res.b_us_per_call,
            }  # fmt: skip
        complete = len(sets) == len(part) and all(x["pairs"] for x in sets.values())
        status = "cancelled" if stop.is_set() and not complete else "measured"
        send(out, msg.Group(job.index, ids, status, sets, seconds=time.monotonic() - t0))


def _parent_alive() -> bool:
    """False once the parent has gone without a word (killed): a waiting spare then leaves."""
    import multiprocessing as mp

    parent = mp.parent_process()
    return parent is None or parent.is_alive()
