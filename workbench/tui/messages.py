"""Messages the workers post to the app: small dataclasses, safe to post from any thread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from workbench.tui.backend import (
    BuildStatus,
    CompareView,
    ExportResult,
    GpuStatus,
    ProgressEvent,
    SessionInfo,
    SessionView,
    VariantRow,
)


@dataclass
class GpuProbed(Message):
    status: GpuStatus
    variants: list[VariantRow]
    build: BuildStatus | None = None  # None: the backend could not say


@dataclass
class BuildProgressed(Message):
    row: VariantRow


@dataclass
class BuildEnded(Message):
    cancelled: bool
    error: str = ""


@dataclass
class RunProgressed(Message):
    event: ProgressEvent

    def can_replace(self, message: Message) -> bool:
        # A newer event of the same comparison supersedes a queued one: the UI shows only
        # the latest ratio, so a burst of fast pairs must not back up the message queue.
        return isinstance(message, RunProgressed) and message.event.cmp_id == self.event.cmp_id


@dataclass
class RunEnded(Message):
    path: Path | None
    cancelled: bool
    error: str = ""


@dataclass
class SessionsListed(Message):
    sessions: list[SessionInfo]


@dataclass
class SessionOpened(Message):
    view: SessionView


@dataclass
class WorkFailed(Message):
    """A worker's call raised: ``what`` names the action, ``error`` is the user-facing text."""

    what: str
    error: str


@dataclass
class Exported(Message):
    result: ExportResult


@dataclass
class Compared(Message):
    title: str
    view: CompareView


@dataclass
class MonitorRead(Message):
    reading: dict | None
    note: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MonitorRead)
