"""What a worker tells its pool (docs/DESIGN.md §5.10): one small dataclass per kind of message,
one encoder and one decoder.

A worker (workbench.run.worker_proc.run_job) says everything as messages, in order, ``Exit``
last. On the wire (a spawned process's queue, a Ray queue, the inline pool's direct call) a
message is a plain tuple ``(kind, worker, fields)``: ``encode`` makes it, ``decode`` makes the
dataclass again from ``KINDS``, the table of kinds. The pool (workbench.run.pool.Pool) handles
each decoded message by its type (``Pool.HANDLERS``). A new kind is a class here, its entry in
``KINDS`` and its handler there; tests/test_messages.py fails on a class without both.
Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from workbench.core.errors import WorkbenchError


@dataclass(frozen=True)
class Message:
    """A message of worker ``worker`` (its number in the run); ``kind`` names it on the wire."""

    worker: int
    kind: ClassVar[str] = ""


@dataclass(frozen=True)
class Record(Message):
    """One record as the worker's engine journaled it (its "type" among its fields)."""

    record: dict[str, Any]
    kind: ClassVar[str] = "record"


@dataclass(frozen=True)
class Progress(Message):
    """Where a comparison stands (abba.Progress), after every sample."""

    progress: Any
    kind: ClassVar[str] = "progress"


@dataclass(frozen=True)
class Event(Message):
    """An engine's event for live listeners ("comparison", "gate", "result", ...): sent by the
    inline pool's worker only, the run's own process."""

    name: str
    data: Any
    kind: ClassVar[str] = "event"


@dataclass(frozen=True)
class Nvml(Message):
    """One NVML reading of the worker's GPU."""

    reading: dict[str, Any]
    kind: ClassVar[str] = "nvml"


@dataclass(frozen=True)
class Hello(Message):
    """The worker is ready to measure: its pid, NVML status, environment, clock (and the
    session's provenance where it was asked to describe it; a Ray worker's host and GPU)."""

    facts: dict[str, Any]
    kind: ClassVar[str] = "hello"


@dataclass(frozen=True)
class Group(Message):
    """A group of the worker's share ended (a tune's candidate): its comparisons, "measured",
    "cancelled" or "excluded", per set the ratio the engine judged, its seconds or why not."""

    cmps: list[str]
    status: str
    sets: dict[str, dict[str, Any]]
    seconds: float | None = None
    reason: str | None = None
    kind: ClassVar[str] = "group"


@dataclass(frozen=True)
class Excluded(Message):
    """A group failed its gate on this worker's placement ("exclude"); the worker went on."""

    cmps: list[str]
    error: str
    kind: ClassVar[str] = "excluded"


@dataclass(frozen=True)
class Done(Message):
    """The worker measured its job to the end: "complete", or "interrupted"."""

    status: str
    kind: ClassVar[str] = "done"


@dataclass(frozen=True)
class Fault(Message):
    """A GPU fault (a sticky CUDA error) ended the worker: the comparison and arm it names."""

    cmp: str | None
    arm: str | None
    error: str
    kind: ClassVar[str] = "fault"

    def as_record(self) -> dict[str, Any]:
        """The fault as an Outcome keeps it (workbench.run.pool.fault_ids reads it)."""
        return {"cmp": self.cmp, "arm": self.arm, "error": self.error}


@dataclass(frozen=True)
class Numerics(Message):
    """A numerics failure that ends the run ("stop")."""

    error: str
    kind: ClassVar[str] = "numerics"


@dataclass(frozen=True)
class Failed(Message):
    """Any other error that ended the worker, as ``Type: message``."""

    error: str
    kind: ClassVar[str] = "error"


@dataclass(frozen=True)
class BuildFailed(Message):
    """A build that failed in the worker, as ``BuildError: message``."""

    error: str
    kind: ClassVar[str] = "build"


@dataclass(frozen=True)
class Exit(Message):
    """The worker's last message: its seconds per phase, import, wait and wall time, what it
    set up for the next workers (workbench.run.setup) and was given, its early context."""

    phases: dict[str, float]
    import_s: float | None = None
    wait_s: float | None = None
    wall_s: float | None = None
    handover: dict[str, Any] | None = None
    setup: dict[str, int] | None = None
    overlap: dict[str, Any] | None = None
    kind: ClassVar[str] = "exit"


KINDS: dict[str, type[Message]] = {
    c.kind: c
    for c in (Record, Progress, Event, Nvml, Hello, Group, Excluded, Done, Fault, Numerics,
              Failed, BuildFailed, Exit)
}  # fmt: skip


def fields(msg: Message) -> dict[str, Any]:
    """``msg``'s fields but its worker, as they are (not copied: a reading, a record)."""
    return {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg) if f.name != "worker"}


def encode(msg: Message) -> tuple[str, int, dict[str, Any]]:
    """``msg`` as it crosses a queue: ``(kind, worker, fields)``, plain data."""
    return msg.kind, msg.worker, fields(msg)


def decode(item: tuple[str, int, dict[str, Any]]) -> Message:
    """The message ``item`` (from ``encode``) again; WorkbenchError for a kind not in KINDS."""
    kind, worker, data = item
    cls = KINDS.get(kind)
    if cls is None:
        raise WorkbenchError(
            f"worker {worker} sent a message of unknown kind {kind!r} (known: {', '.join(KINDS)})"
        )
    return cls(worker, **data)


def send(out: Any, msg: Message) -> None:
    """Put ``msg`` on ``out`` (a queue, or the inline pool's handler), encoded."""
    out.put(encode(msg))
