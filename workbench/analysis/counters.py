"""A session's hardware counters as tables, A beside B (one home for every front end:
`sessions show`, the report, `workbench ab --counters`, the TUI). The numbers are ncu's, read
from workbench/store/counters.py's document; nothing here is a statistic or decides anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.core.fmt import num

# (label, how one launch's value is read, format); a reader returns None when ncu gave no value
_MB = 1e6


def _m(key: str, scale: float = 1.0):
    def read(launch: dict[str, Any]) -> float | None:
        v = launch["metrics"].get(key)
        return None if v is None else v / scale

    return read


def _rate(key: str):
    """Bytes per second of a byte count over the launch's duration, in GB/s."""

    def read(launch: dict[str, Any]) -> float | None:
        b, t = launch["metrics"].get(key), launch["metrics"].get("duration_s")
        return None if b is None or not t else b / t / 1e9

    return read


def _dram(launch: dict[str, Any]) -> float | None:
    r, w = launch["metrics"].get("dram_read_bytes"), launch["metrics"].get("dram_write_bytes")
    return None if r is None or w is None else r + w


def _dram_rate(launch: dict[str, Any]) -> float | None:
    b, t = _dram(launch), launch["metrics"].get("duration_s")
    return None if b is None or not t else b / t / 1e9


ROWS = (
    ("duration (us)", _m("duration_s", 1e-6), ".2f"),
    ("DRAM read+write (MB)", lambda x: None if _dram(x) is None else _dram(x) / _MB, ".3f"),
    ("DRAM (GB/s)", _dram_rate, ".0f"),
    ("DRAM throughput (% of peak)", _m("dram_pct"), ".1f"),
    ("L2 bytes (MB)", _m("l2_bytes", _MB), ".3f"),
    ("L2 (GB/s)", _rate("l2_bytes"), ".0f"),
    ("L2 throughput (% of peak)", _m("l2_pct"), ".1f"),
    ("achieved occupancy (%)", _m("occupancy_pct"), ".1f"),
    ("scheduler issued (% of cycles)", _m("issue_pct"), ".1f"),
    ("registers per thread", _m("registers"), ".0f"),
    ("grid (CTAs)", _m("grid"), ".0f"),
    ("block (threads)", _m("block"), ".0f"),
    ("waves per SM", _m("waves"), ".2f"),
    ("SM clock (MHz)", _m("sm_hz", 1e6), ".0f"),  # ncu's "SM Frequency" (GPC cycles)
)
TOP_STALLS = 4  # stall reasons shown: the largest of either side


@dataclass
class CounterTable:
    """One comparison's counters: rows of (what, A, B, B/A), texts ready to print."""

    cmp: str
    a: str
    b: str
    rows: list[tuple[str, str, str, str]]

    @property
    def title(self) -> str:
        return f"{self.cmp}: A {self.a}, B {self.b} (one launch each, Nsight Compute)"


def _ratio(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None or a == 0 else f"{b / a:.3f}"


def tables(doc: dict[str, Any] | None) -> list[CounterTable]:
    """Side-by-side tables of a counters document (None: no counters), in launch order."""
    if not doc:
        return []
    by_cmp: dict[str, dict[str, dict[str, Any]]] = {}
    for launch in doc["launches"]:
        by_cmp.setdefault(launch["cmp"], {})[launch["side"]] = launch
    out = []
    for cmp, sides in by_cmp.items():
        a, b = sides.get("A"), sides.get("B")
        if a is None or b is None:
            continue
        rows = []
        for label, read, spec in ROWS:
            va, vb = read(a), read(b)
            rows.append((label, num(va, spec), num(vb, spec), _ratio(va, vb)))
        stalls = {**a["stalls"], **b["stalls"]}
        top = sorted(stalls, key=lambda r: -max(a["stalls"].get(r, 0), b["stalls"].get(r, 0)))
        for reason in top[:TOP_STALLS]:
            va, vb = a["stalls"].get(reason), b["stalls"].get(reason)
            label = f"stall {reason} (cycles/issue)"
            rows.append((label, num(va, ".2f"), num(vb, ".2f"), _ratio(va, vb)))
        out.append(CounterTable(cmp, a["arm"], b["arm"], rows))
    return out


def text_lines(doc: dict[str, Any] | None) -> list[str]:
    """The tables as aligned plain text (`sessions show`, `workbench ab --counters`)."""
    out = []
    for t in tables(doc):
        rows = [("counter", "A", "B", "B/A"), *t.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        out += ["", t.title]
        for r in rows:
            cells = [r[0].ljust(widths[0])] + [
                c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
            ]
            out.append("  " + "  ".join(cells).rstrip())
    if doc and out:
        out.append(
            f"(ncu {doc['ncu']}; hot: the routed experts in L2 first, rotating: caches "
            "flushed; one launch each, after the timed blocks)"
        )
    return out


def markdown_lines(doc: dict[str, Any] | None) -> list[str]:
    """The tables in Markdown (the report, the TUI)."""
    out: list[str] = []
    for t in tables(doc):
        out += [f"**{t.title}**", "", "| counter | A | B | B/A |", "| --- | ---: | ---: | ---: |"]
        out += [f"| {' | '.join(r)} |" for r in t.rows] + [""]
    if doc and out:
        out.append(
            f"ncu {doc['ncu']}, one eager launch per arm after the timed blocks (hot: the routed "
            "experts in L2 first; rotating: caches flushed); never part of a verdict."
        )
    return out
