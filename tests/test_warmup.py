"""The warm-up block, sized by the committed sessions (docs/DESIGN.md §5.5, core/defaults.py
WARMUP_PAIRS): the first counted block must not stand apart from the second, and the evidence
that sized the warm-up must still hold in every session that carries it.

On the H200, without a warm-up block, W13 hot's first block read about +1.8 % above the rest
(docs/investigations/2026-11-30-block-zero.md). Each test below runs over every committed
session of its kind, so a session committed later (the runs of a new protocol) is checked too,
and the checker is shown to fail on sessions of the protocol before the warm-up block."""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from workbench.store.session import gpu_name, load_session

SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
OFFSET = 0.018  # W13 hot's first-block offset without a warm-up block (log ratio, H200)
READERS = ("w13/hot", "w13/rotating", "w2/hot", "w2/rotating")
pytestmark = pytest.mark.slow  # it reads some thirty committed sessions: seconds, not the fast lane


def _protocol(path: Path) -> dict:
    return json.loads((path / "session.json").read_text())["config"].get("protocol") or {}


def _sessions(warmup: bool, workers: bool) -> list[Path]:
    """Committed default and A/A sessions measured with (or without) a warm-up block."""
    out = []
    for p in sorted(SESSIONS.iterdir()):
        name = p.name.split("_", 1)[-1]
        if not (name.startswith(("default", "aa")) and (p / "session.json").exists()):
            continue
        meta = json.loads((p / "session.json").read_text())
        if bool(_protocol(p).get("warmup_blocks")) == warmup and (
            bool(meta["config"].get("workers")) == workers
        ):
            out.append(p)
    return out


@functools.cache
def _block_logs(path: Path) -> dict[tuple[str, int | None], dict[int, float]]:
    """Per (comparison, worker): each counted block's mean pair log-ratio."""
    pairs: dict[tuple, dict[str, float]] = defaultdict(lambda: {"A": 0.0, "B": 0.0, "n": 0})
    for x in load_session(path, nvml=False).samples:
        if x["cmp"] in READERS and not x.get("excluded"):
            p = pairs[(x["cmp"], x.get("worker"), x["block"], x["pair"])]
            p[x["arm"]] += x["ms"]
            p["n"] += 1
    logs: dict[tuple, list[float]] = defaultdict(list)
    for (cmp, w, b, _), p in pairs.items():
        if p["n"] == 4:
            logs[(cmp, w, b)].append(math.log(p["B"] / p["A"]))
    out: dict[tuple, dict[int, float]] = defaultdict(dict)
    for (cmp, w, b), v in logs.items():
        out[(cmp, w)][b] = statistics.fmean(v)
    return out


def first_block_shift(path: Path, cmp: str) -> float | None:
    """Mean over the session's workers (or its one process) of the first counted block's log
    ratio minus the second's; None where no worker has two blocks of ``cmp``."""
    d = []
    for (c, _), blocks in _block_logs(path).items():
        if c == cmp and len(blocks) >= 2:
            b0, b1 = sorted(blocks)[:2]
            d.append(blocks[b0] - blocks[b1])
    return statistics.fmean(d) if d else None


def stands_apart(shift: float | None) -> bool:
    """The check: a first block shifted by more than 40 % of the offset the warm-up removes."""
    return shift is not None and abs(shift) > 0.4 * OFFSET


def test_the_first_counted_block_does_not_stand_apart():
    sessions = _sessions(warmup=True, workers=True)
    assert len(sessions) >= 20  # the committed runs of the worker protocol
    seen = {(p.name, c): first_block_shift(p, c) for p in sessions for c in READERS}
    apart = {k: round(v, 4) for k, v in seen.items() if stands_apart(v)}
    assert not apart, f"the first counted block stands apart again: {apart}"
    assert sum(v is not None for v in seen.values()) >= 4 * 20


def test_the_check_fails_on_the_protocol_before_the_warmup_block():
    # the default runs of 2026-12-02 (one process, no warm-up block): W13 hot's block 0 apart
    old = [p for p in _sessions(warmup=False, workers=False) if p.name.startswith("20261202")]
    old = [p for p in old if "default" in p.name]
    assert len(old) >= 5
    assert all(stands_apart(first_block_shift(p, "w13/hot")) for p in old)


def _warmup_ratios(path: Path) -> dict[str, list[list[float]]]:
    out: dict[str, list[list[float]]] = defaultdict(list)
    for b in load_session(path, nvml=False).blocks:
        if b.get("status") == "warmup" and b.get("cmp") in READERS:
            out[b["cmp"]].append([math.log(r) for r in b["ratios"]])
    return out


def _counted(path: Path, cmp: str) -> float:
    return statistics.fmean(v for (c, _), bl in _block_logs(path).items() if c == cmp
                            for v in bl.values())  # fmt: skip


def _gpu(path: Path) -> str:
    """The session's GPU, from its session.json alone (read at collection, in every process:
    loading each journal for it took 4 s)."""
    return gpu_name(json.loads((path / "session.json").read_text())) or ""


def _of(model: str) -> list[Path]:
    return [p for p in _sessions(warmup=True, workers=True) if model in _gpu(p)]


def _pair_step(path: Path) -> float | None:
    """W13 hot's second warm-up pair minus its first (log ratio, mean over workers)."""
    two = [r for r in _warmup_ratios(path)["w13/hot"] if len(r) >= 2]
    return statistics.fmean(r[1] - r[0] for r in two) if two else None


@pytest.mark.parametrize("path", _of("H200")[-9:], ids=lambda p: p.name)
def test_what_sized_the_warmup_still_holds(path):
    """On the H200 the second warm-up pair of W13 hot reads as the first (no number of its
    replays moves it), and the rotating comparison, run after it, matches the counted blocks
    from its first warm-up pair."""
    warm = _warmup_ratios(path)
    default = "default" in path.name
    pair_step = _pair_step(path)
    if pair_step is not None:
        assert abs(pair_step) < 0.1 * OFFSET, pair_step
    if default:  # the offset the warm-up block absorbs is there in its first pair
        hot0 = statistics.fmean(r[0] for r in warm["w13/hot"]) - _counted(path, "w13/hot")
        assert hot0 > 0.5 * OFFSET, hot0
    rot0 = statistics.fmean(r[0] for r in warm["w13/rotating"]) - _counted(path, "w13/rotating")
    assert abs(rot0) < 0.2 * OFFSET, rot0


def test_on_the_h100_the_h200_sizing_does_not_hold():
    """Why WARMUP_PAIRS is 2, not 1 (core/defaults.py): the one-pair warm-up rested on the H200
    sessions' second warm-up pair reading as the first (the test above). On an H100 80GB HBM3
    (sessions of 49475e5, benchmarks/results/h100_warmup_49475e5/README.md) W13 hot's second
    pair minus its first scatters -0.20 .. +0.08 % (mean -0.10 %), past that bound in three of
    six sessions, and one pair left the first counted block apart there (9763616). With two
    pairs no first counted block stands apart (the first test reads these sessions too)."""
    h100 = _of("H100")
    assert len(h100) >= 6
    steps = [s for p in h100 if (s := _pair_step(p)) is not None]
    assert len(steps) == len(h100)
    assert sum(abs(s) >= 0.1 * OFFSET for s in steps) >= 3
    assert statistics.fmean(steps) < 0
