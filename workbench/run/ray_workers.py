"""Worker processes on a Ray cluster (docs/DESIGN.md §5.10): `workbench ab --ray ADDRESS`.

The back end of the one pool (workbench.run.pool) whose workers are Ray tasks of one GPU each (``num_gpus=1``, ``max_calls=1``:
a fresh process per task, as Ray gives GPU tasks by default), one lane per GPU of the cluster,
the lanes at once. Ray sets each task's CUDA_VISIBLE_DEVICES; the task runs the worker's
measuring part (worker_proc.run_job) and sends every message through a Ray queue, which the
parent drains as it drains the local workers' queue; Ctrl-C reaches the tasks through a flag
they poll. The cluster's GPU models (Ray's ``accelerator_type`` resource per node) must be one:
a mix is refused before anything runs, as on one host.

Ray is an optional extra (``pip install 'awq-moe-workbench[ray]'``): ``require_ray`` refuses
in one line without it; this module imports ray only inside its methods.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
from typing import Any

from workbench.core.errors import MissingExtra, NoGPUError, WorkbenchError
from workbench.run.gpus import GPU, check_one_model
from workbench.run.pool import ProcessPool
from workbench.run.worker_proc import WorkerJob, call_setup, run_job

ACCELERATOR = "accelerator_type:"  # Ray's resource naming a node's GPU model


def address(arg: str | None) -> str | None:
    """The Ray cluster to run on: ``--ray ADDRESS``, else $RAY_ADDRESS, else None (local)."""
    return arg or os.environ.get("RAY_ADDRESS") or None


def require_ray(where: str) -> None:
    """MissingExtra (exit 3, a missing package) naming ``where`` (the option or variable) and
    the install command when ray is not installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise MissingExtra("ray", "ray", where) from None


def cluster_gpus(nodes: list[dict[str, Any]]) -> list[GPU]:
    """One GPU per GPU of every live node of ``ray.nodes()``, named by the node's
    accelerator type where Ray knows it (None: fake GPUs, a test's local instance)."""
    out = []
    for node in nodes:
        if not node.get("Alive", True):
            continue
        res = node.get("Resources") or {}
        kinds = sorted(k[len(ACCELERATOR) :] for k in res if k.startswith(ACCELERATOR))
        host = node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "?"
        for i in range(int(res.get("GPU", 0))):
            name = kinds[i % len(kinds)] if kinds else None  # a node of two kinds: both named
            out.append(GPU(f"ray:{host}:{i}", i, name))
    return out


class _Flag:
    """Ctrl-C for the tasks: the parent sets it, each task polls it (a Ray actor)."""

    def __init__(self) -> None:
        self.on = False

    def set(self) -> None:
        self.on = True

    def is_set(self) -> bool:
        return self.on


class _Stop:
    """The parent's side of the flag, spelled as the local workers' event."""

    def __init__(self, actor: Any) -> None:
        self.actor, self.on = actor, False

    def set(self) -> None:
        if not self.on:
            self.on = True
            with contextlib.suppress(Exception):  # a cluster gone has nobody left to stop
                self.actor.set.remote()

    def is_set(self) -> bool:
        return self.on


class _Task:
    """A worker's Ray task, spelled as the local worker's process (is_alive, join, exitcode)."""

    def __init__(self, ray: Any, ref: Any) -> None:
        self.ray, self.ref, self.exitcode = ray, ref, None

    def is_alive(self) -> bool:
        ready, _ = self.ray.wait([self.ref], timeout=0)
        if ready and self.exitcode is None:
            try:
                self.ray.get(self.ref)
                self.exitcode = 0
            except Exception:  # the task or its node died: the parent names the worker
                self.exitcode = 1
        return not ready

    def join(self, timeout: float | None = None) -> None:
        self.ray.wait([self.ref], timeout=timeout)

    def terminate(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.cancel(self.ref, force=True)


def ray_worker(setup: Any, job: WorkerJob, out: Any, flag: Any, inbox: Any = None) -> None:
    """One worker, in the fresh process Ray gives a task of one GPU (CUDA_VISIBLE_DEVICES set)."""
    import ray

    t0 = time.monotonic()
    early: BaseException | None = None
    try:
        call_setup(setup)
        import torch  # noqa: F401

        import workbench.measure.engine  # noqa: F401
    except BaseException as e:  # reported by run_job, which names the worker
        early = e
    info: dict[str, Any] = {"import_s": time.monotonic() - t0, "wait_s": 0.0}
    ids = [str(i) for i in ray.get_gpu_ids()]
    nvml = int(ids[0]) if ids and ids[0].isdigit() else 0  # NVML numbers a host's GPUs
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or str(nvml)
    job = dataclasses.replace(job, gpu=GPU(visible, nvml, job.gpu.name))
    stop, done = threading.Event(), threading.Event()

    def poll() -> None:
        while not done.wait(0.5):
            with contextlib.suppress(Exception):
                if ray.get(flag.is_set.remote(), timeout=5):
                    stop.set()

    threading.Thread(target=poll, name="workbench-ray-stop", daemon=True).start()
    where = {"gpu": visible, "host": socket.gethostname(),
             "ray_node": ray.get_runtime_context().get_node_id()}  # fmt: skip
    try:
        run_job(job, out, stop, info, t0, early, hello_extra=where, inbox=inbox)
    finally:
        done.set()


class RayPool(ProcessPool):
    """The pool whose workers are Ray tasks on the cluster at ``cfg.ray``; ``cfg.ray_init``:
    extra ``ray.init`` arguments (tests start a local instance with fake GPUs)."""

    def __init__(self, cfg: Any, setup: Any = None, cancel: threading.Event | None = None) -> None:
        super().__init__(cfg, setup, cancel)
        self.address, self.init = cfg.ray, dict(cfg.ray_init or {})
        self._own_ray = False
        self._inboxes: list[Any] = []  # the split rounds' group queues (actors), shut at end()

    def start(self, gpus: list[GPU] | None = None) -> None:
        import ray
        from ray.util.queue import Queue

        if self.started:
            return
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         **self.init)  # fmt: skip
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise WorkbenchError(f"--ray {self.address!r}: cannot connect: {e}") from None
            self._own_ray = True
        try:
            self.gpus = cluster_gpus(ray.nodes()) if gpus is None else gpus
            if not self.gpus:
                raise NoGPUError(f"--ray {self.address!r}: the cluster has no GPU")
            check_one_model(self.gpus)
            self.out = Queue(actor_options={"num_cpus": 0})
            self.stop = _Stop(ray.remote(num_cpus=0)(_Flag).remote())
            self._task = ray.remote(num_gpus=1, max_calls=1)(ray_worker)
        except BaseException:
            self._shutdown()
            raise
        self.started = True

    def _spare(self, g: int) -> None:
        """No spares: Ray starts a task's process when a GPU is free."""

    def _start(self, w: Any, g: int) -> None:
        import ray
        from ray.util.queue import Queue

        w.job = self._sendable(self._job(w))
        w.jobs = Queue(actor_options={"num_cpus": 0}) if w.job.split else None  # its groups
        if w.jobs is not None:
            self._inboxes.append(w.jobs)
        w.proc = _Task(ray, self._task.remote(self.setup, w.job, self.out, self.stop.actor,
                                              w.jobs))  # fmt: skip
        self.procs.append(w.proc)
        w.spawned = w.started = time.monotonic()
        w.status = "running"
        if w.job.split:
            self._hand(w)

    def end(self) -> None:
        super().end()
        for q in self._inboxes:
            with contextlib.suppress(Exception):  # a cluster gone took its queues along
                q.shutdown()
        self._inboxes = []
        self._shutdown()

    def _shutdown(self) -> None:
        import ray

        if self._own_ray and ray.is_initialized():
            ray.shutdown()
            self._own_ray = False
