"""`workbench report SESSION`: the Markdown an engineer pastes into a pull request."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.commands._output import output_target
from workbench.commands._paths import output_dir, output_file, writable_dir
from workbench.commands.plot import add_session_argument
from workbench.core import defaults
from workbench.core.errors import BadArgument
from workbench.core.files import write_whole

HELP = "Markdown report of a session, recomputed from its journals (tables, verdicts, plots)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_session_argument(p)
    p.add_argument(
        "--output", "-o", metavar="FILE", help="write here instead of stdout (-: stdout)"
    )
    p.add_argument(
        "--plots-dir",
        default=None,
        metavar="DIR",
        help="where the session's figures are (drawn there first if missing; default: "
        f"{defaults.PLOTS_DIR})",
    )
    p.add_argument("--no-plots", action="store_true", help="neither draw nor link figures")


def run(args: argparse.Namespace) -> int:
    from workbench.plots import existing_plots, plot_session
    from workbench.report.markdown import render_report, resolve_session
    from workbench.store.session import load_session

    if args.no_plots and args.plots_dir is not None:
        raise BadArgument(f"--plots-dir {args.plots_dir!r} contradicts --no-plots: give one")
    figures = args.plots_dir or defaults.PLOTS_DIR
    target = output_target(args.output)
    out = None if target is None else output_file(target, "--output")
    if not args.no_plots:
        writable_dir(figures, "--plots-dir")  # the pre-flight: before the session is read
    session = load_session(resolve_session(args.session, args.root))
    for w in session.warnings:
        print(f"workbench report: warning: {w}", file=sys.stderr)
    plots_dir = None
    if not args.no_plots:
        plots_dir = output_dir(figures, "--plots-dir")
        if not existing_plots(session.path.name, plots_dir):
            print(f"workbench report: drawing the figures into {plots_dir}/", file=sys.stderr)
            plot_session(session, plots_dir, ("png", "svg"))
    # links are relative to where the Markdown lives, so they work once pasted next to it
    base = out.resolve().parent if out else Path.cwd()
    text = render_report(session, plots_dir=plots_dir, link_base=base)
    if out is None:
        sys.stdout.write(text)
        return 0
    # written whole or not at all: an interrupted or failed write leaves no half report behind
    write_whole(out, lambda tmp: tmp.write_text(text, encoding="utf-8"), "--output")
    print(out, file=sys.stderr)
    return 0
