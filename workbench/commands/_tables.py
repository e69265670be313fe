"""Rich rendering for the commands: the comparison table of an analysis (`workbench ab` and
`sessions show` alike, the cells of workbench.analysis.table), a run's events, memory and
calibration (`workbench ab` / `calibrate`)."""

from __future__ import annotations

from typing import Any

from workbench.core.fmt import num
from workbench.core.fmt import size as _mib

VERDICT_STYLE = {"FASTER": "green", "SLOWER": "red", "SAME": "cyan", "AMBIGUOUS": "yellow"}

# the columns `workbench ab` and `sessions show` print (workbench.analysis.table.COLUMNS)
RESULT_COLUMNS = ("comparison", "role", "a", "b", "pairs", "a_ms", "b_ms", "us", "ratio",
                  "change", "ci", "p", "k/n", "flagged", "gate", "ws_l2", "verdict")  # fmt: skip
# the same cells as records (a terminal too narrow for the table), the answer first
RECORD_FIELDS = ("ratio", "ci", "change", "p", "k/n", "a", "b", "a_ms", "b_ms", "us", "pairs",
                 "role", "flagged", "gate", "ws_l2")  # fmt: skip


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
    if kind == "result":  # a finished comparison (workbench.analysis.ComparisonResult)
        from workbench.analysis.table import comparison_table

        ratio, ci, words = comparison_table([data], ("ratio", "ci", "verdict")).rows[0].cells
        return f"  {data.id}: B/A {ratio} {ci} {words}" + (
            f", {data.flagged} flagged" if data.flagged else ""
        )
    if kind == "note":
        return f"[yellow]note[/]: {data}"
    return None


def results_table(results: list[Any]):
    """A rich Table of the analysis model's comparisons: the cells of
    workbench.analysis.table, laid out (verdicts coloured by their class)."""
    from rich.table import Table
    from rich.text import Text

    from workbench.analysis.table import comparison_table

    tab = comparison_table(results, RESULT_COLUMNS)
    # no column is squeezed: a table that does not fit the terminal is laid out as records
    # instead (results_records), never with a cell cut short
    t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c, h in zip(tab.columns, tab.headers, strict=True):
        t.add_column(h, justify="left" if c.align == "l" else "right", no_wrap=True)
    verdict = tab.index("verdict")
    for row in tab.rows:
        # Text, not markup: arm names carry brackets ("b3-scalar[unroll=4]")
        cells = [Text(x) for x in row.cells]
        cells[verdict].stylize(VERDICT_STYLE.get(row.verdict, ""))
        t.add_row(*cells)
    return t


def results_records(results: list[Any], width: int) -> list[Any]:
    """The comparisons one record each, for a terminal too narrow for their table: the id and
    the verdict, then every other cell as "header: value", as many to a line as ``width`` holds
    (a cell is never split: one wider than the line gets a line of its own)."""
    from rich.text import Text

    from workbench.analysis.table import comparison_table

    tab = comparison_table(results, ("comparison", "verdict", *RECORD_FIELDS))
    out = []
    for row in tab.rows:
        head = Text(row.cells[0], style="bold")
        head.append("  ")
        head.append(row.cells[1], style=VERDICT_STYLE.get(row.verdict, ""))
        out.append(head)
        line = ""
        for h, cell in zip(tab.headers[2:], row.cells[2:], strict=True):
            item = f"{h}: {cell}"
            if line and 2 + len(line) + 3 + len(item) > width:
                out.append(Text(f"  {line}"))
                line = ""
            line = f"{line}   {item}" if line else item
        if line:
            out.append(Text(f"  {line}"))
    return out


def print_table(out, table, records=None) -> None:
    """``table`` at its natural width into a file or a pipe (rich would squeeze it into the
    console's width). On a terminal, the table where it fits; where it does not, ``records``
    (the same cells one record per line, a callable of the width), else the table wrapped by
    rich."""
    from rich.measure import Measurement

    need = Measurement.get(out, out.options.update(max_width=100_000), table).maximum
    if out.is_terminal:
        if need <= out.width or records is None:
            out.print(table)
        else:
            for line in records(out.width):
                out.print(line, soft_wrap=True)
        return
    width = out.width
    out.width = max(width, need)  # print caps its own width at the console's
    try:
        out.print(table)
    finally:
        out.width = width


def render_results(out, an: Any) -> None:
    """What `workbench ab` and `sessions show` print of an analysis (workbench.analysis.analyse):
    the comparison table, why each AMBIGUOUS verdict is one, what the block diagnostic finds, the
    recommendation per kernel and its rule."""
    from rich.text import Text

    from workbench.analysis.words import method_check_text, methods_text, reason

    results = an.results
    if results:
        print_table(out, results_table(results), lambda w: results_records(results, w))
        out.print(
            f"(m = {an.m * 100:g} %; ratio = B/A, below 1 favours B; p: Wilcoxon signed-rank over "
            "the pairs; k/n: pairs favouring B; verdicts recomputed from the journal)"
        )
        # what the intervals were computed over, from the verdicts' methods (analysis.words)
        out.print(methods_text([r.verdict for r in results], len(an.session.boards)), markup=False)
        # the journal's words, never read as markup (arm names carry brackets)
        for r in results:
            if r.verdict.verdict == "AMBIGUOUS":
                out.print(f"  {r.id}: {reason(r.verdict)}", markup=False)
        for r in results:  # the block diagnostic (§7.8), where it finds something
            d = r.diagnostic
            if d is not None and (d.rests_on or d.flagged):
                out.print(f"  {r.id}: blocks: {d.summary()}", markup=False)
        for chk in an.method_checks():  # a cell timed by two methods (§5.11)
            out.print(f"  {method_check_text(chk)}", markup=False)
    recs = list(an.recommendations.values())
    for rec in recs:
        head = Text.assemble("\n", (f"recommendation {rec.kernel}", "bold"))
        out.print(head + Text(f": {rec.decision} ({rec.arm})"))
        for line in rec.evidence:
            out.print(f"  {line}", markup=False)
    if recs:
        out.print(Text(f"\nrule: {recs[0].rule}", style="dim"))


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


def render_ab(out, result: Any) -> None:
    """`workbench ab`'s results: the analysis of the merged journal through ``render_results``
    (what `sessions show` prints), then the run's memory, flagged samples and notes."""
    summary = result.summary
    if result.analysis is not None:
        render_results(out, result.analysis)
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
