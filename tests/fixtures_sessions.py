"""Realistic synthetic sessions for CPU tests of plots and reports, written with SessionWriter.

What a default `workbench ab` run on an H200 journals, with timings of known effect: per kernel
(w13, w2) a main comparison (b3-scalar vs b3-coop) on the hot and the rotating set, reference
comparisons against the 4-byte baseline and the tinygemm peer, one `step` confirmation, numerics
gates, memory records of b4 and b3 banks and 20 Hz NVML readings. Every sample carries its
replay times; one sample is flagged and re-measured, one is flagged and kept.

Real H200 sessions committed under ``sessions/`` are used as fixtures too (``real_sessions``; one
of each kind: ``representative_sessions``).
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.data.capacity import expert_footprint
from workbench.data.shapes import PRESETS
from workbench.store.session import SessionWriter

REPO = Path(__file__).resolve().parent.parent
SHAPE = PRESETS["qwen3.8-flash-next"]
L2_BYTES = 62_914_560  # the H200's L2, as the device reports it
T0 = 1_795_000_000.0  # a fixed start (unix s) so that fixture sessions are reproducible

# True B/A effects of the cooperative reader (seed-like: it helps W13 and hurts W2).
EFFECT = {("w13", "hot"): 0.925, ("w13", "rotating"): 0.916}
EFFECT |= {("w2", "hot"): 1.119, ("w2", "rotating"): 1.114}
STEP_EFFECT = 0.958
# µs per call of b3-scalar on the H200-like fixture GPU; b4-scalar is a touch faster (aligned
# records), tinygemm is the peer arm of docs/DESIGN.md §4.5.
US_PER_CALL = {
    ("w13", "hot"): 2.30,
    ("w13", "rotating"): 2.52,
    ("w2", "hot"): 1.55,
    ("w2", "rotating"): 1.75,
}
TINYGEMM_US = {("w13", "hot"): 29.3, ("w13", "rotating"): 45.1}
TINYGEMM_US |= {("w2", "hot"): 22.2, ("w2", "rotating"): 28.6}
B4_FACTOR = 0.985


@dataclass
class Plan:
    """One comparison to write: its record and the true ms per replay of arms A and B."""

    rec: dict
    a_ms: float
    b_ms: float
    pairs: int


def _true_ms(kernel: str, st: str, variant: str, calls: int) -> float:
    us = US_PER_CALL[kernel, st]
    us *= {"b3-scalar": 1.0, "b4-scalar": B4_FACTOR, "b3-coop": EFFECT[kernel, st]}.get(variant, 1)
    return (TINYGEMM_US[kernel, st] if variant == "tinygemm" else us) * calls / 1000.0


def _plans(calls: int, replays: int, pairs: int) -> list[Plan]:
    """The comparisons of a default run, as the runner declares them (ids, arms, roles)."""
    plans = []
    for kernel in ("w13", "w2"):
        for st in ("hot", "rotating"):
            k, n = SHAPE.dims(kernel)
            per_call = expert_footprint(k, n).total("b3") * SHAPE.top_k
            # rotating: the runner adds banks to reach >= 5x L2 and alternates 3 graphs
            graphs = 3 if st == "rotating" else 1
            ws = per_call * SHAPE.layers * graphs if st == "rotating" else per_call
            base = {"kernel": kernel, "set": st, "calls": calls, "replays": replays}
            base |= {"working_set_bytes": ws, "l2_bytes": L2_BYTES, "graphs": graphs}
            # main: scalar vs cooperative; references: the 4-byte baseline and the peer vs B
            arms = [("", "main", "b3-scalar", pairs)]
            arms += [(f"/{v}", "reference", v, pairs // 2) for v in ("b4-scalar", "tinygemm")]
            for suffix, role, a, np_ in arms:
                rec = base | {"id": f"{kernel}/{st}{suffix}", "role": role, "a": a, "b": "b3-coop"}
                plans.append(
                    Plan(
                        rec,
                        _true_ms(kernel, st, a, calls),
                        _true_ms(kernel, st, "b3-coop", calls),
                        np_,
                    )
                )
    for st in ("hot", "rotating"):
        a = sum(_true_ms(k, st, "b3-scalar", calls) for k in ("w13", "w2"))
        step = {"id": f"step/{st}/confirm", "kernel": "step", "set": st, "role": "confirm"}
        step |= {"a": "w13=b3-scalar,w2=b3-scalar", "b": "w13=b3-coop,w2=b3-scalar"}
        step |= {"calls": calls, "replays": replays, "working_set_bytes": None}
        step |= {"l2_bytes": L2_BYTES, "graphs": 1}
        plans.append(Plan(step, a, a * STEP_EFFECT, pairs))
    return plans


class _Gpu:
    """The fixture GPU's NVML state over time: clocks, temperature, power and memory used."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.mem_used = 1_100 * (1 << 20)
        self.dips: list[tuple[float, float]] = []  # (t0, t1) of throttled intervals

    def reading(self, t: float, t_start: float) -> dict:
        throttled = any(a <= t <= b for a, b in self.dips)
        sm = 1755 if throttled else 1980
        warm = 1.0 - math.exp(-(t - t_start) / 8.0)
        return {
            "t": t,
            "mem_used": self.mem_used,
            "mem_free": 150_754_820_096 - self.mem_used,
            "mem_total": 150_754_820_096,
            "sm_mhz": sm,
            "mem_mhz": 3201,
            "temp_c": int(round(36 + 14 * warm)),
            "power_w": round(float(118 + 170 * warm + self.rng.normal(0, 6)), 1),
            "throttle": 0x4 if throttled else 0x0,
        }


def write_session(
    root: str | Path,
    seed: int = 0,
    slug: str = "fixture",
    pairs: int = 12,
    calls: int = 48,
    replays: int = 20,
    nvml: bool = True,
    stop_after_samples: int | None = None,
    summary: bool = True,
) -> Path:
    """Write one synthetic session under ``root``; return its folder.

    ``nvml=False``: no NVML readings and no measured memory (the "NVML unavailable" case).
    ``stop_after_samples``: stop there and finish "interrupted" (what Ctrl-C leaves behind).
    ``summary``: store a summary in session.json, as the runner does (reports must ignore it).
    """
    rng = np.random.default_rng(seed)
    gpu = _Gpu(rng)
    env = {
        "gpu": {
            "name": "NVIDIA H200",
            "uuid": "GPU-5e1f0c2a-7d43-4b8e-9a61-0f2c3d4e5f60",
            "driver": "580.95.05",
            "cuda": "13.0",
            "torch": "2.11.0+cu130",
            "sm": "9.0",
            "l2_bytes": L2_BYTES,
            "clocks": {"sm_mhz": 1980, "mem_mhz": 3201},
        },
        "nvml": "available" if nvml else "NVML unavailable: NVMLError_LibraryNotFound",
    }
    prov = {
        "package": "workbench",
        "version": "0.1.0",
        "git": {"commit": "3f9c2d1e8b7a6f5e4d3c2b1a09f8e7d6c5b4a392", "dirty": False},
        "files": {
            "csrc/kernels/w13.cuh": "55010c76" + "a1" * 27 + "9481b5",
            "csrc/kernels/w2.cuh": "c0ed337c" + "b2" * 27 + "d7c1a9",
            "csrc/kernels/meta_reader.cuh": "7e21aa40" + "c3" * 27 + "02f3e8",
        },
        "python": "3.12.3",
        "platform": "Linux-6.8-x86_64",
    }
    plans = _plans(calls, replays, pairs)
    config = {"mode": "ab", "preset": SHAPE.name, "shape": SHAPE.to_dict(), "pairs": pairs}
    config |= {"calls": calls, "replays": replays, "m": 0.01, "seed": seed}
    config |= {"kernels": ["w13", "w2"], "sets": ["hot", "rotating"], "a": "b3-scalar"}
    config |= {"b": "b3-coop", "comparisons": [p.rec["id"] for p in plans], "confirm": True}
    w = SessionWriter(Path(root), slug, config=config, provenance=prov, environment=env)
    t = T0
    t_start = t
    flag_at = {("w13/rotating", 5, 2): "exclude", ("w2/hot", 8, 1): "keep"}  # (cmp, pair, slot)

    next_reading = t

    def tick(dt: float) -> None:
        """Advance the clock by ``dt`` s; the 20 Hz sampler writes what falls in between."""
        nonlocal t, next_reading
        t += dt
        while nvml and next_reading <= t:
            w.nvml(gpu.reading(next_reading, t_start))
            next_reading += 0.05

    # Memory: banks of each layout for each kernel, NVML used before/after, as the runner does.
    for kernel in ("w13", "w2"):
        k, n = SHAPE.dims(kernel)
        fp = expert_footprint(k, n).scaled(SHAPE.experts * SHAPE.layers)
        for layout in ("b4", "b3"):
            total = fp.total(layout)
            before = gpu.mem_used
            # NVML counts whole 2 MiB pages and a few allocator pages more
            gpu.mem_used += -(-total // (2 << 20)) * (2 << 20) + int(rng.integers(0, 3)) * (2 << 20)
            tick(0.4)
            w.record(
                "memory",
                t=t,
                kernel=kernel,
                layout=layout,
                banks=SHAPE.layers,
                used_before=before if nvml else None,
                used_after=gpu.mem_used if nvml else None,
                computed=fp.meta_b4 if layout == "b4" else fp.meta_b3,
            )
    written = 0
    for plan in plans:
        tick(0.3)
        w.record("comparison", t=t, **plan.rec)
        if plan.rec["a"] == "tinygemm":  # the bf16 peer: a tolerance check, not bit-identity
            kind = "rel_l2 vs b3-coop (bf16 peer, tolerance 0.02)"
            w.record(
                "gate", t=t, cmp=plan.rec["id"], ok=True, gated=False, kind=kind, rel_l2=2.4e-3
            )
        else:
            w.record("gate", t=t, cmp=plan.rec["id"], ok=True, gated=True, kind="bit-identical")
        drift_phase = rng.uniform(0, 2 * math.pi)
        for p in range(plan.pairs):
            order = "ABBA" if p % 2 == 0 else "BAAB"
            for slot, arm in enumerate(order):
                # without NVML nothing can flag a sample
                mode = flag_at.get((plan.rec["id"], p, slot)) if nvml else None
                attempts = [True, False] if mode == "exclude" else [mode == "keep"]
                for flagged in attempts:
                    if stop_after_samples is not None and written >= stop_after_samples:
                        w.finish("interrupted", error="interrupted (KeyboardInterrupt)")
                        return w.path
                    true = plan.a_ms if arm == "A" else plan.b_ms
                    drift = 1.0 + 0.004 * math.sin(drift_phase + 0.35 * p)
                    slow = 1.09 if flagged else 1.0
                    reps = true * drift * slow * rng.lognormal(0.0, 0.006, replays)
                    dur = float(reps.sum()) / 1000.0 + 0.004  # replays + launch overhead
                    if flagged:  # the clock dip outlasts the sample: the sampler sees it
                        gpu.dips.append((t - 0.04, t + dur + 0.04))
                    tick(dur)
                    w.record(
                        "sample",
                        t=t,
                        cmp=plan.rec["id"],
                        pair=p,
                        slot=slot,
                        arm=arm,
                        variant=plan.rec[arm.lower()],
                        ms=float(np.median(reps)),
                        replay_ms=[round(float(x), 6) for x in reps],
                        sm_mhz_min=(1755 if flagged else 1980) if nvml else None,
                        sm_mhz_max=1980 if nvml else None,
                        throttle=0x4 if flagged else 0,
                        flagged=flagged,
                        excluded=flagged and mode == "exclude",
                    )
                    written += 1
                    if flagged and mode == "exclude":
                        tick(0.05)  # the runner lets the clocks recover before re-measuring
    tick(0.2)
    w.finish("complete", summary=_summary() if summary else None)
    return w.path


def write_calibration_session(
    root: str | Path, seed: int = 0, spins: tuple[int, ...] = (0, 10, 20, 40, 80, 160, 320)
) -> Path:
    """A `workbench calibrate` session on W13 hot: B = A + a spin of ``spin`` cycles per CTA,
    which costs 0.025 % per cycle (spin 40: +1 %), 6 pairs each; no NVML."""
    rng = np.random.default_rng(seed)
    config = {"mode": "calibrate", "shape": SHAPE.to_dict(), "calls": 48, "replays": 20}
    config |= {"m": 0.01, "seed": seed, "comparisons": [f"w13/hot/spin={s}" for s in spins]}
    env = {"gpu": {"name": "NVIDIA H200", "l2_bytes": L2_BYTES}, "nvml": "NVML unavailable"}
    w = SessionWriter(Path(root), "calibrate", config=config, environment=env)
    t, base = T0, _true_ms("w13", "hot", "b3-scalar", 48)
    for spin in spins:
        cmp_id = f"w13/hot/spin={spin}"
        rec = {"id": cmp_id, "kernel": "w13", "set": "hot", "role": "calibration", "spin": spin}
        rec |= {"a": "b3-scalar+spin=0", "b": f"b3-scalar+spin={spin}", "calls": 48}
        rec |= {"replays": 20, "working_set_bytes": None, "l2_bytes": L2_BYTES, "graphs": 1}
        w.record("comparison", t=t, **rec)
        w.record("gate", t=t, cmp=cmp_id, ok=True, gated=False, kind="bit-identical")
        for p in range(6):
            for slot, arm in enumerate("ABBA" if p % 2 == 0 else "BAAB"):
                ms = base * (1 + 0.00025 * spin * (arm == "B")) * rng.lognormal(0, 0.002)
                t += 0.006
                w.record("sample", t=t, cmp=cmp_id, pair=p, slot=slot, arm=arm, ms=ms)
    w.finish("complete")
    return w.path


def _summary() -> dict:
    """A summary such as the runner stores; reports recompute everything and must ignore it."""
    return {"note": "runner summary (not read by report)", "w13/hot": {"median": 0.925}}


def real_sessions() -> list[Path]:
    """Folders of the real sessions committed under sessions/ (empty until there are some)."""
    root = REPO / "sessions"
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if (d / "session.json").is_file())


@functools.cache  # read at collection by both representative_sessions and sessions_to_plot
def session_signature(path: Path) -> tuple:
    """What decides which code paths loading, analysing and plotting a session take: its mode,
    whether it is an A/A, its status and kernels, the fields its protocol recorded (they grew over the protocol's versions)
    and the record types of its journal (blocks, notes, candidates, workers...)."""
    meta = json.loads((path / "session.json").read_text())
    config = meta.get("config") or {}
    protocol = config.get("protocol")
    types: set[bytes] = set()
    for journal in path.glob("journal.jsonl*"):
        raw = journal.read_bytes()
        raw = gzip.decompress(raw) if journal.suffix == ".gz" else raw
        types |= set(re.findall(rb'"type": "(\w+)"', raw))
    return (
        config.get("mode"),
        config.get("a") == config.get("b"),  # an A/A session recommends nothing
        meta.get("status"),
        tuple(config.get("kernels") or ()),
        tuple(sorted(protocol)) if isinstance(protocol, dict) else repr(protocol),
        tuple(sorted(t.decode() for t in types)),
    )


def _largest_by(key) -> list[Path]:
    kinds: dict[tuple, Path] = {}
    for path in real_sessions():
        k = key(session_signature(path))
        if k not in kinds or _size(path) > _size(kinds[k]):
            kinds[k] = path
    return sorted(kinds.values())


@functools.cache
def representative_sessions() -> list[Path]:
    """One committed session per signature (session_signature), the largest of each: the
    committed sessions grew to dozens of replicates of a few kinds, and a test that renders each
    of them spent minutes on what one of a kind already covers. The largest of a kind carries
    the most samples, so it also meets the size limits first."""
    return _largest_by(lambda sig: sig)


@functools.cache
def sessions_to_plot() -> list[Path]:
    """The largest committed session of each mode (ab, calibrate, tune), an ab session being
    one run in worker processes (today's protocol): plotting one session draws 5 to 21 figures
    (5 to 40 s on the 2-core CI machine); the figures' code paths depend on the mode, which the
    synthetic sessions of tests/test_plots*.py vary one by one."""

    def key(sig: tuple) -> tuple:
        return sig[0], "worker" in sig[-1]

    return [p for p in _largest_by(key) if key(session_signature(p)) != ("ab", False)]


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
