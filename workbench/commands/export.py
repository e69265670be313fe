"""`workbench export SESSION... [--format json|per-shape] [--out PATH] [--model]`: the decision
file an inference engine reads (docs/EXPORT.md).

Per device (named as vLLM keys it) and MoE shape: the reader chosen per kernel and layout, the
verdicts, ratios, intervals and block counts behind the choice, the sessions and their source
hashes. Sessions of several GPUs of one model merge into one entry (pooled; over two or more
boards the model's decision, the board the unit; ``--model`` refuses any other). ``--format json``
writes one file (stdout by default); ``--format per-shape`` writes a folder of per-shape decision
files, one ``E=...,N=...,device_name=....json`` per device and (E, N): named as vLLM names its
tuned MoE configs, but read by workbench/core/decision.py (vLLM's own loader would fail on them).
``--format vllm`` is its old name, kept for one release with a deprecation line.
"""

from __future__ import annotations

import argparse
import json
import sys

from workbench.commands._paths import add_sessions_dir
from workbench.core import defaults
from workbench.core.errors import BadArgument

HELP = "write the reader decisions of sessions as a file an inference engine reads"
FORMATS = ("json", "per-shape")
# old names kept for one release (each run says so in one line), then gone
DEPRECATED = {"vllm": "per-shape"}
DEFAULT_FOLDER = "decisions"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "sessions", metavar="SESSION", nargs="+", help="session folders, names or 'latest'"
    )
    p.add_argument(
        "--format",
        default="json",
        help="json (one file) or per-shape (a folder of per-shape decision files, E=..,N=.., "
        "named as vLLM names its MoE configs but read by workbench/core/decision.py, not by "
        "vLLM's loader; 'vllm' is its deprecated name)",
    )
    p.add_argument(
        "--out",
        default=None,
        help=f"json: a file (default stdout); per-shape: a folder (default {DEFAULT_FOLDER}/)",
    )
    add_sessions_dir(p, "where session names are looked up", default=defaults.SESSIONS_DIR)
    p.add_argument("--m", type=float, default=None, help="minimum effect (default: each session's)")
    p.add_argument(
        "--model",
        action="store_true",
        help="every entry must be its GPU model's decision (sessions of two or more boards, "
        "the board the unit); one board's is refused (exit 2) instead of written as that board's",
    )


def run(args: argparse.Namespace) -> int:
    from workbench.commands._output import not_stdout, output_target
    from workbench.commands._paths import distinct_sessions, output_dir, output_file
    from workbench.commands.sessions import resolve
    from workbench.core.files import write_whole
    from workbench.report import decisions
    from workbench.store.session import load_session

    fmt = DEPRECATED.get(args.format, args.format)
    if fmt not in FORMATS:
        raise BadArgument(f"--format {args.format!r} is unknown: use one of {', '.join(FORMATS)}")
    if args.m is not None and not 0 < args.m < 0.5:
        raise BadArgument(f"--m {args.m!r} must be a fraction in (0, 0.5)")
    # the output first (pre-flight): a bad one costs no session load
    target = output_target(args.out)
    if fmt == "json":
        out = None if target is None else output_file(target, "--out", "decisions.json")
    else:
        not_stdout(args.out, "--out", f"--format {args.format} writes a folder of files")
        folder = output_dir(args.out or DEFAULT_FOLDER, "--out")
    paths = [resolve(a, args.root) for a in args.sessions]
    distinct_sessions(args.sessions, paths, "its decisions would count twice")
    sessions = [load_session(p) for p in paths]
    doc, notes = decisions.build(sessions, args.m, model=args.model)
    if fmt == "json":
        text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
        if out is None:
            sys.stdout.write(text)
        else:
            write_whole(out, lambda tmp: tmp.write_text(text), "--out")
            print(f"workbench export: wrote {out}", file=sys.stderr)
        _said(notes, sessions)
        return 0
    for name, part in decisions.split(doc).items():
        text = json.dumps(part, indent=1) + "\n"
        # whole or not at all: an engine may be reading the folder
        write_whole(folder / name, lambda tmp, text=text: tmp.write_text(text), "--out")
        print(f"workbench export: wrote {folder / name}", file=sys.stderr)
    print(
        f"workbench export: {folder}/ is for workbench/core/decision.py (decision.load), "
        "not a vLLM config folder: vLLM's loader would fail on these files",
        file=sys.stderr,
    )
    if args.format in DEPRECATED:  # once the files are written: a refusal stays one line
        print(
            f"workbench export: --format {args.format} is deprecated, its files are no vLLM "
            f"configs: use --format {fmt} (the same files; '{args.format}' goes in the next "
            "release)",
            file=sys.stderr,
        )
    _said(notes, sessions)
    return 0


def _said(notes: list[str], sessions: list) -> None:
    """What the document's build noted (sessions skipped, one board's entries), then the stale
    sessions: once it is written, so that a failed write stays one line."""
    for n in notes:
        print(f"workbench export: {n}", file=sys.stderr)
    _warn_stale(sessions)


def _warn_stale(sessions: list) -> None:
    """One line, once the document is written, naming the sessions measured on other kernels
    than the working tree's (provenance.staleness: the rule of list, show, report and TUI)."""
    from workbench.store.provenance import session_staleness

    stale = {s.name: st for s in sessions if (st := session_staleness(s)).stale}
    if stale:  # said, not refused: evidence of older kernels may be what the user exports
        first = next(iter(stale.values()))
        many = f" (the files of {next(iter(stale))})" if len(stale) > 1 else ""
        verb = "is" if len(stale) == 1 else "are"
        print(
            f"workbench export: warning: {', '.join(stale)} {verb} {first.text()}{many}",
            file=sys.stderr,
        )
