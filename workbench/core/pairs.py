"""ABBA pairs from the journal (docs/DESIGN.md §7.1): a pair is four samples, ABBA (even pairs)
or BAAB (odd pairs); its ratio is (B1+B2)/(A1+A2), which cancels any linear drift within the pair
exactly. Ratio < 1 means B is faster. Plain Python: no NumPy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workbench.core.errors import BadArgument


@dataclass(frozen=True)
class PairRatio:
    """One complete ABBA/BAAB pair: ``a_ms``/``b_ms`` in slot order, ``t`` of its first sample."""

    pair: int
    ratio: float
    a_ms: tuple[float, float]
    b_ms: tuple[float, float]
    order: str
    t: float | None = None
    flagged: bool = False
    block: int | None = None  # the placement block it was measured in (None: a legacy session)
    worker: int | None = None  # the worker process it was measured in (None: one process)


class PairRatios(list):
    """List of PairRatio, pair order; ``dropped`` maps each dropped pair index to the reason."""

    def __init__(self, items: Iterable[PairRatio] = (), dropped: dict[int, str] | None = None):
        super().__init__(items)
        self.dropped: dict[int, str] = dropped or {}

    @property
    def values(self) -> list[float]:
        return [p.ratio for p in self]


def pair_ratios(samples: Iterable[Mapping[str, Any]]) -> PairRatios:
    """Pair ratios from the ``sample`` journal records of ONE comparison.

    For each (pair, slot) the last non-excluded record counts (a re-measured slot replaces the
    earlier one). A pair with a slot missing, only excluded records, or a non-positive time is
    dropped and listed in ``.dropped``. Arms must read ABBA or BAAB over slots 0..3.
    """
    samples = list(samples)
    cmps = {s.get("cmp") for s in samples}
    if len(cmps) > 1:
        raise BadArgument(
            f"samples: pair_ratios takes one comparison, got {sorted(map(str, cmps))}"
        )
    slots: dict[int, dict[int, Mapping[str, Any]]] = {}
    seen: set[int] = set()
    for s in samples:
        p, k = int(s["pair"]), int(s["slot"])
        seen.add(p)
        if not s.get("excluded", False):
            slots.setdefault(p, {})[k] = s  # later records overwrite: a re-measure wins
    out, dropped = [], {}
    for p in sorted(seen):
        got = slots.get(p, {})
        missing = [k for k in range(4) if k not in got]
        if missing:
            dropped[p] = f"slot(s) {', '.join(map(str, missing))} missing or excluded"
            continue
        recs = [got[k] for k in range(4)]
        order = "".join(str(r["arm"]) for r in recs)
        if order not in ("ABBA", "BAAB"):
            cmp_id = next(iter(cmps))
            raise BadArgument(
                f"samples: pair {p} of {cmp_id!r} has arms {order!r} (need ABBA or BAAB)"
            )
        ms = [float(r["ms"]) for r in recs]
        if not all(math.isfinite(x) and x > 0 for x in ms):
            dropped[p] = f"non-positive or non-finite time in {ms}"
            continue
        a = tuple(x for x, arm in zip(ms, order, strict=True) if arm == "A")
        b = tuple(x for x, arm in zip(ms, order, strict=True) if arm == "B")
        flagged = any(bool(r.get("flagged", False)) for r in recs)
        blk = recs[0].get("block")
        if any(r.get("block") != blk for r in recs):
            cmp_id = next(iter(cmps))
            raise BadArgument(f"samples: pair {p} of {cmp_id!r} spans more than one block")
        blk = None if blk is None else int(blk)
        wk = recs[0].get("worker")
        if any(r.get("worker") != wk for r in recs):
            cmp_id = next(iter(cmps))
            raise BadArgument(f"samples: pair {p} of {cmp_id!r} spans more than one worker")
        wk = None if wk is None else int(wk)
        out.append(PairRatio(p, sum(b) / sum(a), a, b, order, recs[0].get("t"), flagged, blk, wk))
    return PairRatios(out, dropped)
