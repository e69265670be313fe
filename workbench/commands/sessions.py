"""`workbench sessions list | show SESSION | compare A B | pool S1 S2 ...`: browse, compare and
pool saved sessions (pool: verdicts that must hold in every replicate run, workbench/analysis/pool.py).

SESSION is a path to a session folder (or its session.json), a folder name under --sessions-dir
(--root: its old name), a
unique part of one (e.g. the slug or the timestamp), or "latest".

Exit codes: 0 done; 2 bad arguments or a session that cannot be loaded (one line on stderr naming
the file and the field, see workbench/store/session_schema.py). `list` and `pool` skip a bad session
with a one-line warning and go on with the good ones.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.commands import _fit
from workbench.commands._paths import add_sessions_dir, distinct_sessions
from workbench.core import defaults
from workbench.core.errors import BadArgument
from workbench.core.fmt import DASH, num

if TYPE_CHECKING:
    from workbench.store.session import Session

HELP = "list, show or compare saved sessions"

# fitted to a terminal (workbench/commands/_fit.py), by the words of the column titles: the
# columns never left out, those left out first to last, the one that may fold
LIST_FIT = {"keep": ("session", "recommendation"), "fold": ("recommendation",),
            "ranks": ("when", "commit", "GPU", "sources", "status")}  # fmt: skip
COMPARE_FIT = {"keep": ("comparison", "ratio", "verdict"),
               "ranks": ("ms", "changed", "interval", "shift")}  # fmt: skip
FITTED = ("list", "show", "compare")  # the actions whose output fits the terminal


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    add_sessions_dir(common, "folder holding the sessions")
    common.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    fitting = argparse.ArgumentParser(add_help=False)  # tables that fit the terminal
    _fit.add_arguments(fitting)
    sub.add_parser(
        "list",
        parents=[common, fitting],
        help="sessions under --sessions-dir, newest first: status, GPU, commit, kernel sources "
        "(STALE when they differ from the working tree), recommendation",
    )
    stats = argparse.ArgumentParser(add_help=False)
    stats.add_argument(
        "--m", type=float, default=None, help="minimum effect (default: the session's, else 0.01)"
    )
    show = sub.add_parser(
        "show",
        parents=[common, stats, fitting],
        help="config, GPU and verdicts recomputed from the journal",
    )
    show.add_argument("session", metavar="SESSION")
    show.add_argument(
        "--phases",
        action="store_true",
        help="where the run's time went: per worker process its import, wait, turn and seconds "
        "per phase, and the parent's steps (docs/DESIGN.md §5.10)",
    )
    cmp = sub.add_parser(
        "compare",
        parents=[common, stats, fitting],
        help="shift of each comparison's ratio from A to B",
    )
    cmp.add_argument("a", metavar="A")
    cmp.add_argument("b", metavar="B")
    pool = sub.add_parser(
        "pool",
        parents=[common, stats],
        help="replicate runs of one configuration: a verdict only where every session agrees; "
        "over two or more boards, the GPU model's word (the board the unit)",
    )
    pool.add_argument("sessions", metavar="SESSION", nargs="+")
    pack = sub.add_parser(
        "pack",
        parents=[common],
        help="compress finished sessions' journal and NVML readings in place (.gz; every "
        "command reads them alike): for sessions committed as evidence",
    )
    pack.add_argument("sessions", metavar="SESSION", nargs="+")


def resolve(arg: str, root: str | Path) -> Path:
    """Find a session folder from a path, a name under ``root``, a unique part of one, or "latest"."""
    from workbench.store.listing import find_session

    return find_session(arg, root)


def _clean(x: Any) -> Any:
    """Strict JSON: non-finite floats (which callers may have stored) become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _dump(obj: Any) -> None:
    json.dump(_clean(obj), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _recs(recs: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in recs.items()) or "-"


def _sources(i: Any) -> str:
    """Short csrc/ digest, with STALE when it differs from the working tree's ("?": unknown)."""
    from workbench.store.provenance import STALE

    if i.sources is None:
        return "?"
    return i.sources + (f" {STALE}" if i.stale else "")


def _nothing_here(args: argparse.Namespace) -> str:
    """Where `sessions list` looked and found nothing, and how to point it elsewhere."""
    where = Path(args.root).resolve()
    notes = [] if where.is_dir() else ["no such folder"]
    if not args.root_given:
        notes.append(f"the default, ./{defaults.SESSIONS_DIR} of the current folder")
    why = f" ({'; '.join(notes)})" if notes else ""
    return f"no sessions under {where}{why}: --sessions-dir DIR lists another folder"


def _list(args: argparse.Namespace) -> int:
    from workbench.store.listing import list_sessions

    if not Path(args.root).is_dir():  # the default, outside a checkout (a given one: exit 2)
        if args.json:
            _dump({"root": str(Path(args.root).resolve()), "sessions": [], "skipped": [],
                   "missing": True})  # fmt: skip
        else:
            print(_nothing_here(args))
        return 0
    infos = list_sessions(args.root)
    if args.json:
        _dump(
            {
                "root": str(args.root),
                "sessions": [i.to_dict() for i in infos],
                "skipped": [{"path": str(p), "error": e} for p, e in infos.skipped],
            }
        )
    elif not infos:
        print(_nothing_here(args))
    else:
        # the folder name (<when>_<slug>) is what SESSION arguments match
        rows = [["session", "when (UTC)", "status", "GPU", "commit", "sources", "recommendation"]]
        rows += [
            [
                i.path.name,
                i.created.replace("T", " ")[:16],
                i.status,
                i.gpu or "-",
                (i.commit or "-") + ("+" if i.dirty else ""),
                _sources(i),
                _recs(i.recommendations),
            ]
            for i in infos
        ]
        _fit.print_rows(rows[0], rows[1:], _fit.policy(rows[0], **LIST_FIT), args.fit_width)
        if any(i.stale for i in infos):
            from workbench.store.provenance import STALE_NOTE

            print(STALE_NOTE)
    for p, e in infos.skipped:
        print(f"skipped {p.name}: {e}", file=sys.stderr)
    return 0


def _gpu_line(s: Session) -> str:
    gpu = s.gpu
    bits = [f"{k} {gpu[k]}" for k in ("driver", "cuda", "torch", "sm") if gpu.get(k)]
    return f"{gpu.get('name', 'unknown')}" + (f" ({', '.join(bits)})" if bits else "")


def _show(args: argparse.Namespace) -> int:
    from workbench.analysis import analyse
    from workbench.analysis.counters import text_lines
    from workbench.analysis.words import boards_text
    from workbench.report.rerun import session_rerun
    from workbench.store import counters
    from workbench.store.provenance import session_staleness, source_digest
    from workbench.store.session import load_session

    s = load_session(resolve(args.session, args.root))
    if args.phases:
        return _phases(s, args.json)
    an = analyse(s, args.m)
    hw = counters.load(s.path)
    results, recs = an.results, list(an.recommendations.values())
    files = s.provenance.get("files")
    st = session_staleness(s)  # the one rule of list, show, report, TUI and export
    if args.json:
        _dump(
            {
                "path": str(s.path),
                "status": s.status,
                "warnings": s.warnings,
                "sources": source_digest(files),
                "stale": st.differ if st.stale or st.differ is None else [],
                "same_code": st.differ if st.same_code else [],
                "meta": s.meta,
                "m": an.m,
                "comparisons": [r.to_dict() for r in results],
                "recommendations": [r.to_dict() for r in recs],
                "counters": hw,
                "boards": s.boards,
            }
        )
        return 0
    git = s.provenance.get("git") or {}
    print(f"session   {s.path.name}  ({s.status})")
    print(f"path      {s.path}")
    print(f"created   {s.created}   finished {s.finished or '-'}")
    print(f"GPU       {_gpu_line(s)}")
    commit = str(git.get("commit") or "unknown")[:10] + (" (dirty)" if git.get("dirty") else "")
    print(f"commit    {commit}   workbench {s.provenance.get('version', '?')}")
    digest = source_digest(files)
    print(f"sources   {digest + '  ' if digest else ''}{st.text()}")
    cfg = " ".join(f"{k}={json.dumps(v)}" for k, v in s.config.items())
    if args.fit_width is None or len(cfg) + 10 <= args.fit_width:
        print(f"config    {cfg or '-'}")
    else:  # a line of a thousand characters: the command below says what differs
        print(f"config    (left out to fit {args.fit_width} columns; {_fit.WIDE_HINT})")
    again = session_rerun(s)
    print(f"rerun     {again.text()}" + (f"  (not rebuilt: {again.error})" if again.error else ""))
    if again.unmatched:
        print(f"          and, set by no option today: {', '.join(again.unmatched)}")
    print(f"samples   {len(s.samples)} in {len(results)} comparisons; {len(s.nvml)} NVML readings")
    workers = boards_text(s)
    if workers:
        print(f"workers   {workers}")
    if s.meta.get("error"):
        print(f"error     {s.meta['error']}")
    for w in s.warnings:
        print(f"warning   {w}")
    if results or recs:
        from workbench.commands._output import console
        from workbench.commands._tables import render_results

        print(flush=True)
        render_results(console(stderr=False, width=args.fit_width), an, args.fit_width)
    for line in text_lines(hw):
        print(line)
    return 0


def _phases(s: Session, as_json: bool) -> int:
    """`sessions show --phases`: the phase table (workbench.run.phases) alone."""
    from workbench.run.phases import phase_lines, phase_table

    table = phase_table(s)
    if as_json:
        _dump(table.to_dict())
    else:
        print("\n".join(phase_lines(table)))
    return 0


# `sessions compare`'s columns of the shift table (workbench/analysis/shifts.py), in order
CMP_COLUMNS = ("comparison", "ms_a", "ms_b", "ratio_a", "ratio_b", "verdicts", "shift", "interval",
               "changed")  # fmt: skip


def _compare(args: argparse.Namespace) -> int:
    from workbench.analysis import compare_sessions, shifts
    from workbench.store.session import load_session

    paths = [resolve(args.a, args.root), resolve(args.b, args.root)]
    distinct_sessions([args.a, args.b], paths, "a session compared with itself shifts nothing")
    a, b = (load_session(p) for p in paths)
    d = compare_sessions(a, b, args.m)
    if not d.shifts:
        raise BadArgument(
            f"{a.path.name} and {b.path.name} have no comparison in common, nothing to compare "
            f"(A: {', '.join(d.only_a) or 'none'}; B: {', '.join(d.only_b) or 'none'})"
        )
    if args.json:
        _dump(d.to_dict())
    else:
        print(f"A  {a.path.name}  ({a.status}, {a.gpu_name or 'GPU unknown'})")
        print(f"B  {b.path.name}  ({b.status}, {b.gpu_name or 'GPU unknown'})")
        for w in d.warnings:
            print(f"!! WARNING: {w}")
        for n in d.notes:
            print(f"note: {n}")
        if d.shifts:
            table = shifts.shift_table(d, CMP_COLUMNS)
            head = list(table.headers)
            _fit.print_rows(
                head,
                [list(r.cells) for r in table.rows],
                _fit.policy(head, **COMPARE_FIT),
                args.fit_width,
            )
            for s in d.shifts:  # the block diagnostic (§7.8), where it finds something
                for name, r in (("A", s.a), ("B", s.b)):
                    g = r.diagnostic
                    if g is not None and (g.rests_on or g.flagged):
                        print(f"  {name} {s.id}: blocks: {g.summary()}")
            print(shifts.CHANGED_LEGEND)
            print(f"method: {d.method}")
        else:
            print("no comparison id is present in both sessions")
        for name, ids in (("A", d.only_a), ("B", d.only_b)):
            if ids:
                print(f"only in {name}: {', '.join(ids)}")
    if d.warnings:
        print(
            f"workbench sessions compare: {len(d.warnings)} WARNING(S): the sessions are not like for like",
            file=sys.stderr,
        )
    return 0


def _pool(args: argparse.Namespace) -> int:
    from workbench.analysis import pool_sessions
    from workbench.analysis.fleet import fleet, models
    from workbench.analysis.words import holds_for_boards
    from workbench.core.errors import SessionError
    from workbench.store.session import load_session

    paths = [resolve(a, args.root) for a in args.sessions]
    distinct_sessions(args.sessions, paths, "a session cannot be its own replicate")
    sessions = []
    for p in paths:
        try:
            sessions.append(load_session(p, nvml=False))  # pooling reads no NVML readings
        except SessionError as e:  # one bad replicate must not hide what the others say
            print(f"workbench sessions pool: skipped: {e}", file=sys.stderr)
    if len(sessions) < 2:
        raise BadArgument(
            f"pool needs at least 2 loadable sessions, got {len(sessions)} of {len(paths)}"
        )
    p = pool_sessions(sessions, args.m)
    if not p.rows:
        raise BadArgument(
            f"the {len(sessions)} sessions have no comparison in common, nothing to pool "
            f"({'; '.join(f'{s.path.name}: {len(s.comparisons)} comparison(s)' for s in sessions)})"
        )
    # before the table, so that a reader meets them first; one line per difference, naming
    # the sessions it concerns (workbench.analysis.pool)
    for w in p.warnings:
        print(f"!! WARNING: {w}", file=sys.stderr)
    # where the noise is, per level, for the comparisons a recommendation reads (REML)
    fits = {r.id: r.components() for r in p.rows if r.role == "main"}
    model = fleet(p, fits)  # the GPU model's word, where the sessions ran on several boards
    if args.json:
        _dump(
            {
                "sessions": [str(s.path) for s in sessions],
                "comparisons": [r.to_dict() for r in p.rows],
                "components": {
                    cid: None
                    if f is None
                    else {c.level: {"sd": c.sd, "low": c.low, "high": c.high} for c in f.components}
                    for cid, f in fits.items()
                },  # fmt: skip
                "recommendations": [r.to_dict() for r in p.recommendations],
                "model": None if model is None else model.to_dict(),
                "warnings": p.warnings,
                "method": p.method,
            }
        )
    else:
        boards = p.rows[0].board_groups() if p.rows else {}
        for i, s in enumerate(sessions, 1):
            print(f"{i}  {s.path.name}  ({s.status}, {s.gpu_name or 'unknown GPU'})")
        if len(boards) > 1:
            each = "; ".join(
                f"{k[:12]}: {', '.join(str(i + 1) for i in idx)}" for k, idx in boards.items()
            )
            print(f"{len(boards)} boards ({each}): estimates and intervals are over boards")
        elif boards and "?" not in boards:  # one board: what the pooled interval holds for
            print(f"1 board ({next(iter(boards))[:12]}): the pooled interval is over sessions; "
                  f"{holds_for_boards(1)}")  # fmt: skip
        rows = [["comparison", "session estimates B/A", "range", "pooled [95 % CI]",
                 "CIs with pooled", "session verdicts", "rests on block", "pooled"]]  # fmt: skip
        rows += [
            [
                r.id,
                " ".join(num(x, none=DASH) for x in r.medians),
                f"{num(r.low, none='-')}..{num(r.high, none='-')}",
                f"{num(r.estimate, none='-')} [{num(r.interval[0], none='-')}, {num(r.interval[1], none='-')}]",
                f"{r.covered}/{len(r.cis)}",
                ",".join(r.words),
                " ".join(",".join(map(str, b)) or "-" for b in r.rests_on),
                r.verdict,
            ]  # fmt: skip
            for r in p.rows
        ]
        print(_table(rows))
        for r in p.rows:  # the same block at one end of every session: not exchangeable
            ext = r.same_block_extreme()
            if ext is not None and ext[3] < 0.05:
                print(
                    f"  {r.id}: block {ext[1]} is the {ext[0]} in {ext[2]} of "
                    f"{len(r.block_ratios)} sessions (p = {ext[3]:.2g} if the blocks were "
                    "exchangeable)"
                )
        for r in p.rows:  # the rows a recommendation reads: is one run's interval enough?
            for note in (r.coverage_note(), r.board_note()):
                if note is not None:
                    print(f"  {note}")
        _print_components(fits)
        for rec in p.recommendations:
            print(f"recommendation {rec.kernel}: {rec.decision} ({rec.arm})")
            for e in rec.evidence:
                print(f"    {e}")
        if model is not None:
            _print_model(model)
        elif len(boards) > 1:
            print(f"no word for a GPU model: the sessions ran on {', '.join(models(p))}")
        print(f"method: {p.method}")
    return 0


def _print_model(model: Any) -> None:
    """`sessions pool`'s word for the GPU model (workbench.analysis.fleet): per comparison the
    interval over boards, its verdict, whether the boards agree, the REML board SD and how many
    runs' intervals hold the model's estimate; then the recommendation `export` writes."""
    from workbench.analysis.words import boards_agree

    each = "; ".join(f"{k[:12]}: {len(v)} runs" for k, v in model.boards.items())
    print(f"for the model {model.model}: {len(model.boards)} boards ({each}); {model.holds_for()}")
    pct = lambda x: num(x * 100, ".3f")  # noqa: E731
    rows = [["comparison", "over boards [95 % CI]", "verdict", "boards", "board SD % [95 %]",
             "runs' CIs holding it"]]  # fmt: skip
    for r in model.results:
        v, c = r.verdict, model.checks[r.id]
        sd = c.board_sd
        rows.append([
            r.id, f"{num(v.median, none='-')} [{num(v.ci_low, none='-')}, {num(v.ci_high, none='-')}]",
            v.words, boards_agree(c.p, c.differ),
            "-" if sd is None else f"{pct(sd.sd)} [{pct(sd.low)}, {pct(sd.high)}]",
            f"{c.held}/{c.runs}",
        ])  # fmt: skip
    print(_table(rows))
    for rec in model.recommendations:
        print(
            f"recommendation for the model {model.model}, {rec.kernel}: {rec.decision} ({rec.arm})"
        )
        for e in rec.evidence:
            print(f"    {e}")


def _print_components(fits: dict[str, Any]) -> None:
    """`sessions pool`'s table of variance components (workbench.analysis.components)."""
    from workbench.analysis.components import LEVELS

    fits = {k: f for k, f in fits.items() if f is not None}
    if not fits:
        return
    pct = lambda x: num(x * 100, ".3f")  # noqa: E731
    rows = [["comparison", *(f"{lv} SD %" for lv in LEVELS)]]
    for cid, f in fits.items():
        by = {c.level: c for c in f.components}
        rows.append([cid] + [f"{pct(by[lv].sd)} [{pct(by[lv].low)}, {pct(by[lv].high)}]"
                             if lv in by else "n/e" for lv in LEVELS])  # fmt: skip
    print("where the noise is: REML SDs of the log pair ratio per level, 95 % profile intervals "
          "(n/e: one group, not estimable; docs/DESIGN.md §5.10.1)")  # fmt: skip
    print(_table(rows))


def _check_args(args: argparse.Namespace) -> None:
    """Bad options exit 2 before any session is read (--m is checked by workbench.core.stats)."""
    from workbench.commands._paths import existing_dir
    from workbench.core.limits import check_min_effect

    if args.action == "list" and (args.root_given or Path(args.root).exists()):
        existing_dir(args.root, "--sessions-dir")
    elif getattr(args, "m", None) is not None:
        check_min_effect(args.m, "--m")  # the rule of ab --min-effect (workbench.core.limits)


def run(args: argparse.Namespace) -> int:
    args.root_given = args.root is not None  # else the default, ./sessions, is where it looks
    args.root = defaults.SESSIONS_DIR if args.root is None else args.root
    _check_args(args)
    actions = {"list": _list, "show": _show, "compare": _compare, "pool": _pool, "pack": _pack}
    # on a terminal (or --width N) the tables and lines fit it; piped or --wide, whole rows
    args.fit_width = _fit.width_of(args) if args.action in FITTED else None
    with _fit.folded_stdout(args.fit_width):
        return actions[args.action](args)


def _pack(args: argparse.Namespace) -> int:
    from workbench.store.session import pack_session

    folders = [resolve(a, args.root) for a in args.sessions]  # every name checked first
    for folder in folders:
        saved = pack_session(folder)
        print(f"{folder}: packed ({saved / 1e6:.1f} MB saved)" if saved else f"{folder}: packed")
    return 0
