"""How the runner journals its workers' outcomes into the one session (docs/DESIGN.md §5.10).

A worker measures as if it were alone: its pairs and blocks count from 0. The runner merges each
worker's records into the session as its outcome arrives (workbench.run.pool.Outcome): tagged
with the worker's number, pairs and blocks renumbered so that they are unique across the run's
workers, a comparison declared once (with the blocks and workers of its round), a note said
once; then the worker's own record (its GPU, its phases, how it ended). The inline pool's one
worker is the run's own process: its records go in as measured, and it has no worker record.
Torch-free; it writes nothing itself (the runner does).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.run.pool import Outcome


def _wall(mono: float | None) -> float | None:
    """A monotonic instant of this process as wall-clock time (journal times are wall-clock)."""
    return None if mono is None else time.time() - (time.monotonic() - mono)


@dataclass
class Merge:
    """The renumbering state of one run: the next pair per comparison, what was declared."""

    cfg: Any  # the run's RunConfig
    pair_next: dict[str, int] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)
    notes: set[str] = field(default_factory=set)

    def records(self, o: Outcome) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(type, fields)`` of each of ``o``'s records as the session journals it."""
        stride = max(1, self.cfg.protocol.block_goal)
        base_block = o.job.index * stride
        pair_base: dict[str, int] = {}
        top: dict[str, int] = {}
        for rec in o.records:
            rec = dict(rec)
            t = rec.pop("type")
            if not o.inline:
                rec["worker"] = o.job.index
            if t == "comparison":
                if rec["id"] in self.declared:
                    continue
                self.declared.add(rec["id"])
                if not o.inline:  # the blocks and workers of the round, the run's seed
                    n = o.job.replicas
                    rec.update(blocks=o.job.cfg.protocol.block_goal * n, workers=n,
                               placement_seed=self.cfg.protocol.placement_seed)  # fmt: skip
                    del rec["worker"]
            if t == "note":
                if rec["text"] in self.notes:
                    continue
                self.notes.add(rec["text"])
            if "block" in rec and isinstance(rec["block"], int):
                rec["block"] = base_block + rec["block"]
            if t == "sample":
                cmp = rec["cmp"]
                base = pair_base.setdefault(cmp, self.pair_next.get(cmp, 0))
                rec["pair"] = base + int(rec["pair"])
                top[cmp] = max(top.get(cmp, base), rec["pair"] + 1)
            yield t, rec
        self.pair_next.update(top)


def worker_record(o: Outcome) -> dict[str, Any]:
    """The ``worker`` record of a worker's outcome: where it ran, its seconds, how it ended."""
    exit_ = o.exit or {}
    hello = o.hello or {}
    gpu = (hello.get("environment") or {}).get("gpu") or {}
    phases = dict(exit_.get("phases") or {})
    if o.started is not None and o.hello is not None:
        phases.setdefault("startup", 0.0)
    rec = {
        "worker": o.job.index, "round": o.job.round, "status": o.status,
        "gpu": hello.get("gpu") or o.job.gpu.visible,
        "uuid": o.job.gpu.uuid or gpu.get("uuid"),
        "name": o.job.gpu.name or gpu.get("name"), "pid": hello.get("pid"),
        "started": _wall(o.started), "ended": _wall(o.ended),
        "placement_seed": o.job.cfg.protocol.placement_seed,
        "blocks": o.job.cfg.protocol.block_goal, "phases": phases,
        "import_s": exit_.get("import_s"), "wait_s": exit_.get("wait_s"),
        "wall_s": exit_.get("wall_s"), "setup": exit_.get("setup"),
        "error": o.error or (o.fault or {}).get("error"),
    }  # fmt: skip
    if exit_.get("overlap"):  # its CUDA context made before its turn (--overlap)
        rec["overlap"] = exit_["overlap"]
    if hello.get("host"):  # a Ray worker: its host and node
        rec["host"], rec["ray_node"] = hello["host"], hello.get("ray_node")
    if o.fault is not None:
        rec["fault_cmp"], rec["fault_arm"] = o.fault.get("cmp"), o.fault.get("arm")
    return rec
