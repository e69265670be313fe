"""Screening: every candidate against the default, a few ABBA pairs on one placement per expert
set, its numerics gated first (docs/DESIGN.md §11.2, §11.4).

One GPU screens in the run's own process. Several GPUs screen in one spawned worker process per
GPU, each with ``CUDA_VISIBLE_DEVICES`` set to its GPU before torch loads, its own engine and
banks, and one shared queue of candidates; every journal record a worker makes travels back to
the parent, which writes it into the session with the worker's GPU index. Torch-free at module
level: the worker imports torch only after its environment is set.
"""

from __future__ import annotations

import math
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.core.errors import NumericsError, WorkbenchError
from workbench.run.sink import Sink
from workbench.run.worker_proc import call_setup
from workbench.tune.space import Candidate, comparisons


@dataclass(frozen=True)
class Task:
    """One candidate to screen; ``group`` numbers its placements (distinct per candidate)."""

    candidate: Candidate
    default: Candidate
    group: int


def score(sets: dict[str, dict[str, Any]]) -> float | None:
    """Geometric mean over the expert sets of the candidate/default ratio (< 1: faster)."""
    ratios = [s["ratio"] for s in sets.values() if s.get("ratio")]
    if not ratios or len(ratios) < len(sets):
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def screen_one(engine: Any, task: Task, sets: tuple[str, ...], gpu: int) -> dict[str, Any]:
    """Screen ``task`` on ``engine`` (its protocol already the screening one). Returns the
    result record: status "screened", "excluded" (gate failed), "failed" (every block failed)
    or "cancelled"; a numerics failure never stops the sweep."""
    r, cand = engine.sink, task.candidate
    cmps = comparisons("screen", task.default, cand, sets, f"screen/{cand.name}")
    out: dict[str, Any] = {
        "candidate": cand.name, "params": dict(cand.params), "arm": cand.arm, "gpu": gpu,
        "gate": "rel_l2" if cand.tolerance is not None else "bit-identical", "sets": {},
    }  # fmt: skip
    before = len(r.results)
    t0 = time.monotonic()
    try:
        engine._prepare_banks(cmps)
        engine.run_group(task.group, cmps)
    except NumericsError as e:
        return {**out, "status": "excluded", "reason": f"numerics: {e}"}
    except (WorkbenchError, RuntimeError) as e:
        return {**out, "status": "failed", "reason": f"{type(e).__name__}: {e}"}
    finally:
        done = r.results[before:]
        del r.results[before:]  # screening results live in candidate records, not the summary
    for res in done:
        v = res.verdict
        out["sets"][res.set] = {
            "cmp": res.id, "ratio": v.median if v.n else None,
            "ci": [v.ci_low, v.ci_high], "pairs": v.n,
            "a_us": res.a_us_per_call, "b_us": res.b_us_per_call,
        }  # fmt: skip
    out["seconds"] = time.monotonic() - t0
    complete = len(out["sets"]) == len(sets) and all(x["pairs"] for x in out["sets"].values())
    if r.cancel.is_set() and not complete:
        return {**out, "status": "cancelled", "reason": "interrupted while screening"}
    out["score"] = score(out["sets"])
    return {**out, "status": "screened", "reason": None}


# ------------------------------------------------------------------------ several GPUs


class _QueueSession:
    """What a worker's engine records into: each record goes to the parent, tagged with the GPU."""

    def __init__(self, out: Any, gpu: int, tags: dict[str, Any] | None = None) -> None:
        self.out, self.gpu, self.tags = out, gpu, dict(tags or {})

    def record(self, type: str, **fields: Any) -> dict[str, Any]:
        rec = {"type": type, "t": fields.pop("t", time.time()), "gpu": self.gpu, **self.tags,
               **fields}  # fmt: skip
        self.out.put(("record", self.gpu, rec))
        return rec


class _WorkerRunner:
    """What a screening worker's engine is made from: its config, its GPU's monitor, and a sink
    whose records go to the parent tagged with the GPU."""

    def __init__(
        self, cfg: Any, gpu: int, out: Any, stop: Any, monitor: Any,
        tags: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.cfg, self.gpu, self.out, self.cancel = cfg, gpu, out, stop
        self.session = _QueueSession(out, gpu, tags)
        self.monitor = monitor
        self.sink = Sink(record=self.session.record, cancel=stop)

    def engine(self) -> Any:
        from workbench.tune.device import TuneEngine

        return TuneEngine(self.cfg, self.sink, self.monitor)


def worker_main(
    gpu: int, nvml_index: int, cfg: Any, protocol: Any, sets: tuple[str, ...],
    tasks: Any, out: Any, stop: Any, setup: tuple[str, dict[str, Any]] | None,
) -> None:  # fmt: skip
    """One screening worker: its GPU only (CUDA_VISIBLE_DEVICES was set before it started)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C reaches the group
    try:
        call_setup(setup)
        from workbench.measure.monitor import Monitor

        monitor = Monitor(device_index=nvml_index)
        monitor.start()
        engine = _WorkerRunner(cfg, gpu, out, stop, monitor).engine()
        engine.use_protocol(protocol)
        out.put(("ready", gpu, {"nvml": monitor.reason or "available"}))
        try:
            while not stop.is_set():
                task = tasks.get()
                if task is None:
                    break
                out.put(("result", gpu, screen_one(engine, task, sets, gpu)))
        finally:
            monitor.stop()
            engine.release()
    except BaseException as e:  # reported to the parent, which names the GPU
        out.put(("error", gpu, f"{type(e).__name__}: {e}"))
    out.put(("exit", gpu, None))


def visible_gpus(count: int) -> list[str]:
    """The device ids the workers get: the entries of $CUDA_VISIBLE_DEVICES, else 0..count-1."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in env.split(",") if x.strip()] if env else []
    return ids[:count] if ids else [str(i) for i in range(count)]


@dataclass
class Pool:
    """Screen ``tasks`` on ``workers`` spawned processes; ``on_message(kind, gpu, data)`` gets
    every record and result in the parent's thread. ``cancel`` stops after the samples in
    flight; the candidates not started stay unscreened."""

    cfg: Any
    protocol: Any
    sets: tuple[str, ...]
    workers: int
    setup: tuple[str, dict[str, Any]] | None = None
    procs: list[Any] = field(default_factory=list)

    def run(
        self,
        tasks: list[Task],
        on_message: Callable[[str, int, Any], None],
        cancel: threading.Event,
    ) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")  # a forked CUDA context is unusable in the child
        todo, out, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
        for t in tasks:
            todo.put(t)
        ids = visible_gpus(self.workers)
        for _ in ids:
            todo.put(None)
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            for gpu, dev in enumerate(ids):
                os.environ["CUDA_VISIBLE_DEVICES"] = dev  # inherited by the spawned worker
                nvml = int(dev) if dev.isdigit() else gpu
                args = (gpu, nvml, self.cfg, self.protocol, self.sets, todo, out, stop, self.setup)
                p = ctx.Process(target=worker_main, args=args, name=f"workbench-screen-{gpu}")
                p.start()
                self.procs.append(p)
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
        try:
            self._drain(out, stop, on_message, cancel)
        finally:
            stop.set()
            for p in self.procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=5)

    def _drain(self, out: Any, stop: Any, on_message: Callable[..., None], cancel: Any) -> None:
        running = len(self.procs)
        while running:
            if cancel.is_set():
                stop.set()
            try:
                kind, gpu, data = out.get(timeout=0.2)
            except queue.Empty:
                if not any(p.is_alive() for p in self.procs) and out.empty():
                    return  # every worker died without saying so (killed): nothing more comes
                continue
            if kind == "exit":
                running -= 1
                continue
            on_message(kind, gpu, data)
