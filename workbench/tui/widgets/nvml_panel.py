"""Live NVML panel: memory bar, clocks, temperature, power, throttle flags and sparklines.

Where there is no room for the panel (a narrow terminal) or nothing to show in it (no NVML), it
collapses to one line under the tabs: the readings in brief, or "NVML unavailable: <why>".
"""

from __future__ import annotations

import re
from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Label, ProgressBar, Sparkline, Static

from workbench.measure.monitor import FLAG_MASK, throttle_names

HISTORY = 60  # readings kept for the sparklines (one per poll)
GIB = 1024**3


def short_reason(reason: str) -> str:
    """The gist of why NVML is unavailable, for one line (the full text goes in a tooltip).

    ``NVML unavailable: NVMLError_LibraryNotFound: NVML Shared Library Not Found`` gives
    ``library not found``: pynvml's error class names say it in their words."""
    text = re.sub(r"^NVML unavailable:?\s*", "", reason.strip())
    error = re.match(r"NVMLError_(\w+)", text)
    if error:
        return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", error.group(1)).lower()
    text = re.sub(r"\s*\([^()]*\)$", "", text.split(": ")[0])  # no trailing detail
    return text if len(text) <= 48 else text[:47] + "…"


def _fmt(value: float | None, unit: str) -> str:
    # NVML may not answer a query on some boards (power, say): show a dash, keep the rest.
    return "–" if value is None else f"{value:.0f} {unit}"


class NvmlPanel(Vertical):
    """Push readings (dicts with the nvml.jsonl keys) or a reason NVML is unavailable.

    The class ``-unavailable`` is set while NVML is unavailable; the app's stylesheet then (and
    on narrow screens) shows only ``#nvml-line``."""

    available: reactive[bool] = reactive(True)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history: dict[str, deque[float]] = {
            k: deque(maxlen=HISTORY) for k in ("sm_mhz", "temp_c", "power_w", "mem_used")
        }

    def compose(self) -> ComposeResult:
        yield Static("waiting for NVML…", id="nvml-line")
        yield Static("waiting for NVML…", id="nvml-note")
        with Vertical(id="nvml-live"):
            yield Label("memory", classes="nvml-label")
            yield ProgressBar(total=1, show_eta=False, id="nvml-mem")
            yield Static("", id="nvml-mem-text")
            yield Static("", id="nvml-clocks")
            yield Static("", id="nvml-throttle")
            for key, title in (
                ("sm_mhz", "SM clock"),
                ("temp_c", "temperature"),
                ("power_w", "power"),
                ("mem_used", "memory used"),
            ):
                yield Label(title, classes="nvml-label")
                yield Sparkline([], id=f"spark-{key.replace('_', '-')}")

    def watch_available(self, available: bool) -> None:
        self.set_class(not available, "-unavailable")

    def unavailable(self, reason: str) -> None:
        self.available = False
        note = Text.assemble(("NVML unavailable", "bold yellow"))
        if short_reason(reason):
            note.append(f": {short_reason(reason)}", "yellow")
        for widget in (self.query_one("#nvml-line", Static), self.query_one("#nvml-note", Static)):
            widget.update(note)
            widget.tooltip = reason or None

    def push(self, reading: dict) -> None:
        """Show one reading and append it to the sparkline history."""
        self.available = True
        self.query_one("#nvml-note", Static).update(Text(reading.get("gpu", "GPU"), "bold"))
        self.query_one("#nvml-line", Static).tooltip = None
        used, total = reading.get("mem_used"), reading.get("mem_total")
        bar = self.query_one("#nvml-mem", ProgressBar)
        mem_text = self.query_one("#nvml-mem-text", Static)
        if used is None or not total:
            bar.update(total=1, progress=0)
            mem_text.update("memory: –")
        else:
            bar.update(total=int(total), progress=int(used))
            mem_text.update(f"{used / GIB:.1f} / {total / GIB:.1f} GiB used")
        self.query_one("#nvml-clocks", Static).update(
            f"SM {_fmt(reading.get('sm_mhz'), 'MHz')}   mem {_fmt(reading.get('mem_mhz'), 'MHz')}\n"
            f"{_fmt(reading.get('temp_c'), '°C')}   {_fmt(reading.get('power_w'), 'W')}"
        )
        bits = int(reading.get("throttle") or 0)
        names = throttle_names(bits)
        # Only the bits that flag a timed sample are alarming; idle and app clocks are not.
        flag = (", ".join(names) if names else "none", "bold red" if bits & FLAG_MASK else "green")
        self.query_one("#nvml-throttle", Static).update(Text.assemble("throttle: ", flag))
        mem = "–" if used is None or not total else f"{used / GIB:.1f}/{total / GIB:.1f} GiB"
        self.query_one("#nvml-line", Static).update(
            Text.assemble(
                (reading.get("gpu", "GPU"), "bold"),
                f"  mem {mem}  SM {_fmt(reading.get('sm_mhz'), 'MHz')}  throttle: ",
                flag,
                f"  {_fmt(reading.get('temp_c'), '°C')}  {_fmt(reading.get('power_w'), 'W')}",
            )
        )
        for key, hist in self.history.items():
            value = reading.get(key)
            if value is not None:
                hist.append(float(value))
            self.query_one(f"#spark-{key.replace('_', '-')}", Sparkline).data = list(hist)
