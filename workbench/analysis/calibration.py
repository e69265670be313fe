"""The calibration resolution (docs/DESIGN.md §5.8): the smallest injected delay this GPU and
protocol detect reliably. One rule, read by the runner (stored in the session summary) and by
the report and plots (recomputed from the journal): both pass per-comparison summaries, the
dicts of ``ComparisonResult.to_dict``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from workbench.core.power import detectable_effect
from workbench.core.stats import DEFAULT_CONF, verdict_words

RULE = (
    "resolution = the smallest injected spin whose comparison is SLOWER and every larger "
    "spin SLOWER too (per kernel and set; overall the coarsest); its effect_pct, the "
    "measured median effect, is the smallest effect that clears m on this GPU and protocol "
    "now. detectable = the smallest effect whose interval excludes 1 in 95 % of runs, from the "
    "block spread (the RMS between-block SD of the group's comparisons, noncentral t over its "
    "blocks): what the run can see, m aside; resolved = the smallest injected spin whose "
    "interval lies above 1, and every larger one's too"
)


def spin_of(cmp: Mapping[str, Any]) -> int:
    """Injected extra work of a calibration arm: the record's "spin", else "+spin=N" in B."""
    spin = cmp.get("spin")
    if isinstance(spin, int) and not isinstance(spin, bool):
        return spin
    tail = str(cmp.get("b", "")).rpartition("+spin=")[2]
    return int(tail) if tail.isdigit() else 0


def _rung(c: Mapping[str, Any], fallback_mhz: float | None) -> dict[str, Any]:
    a_us, b_us = c["a_us_per_call"], c["b_us_per_call"]
    mhz = c.get("sm_mhz") or fallback_mhz
    v = c["verdict"]
    spin = spin_of(c)
    injected_us = spin / mhz if mhz else None  # cycles / MHz = microseconds (per CTA)
    return {
        "id": c["id"],
        "group": f"{c['kernel']}/{c['set']}",  # trials of a rung share its group
        "spin_cycles": spin,
        "sm_mhz": mhz,
        "injected_us_per_cta": injected_us,
        "injected_pct": None if not (injected_us and a_us) else injected_us / a_us * 100,
        "measured_us_per_call": None if a_us is None or b_us is None else b_us - a_us,
        "effect_pct": None if v["median"] is None else (v["median"] - 1) * 100,
        "verdict": v["verdict"],
        "words": verdict_words(v["verdict"], v.get("ci_low"), v.get("ci_high")),
        "pairs": c["pairs"],
        "blocks": c.get("blocks") or v.get("blocks") or 0,
        "between_sd": v.get("between_sd"),
        "above_1": v.get("ci_low") is not None and v["ci_low"] > 1.0,
    }


def _detection(rungs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per (kernel/set) and injected spin: how many trials called it SLOWER (FASTER, SAME,
    AMBIGUOUS), with the median measured effect: the detection rate of that delay."""
    out: dict[str, dict[str, Any]] = {}
    for r in rungs:
        d = out.setdefault(r["group"], {}).setdefault(
            str(r["spin_cycles"]), {"trials": 0, "verdicts": {}, "effects_pct": []}
        )
        d["trials"] += 1
        d["verdicts"][r["verdict"]] = d["verdicts"].get(r["verdict"], 0) + 1
        if r["effect_pct"] is not None:
            d["effects_pct"].append(r["effect_pct"])
    for g in out.values():
        for d in g.values():
            d["median_effect_pct"] = (
                statistics.median(d["effects_pct"]) if d["effects_pct"] else None
            )
    return out


def _smallest(rungs: list[dict[str, Any]], ok) -> dict[str, Any] | None:
    """The first rung with spin > 0 from which every rung (this and larger spins) is ``ok``."""
    for i, r in enumerate(rungs):
        if r["spin_cycles"] > 0 and all(ok(x) for x in rungs[i:]):
            return r
    return None


def _detectable_pct(rungs: list[dict[str, Any]]) -> float | None:
    """The detectable effect (%) of a group: power.detectable_effect on the RMS between-block
    SD of its comparisons over their typical block count; None without blocks."""
    sds = [r["between_sd"] for r in rungs if r["between_sd"] is not None and r["blocks"] >= 2]
    if not sds:
        return None
    blocks = int(statistics.median(r["blocks"] for r in rungs if r["between_sd"] is not None))
    sd = math.sqrt(statistics.fmean(x * x for x in sds))
    d = detectable_effect(sd, blocks, DEFAULT_CONF)
    return None if d is None else d * 100


def calibration_summary(
    comparisons: list[Mapping[str, Any]], m: float, fallback_mhz: float | None = None
) -> dict[str, Any]:
    """Measured vs injected delay per rung of the spin ladder, per (kernel, set), and the
    resolution of each: the smallest injected spin detected SLOWER at that rung and at every
    larger one. The overall resolution is the coarsest of them (torch-free).

    ``fallback_mhz`` converts cycles to µs when NVML gave no SM clock."""
    cal = [c for c in comparisons if c["role"] == "calibration"]
    rungs = [_rung(c, fallback_mhz) for c in sorted(cal, key=spin_of)]
    groups: dict[str, dict[str, Any]] = {}
    for g in dict.fromkeys(r["group"] for r in rungs):
        mine = [r for r in rungs if r["group"] == g]
        res = _smallest(mine, lambda x: x["verdict"] == "SLOWER")
        groups[g] = {
            "resolution": res,
            "resolved": _smallest(mine, lambda x: x["above_1"]),
            "detectable_pct": _detectable_pct(mine),
            "controls": [r["verdict"] for r in mine if r["spin_cycles"] == 0],
        }
    dets = [g["detectable_pct"] for g in groups.values()]
    found = [g["resolution"] for g in groups.values()]
    overall = None
    if found and all(r is not None for r in found):
        overall = max(found, key=lambda r: (r["effect_pct"] or 0.0, r["spin_cycles"]))
    return {
        "m": m,
        "rungs": rungs,
        "groups": groups,
        "resolution": overall,
        "detectable_pct": max(dets) if dets and all(d is not None for d in dets) else None,
        "control_verdicts": [r["verdict"] for r in rungs if r["spin_cycles"] == 0],
        "detection": _detection(rungs),
        "rule": RULE,
    }
