"""`workbench plot SESSION`: draw a session's figures (PNG/SVG) into a folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.commands._paths import output_dir
from workbench.errors import BadArgument

HELP = "draw a session's figures (pair ratios, samples over time, distributions, NVML) as PNG/SVG"


def add_session_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "session",
        metavar="SESSION",
        help='session folder, its session.json, or "latest" (the newest under --root)',
    )
    p.add_argument("--root", default="sessions", help='where "latest" looks (default: sessions)')


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_session_argument(p)
    p.add_argument("--out", default="plots", metavar="DIR", help="output folder (default: plots)")
    p.add_argument(
        "--format",
        default="png,svg",
        metavar="FMT[,FMT]",
        help="comma-separated formats: png, svg, pdf (default: png,svg)",
    )


def parse_formats(text: str) -> tuple[str, ...]:
    from workbench.plots import FORMATS

    fs = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in fs if f not in FORMATS]
    if bad or not fs:
        raise BadArgument(f"--format {text!r}: choose from {', '.join(FORMATS)}")
    return fs


def run(args: argparse.Namespace) -> int:
    from workbench.plots import plot_session
    from workbench.report import resolve_session
    from workbench.session import load_session

    formats = parse_formats(args.format)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise BadArgument(f"--out {args.out!r} is a file, not a folder")
    session = load_session(resolve_session(args.session, args.root))
    for w in session.warnings:
        print(f"workbench plot: warning: {w}", file=sys.stderr)
    out = output_dir(args.out, "--out")
    for path in plot_session(session, out, formats):
        print(path)
    return 0
