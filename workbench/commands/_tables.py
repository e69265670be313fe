"""Rich rendering of a run's summary (runner.Runner.summary) for `workbench ab` / `calibrate`."""

from __future__ import annotations

from typing import Any

from workbench.core.fmt import num
from workbench.core.fmt import size as _mib

VERDICT_STYLE = {"FASTER": "green", "SLOWER": "red", "SAME": "cyan", "AMBIGUOUS": "yellow"}


def _words(v: dict[str, Any], c: dict[str, Any] | None = None) -> str:
    """A verdict dict's printed words (workbench.core.stats.verdict_words), and "(rests on
    block N)" where the comparison ``c``'s block diagnostic says so."""
    from workbench.core.block_diagnostic import rests_text
    from workbench.core.stats import verdict_words

    rests = ((c or {}).get("block_diagnostic") or {}).get("rests_on") or []
    tail = f" ({rests_text(rests)})" if rests else ""
    return verdict_words(v["verdict"], v.get("ci_low"), v.get("ci_high")) + tail


def _f(x: float | None, fmt: str, none: str = "–") -> str:
    return num(x, fmt, none)  # workbench.core.fmt: the one home of the number formatters


def _arm(name: str) -> str:
    # step arms "w13=..,w2=.." on two lines keep the table narrow
    return name.replace(",", "\n")


def event_line(kind: str, data: Any) -> str | None:
    """One stderr line per runner event (None: nothing to say)."""
    if kind == "builds":
        hits = sum(1 for b in data if b.get("cache_hit"))
        return f"builds: {len(data)} variant(s), {hits} from cache"
    if kind == "session":
        return f"session: {data}"
    if kind == "memory":
        return (
            f"banks: {data['kernel']} {data['layout']} x{data['banks']}: NVML "
            f"{_mib(data['measured'])} (computed {_mib(data['computed_total'])}, metadata "
            f"{_mib(data['computed'])}) in {data['seconds']:.1f} s"
        )
    if kind == "comparison":
        ratio = data.get("working_set_l2_ratio")
        ws = (
            "" if ratio is None else f", working set {ratio:.1f}x L2 over {data['graphs']} graph(s)"
        )
        label = data.get("set_label")
        shown = f", set {label}" if label and label != data.get("set") else ""
        return f"{data['id']}: A={data['a']} B={data['b']} ({data['role']}{ws}{shown})"
    if kind == "gate":
        if "rel_l2" in data:
            how = "gated" if data.get("gated") else "not gated"
            state = "" if data.get("ok", True) else "OUTSIDE TOLERANCE "
            err = "n/a" if data["rel_l2"] is None else f"{data['rel_l2']:.2e}"
            return f"  gate: {state}{how} ({data['kind']}): rel_l2 {err}"
        state = "bit-identical" if data["ok"] else "DIFFER"
        gated = "" if data.get("gated", True) else " (recorded, not gated)"
        return f"  gate: {state} over {data.get('outputs', '?')} outputs{gated}"
    if kind == "result":
        v = data["verdict"]
        return (
            f"  {data['id']}: B/A {_f(v['median'], '.4f')} "
            f"[{_f(v['ci_low'], '.4f')}, {_f(v['ci_high'], '.4f')}] {_words(v, data)}"
            + (f", {data['flagged']} flagged" if data["flagged"] else "")
        )
    if kind == "note":
        return f"[yellow]note[/]: {data}"
    return None


def results_table(comparisons: list[dict[str, Any]], title: str = "results"):
    from rich import box
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ["comparison", "A", "B", "A ms", "B ms", "A µs/call", "B µs/call", "B/A",
            "95% CI", "p", "k/n", "verdict", "flagged", "WS/L2"]  # fmt: skip
    for c in cols:
        left = c in ("comparison", "A", "B", "verdict")
        t.add_column(c, justify="left" if left else "right", no_wrap=c in ("comparison", "95% CI"))
    for c in comparisons:
        v = c["verdict"]
        style = VERDICT_STYLE.get(v["verdict"], "")
        ws = c.get("working_set_l2_ratio")
        t.add_row(
            c["id"] + (" (A/A)" if c["role"] == "aa" else ""),
            _arm(c["a"]), _arm(c["b"]),
            _f(c["a_ms"], ".4f"), _f(c["b_ms"], ".4f"),
            _f(c["a_us_per_call"], ".2f"), _f(c["b_us_per_call"], ".2f"),
            _f(v["median"], ".4f"),
            f"[{_f(v['ci_low'], '.4f')}, {_f(v['ci_high'], '.4f')}]",
            _f(v["wilcoxon_p"], ".2g", "n/a"),
            f"{v['k_faster']}/{v['n']}",
            f"[{style}]{_words(v, c)}[/]",
            f"{c['flagged']}" + (f" ({c['excluded']} excl.)" if c["excluded"] else ""),
            "–" if ws is None else f"{ws:.1f} ({c['graphs']}g)",
        )  # fmt: skip
    return t


def memory_table(memory: list[dict[str, Any]]):
    from rich import box
    from rich.table import Table

    t = Table(title="memory of the banks (NVML, measured vs computed)", box=box.SIMPLE_HEAD)
    for c in ("kernel", "layout", "banks", "NVML used +", "computed total", "metadata"):
        t.add_column(c, justify="right")
    for m in memory:
        t.add_row(
            m["kernel"], m["layout"], str(m["banks"]), _mib(m["measured"]),
            _mib(m["computed_total"]), _mib(m["computed"]),
        )  # fmt: skip
    return t


def saving_lines(memory: list[dict[str, Any]]) -> list[str]:
    """Measured vs computed 3-byte saving per kernel, where both layouts were allocated."""
    out = []
    for kernel in dict.fromkeys(m["kernel"] for m in memory):
        per = {m["layout"]: m for m in memory if m["kernel"] == kernel}
        if {"b4", "b3"} <= set(per) and per["b4"]["banks"] == per["b3"]["banks"]:
            b4, b3 = per["b4"], per["b3"]
            computed = b4["computed"] - b3["computed"]
            measured = (
                None
                if b4["measured"] is None or b3["measured"] is None
                else b4["measured"] - b3["measured"]
            )
            out.append(
                f"{kernel}: 3-byte metadata saves {_mib(measured)} measured (NVML) vs "
                f"{_mib(computed)} computed over {b3['banks']} bank(s)"
            )
    return out


def render_ab(console, summary: dict[str, Any]) -> None:
    cmps = summary["comparisons"]
    main = [c for c in cmps if c["role"] != "confirm"]
    if main:
        console.print(results_table(main))
    for c in cmps:
        v = c["verdict"]
        if v["verdict"] == "AMBIGUOUS" and c["role"] in ("main", "aa"):
            console.print(f"  {c['id']}: {v['reason']}")
        d = c.get("block_diagnostic")
        if d and (d["rests_on"] or d["flagged"]):
            console.print(f"  {c['id']}: blocks: {'; '.join(d['flags'])}")
    recs = summary.get("recommendations") or {}
    if recs:
        console.print("[bold]recommendation per kernel[/]")
        for kernel, r in recs.items():
            console.print(f"  [bold]{kernel}[/]: {r['decision']} → {r['arm']}")
            for e in r["evidence"]:
                console.print(f"      {e}")
        console.print(f"  [dim]rule: {next(iter(recs.values()))['rule']}[/]")
    confirm = [c for c in cmps if c["role"] == "confirm"]
    if confirm:
        console.print(
            results_table(confirm, "step confirmation: recommended mix (B) vs baseline (A)")
        )
    if summary.get("memory"):
        console.print(memory_table(summary["memory"]))
        for line in saving_lines(summary["memory"]):
            console.print(f"  {line}")
    flagged, excluded = summary.get("flagged", 0), summary.get("excluded", 0)
    nvml = summary.get("nvml") or ""
    console.print(
        f"flagged samples: {flagged} ({excluded} excluded); "
        f"NVML {'available' if nvml == 'available' else 'unavailable'}; "
        f"{summary['calls']} calls per replay, {summary['replays']} replays per sample"
    )
    for n in summary.get("notes", []):
        console.print(f"[yellow]note[/]: {n}")


def _detect_line(g: dict[str, Any]) -> str:
    """The smallest effect the run can see (block spread) and the smallest injected delay whose
    interval lay above 1, beside the resolution (the smallest that clears m)."""
    det = g.get("detectable_pct")
    res = g.get("resolved")
    seen = (
        "no spin's interval lay above 1 together with every larger one's"
        if res is None
        else f"smallest spin resolved above 1: {res['spin_cycles']} cycles "
        f"({_f(res['effect_pct'], '+.2f')} %, {res.get('words', res['verdict'])})"
    )
    can = "n/a (no blocks)" if det is None else f"{det:.2f} %"
    return f"detectable (interval excludes 1 in 95 % of runs, from the block spread): {can}; {seen}"


def render_calibration(console, summary: dict[str, Any]) -> None:
    from rich import box
    from rich.table import Table

    cal = summary.get("calibration") or {}
    t = Table(title="calibration: injected spin vs measured delay", box=box.SIMPLE_HEAD)
    for c in ("comparison", "spin cycles", "injected µs/CTA", "injected %", "measured Δ µs/call",
              "effect %", "verdict", "pairs"):  # fmt: skip
        t.add_column(c, justify="left" if c in ("comparison", "verdict") else "right")
    for r in cal.get("rungs", []):
        style = VERDICT_STYLE.get(r["verdict"], "")
        t.add_row(
            r["id"], str(r["spin_cycles"]), _f(r["injected_us_per_cta"], ".3f"),
            _f(r["injected_pct"], ".2f"), _f(r["measured_us_per_call"], "+.3f"),
            _f(r["effect_pct"], "+.2f"), f"[{style}]{r.get('words', r['verdict'])}[/]",
            str(r["pairs"]),
        )  # fmt: skip
    console.print(t)
    for group, g in (cal.get("groups") or {}).items():
        res = g["resolution"]
        if res is None:
            console.print(f"resolution {group}: no injected delay was detected reliably")
        else:
            console.print(
                f"resolution {group}: {res['spin_cycles']} cycles per CTA detected reliably, "
                f"an effect of {_f(res['effect_pct'], '+.2f')} % of the kernel time "
                f"({_f(res['measured_us_per_call'], '+.3f')} µs per call)"
            )
        console.print(f"  {_detect_line(g)}")
        if g["controls"]:
            console.print(f"  A/A control (spin 0 vs 0): {', '.join(g['controls'])}")
    for group, spins in (cal.get("detection") or {}).items():
        for spin, d in spins.items():
            if d["trials"] > 1:
                counts = ", ".join(f"{k} {v}" for k, v in sorted(d["verdicts"].items()))
                console.print(
                    f"trials {group} spin {spin}: {counts} of {d['trials']} "
                    f"(median effect {_f(d['median_effect_pct'], '+.2f')} %)"
                )
    console.print(f"[dim]{cal.get('rule', '')}[/]")
    for n in summary.get("notes", []):
        console.print(f"[yellow]note[/]: {n}")
