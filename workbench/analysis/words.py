"""Numbers into words: the one module that says in sentences what a verdict decided, from which
interval, and for how many boards that interval holds (docs/DESIGN.md §7.3, §7.4).

A ``Verdict`` (workbench.core.stats) holds numbers, a ``method`` ("workers", "blocks" or
"pairs") and a ``code`` (the branch of the rule that decided). Every renderer (the report,
`ab` and `sessions show`, `compare`, `pool`, the plots' legends, the TUI, `export`, the tuner's
records) words them here, so a method or a rule is described where it is computed from, once,
and a new method without its words fails here (``KeyError``) instead of being mislabelled.
pyperf's ``_formatter.py`` is the model: the data model computes, one module formats.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from workbench.core.arms import BASELINE, LABELS, PEER_ARMS
from workbench.core.fmt import p_value
from workbench.core.stats import DEFAULT_CONF, MAX_MORE_PAIRS, RULE, Verdict, min_pairs
from workbench.store.session import Session

# The printed words of a verdict (Verdict.words) and what each says, for legends and rule texts.
WORDS = {
    "FASTER": "B is faster by m or more",
    "SLOWER": "B is slower by m or more",
    "FASTER<m": "B is faster, by less than m",
    "SLOWER<m": "B is slower, by less than m",
    "FASTER~m": "B is faster; whether by m or more is not resolved",
    "SLOWER~m": "B is slower; whether by m or more is not resolved",
    "SAME": "no effect of m or more, direction unknown",
    "AMBIGUOUS": "cannot tell",
}
WORDS_LEGEND = "Verdict words: " + "; ".join(f"{k} = {v}" for k, v in WORDS.items()) + "."
# What every verdict of one process says (a single-process run, a session before workers)
SINGLE_PROCESS = (
    "one process: the interval ignores process-to-process variance (docs/DESIGN.md §7.3)"
)

# Per method: the estimate, the interval's units, the unit more of which would settle an
# AMBIGUOUS verdict, and what the interval covers (docs/DESIGN.md §7.2, §7.3).
ESTIMATE = {
    "workers": "geometric mean of the worker processes' block means",
    "blocks": "geometric mean of the block medians",
    "pairs": "median pair ratio",
    "boards": "geometric mean of the boards' estimates (each its runs' geometric mean)",
}
OVER = {"workers": "worker processes", "blocks": "blocks", "pairs": "pairs", "boards": "boards"}
UNIT = {"workers": "worker", "blocks": "block", "pairs": "pair", "boards": "board"}
ORDER = ("workers", "blocks", "pairs", "boards")  # "boards": a pool's, the GPU model's


def _pct(conf: float) -> str:
    return f"{conf * 100:.4g} %"


def interval_kind(method: str, conf: float = DEFAULT_CONF) -> str:
    """The interval of ``method``: "95 % t-interval over worker processes", ..."""
    if method == "pairs":
        return f"{_pct(conf)} CI of the median over pairs (distribution-free)"
    return f"{_pct(conf)} t-interval over {OVER[method]}"


def legend(methods: Iterable[str], conf: float = DEFAULT_CONF) -> tuple[str, str]:
    """(marker, interval) legend words for rows whose verdicts used ``methods``: one method's
    words, or each method's joined with " / " where the rows mix them (workers first). The
    plots' and the TUI's legends."""
    used = [m for m in ORDER if m in set(methods)] or ["workers"]
    return (
        " / ".join(ESTIMATE[m] for m in used),
        " / ".join(interval_kind(m, conf) for m in used),
    )


def holds_for(boards: int) -> str:
    """For how many boards a run's intervals hold: "its intervals hold for this board ..."."""
    if boards <= 1:
        return "its intervals hold for this board (boards of one model differ: docs/DESIGN.md §7.6)"
    return f"its intervals hold for these {boards} boards, which its workers sampled"


def holds_for_boards(boards: int, model: str | None = None) -> str:
    """For how many boards a pool's interval holds (`sessions pool`, `export`): over one board's
    runs, for that board; over several boards (the board the unit), for the GPU model as far as
    they sample it."""
    if boards <= 1:
        return (
            "it holds for this board, not for the GPU model (boards of one model differ: "
            "docs/DESIGN.md §7.6)"
        )
    return (
        f"it holds for {boards} boards of {model or 'one GPU model'} (the board the unit): "
        "the model's interval, as far as these boards sample it"
    )


def boards_agree(p: float | None, differ: bool | None) -> str:
    """Whether a pool's boards agree, from the F test of its runs by board (analysis.fleet)."""
    if p is None or differ is None:
        return "untested (no board has two runs)"
    return f"{'DIFFER' if differ else 'agree'} (F test p = {p:.2g})"


def board_level_text(
    v: Verdict, boards: int, runs: int, held: int, p: float | None, differ: bool | None
) -> str:
    """One comparison for the GPU model in a sentence: the verdict on the interval over
    ``boards`` (``v``, method "boards"), whether the boards agree, and how many of the ``runs``'
    own intervals hold the model's estimate (the recommendation's evidence, `export`'s)."""
    return (
        f"over {boards} boards ({runs} runs): {v.median:.4f} "
        f"[{v.ci_low:.4f}, {v.ci_high:.4f}], {interval_kind('boards', v.conf)} ({boards - 1} df); "
        f"the boards {boards_agree(p, differ)}; {held} of {runs} runs' intervals hold the estimate"
    )


def reach(method: str, blocks: int = 0, boards: int = 1) -> str:
    """What an interval of ``method`` covers, and for how many boards it holds."""
    if method == "boards":
        return holds_for_boards(boards)
    if method == "workers":
        n = max(boards, 1)
        return (
            f"it covers fresh processes and memory placements on {n} board{'s' * (n > 1)}: "
            + holds_for(n)
        )
    if method == "blocks":
        return "it covers memory placements within one process on one board and ignores " + (
            "process-to-process variance (docs/DESIGN.md §7.3)"
        )
    placement = "one block" if blocks == 1 else "no blocks"
    return (
        f"{placement}: it covers one memory placement of one process on one board, so it is "
        "narrower than run-to-run reality (docs/DESIGN.md §7.2)"
    )


def sample_size(v: Verdict) -> str:
    """ "6 workers, 12 blocks, 24 pairs", "6 blocks, 12 pairs" or "12 pairs": what ``v``'s
    interval ran over."""
    parts = [f"{v.workers} workers"] if v.method == "workers" else []
    parts += [f"{v.blocks} blocks"] if v.method in ("workers", "blocks") else []
    return ", ".join([*parts, f"{v.n} pairs"])


def method_line(v: Verdict, boards: int = 1) -> str:
    """One verdict's method in a sentence: its estimate and interval, their units and counts,
    and what the interval holds for."""
    return (
        f"{ESTIMATE[v.method]}, {interval_kind(v.method, v.conf)} ({sample_size(v)}); "
        f"{reach(v.method, v.blocks, boards)}"
    )


def methods_text(verdicts: Iterable[Verdict], boards: int = 1) -> str:
    """The methods of a session's verdicts in sentences, one per method used (workers first),
    naming the comparisons' counts: the report's footnote and the TUI's note."""
    by: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by.setdefault(v.method, []).append(v)
    out = []
    for m in (x for x in ORDER if x in by):
        vs = by[m]
        conf = vs[0].conf
        counts = sorted({sample_size(v) for v in vs})
        scope = "" if len(by) == 1 else f"{len(vs)} comparison{'s' * (len(vs) > 1)}: "
        out.append(
            f"{scope}the ratio is the {ESTIMATE[m]} and the interval a "
            f"{interval_kind(m, conf)} ({'; '.join(counts)}); {reach(m, vs[0].blocks, boards)}"
        )
    return ". ".join(s[0].upper() + s[1:] for s in out) + "." if out else ""


def compare_method(
    methods: Sequence[Iterable[str]], conf: float, boards: Sequence[Sequence[str]]
) -> str:
    """`sessions compare`'s method line: each session's estimate and interval by the methods
    its verdicts used (A's, then B's), their combination, and the boards the shift spans."""
    each = math.sqrt(conf)
    said = []
    for name, ms in zip("AB", methods, strict=True):
        est, ci = legend(ms, each)
        said.append(f"{name}: {est}, {ci}")
    ba, bb = (set(x) for x in boards)
    if ba and bb and ba != bb:
        spans = "the sessions ran on different boards, so the shift includes the boards' difference"
    elif ba and bb:
        spans = f"both sessions ran on the same {'board' if len(ba) == 1 else 'boards'}"
    else:
        spans = "a session's board is not recorded"
    return (
        f"shift = ratio in B minus ratio in A, each session's estimate and interval by its own "
        f"method at sqrt({conf:g}) = {each * 100:.2f} % ({'; '.join(said)}), combined as "
        f"[low_B - high_A, high_B - low_A], which holds with probability >= {conf * 100:g} % for "
        f"independent sessions (conservative); {spans}"
    )


def more_text(v: Verdict) -> str | None:
    """ "about 3 more worker(s) would likely settle it" for an AMBIGUOUS verdict; None else."""
    if v.verdict != "AMBIGUOUS":
        return None
    unit = UNIT[v.method]
    if v.more_pairs is None:
        return (
            f"more than {MAX_MORE_PAIRS} more {unit}s would be needed (the estimate sits near a "
            "boundary)"
        )
    return f"about {v.more_pairs} more {unit}(s) would likely settle it"


def _why(v: Verdict) -> str:
    """The rule ``v.code`` names, with its thresholds (and the side of 1, where it says it)."""
    rule, aside = _why_parts(v)
    return rule if aside is None else f"{rule}; {aside}"


def _why_parts(v: Verdict) -> tuple[str, str | None]:
    """(the rule ``v.code`` names, with its thresholds; what the CI says beside it, or None:
    "B is faster, by less than m (the CI excludes 1)" for a CI inside the band on one side of 1)."""
    m, lo_m, hi_m = v.m, 1.0 - v.m, 1.0 + v.m
    est = "median" if v.method == "pairs" else "estimate"
    side = "faster" if v.ci_high < 1.0 else "slower" if v.ci_low > 1.0 else None
    band = f"[{lo_m:.4f}, {hi_m:.4f}]"
    if v.rule == RULE and v.code in ("faster", "slower", "one-side"):  # the interval alone
        return {
            "faster": f"B is faster by m or more: the CI lies entirely below {lo_m:.4f} (1 - m)",
            "slower": f"B is slower by m or more: the CI lies entirely above {hi_m:.4f} (1 + m)",
            "one-side": f"B is {side} (the CI excludes 1) but the CI straddles "
            f"{lo_m if side == 'faster' else hi_m:.4f} (1 {'-' if side == 'faster' else '+'} m): "
            f"whether the effect reaches m = {m * 100:g} % is not resolved",
        }[v.code], None
    if v.code == "inside":
        aside = None if side is None else f"B is {side}, by less than m (the CI excludes 1)"
        return f"no effect of m = {m * 100:g} % or more: the whole CI lies inside {band}", aside
    return {
        "faster": f"B is faster: the CI lies entirely below 1 and the {est} is <= {lo_m:.4f} "
        "(1 - m)",
        "slower": f"B is slower: the CI lies entirely above 1 and the {est} is >= {hi_m:.4f} "
        "(1 + m)",
        "one-side": f"B is {side} (the CI excludes 1) but the {est} is within m = {m * 100:g} % "
        f"of 1 and the CI is not inside {band}: whether the effect reaches m is not resolved",
        "contains-1": f"the CI contains 1 and is not inside {band}",
        "too-few-pairs": f"only {v.n} pair(s): a distribution-free {_pct(v.conf)} CI needs at "
        f"least {min_pairs(v.conf)}",
        "no-pairs": "no complete pairs",
    }[v.code], None


def _facts(v: Verdict) -> str:
    """The numbers behind ``v``: estimate, interval, spreads and counts of its method."""
    if v.n == 0:
        return f"{v.dropped} pair(s) dropped" if v.dropped else "no samples"
    pct, p = _pct(v.conf), p_value(v.wilcoxon_p)
    change = f"{(v.median - 1) * 100:+.2f} %"
    ci = f"[{v.ci_low:.4f}, {v.ci_high:.4f}]"
    sd = None if v.between_sd is None else f"{v.between_sd * 100:.2f} %"
    if v.method == "workers":
        text = (
            f"ratio B/A {v.median:.4f} ({change}, {ESTIMATE['workers']}, {v.workers} workers, "
            f"{v.blocks} blocks), {pct} CI over workers {ci}, between-worker SD {sd}, "
            # (a verdict stored before k_workers was recorded does not know it)
            + ("" if v.k_workers is None else f"{v.k_workers} of {v.workers} workers, ")
            + f"{v.k_blocks} of {v.blocks} blocks and {v.k_faster} of {v.n} pairs favour B, "
            f"Wilcoxon p (pairs) = {p}"
        )
    elif v.method == "boards":
        text = (
            f"ratio B/A {v.median:.4f} ({change}, {ESTIMATE['boards']}), {pct} CI over boards "
            f"{ci}, between-board SD {sd}, {v.k_faster} board(s) favour B"
        )
    elif v.method == "blocks":
        text = (
            f"ratio B/A {v.median:.4f} ({change}, {ESTIMATE['blocks']}, {v.blocks} blocks), "
            f"{pct} CI over blocks {ci}, between-block SD {sd}, {v.k_blocks} of {v.blocks} "
            f"blocks and {v.k_faster} of {v.n} pairs favour B, Wilcoxon p (pairs) = {p}; "
            f"{SINGLE_PROCESS}"
        )
    else:
        caveat = "one block" if v.blocks == 1 else "no blocks"
        caveat += ": placement and process not covered"
        bounded = v.ci_low > float("-inf") and v.ci_high < float("inf")
        ci = (  # below min_pairs the CI is unbounded: say so, never print "inf"
            f"{ci} (exact coverage {v.coverage * 100:.1f} %; {caveat})"
            if bounded
            else f"n/a (too few pairs; {caveat})"
        )
        text = (
            f"median ratio B/A {v.median:.4f} ({change}), {pct} CI {ci}, {v.k_faster} of {v.n} "
            f"pairs favour B, Wilcoxon p = {p}"
        )
    return text + (f", {v.dropped} pair(s) dropped" if v.dropped else "")


def reason(v: Verdict) -> str:
    """Why ``v`` is what it is, in one sentence: the rule it met, how many more units would
    likely settle it (AMBIGUOUS), and its numbers. What `ab` prints under an AMBIGUOUS row,
    the recommendation's evidence, the export's and the tuner's ``reason``."""
    why = _why(v)
    more = more_text(v)
    return f"{why}{'; ' + more if more else ''}; {_facts(v)}"


# ------------------------------------------------------------------------------ method check

# What each timing method (measure/graphs.TIMINGS) times a sample as (docs/DESIGN.md §5.11)
TIMING_WORDS = {
    "events": "the median over replays, each between its own pair of CUDA events",
    "batch": "one pair of CUDA events around all of a sample's replays, their mean",
}


def timing_reading(r: Any) -> str:
    """One method's reading of a cell: "events: SAME 0.9980 [0.9950, 1.0010]" (``r``: an
    analysis.method_check.Reading)."""
    v = r.verdict
    return f"{r.timing}: {v.words} {v.median:.4f} [{v.ci_low:.4f}, {v.ci_high:.4f}]"


def method_check_text(check: Any, name: str | None = None) -> str:
    """A cell timed by two or more methods (analysis.method_check.MethodCheck) in a line: each
    method's reading, and whether the word depends on the timer. The recommendation's evidence
    where the intervals do not overlap; `ab`'s, `sessions show`'s and the report's line per
    cell. ``name``: the cell as the medium sets it (default its main comparison's id)."""
    said = "; ".join(timing_reading(r) for r in check.readings)
    if check.word_depends:
        end = "the word depends on the timer (the intervals do not overlap)"
    elif check.disagree:
        end = "the timers disagree beyond their intervals, with one word"
    else:
        end = "the intervals overlap"
    return f"{name or check.id}, by timer: {said} — {end}"


def timings_legend(timings: Iterable[str]) -> str:
    """What each of ``timings`` times a sample as, for the method check's lines."""
    return "; ".join(f"{t} = {TIMING_WORDS.get(t, t)}" for t in dict.fromkeys(timings))


# ------------------------------------------------------------------------------ a recommendation


def set_evidence_text(e: Any) -> str:
    """One expert set's evidence (``recommend.SetEvidence``) in a sentence: "hot: FASTER (why;
    figures)", in the words given for it where there are (a pool's, the fleet's)."""
    return f"{e.set}: {e.word} ({e.given or reason(e.verdict)})"


def set_figures(e: Any) -> str:
    """A set's evidence without the rule's branch, for a face that prints the rule once (the
    TUI's evidence panel): the side of 1, how many more units would settle it, and the figures;
    the given words whole where there are."""
    if e.given:
        return e.given
    v = e.verdict
    return "; ".join(x for x in (_why_parts(v)[1], more_text(v), _facts(v)) if x)


def decision_text(rec: Any) -> str:
    """A recommendation's decision (``recommend.Recommendation``) and the sets it rests on."""
    named = ", ".join(f"{e.set} ({e.word})" for e in rec.sets if e.decides)
    if rec.decision == "cooperative":
        return f"cooperative: B is faster in {named} and SLOWER nowhere"
    if rec.decision == "scalar":
        if named:
            return f"scalar: B is slower in {named}"
        return "scalar: no set shows an effect of m or more (SAME everywhere)"
    opened = ", ".join(f"{e.set} {e.word}" for e in rec.sets if e.open)
    return f"inconclusive: {opened} and no set faster or slower; scalar stays"


def caution_text(rec: Any) -> str | None:
    """The unresolved sets beside a cooperative decision (``Recommendation.caution``), or None."""
    if not rec.caution:
        return None
    return f"caution: {', '.join(f'{e.set} {e.word}' for e in rec.caution)}: the CI contains 1"


def evidence_lines(rec: Any) -> list[str]:
    """A recommendation's evidence in sentences: one per set, the decision, any caution (the
    report's, the CLI's, `export`'s)."""
    caution = caution_text(rec)
    return [
        *(set_evidence_text(e) for e in rec.sets),
        decision_text(rec),
        *([caution] if caution else []),
    ]


# ------------------------------------------------------------------------------ settling looks

LOOK_STOPS = {
    None: "another look",
    "decided": "it stops",
    "looks": "the looks are spent",
    "budget": "another look would end past --budget",
}


def look_text(look: Any, looks: int) -> str:
    """A settling run's look in a line (workbench.core.sequential.Look): its workers, the labels
    still undecided, and what comes next."""
    from workbench.core.sequential import decided

    open_ = [f"{k} {w}" for k, w in look.labels.items() if not decided(w)]
    state = f"undecided {', '.join(open_)}" if open_ else "all decided"
    return (
        f"settle: look {look.look} of {looks} ({look.workers} workers): {state}; "
        f"{LOOK_STOPS[look.stop]}"
    )


def undecided_text(cmp_id: str, v: Verdict, look: Any) -> str:
    """What a settling run says of a label it stopped undecided: the threshold its interval
    still straddles, where the effect sits."""
    from workbench.core.sequential import straddled

    where = " and ".join(straddled(v.ci_low, v.ci_high, v.m)) or "a threshold"
    return (
        f"{cmp_id}: after {look.look} look(s), {look.workers} workers, its "
        f"{_pct(v.conf)} interval [{v.ci_low:.4f}, {v.ci_high:.4f}] still straddles {where}: "
        f"the effect sits on {where} at this resolution, so its label {v.words} is where the "
        "run stopped, not a settled one (docs/DESIGN.md §7.4)"
    )


# ------------------------------------------------------------------------------ sessions and arms

# the report's key to the columns of a comparison table with blocks (report/markdown.py)
TABLE_COLUMNS = (
    "blocks = blocks favouring B / blocks; between-worker (or -block) SD = spread of the interval's units "
    "(the workers' block means, or the block medians of one process); resolves = the "
    "smallest effect this run could call, max(m, CI half-width); detects = the smallest "
    "effect whose interval would exclude 1 in 95 % of runs with this spread; blocks check = "
    'the block diagnostic (§7.8): a verdict that changes when one block is left out "rests '
    'on" that block, a block that stands apart from the others or a drift over the blocks '
    "means they are not exchangeable draws. "
)

KERNEL_TITLES = {"w13": "W13 + SwiGLU", "w2": "W2 + weighted sum", "step": "step (W13 then W2)"}
PEERS = {name: LABELS[name] for name in PEER_ARMS}  # the arm table's words (core/arms.py)


def shape_text(session: Session) -> str:
    """Shape in words, e.g. ``qwen3.8-flash-next, tp 4 (H 2560, I 640, E 512, ...)``."""
    s = session.config.get("shape")
    name = session.config.get("preset")
    if isinstance(s, dict):
        name = s.get("name") or name
        dims = (
            f"H {s.get('hidden')}, I {s.get('inter')}, E {s.get('experts')}, "
            f"top-k {s.get('top_k')}, {s.get('layers')} layers"
        )
        return f"{name}, tp {s.get('tp')} ({dims})"
    return str(name) if name else "shape not recorded"


def protocol_text(an: Any) -> str:
    """Protocol in words from the comparisons of ``an`` (a workbench.analysis.Analysis, which
    this module cannot import: the model's reader rule words its evidence here): calls per
    replay, replays per sample, then per role its pairs, blocks and worker processes ("main: 24
    ABBA pairs in 12 blocks of 6 worker processes; confirm: 12 ABBA pairs in 6 blocks of 3 ...")."""
    main = an.by_role("main", "confirm") or an.results
    if not main:
        return "no comparisons"
    j = lambda xs: "/".join(map(str, sorted(xs)))  # noqa: E731
    calls, replays = {r.calls for r in main}, {int(r.cmp["replays"]) for r in main}
    parts = []
    for role in dict.fromkeys(r.role for r in main):  # in the session's order
        rows = [r for r in main if r.role == role]
        blocks = {r.verdict.blocks for r in rows if r.verdict.method != "pairs"}
        workers = {r.verdict.workers for r in rows if r.verdict.method == "workers"}
        part = f"{role}: {j({r.verdict.n for r in rows})} ABBA pairs"
        part += f" in {j(blocks)} blocks" if blocks else ""
        part += f" of {j(workers)} worker processes" if workers else ""
        parts.append(part)
    text = f"{j(calls)} calls per replay, {j(replays)} replays per sample; " + "; ".join(parts)
    if any(r.verdict.method != "pairs" for r in main):
        seed = an.session.config.get("protocol", {}).get("placement_seed")
        text += f" (placement seed {seed})"
    return text


def gpu_text(session: Session) -> str:
    return session.gpu_name or "GPU not recorded"


def variant_label(v: str) -> str:
    return f"{v} ({LABELS[v]})" if v in LABELS else v


def variant_order(names: Iterable[str]) -> list[str]:
    """Baseline first, then the readers with the scalar ones before the cooperative ones
    (for step mixes: fewer cooperative kernels first), peers last."""

    def key(v: str) -> tuple[int, int, int, list[tuple[int, str]]]:
        # numbers compare as numbers: "spin=80" before "spin=160"
        natural = [(int(x), "") if x.isdigit() else (0, x) for x in re.split(r"(\d+)", v)]
        if v == BASELINE:
            return (0, 0, 0, natural)
        if v in PEERS:
            return (2, 0, 0, natural)
        return (1, v.count("coop"), -v.count("b4"), natural)

    return sorted(set(names), key=key)


def boards_text(s: Session) -> str | None:
    """ "6 main and 3 confirm worker processes on 1 board (GPU-712d216e)", and what one board's
    interval holds; None for a session without worker processes."""
    if not s.workers:
        return None
    rounds: dict[str, int] = {}
    for w in s.workers:
        rounds[w.get("round", "?")] = rounds.get(w.get("round", "?"), 0) + 1
    boards = s.boards
    each = ", ".join(b[:12] for b in boards) or "UUID not recorded"
    text = " and ".join(f"{n} {r}" for r, n in rounds.items())
    text += f" worker processes on {len(boards) or 1} board{'s' * (len(boards) > 1)} ({each})"
    if len(boards) <= 1:
        text += f"; {holds_for(1)}"
    return text


def provenance_line(session: Session) -> str:
    env, prov = session.environment, session.provenance
    gpu = session.gpu
    parts = [f"GPU {gpu_text(session)}"]
    workers = boards_text(session)
    if workers:
        parts.append(workers)
    if gpu.get("sm"):
        parts.append(f"sm {gpu['sm']}")
    for key, label in (("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch")):
        parts.append(f"{label} {gpu.get(key) or env.get(key) or 'n/a'}")
    git = prov.get("git") or {}
    commit = (git.get("commit") or "n/a")[:12]
    dirty = " (dirty)" if git.get("dirty") else ""
    parts.append(f"workbench {prov.get('version', 'n/a')} @ {commit}{dirty}")
    files = prov.get("files") or {}
    if files:
        parts.append(
            "sources " + ", ".join(f"{Path(p).name} {h[:10]}" for p, h in sorted(files.items()))
        )
    builds = {v: h for v, h in (prov.get("builds") or {}).items() if isinstance(h, str)}
    if builds:
        parts.append("builds " + ", ".join(f"{v} {h[:10]}" for v, h in sorted(builds.items())))
    return " · ".join(parts)
