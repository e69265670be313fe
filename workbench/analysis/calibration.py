"""The calibration resolution (docs/DESIGN.md §5.8): the smallest injected delay this GPU and
protocol detect reliably. One rule, read by the runner (stored in the session summary) and by
the report and plots (recomputed from the journal): both pass per-comparison summaries, dicts
with the keys ``ComparisonResult.to_dict`` and ``results.CmpResult.summary`` share."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

RULE = (
    "resolution = the smallest injected spin whose comparison is SLOWER and every larger "
    "spin SLOWER too (per kernel and set; overall the coarsest); its effect_pct, the "
    "measured median effect, is the smallest effect this GPU and protocol detect "
    "reliably now"
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
        "pairs": c["pairs"],
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
        res = None
        for i, r in enumerate(mine):
            if r["spin_cycles"] > 0 and all(x["verdict"] == "SLOWER" for x in mine[i:]):
                res = r
                break
        groups[g] = {
            "resolution": res,
            "controls": [r["verdict"] for r in mine if r["spin_cycles"] == 0],
        }
    found = [g["resolution"] for g in groups.values()]
    overall = None
    if found and all(r is not None for r in found):
        overall = max(found, key=lambda r: (r["effect_pct"] or 0.0, r["spin_cycles"]))
    return {
        "m": m,
        "rungs": rungs,
        "groups": groups,
        "resolution": overall,
        "control_verdicts": [r["verdict"] for r in rungs if r["spin_cycles"] == 0],
        "detection": _detection(rungs),
        "rule": RULE,
    }
