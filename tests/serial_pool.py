"""A pool of worker "processes" run one after another in this process, on the simulated device
(tests only): the runner, the pool's bookkeeping, the engine and the journal as a run of
spawned workers has them (each worker's records tagged with its number, the interval over
workers), without a process spawn per worker, so a test can run many seeded runs of many
workers. Each worker first takes a fresh process's draws of the noise model
(``sim_device.new_process``), from the seeded stream of ``sim_device.reseed``.

``use(monkeypatch)`` makes the runner take this pool where it would spawn processes.
"""

from __future__ import annotations

import time

import sim_device

from workbench.run import pool, runner
from workbench.run.worker_proc import run_job


class SerialPool(pool.Pool):
    inline = False  # its records name their worker, as a spawned worker's do

    @classmethod
    def early(cls, cfg, setup, cancel):
        return None  # nothing to import ahead

    def workers_of(self, round_: str) -> int:
        return pool.round_workers(self.cfg.workers, round_)

    describe = pool.ProcessPool.describe
    job_cfg = pool.ProcessPool.job_cfg

    def _drive(self, lanes) -> None:
        for lane in lanes.values():
            for w in lane:
                if not self.go_on():
                    w.status = "skipped"
                    continue
                sim_device.new_process(sim_device.PROCESS_RNG.spawn(1)[0])
                w.job = self._job(w)
                w.spawned = w.started = time.monotonic()
                w.status = "running"
                sink = pool._Handler(self, w)
                info = {"import_s": 0.0, "wait_s": 0.0}
                try:
                    run_job(w.job, sink, self.cancel, info, w.started, inbox=sink)
                finally:
                    if w.exit is None:
                        w.ended = time.monotonic()
                    self._tell(w)


def use(monkeypatch) -> None:
    """The runner's worker processes become SerialPool's workers."""
    monkeypatch.setattr(runner, "ProcessPool", SerialPool)
