"""`workbench tui` (also `workbench` with no arguments): the Textual app of docs/DESIGN.md §9."""

from __future__ import annotations

import argparse

from workbench.commands._paths import add_sessions_dir
from workbench.core import defaults

HELP = "open the interactive workbench (the default with no command)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_sessions_dir(p, "folder of saved sessions, where runs are saved too", dest="sessions",
                     old="--sessions", default=defaults.SESSIONS_DIR)  # fmt: skip
    p.add_argument(
        "--plots-dir",
        "--plots",
        dest="plots",
        default=defaults.PLOTS_DIR,
        metavar="DIR",
        help="where exports go (default: %(default)s; --plots is its old name)",
    )
    p.add_argument(
        "--browse",
        action="store_true",
        help="no runs, even on a machine with a GPU: saved sessions (and builds) only",
    )
    p.add_argument(
        "--nvml-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between NVML panel updates (default: 1.0)",
    )
    g = p.add_argument_group("headless (no terminal needed)")
    g.add_argument(
        "--screenshot",
        metavar="SVG",
        help="run the app headless, save an SVG of its final screen here and exit",
    )
    g.add_argument(
        "--run",
        action="store_true",
        help="with --screenshot: first run the form's default A/B and wait for its results",
    )
    g.add_argument(
        "--size", default=None, metavar="WxH", help="headless screen size (default: 160x48)"
    )


def run(args: argparse.Namespace) -> int:
    from workbench.commands._paths import not_a_file
    from workbench.core.errors import BadArgument

    not_a_file(args.sessions, "--sessions-dir")
    not_a_file(args.plots, "--plots-dir")
    if not args.nvml_interval > 0:
        raise BadArgument(f"--nvml-interval={args.nvml_interval} must be > 0 seconds")
    if args.run and not args.screenshot:
        raise BadArgument("--run needs --screenshot SVG (interactively, press r instead)")
    if args.size is not None and not args.screenshot:
        raise BadArgument(f"--size {args.size!r} needs --screenshot SVG (a terminal has its own)")
    size = None
    if args.screenshot:
        from workbench.commands._output import not_stdout
        from workbench.commands._paths import output_file
        from workbench.tui.headless import parse_size

        size = parse_size(args.size or "160x48")
        not_stdout(args.screenshot, "--screenshot", "the screenshot is an SVG file")
        output_file(args.screenshot, "--screenshot", "screen.svg")
    # Textual is imported here, never at module level: `workbench --help` must stay light.
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.engine import EngineBackend

    backend = EngineBackend(args.sessions, args.plots, browse_only=args.browse)
    app = WorkbenchApp(backend, monitor_interval=args.nvml_interval)
    if args.screenshot:
        from pathlib import Path

        from workbench.tui.headless import screenshot

        return screenshot(app, Path(args.screenshot), args.run, size)
    app.run()
    return app.return_code or 0  # 130 after Ctrl-C
