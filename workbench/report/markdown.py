"""Markdown report of a session, recomputed from its raw journals (docs/DESIGN.md §8).

Every number here comes from ``workbench.analysis.analyse`` (the analysis model the runner, the
plots and the TUI share): the summary that the runner stores in session.json is never read, so a
report cannot disagree with the evidence it cites. ``render_report`` formats the analysis; the
helpers that put numbers and sessions into words are public because the plots title with them.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.analysis import TIMING_ROLES, Analysis, analyse, words
from workbench.analysis.counters import markdown_lines as counter_markdown
from workbench.analysis.recommend import reader_results
from workbench.analysis.table import BLOCK_COLUMNS, comparison_table
from workbench.analysis.words import (
    KERNEL_TITLES,
    gpu_text,
    protocol_text,
    provenance_line,
    shape_text,
    variant_label,
    variant_order,
)
from workbench.core.fmt import MIB, change_pct, interval, nbytes, num, signed_pct
from workbench.core.vocab import KERNEL_CHOICES, KERNELS, SETS
from workbench.measure.monitor import shared_reading
from workbench.report.rerun import session_rerun
from workbench.store import counters
from workbench.store.listing import find_session
from workbench.store.plot_files import existing_plots
from workbench.store.provenance import session_staleness
from workbench.store.session import Session, load_session

# ------------------------------------------------------------------------------ formatting


def _table(header: list[str], rows: Iterable[list[str]], align: str) -> list[str]:
    """Markdown table; ``align`` holds one of "l"/"r" per column."""
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


# ------------------------------------------------------------------------------- sections


def _set_title(st: str, top_k: int | None, calls: int) -> str:
    """Column title of an expert set, seed-style: "hot 10 experts", "rotating 480 experts"."""
    if top_k and st == "hot":
        return f"hot {top_k} experts"
    if top_k and st == "rotating":
        return f"rotating {top_k * calls} experts"
    return st


def _seed_tables(an: Analysis) -> list[str]:
    us = an.variant_us()
    shape = an.session.config.get("shape") or {}
    top_k = shape.get("top_k") if isinstance(shape, dict) else None
    out: list[str] = []
    for kernel in KERNEL_CHOICES:
        rows = an.by_role(*TIMING_ROLES)
        rows = [r for r in rows if r.kernel == kernel]
        if not rows:
            continue
        calls = statistics.mode(r.calls for r in rows)
        sets = [s for s in SETS if any(r.set == s for r in rows)]
        sets += sorted({r.set for r in rows} - set(sets))

        header = [f"{KERNEL_TITLES.get(kernel, kernel)}, ms per {calls} calls (median)"]
        header += [_set_title(s, top_k, calls) for s in sets] + [f"µs/call {s}" for s in sets]
        body = []
        for v in variant_order(k[2] for k in us if k[0] == kernel):
            vals = [us.get((kernel, s, v)) for s in sets]
            med = [statistics.median(x) if x else None for x in vals]
            cells = [num(None if u is None else u * calls / 1000.0) for u in med]
            body.append([variant_label(v), *cells, *(num(u, ".2f") for u in med)])
        out += _table(header, body, "l" + "r" * 2 * len(sets)) + [""]
    return out[:-1]


SEED_LEGEND = (
    "Operator results: medians of the sample medians (each sample: the median of its timed "
    "replays) over the complete ABBA pairs; excluded samples left out."
)


def _md_table(an: Analysis, keys: tuple[str, ...]) -> list[str]:
    """The one comparison table's cells (workbench.analysis.table) as Markdown: identifiers as
    code, the verdict in bold."""
    t = comparison_table(an.results, keys)
    body = [
        [f"`{x}`" if c.name else f"**{x}**" if c.key == "verdict" else x for c, x in
         zip(t.columns, row.cells, strict=True)]
        for row in t.rows
    ]  # fmt: skip
    return _table(list(t.headers), body, t.aligns)


VERDICT_KEYS = ("comparison", "role", "a", "b", "ratio", "change", "ci", "p", "k/n", "flagged",
                "verdict")  # fmt: skip


def _blocked(an: Analysis) -> bool:
    return any(r.verdict.method != "pairs" for r in an.results)


def _verdict_table(an: Analysis) -> list[str]:
    lines = _md_table(an, VERDICT_KEYS)
    dropped = [f"`{r.id}`: {len(r.ratios.dropped)}" for r in an.results if r.ratios.dropped]
    if dropped:
        lines += ["", f"Incomplete pairs dropped: {', '.join(dropped)}."]
    more = [(r.id, words.more_text(r.verdict)) for r in an.results if r.verdict.more_pairs]
    lines += [""] * any(m for _, m in more) + [f"`{cid}`: {m}." for cid, m in more if m]
    return lines


def _method_checks(an: Analysis) -> list[str]:
    """The cells timed by a second method (docs/DESIGN.md §5.11); none before the check."""
    checks = an.method_checks()
    if not checks:
        return []
    out = [f"- {words.method_check_text(c, f'`{c.id}`')}." for c in checks]
    legend = words.timings_legend(r.timing for c in checks for r in c.readings)
    return [*out, "", f"Each method's ratio and interval as in the verdicts above: {legend}."]


def _block_table(an: Analysis) -> list[str]:
    """The block-level columns and what the block diagnostic finds (docs/DESIGN.md §7.8)."""
    if not _blocked(an):
        return []
    lines = _md_table(an, ("comparison", *BLOCK_COLUMNS))
    found = [
        r for r in an.results if r.diagnostic and (r.diagnostic.rests_on or r.diagnostic.flagged)
    ]
    lines += [""] * bool(found) + [f"- `{r.id}`: {r.diagnostic.summary()}." for r in found]
    return lines


def _verdict_legend(an: Analysis) -> str:
    # what was computed, from the verdicts' own methods (workbench.analysis.words)
    method = words.methods_text([r.verdict for r in an.results], len(an.session.boards))
    columns = words.TABLE_COLUMNS if _blocked(an) else ""
    return (
        f"Verdicts: ratio = (B1+B2)/(A1+A2) per ABBA/BAAB pair, < 1 favours B. {method} "
        f"{columns}p (Wilcoxon signed-rank on log-ratios) and k/n (pairs favouring B) describe "
        f"the pairs. Minimum effect m = {an.m * 100:g} %. {words.WORDS_LEGEND}"
    )


def _recommendations(an: Analysis) -> list[str]:
    why_not = [f"- {line}." for line in an.not_counted()]
    if not an.recommendations:
        if an.by_role("calibration"):
            return []  # a calibration session: nothing to recommend, by design
        if why_not:
            return ["No reader comparison in this session: no recommendation.", "", *why_not]
        return ["No main comparison (b3-scalar vs b3-coop) in this session: no recommendation."]
    out = []
    for kernel, rec in an.recommendations.items():
        title = KERNEL_TITLES.get(kernel, kernel)
        sets = ", ".join(f"{s} {v}" for s, v in rec.verdicts.items())
        out.append(f"- **{title}: {rec.decision}** → `{rec.arm}` ({sets})")
        out += [f"  - {e}" for e in rec.evidence]
    cfg = an.session.config
    planned = {str(k) for k in cfg.get("kernels") or []}
    planned |= {str(c).split("/")[0] for c in cfg.get("comparisons") or []}
    for kernel in KERNELS:
        if kernel in planned and kernel not in an.recommendations:
            title = KERNEL_TITLES[kernel]
            out.append(f"- **{title}: not measured** (planned, but no reader comparison was run)")
    return out + why_not


def _confirmation(an: Analysis) -> list[str]:
    conf = an.by_role("confirm")
    if not conf:
        return [] if an.by_role("calibration") else ["No step confirmation in this session."]
    out = []
    for r in conf:
        v = r.verdict
        us_a = r.us_per_call(r.a_ms) if r.a_samples_ms else None
        us_b = r.us_per_call(r.b_ms) if r.b_samples_ms else None
        out.append(
            f"- `{r.id}`: `{r.cmp['b']}` against the all-scalar `{r.cmp['a']}`: "
            f"{num(us_b, '.3f')} vs {num(us_a, '.3f')} µs per step, ratio {num(v.median)} "
            f"({change_pct(v.median)}), 95 % CI {interval(v.ci_low, v.ci_high)}, "
            f"{v.k_faster}/{v.n} pairs favour the mix: **{v.verdict}**"
        )
    return out


@dataclass
class MemoryRow:
    """NVML-measured vs computed metadata saving of one kernel's banks, per bank (one layer's
    experts): allocations may come in several steps and in different counts per layout."""

    kernel: str
    banks: dict[str, int]  # layout -> banks allocated in all
    used: dict[str, int | None]  # layout -> NVML used bytes added in all (None: no NVML)
    computed: dict[str, int | None]  # layout -> metadata bytes in those banks
    # other processes changed GPU memory while some of them were made (bankstore's "others"):
    # their NVML figures are not the banks' alone, so none is used
    shared: bool = False

    def per_bank(self, what: dict[str, int | None]) -> float | None:
        if any(what.get(k) is None or not self.banks.get(k) for k in ("b4", "b3")):
            return None
        return what["b4"] / self.banks["b4"] - what["b3"] / self.banks["b3"]


def memory_rows(session: Session) -> list[MemoryRow]:
    rows: dict[str, MemoryRow] = {}
    for m in session.memory:
        lay = m.get("layout")
        if lay not in ("b4", "b3"):
            continue
        k = str(m.get("kernel", "all"))
        row = rows.setdefault(k, MemoryRow(k, {}, {}, {}))
        row.banks[lay] = row.banks.get(lay, 0) + int(m.get("banks") or 1)
        before, after = m.get("used_before"), m.get("used_after")
        delta = None if before is None or after is None else int(after) - int(before)
        if shared_reading(m):
            row.shared, delta = True, None
        prev = row.used.get(lay, 0)
        row.used[lay] = None if delta is None or prev is None else prev + delta
        comp, prev_c = m.get("computed"), row.computed.get(lay, 0)
        row.computed[lay] = None if comp is None or prev_c is None else prev_c + int(comp)
    return [r for r in rows.values() if set(r.banks) == {"b4", "b3"}]


def _no_reading(r: MemoryRow) -> str:
    return "other processes on the GPU" if r.shared else "NVML unavailable"


def _memory(an: Analysis) -> list[str]:
    from workbench.data.capacity import capacity
    from workbench.data.shapes import Shape

    out, body = [], []
    rows = memory_rows(an.session)
    for r in rows:
        meas, comp = r.per_bank(r.used), r.per_bank(r.computed)
        diff = "n/a" if meas is None or not comp else f"{(meas - comp) / comp * 100:+.1f} %"
        body.append(
            [KERNEL_TITLES.get(r.kernel, r.kernel), f"{r.banks['b4']} / {r.banks['b3']}"]
            + [nbytes(r.used["b4"]), nbytes(r.used["b3"])]
            + [nbytes(meas) if meas is not None else _no_reading(r), nbytes(comp), diff]
        )
    if body:
        header = ["kernel", "banks b4 / b3", "NVML Δused b4", "NVML Δused b3"]
        header += ["saving per bank, measured", "saving per bank, computed", "measured vs computed"]
        out += _table(header, body, "lrrrrrr")
    elif an.by_role("calibration"):
        return []  # calibration measures time only
    else:
        out.append("No memory records with both layouts in this session.")
    s = an.session.config.get("shape")
    try:
        cap = capacity(Shape(**s)) if isinstance(s, dict) else None
    except (TypeError, ValueError):
        cap = None
    if cap is not None:
        sv, layers = cap.per_rank.saving, cap.shape.layers
        line = (
            f"Per rank ({layers} layers × {cap.shape.experts} experts, W13 and W2): 3-byte "
            f"metadata saves {sv:,} bytes ({sv / MIB:,.1f} MiB) computed"
        )
        per_bank = {r.kernel: r.per_bank(r.used) for r in rows}
        if all(per_bank.get(k) is not None for k in KERNELS):
            meas = (per_bank["w13"] + per_bank["w2"]) * layers
            line += f"; {meas:,.0f} bytes ({meas / MIB:,.1f} MiB) from the measured banks"
        out += ["", line + "."]
    return out


MEMORY_LEGEND = (
    "Metadata memory: a bank is one layer's experts. NVML counts whole pages, so a measured "
    "figure is rounded to a few MiB."
)
WORKING_SET_LEGEND = (
    "Working set: rotating sets below 5× L2 get extra banks and alternate several captured "
    "graphs, so that consecutive replays touch disjoint memory (docs/DESIGN.md §5.3)."
)


def _working_set(an: Analysis) -> list[str]:
    """One row per (kernel, set, geometry): every comparison of a set shares its banks."""
    from workbench.measure.plan import set_label

    groups: dict[tuple[Any, ...], list[str]] = {}
    largest: dict[tuple[Any, ...], int] = {}  # the arms' largest layout, over the group
    for r in an.results:
        ws, l2 = r.cmp.get("working_set_bytes"), r.cmp.get("l2_bytes")
        if ws is not None:
            key = (r.kernel, r.set, ws, l2, r.cmp.get("graphs", 1))
            groups.setdefault(key, []).append(r.id)
            # sessions before the hot-set check recorded only the smallest layout's bytes
            big = r.cmp.get("working_set_largest_bytes") or ws
            largest[key] = max(largest.get(key, 0), big)
    if not groups:
        return ["Working set not recorded."]
    labels = {key: set_label(key[1], largest[key], key[3]) for key in groups}
    body = []
    for key, ids in groups.items():
        kernel, _, ws, l2, graphs = key
        ratio = f"{ws / l2:.2f}×" if l2 else "L2 unknown"
        body.append([f"{kernel} / {labels[key]}", nbytes(ws), nbytes(l2), ratio, str(graphs)])
        body[-1].append(", ".join(f"`{i}`" for i in ids))
    header = ["kernel / set", "working set (one cycle of graphs)", "L2", "working set / L2"]
    lines = _table(header + ["graphs", "comparisons"], body, "lrrrrl")
    partly = sorted({lab for lab in labels.values() if lab.startswith("hot (")})
    if partly:
        lines += [
            "",
            "**Hot sets that may not stay in the L2:** "
            + "; ".join(partly)
            + ". A hot set counts as resident up to half the L2 (docs/DESIGN.md §5.3); above it, "
            "its calls read part of their weights from DRAM and its verdict is not an L2 verdict.",
        ]
    return lines


def _numerics(an: Analysis) -> list[str]:
    """Gate records: bit-identity of the readers; the bf16 peer is checked against a tolerance.
    ``gated: false`` means the check did not block timing; its result is still reported."""
    exact, loose = [], []
    for r in an.results:
        for g in r.gates:
            exact_kind = (g.get("kind") or "bit-identical") == "bit-identical"
            (exact if exact_kind else loose).append((r, g))
    ids = {r.id for r, _ in exact}
    bad = sorted({r.id for r, g in exact if not g.get("ok")})
    line = f"Numerics gate: {len(ids) - len(bad)} of {len(ids)} comparisons bit-identical"
    lines = [line + ("; **DIFFER**: " + ", ".join(f"`{i}`" for i in bad) if bad else "") + "."]
    # one line per comparison and kind of check: a session with blocks checks each block
    by: dict[tuple[str, str], list[dict]] = {}
    for r, g in loose:
        by.setdefault((r.id, str(g.get("kind"))), []).append(g)
    for (cid, kind), gs in by.items():
        errs = sorted(g["rel_l2"] for g in gs if g.get("rel_l2") is not None)
        val = "n/a" if not errs else f"{errs[0]:.2g}"
        if errs and f"{errs[-1]:.2g}" != val:
            val += f"..{errs[-1]:.2g}"
        ok = sum(bool(g.get("ok")) for g in gs)
        state = "within tolerance" if ok == len(gs) else "**outside tolerance**"
        checks = f" ({len(gs)} checks, {ok} within)" if len(gs) > 1 else ""
        lines.append(f"`{cid}` (not bit-identical by design): {kind}: {val}, {state}{checks}.")
    ungated = [f"`{r.id}`" for r in an.results if not r.gates]
    if ungated:
        lines.append(f"No numerics check recorded for {', '.join(ungated)}.")
    return lines[:1] + ([""] + [f"- {x}" for x in lines[1:]] if len(lines) > 1 else [])


def _calibration(an: Analysis) -> list[str]:
    """Smallest injected delay detected reliably: SLOWER at that spin and every larger one
    (the rule of workbench.analysis.calibration)."""
    cal = an.calibration()
    if cal is None:
        return []
    out = []
    for group, g in cal["groups"].items():
        found = g["resolution"]
        res = (
            f"spin={found['spin_cycles']}, measured "
            f"{'n/a' if found['effect_pct'] is None else format(found['effect_pct'], '+.2f')} %"
            if found
            else "none (no spin was detected SLOWER together with every larger one)"
        )
        kernel, _, st = group.partition("/")
        det = g.get("detectable_pct")
        seen = g.get("resolved")
        out.append(
            f"- {kernel} / {st}: smallest injected delay that clears m: {res}; smallest effect "
            f"the run can detect (from the block spread): "
            f"{'n/a (no blocks)' if det is None else f'{det:.2f} %'}; smallest spin resolved "
            "above 1: "
            + (
                "none"
                if seen is None
                else f"spin={seen['spin_cycles']} ({signed_pct(seen['effect_pct'])}, {seen['words']})"
            )
            + f"; controls (spin 0): {', '.join(g['controls']) or 'none'}"
        )
    return out


CALIBRATION_LEGEND = (
    "Calibration: clears m = that spin's comparison is SLOWER and so is every larger one; "
    "detectable = the effect whose 95 % interval would exclude 1 in 95 % of runs with this block "
    "spread (it can lie below m: such an effect reads SLOWER<m, not SAME or AMBIGUOUS); resolved "
    "above 1 = the interval of that spin and of every larger one lies above 1. The control "
    "(B = A) should read SAME or AMBIGUOUS, never FASTER/SLOWER."
)


def _counters(session: Session) -> list[str]:
    """A beside B per comparison, from the session's counters.json (`ab --counters`)."""
    return counter_markdown(counters.load(session.path))


def _plot_links(session: Session, plots_dir: Path | None, link_base: Path | None) -> list[str]:
    if plots_dir is None:
        return []
    found = existing_plots(session.path.name, plots_dir)
    if not found:
        return [f"No plots in `{plots_dir}`: run `workbench plot {session.path}`."]
    base = link_base if link_base is not None else Path.cwd()
    rel = {k: Path(os.path.relpath(p, base)).as_posix() for k, p in found.items()}
    out = []
    if "summary" in rel:
        out += [f"![summary of {session.path.name}]({rel['summary']})", ""]
    out += [f"- [{k}]({p})" for k, p in rel.items()]
    return out


# ------------------------------------------------------------------------------ the answer

ANSWER_ROLES = ("main", "aa", "tune", "screen")  # what a session without a recommendation says
ANSWER_ROWS = 4  # comparisons in such an answer; the Verdicts table below holds every one


def _said(r: Any) -> str:
    """A set's answer: its word (bold), ratio and interval, the Verdicts table's own cells."""
    word, ratio, ci = comparison_table([r], ("verdict", "ratio", "ci")).rows[0].cells
    return f"**{word}** {ratio} {ci}"


def _answer_table(an: Analysis) -> list[str]:
    """Per kernel the reader chosen and each set's word, ratio and interval; the step
    confirmation of the mix below them."""
    recs = an.recommendations
    rows = {k: {r.set: r for r in reader_results(an.results, k)} for k in recs}
    rows["step"] = {r.set: r for r in an.by_role("confirm")}
    sets = [st for st in SETS if any(st in by for by in rows.values())]
    sets += sorted({st for by in rows.values() for st in by} - set(sets))
    conf = f"{an.results[0].verdict.conf * 100:g} %"
    header = ["kernel", "reader", *(f"{st}: verdict, B/A, {conf} CI" for st in sets)]
    body = []
    for kernel, rec in recs.items():
        cells = [_said(rows[kernel][st]) if st in rows[kernel] else "–" for st in sets]
        body.append([KERNEL_TITLES.get(kernel, kernel), f"**{rec.decision}** `{rec.arm}`", *cells])
    if rows["step"]:
        mix = next(iter(rows["step"].values())).cmp
        cells = [_said(rows["step"][st]) if st in rows["step"] else "–" for st in sets]
        reader = f"the mix `{mix['b']}` vs `{mix['a']}`"
        body.append([KERNEL_TITLES["step"], reader, *cells])
    return _table(header, body, "ll" + "l" * len(sets))


def _answer_calibration(an: Analysis) -> list[str]:
    out = []
    for group, g in (an.calibration() or {}).get("groups", {}).items():
        found, det = g["resolution"], g.get("detectable_pct")
        clears = "no spin clears m" if not found else f"spin={found['spin_cycles']} clears m"
        if found and found.get("effect_pct") is not None:
            clears += f" ({signed_pct(found['effect_pct'])})"
        seen = "n/a" if det is None else f"{det:.2f} %"
        counts = Counter(g["controls"])
        controls = ", ".join(f"{w} ×{n}" if n > 1 else w for w, n in counts.items()) or "none"
        out.append(f"- **{group}**: {clears}; detects {seen}; controls (spin 0) {controls}")
    return out


def _answer_rows(an: Analysis) -> list[str]:
    role = next((x for x in ANSWER_ROLES if an.by_role(x)), None)
    shown = an.by_role(role) if role else []
    if not shown:
        return ["No comparison was measured."]
    conf = f"{shown[0].verdict.conf * 100:g} %"
    t = comparison_table(shown[:ANSWER_ROWS], ("comparison", "a", "b"))
    body = [[f"`{x}`" for x in row.cells] + [_said(row.result)] for row in t.rows]
    out = _table(["comparison", "A", "B", f"verdict, B/A, {conf} CI"], body, "llll")
    more = len(shown) - ANSWER_ROWS
    left = f"{more} more {role} comparisons under Verdicts; " if more > 0 else ""
    return [*out, "", f"{left}no reader recommendation (see Recommendation)."]


def answer(an: Analysis) -> list[str]:
    """What a report opens with (docs/DESIGN.md §8): the decision (per kernel the reader and
    each set's word, ratio and interval), the GPU and board, the commit and whether the
    sources match, and the command that reproduces the session."""
    s = an.session
    if an.recommendations:
        out = _answer_table(an)
    elif an.by_role("calibration"):
        out = _answer_calibration(an)
    else:
        out = _answer_rows(an)
    boards = ", ".join(b[:12] for b in s.boards) or "not recorded"
    status = "complete" if s.status == "complete" else f"**{s.status}**"
    out += ["", f"- GPU: {gpu_text(s)}, board{'s' * (len(s.boards) > 1)} {boards}; status {status}"]
    git = s.provenance.get("git") or {}
    commit = str(git.get("commit") or "not recorded")[:12] + (
        " (dirty)" if git.get("dirty") else ""
    )
    st = session_staleness(s)
    out.append(f"- Commit: {commit}; " + (f"**{st.text()}**" if st.stale else f"{st.text()}."))
    again = session_rerun(s)
    cmd = f"- Reproduce: `{again.text()}`"
    if again.error:
        cmd = f"- Reproduce: not rebuilt, the recorded config spells no command ({again.error})"
    elif again.unmatched:
        cmd += f" (recorded, and set by no option today: {', '.join(again.unmatched)})"
    out += [cmd, f"- Shape {shape_text(s)}; {protocol_text(an)}"]
    return out


# ------------------------------------------------------------------------------ the report


def _legends(an: Analysis) -> list[str]:
    """Method and legends, folded at the end (GitHub renders <details>)."""
    parts = [_verdict_legend(an)] if an.results else []
    if an.recommendations:
        parts.append(f"Rule: {next(iter(an.recommendations.values())).rule}")
    parts.append(SEED_LEGEND)
    if an.calibration() is not None:
        parts.append(CALIBRATION_LEGEND)
    if memory_rows(an.session):
        parts.append(MEMORY_LEGEND)
    parts.append(WORKING_SET_LEGEND)
    body = [x for p in parts for x in (p, "")]
    return ["<details>", "<summary>Method and legends</summary>", "", *body, "</details>"]


def render_report(
    session: Session | str | os.PathLike,
    plots_dir: str | os.PathLike | None = None,
    link_base: str | os.PathLike | None = None,
) -> str:
    """Markdown report of ``session`` (a loaded Session or a path), recomputed from its journals:
    the answer first, then the tables a reviewer checks, the method and legends folded last.

    ``plots_dir``: where `workbench plot` wrote this session's figures (linked if present);
    ``link_base``: the folder the links are relative to (the report file's folder; default cwd).
    """
    s = session if isinstance(session, Session) else load_session(session)
    an = analyse(s)
    out = [f"# Reader A/B on {gpu_text(s)}: `{s.path.name}`", "", *answer(an)]
    if s.status != "complete" or s.warnings:
        out.append("")
        if s.status != "complete":
            out.append(
                f"> **This session is {s.status}**: figures cover the samples measured before it "
                "stopped."
            )
        out += [f"> warning: {w}" for w in s.warnings]
    sections = [
        ("Verdicts", _verdict_table(an)),
        ("Block checks", _block_table(an)),
        ("Timing methods", _method_checks(an)),
        ("Numerics gate", _numerics(an)),
        ("Calibration", _calibration(an)),
        ("Recommendation", _recommendations(an)),
        ("Step confirmation", _confirmation(an)),
        ("Operator results", _seed_tables(an)),
        ("Metadata memory: measured vs computed", _memory(an)),
        ("Working set and L2", _working_set(an)),
        ("Hardware counters", _counters(s)),
    ]
    links = _plot_links(s, Path(plots_dir) if plots_dir else None, link_base and Path(link_base))
    if links:
        sections.append(("Plots", links))
    sections.append(("Provenance", [f"Created {s.created or 'n/a'} · {provenance_line(s)}"]))
    for name, body in sections:
        if body:
            out += ["", f"## {name}", "", *body]
    out += ["", *_legends(an)]
    return "\n".join(out).rstrip() + "\n"


def resolve_session(arg: str, root: str | os.PathLike = "sessions") -> Path:
    """SESSION argument of `workbench report`/`plot`, read like every command reads it
    (`workbench.store.listing.find_session`: a path, a name or part of one, or "latest")."""
    return find_session(arg, root)
