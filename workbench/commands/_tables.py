"""Rich rendering for the commands: the comparison table of an analysis (`workbench ab` and
`sessions show` alike, the cells of workbench.analysis.table), a run's events, memory and
calibration (`workbench ab` / `calibrate`)."""

from __future__ import annotations

from typing import Any

from workbench.core.fmt import num
from workbench.core.fmt import size as _mib
from workbench.measure.monitor import shared_reading

VERDICT_STYLE = {"FASTER": "green", "SLOWER": "red", "SAME": "cyan", "AMBIGUOUS": "yellow"}

# the columns `workbench ab` and `sessions show` print (workbench.analysis.table.COLUMNS)
RESULT_COLUMNS = ("comparison", "role", "a", "b", "pairs", "a_ms", "b_ms", "us", "ratio",
                  "change", "ci", "p", "k/n", "flagged", "gate", "ws_l2", "verdict")  # fmt: skip
# fitted to a terminal (workbench/commands/_fit.py): the verdict's word kept apart from the
# blocks it rests on (a column that folds), and the columns left out first to last
FITTED_COLUMNS = (*RESULT_COLUMNS[:-1], "verdict_word", "rests_on")
KEEP = ("comparison", "ratio", "ci", "verdict_word")
LEAVE_OUT = ("a_ms", "b_ms", "p", "ws_l2", "gate", "pairs", "k/n", "flagged", "us", "a", "b",
             "role", "change")  # fmt: skip


def _f(x: float | None, fmt: str, none: str = "–") -> str:
    return num(x, fmt, none)  # workbench.core.fmt: the one home of the number formatters


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
            f"{_mib(data['measured'])}{_shared_note(data)} (computed "
            f"{_mib(data['computed_total'])}, metadata {_mib(data['computed'])}) in "
            f"{data['seconds']:.1f} s"
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
    if kind == "result":  # a finished comparison (workbench.analysis.ComparisonResult)
        from workbench.analysis.table import comparison_table

        ratio, ci, words = comparison_table([data], ("ratio", "ci", "verdict")).rows[0].cells
        return f"  {data.id}: B/A {ratio} {ci} {words}" + (
            f", {data.flagged} flagged" if data.flagged else ""
        )
    if kind == "note":
        return f"[yellow]note[/]: {data}"
    return None


def results_lines(results: list[Any], width: int | None):
    """The analysis model's comparisons as lines of rich Text, the cells of
    workbench.analysis.table laid out by the width layer (workbench/commands/_fit.py: None,
    whole rows), verdicts coloured by their class; and what was left out to fit."""
    from rich.text import Text

    from workbench.analysis.table import comparison_table
    from workbench.commands._fit import Col, fit_table

    keys = RESULT_COLUMNS if width is None else FITTED_COLUMNS
    tab = comparison_table(results, keys)
    rank = {k: i for i, k in enumerate(LEAVE_OUT)}
    cols = [
        Col(h, c.align, c.key in KEEP, rank.get(c.key), c.key == "rests_on")
        for c, h in zip(tab.columns, tab.headers, strict=True)
    ]
    fitted = fit_table(cols, [row.cells for row in tab.rows], width)
    words = {tab.index(k) for k in ("verdict", "verdict_word") if k in keys}
    lines = []
    for line, row in zip(fitted.lines, fitted.line_rows, strict=True):
        # Text, not markup: arm names carry brackets ("b3-scalar[unroll=4]")
        text = Text()
        for part, col in line:
            style = (
                VERDICT_STYLE.get(tab.rows[row].verdict, "")
                if col in words and row is not None
                else ""
            )
            text.append(part, style=style or ("bold" if row is None else ""))
        text.rstrip()
        lines.append(text)
    return lines, fitted


def render_results(out, an: Any, width: int | None = -1, hint: str = "") -> None:
    """What `workbench ab` and `sessions show` print of an analysis (workbench.analysis.analyse):
    the comparison table, why each AMBIGUOUS verdict is one, what the block diagnostic finds, the
    recommendation per kernel and its rule. ``width``: the width the table fits (None: whole
    rows; -1: the console's where it is a terminal); ``hint``: how to see every column."""
    from rich.text import Text

    from workbench.analysis.words import method_check_text, methods_text, reason
    from workbench.commands._fit import WIDE_HINT, fold_line, left_out_line

    if width == -1:
        width = out.width if out.is_terminal else None
    hint = hint or WIDE_HINT

    def say(text: str, style: str = "") -> None:
        # prose, as Text (never markup: arm names carry brackets), folded at a fitted width
        for line in [text] if width is None else fold_line(text, width):
            out.print(Text(line, style=style), soft_wrap=True)

    results = an.results
    if results:
        lines, fitted = results_lines(results, width)
        for line in lines:
            out.print(line, soft_wrap=True)  # laid out to the width already
        note = None if width is None else left_out_line(fitted, width, hint)
        if note:
            say(note)
        say(
            f"(m = {an.m * 100:g} %; ratio = B/A, below 1 favours B; p: Wilcoxon signed-rank over "
            "the pairs; k/n: pairs favouring B; verdicts recomputed from the journal)"
        )
        # what the intervals were computed over, from the verdicts' methods (analysis.words)
        say(methods_text([r.verdict for r in results], len(an.session.boards)))
        for r in results:
            if r.verdict.verdict == "AMBIGUOUS":
                say(f"  {r.id}: {reason(r.verdict)}")
        for r in results:  # the block diagnostic (§7.8), where it finds something
            d = r.diagnostic
            if d is not None and (d.rests_on or d.flagged):
                say(f"  {r.id}: blocks: {d.summary()}")
        for chk in an.method_checks():  # a cell timed by two methods (§5.11)
            say(f"  {method_check_text(chk)}")
    recs = list(an.recommendations.values())
    for rec in recs:
        head = Text.assemble("\n", (f"recommendation {rec.kernel}", "bold"))
        out.print(head + Text(f": {rec.decision} ({rec.arm})"), soft_wrap=True)
        for line in rec.evidence:
            say(f"  {line}")
    if recs:
        out.print()
        say(f"rule: {recs[0].rule}", "dim")


def _shared_note(m: dict[str, Any]) -> str:
    n = m.get("others") or 0
    return (
        f" with {n} other process(es) changing GPU memory meanwhile, not the banks' alone" * bool(n)
    )


def memory_table(memory: list[dict[str, Any]]):
    from rich import box
    from rich.table import Table

    t = Table(title="memory of the banks (NVML, measured vs computed)", box=box.SIMPLE_HEAD)
    for c in ("kernel", "layout", "banks", "NVML used +", "computed total", "metadata"):
        t.add_column(c, justify="right")
    for m in memory:
        t.add_row(
            m["kernel"], m["layout"], str(m["banks"]),
            "shared GPU" if shared_reading(m) else _mib(m["measured"]),
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
            shared = shared_reading(b4) or shared_reading(b3)
            measured = (
                None
                if shared or b4["measured"] is None or b3["measured"] is None
                else b4["measured"] - b3["measured"]
            )
            how = "NVML: other processes changed GPU memory meanwhile" if shared else "NVML"
            out.append(
                f"{kernel}: 3-byte metadata saves {_mib(measured)} measured ({how}) vs "
                f"{_mib(computed)} computed over {b3['banks']} bank(s)"
            )
    return out


def render_ab(out, result: Any) -> None:
    """`workbench ab`'s results: the analysis of the merged journal through ``render_results``
    (what `sessions show` prints), then the run's memory, flagged samples and notes."""
    summary = result.summary
    if result.analysis is not None:
        name = result.session_path.name if result.session_path else "SESSION"
        every = f"`workbench sessions show {name} --wide` shows every column"
        render_results(out, result.analysis, hint=every)
    if summary.get("memory"):
        out.print(memory_table(summary["memory"]))
        for line in saving_lines(summary["memory"]):
            out.print(f"  {line}")
    flagged, excluded = summary.get("flagged", 0), summary.get("excluded", 0)
    nvml = summary.get("nvml") or ""
    out.print(
        f"flagged samples: {flagged} ({excluded} excluded); "
        f"NVML {'available' if nvml == 'available' else 'unavailable'}; "
        f"{summary['calls']} calls per replay, {summary['replays']} replays per sample"
    )
    for n in summary.get("notes", []):
        out.print(f"[yellow]note[/]: {n}")


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


def render_calibration(console, result: Any) -> None:
    from rich import box
    from rich.table import Table

    summary = result.summary
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
