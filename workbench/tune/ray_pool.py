"""Screening on a Ray cluster (docs/DESIGN.md §11.5): one actor per GPU of every host, declared
with ``num_gpus=1`` as vLLM's MoE tuner declares its workers, so Ray reserves the GPU and sets
``CUDA_VISIBLE_DEVICES`` for it. Each actor holds its own engine, banks and NVML monitor (the
local pool's worker, screen.py) and screens one candidate at a time; the driver hands the next
candidate to whichever actor is free, so a fast GPU takes more.

A candidate's journal records come back with its result, each tagged with the actor's host and
its GPU on that host, and the driver writes them into the one session. Ctrl-C: the driver stops
handing out candidates and tells each actor to stop after the samples in flight (the actors are
threaded, so that call reaches them mid-screen). Ray is an optional extra (``pip install
'awq-moe-workbench[ray]'``); this module imports it only inside ``RayPool.run``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.core.errors import NoGPUError, WorkbenchError
from workbench.run.ray_workers import address, require_ray
from workbench.tune.screen import Task, _WorkerRunner, call_setup, screen_one

__all__ = ["RayPool", "ScreenActor", "address", "require_ray"]

PLACE_TIMEOUT_S = 600.0  # actors waiting this long for a GPU (held by others) are given up


class _Collect:
    """A worker's outbox: what the local pool sends over a queue, kept until the call returns."""

    def __init__(self) -> None:
        self.items: list[tuple[str, int, Any]] = []

    def put(self, item: tuple[str, int, Any]) -> None:
        self.items.append(item)

    def take(self) -> list[tuple[str, int, Any]]:
        out, self.items = self.items, []
        return out


def _gpu_index(ids: list[Any], fallback: int) -> int:
    try:
        return int(ids[0])
    except (IndexError, TypeError, ValueError):
        return fallback


class ScreenActor:
    """One GPU's screening worker; RayPool wraps it with ``ray.remote(num_gpus=1)``."""

    def __init__(self, index: int, cfg: Any, protocol: Any, sets: tuple[str, ...],
                 setup: tuple[str, dict[str, Any]] | None) -> None:  # fmt: skip
        import ray

        call_setup(setup)
        from workbench.measure.monitor import Monitor

        ids = list(ray.get_gpu_ids())
        self.gpu = _gpu_index(ids, index)  # this GPU's index on its host (NVML's numbering)
        self.host = socket.gethostname()
        self.sets = sets
        self.out = _Collect()
        self.stop_event = threading.Event()
        self.monitor = Monitor(device_index=self.gpu)
        self.monitor.start()
        self.runner = _WorkerRunner(cfg, self.gpu, self.out, self.stop_event, self.monitor,
                                    tags={"host": self.host})  # fmt: skip
        self.engine = self.runner.engine()
        self.engine.use_protocol(protocol)
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.facts = {
            "host": self.host, "gpu": self.gpu, "ray_gpu_ids": [str(i) for i in ids],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "node": ray.get_runtime_context().get_node_id(), "name": props.name,
            "uuid": str(getattr(props, "uuid", "") or ""),
            "nvml": self.monitor.reason or "available",
        }  # fmt: skip

    def info(self) -> dict[str, Any]:
        return self.facts

    def screen(self, task: Task) -> list[tuple[str, int, Any]]:
        """Screen one candidate: its journal records, then its result."""
        res = screen_one(self.engine, task, self.sets, self.gpu)
        return [*self.out.take(), ("result", self.gpu, {**res, "host": self.host})]

    def stop(self) -> None:
        self.stop_event.set()  # screen_one's engine stops after the samples in flight

    def close(self) -> None:
        self.monitor.stop()
        self.engine.release()


@dataclass
class RayPool:
    """Screen ``tasks`` on one Ray actor per GPU of the cluster at ``address`` (``workers``
    caps them; None: every GPU). ``on_message(kind, gpu, data)`` gets every record and result
    in the driver's thread, as the local Pool's does; ``expect_gpu``: the driver's GPU model
    (actors on another model are dropped with a note: screening ratios rank within a model).
    ``init``: extra ``ray.init`` arguments (tests start a local instance with fake GPUs)."""

    cfg: Any
    protocol: Any
    sets: tuple[str, ...]
    address: str | None
    workers: int | None = None
    setup: tuple[str, dict[str, Any]] | None = None
    expect_gpu: str | None = None
    init: dict[str, Any] = field(default_factory=dict)
    facts: list[dict[str, Any]] = field(default_factory=list)

    def run(
        self,
        tasks: list[Task],
        on_message: Callable[[str, int, Any], None],
        cancel: threading.Event,
    ) -> None:
        import ray

        started = not ray.is_initialized()
        if started:
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         **self.init)  # fmt: skip
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise WorkbenchError(f"--ray {self.address!r}: cannot connect: {e}") from None
        actors: list[Any] = []
        try:
            gpus = int(ray.cluster_resources().get("GPU", 0))
            if gpus < 1:
                raise NoGPUError(f"--ray {self.address!r}: the cluster has no GPU")
            n = min(gpus, self.workers or gpus, max(1, len(tasks)))
            remote = ray.remote(num_gpus=1, max_concurrency=2)(ScreenActor)
            made = [remote.remote(i, self.cfg, self.protocol, self.sets, self.setup)
                    for i in range(n)]  # fmt: skip
            placed = self._placed(ray, made, on_message, cancel)
            actors = [a for a, _ in placed]
            if placed:
                self._screen(ray, placed, list(tasks), on_message, cancel)
        finally:
            for a in actors:
                with contextlib.suppress(Exception):  # a dead actor has nothing left to close
                    ray.get(a.close.remote(), timeout=30)
            for a in actors:
                ray.kill(a)
            if started:
                ray.shutdown()

    def _placed(self, ray: Any, made: list[Any], on_message: Callable[..., None],
                cancel: threading.Event) -> list[tuple[Any, dict[str, Any]]]:  # fmt: skip
        """(actor, its facts) of those that started on a GPU of the expected model, each
        announced as "ready"; the others are killed and reported as errors."""
        pending = {a.info.remote(): (i, a) for i, a in enumerate(made)}
        ok, t0 = [], time.monotonic()
        while pending and not cancel.is_set() and time.monotonic() - t0 < PLACE_TIMEOUT_S:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
            for ref in ready:
                i, a = pending.pop(ref)
                try:
                    facts = ray.get(ref)
                except Exception as e:  # its setup or its GPU failed
                    on_message("error", i, f"{type(e).__name__}: {_first_line(e)}")
                    ray.kill(a)
                    continue
                if self.expect_gpu and facts["name"] != self.expect_gpu:
                    on_message("error", facts["gpu"], f"host {facts['host']} GPU {facts['gpu']} "
                               f"is a {facts['name']}, not the driver's {self.expect_gpu}: "
                               "not used (screening ratios rank within one GPU model)")  # fmt: skip
                    ray.kill(a)
                    continue
                self.facts.append(facts)
                on_message("ready", facts["gpu"], facts)
                ok.append((a, facts))
        for i, a in pending.values():  # never placed: the cluster's GPUs are held elsewhere
            on_message("error", i, f"actor {i} got no GPU within {PLACE_TIMEOUT_S:.0f} s")
            ray.kill(a)
        return ok

    def _screen(self, ray: Any, placed: list[tuple[Any, dict[str, Any]]], todo: list[Task],
                on_message: Callable[..., None], cancel: threading.Event) -> None:  # fmt: skip
        idle: list[tuple[Any, dict[str, Any]]] = list(placed)
        busy: dict[Any, tuple[Any, dict[str, Any]]] = {}
        stopped = False
        while todo or busy:
            if cancel.is_set() and not stopped:
                stopped = True
                todo.clear()  # what was not handed out stays unscreened
                for a, _ in busy.values():
                    a.stop.remote()
            while idle and todo:
                a, facts = idle.pop(0)
                busy[a.screen.remote(todo.pop(0))] = (a, facts)
            if not busy:
                break
            ready, _ = ray.wait(list(busy), num_returns=1, timeout=0.2)
            for ref in ready:
                a, facts = busy.pop(ref)
                try:
                    items = ray.get(ref)
                except Exception as e:  # the actor died (its host, its GPU): its candidate is lost
                    on_message("error", facts["gpu"], f"host {facts['host']}: "
                               f"{type(e).__name__}: {_first_line(e)}")  # fmt: skip
                    continue
                for kind, gpu, data in items:
                    on_message(kind, gpu, data)
                idle.append((a, facts))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[-1] if text else type(e).__name__
