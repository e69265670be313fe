"""`workbench tui` (also `workbench` with no arguments): the Textual app of DESIGN §9."""

from __future__ import annotations

import argparse

HELP = "open the interactive workbench (the default with no command)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sessions",
        default="sessions",
        metavar="DIR",
        help="folder of saved sessions, where runs are saved too (default: sessions)",
    )
    p.add_argument(
        "--plots", default="plots", metavar="DIR", help="where exports go (default: plots)"
    )
    p.add_argument(
        "--browse",
        action="store_true",
        help="browse saved sessions only, even on a machine with a GPU",
    )
    p.add_argument(
        "--nvml-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between NVML panel updates (default: 1.0)",
    )


def run(args: argparse.Namespace) -> int:
    from workbench.errors import BadArgument

    if not args.nvml_interval > 0:
        raise BadArgument(f"--nvml-interval={args.nvml_interval} must be > 0 seconds")
    # Textual is imported here, never at module level: `workbench --help` must stay light.
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.engine import EngineBackend

    backend = EngineBackend(args.sessions, args.plots, browse_only=args.browse)
    WorkbenchApp(backend, monitor_interval=args.nvml_interval).run()
    return 0
