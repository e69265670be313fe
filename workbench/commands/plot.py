"""`workbench plot SESSION [SESSION ...]`: draw sessions' figures (PNG/SVG/PDF) into a folder.

With two sessions or more (replicate runs of one configuration) it also draws the replicates
figure: each session's ratio and CI side by side per comparison. ``--floor-us`` or
``--floor-file`` adds µs per call of each arm against a streaming floor measured on the GPU
(benchmarks/floor_probe.cu; e.g. benchmarks/results/h200_floor.txt).
"""

from __future__ import annotations

import argparse
import sys

from workbench.commands._output import not_stdout
from workbench.commands._paths import add_sessions_dir, distinct_sessions, output_dir, writable_dir
from workbench.core import defaults
from workbench.core.errors import EXIT_INTERRUPTED, BadArgument

HELP = (
    "draw sessions' figures (pair ratios, samples, distributions, NVML, calibration, floor) and, "
    "for several sessions, their replicates"
)


SESSIONS = defaults.SESSIONS_DIR


def add_session_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "session",
        metavar="SESSION",
        help='session folder, its session.json, a name under --sessions-dir, or "latest" (the '
        "newest there)",
    )
    add_sessions_dir(p, 'where session names and "latest" are looked up', default=SESSIONS)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "sessions",
        metavar="SESSION",
        nargs="+",
        help='session folder, its session.json, or "latest"; several: replicates too',
    )
    add_sessions_dir(p, 'where session names and "latest" are looked up', default=SESSIONS)
    p.add_argument(
        "--out",
        default=defaults.PLOTS_DIR,
        metavar="DIR",
        help="output folder (default: %(default)s)",
    )
    p.add_argument(
        "--format",
        default="png,svg",
        metavar="FMT[,FMT]",
        help="comma-separated formats: png, svg, pdf (default: png,svg)",
    )
    p.add_argument(
        "--figure",
        metavar="KIND[,KIND]",
        help="draw only these kinds of figure: summary, ratios, distributions, nvml, "
        "calibration, floor, samples, replicates (default: every figure)",
    )
    floor = p.add_mutually_exclusive_group()
    floor.add_argument(
        "--floor-us",
        metavar="K/S=US,...",
        help="streaming floor in µs per call, e.g. w13/hot=1.94,w2/rotating=2.18: adds the floor figure",
    )
    floor.add_argument(
        "--floor-file",
        metavar="FILE",
        help="the floor from a file of KERNEL/SET = US lines (# comments)",
    )


def parse_formats(text: str) -> tuple[str, ...]:
    from workbench.plots import FORMATS

    fs = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in fs if f not in FORMATS]
    if bad or not fs:
        raise BadArgument(f"--format {text!r}: choose from {', '.join(FORMATS)}")
    return fs


def parse_kinds(args: argparse.Namespace) -> tuple[str, ...] | None:
    """--figure's kinds (None: every figure), checked against what the command line can draw."""
    from workbench.plots import KINDS

    if args.figure is None:
        return None
    ks = tuple(k.strip().lower() for k in args.figure.split(",") if k.strip())
    bad = [k for k in ks if k not in KINDS]
    if bad or not ks:
        raise BadArgument(f"--figure {args.figure!r}: choose from {', '.join(KINDS)}")
    if "floor" in ks and args.floor_us is None and args.floor_file is None:
        raise BadArgument("--figure floor: give the floor (--floor-us or --floor-file)")
    if "replicates" in ks and len(args.sessions) < 2:
        raise BadArgument("--figure replicates: give two sessions or more")
    return ks


def _floor(args: argparse.Namespace):
    from workbench.plots import parse_floor, read_floor_file

    if args.floor_us is not None:
        return parse_floor(args.floor_us, "--floor-us"), "--floor-us " + args.floor_us
    if args.floor_file is not None:
        return read_floor_file(args.floor_file), args.floor_file
    return None, ""


def _sessions(args: argparse.Namespace) -> list:
    """Load every SESSION once; the same session twice is an error (it is no replicate)."""
    from workbench.report.markdown import resolve_session
    from workbench.store.session import load_session

    paths = [resolve_session(a, args.root) for a in args.sessions]
    distinct_sessions(args.sessions, paths, "the same session twice is no replicate")
    return [load_session(p) for p in paths]


def run(args: argparse.Namespace) -> int:
    from workbench.analysis import analyse
    from workbench.plots import floor_keys_missing, iter_plots, iter_replicates

    formats = parse_formats(args.format)
    kinds = parse_kinds(args)
    not_stdout(args.out, "--out", "the figures are files in a folder")
    writable_dir(args.out, "--out")  # the pre-flight: before any session is read
    floor, source = _floor(args)
    sessions = _sessions(args)
    out = output_dir(args.out, "--out")
    written = 0
    try:
        analyses = []  # each session analysed once, for its figures and the replicates alike
        for s in sessions:
            for w in s.warnings:
                print(f"workbench plot: warning: {s.path.name}: {w}", file=sys.stderr)
            an = analyse(s)
            analyses.append(an)
            if floor:
                missing = floor_keys_missing(an, floor)
                if missing:
                    print(
                        f"workbench plot: note: {s.path.name} timed no {', '.join(missing)}: "
                        "no floor panel for it",
                        file=sys.stderr,
                    )
            for path in iter_plots(an, out, formats, floor, source, kinds):
                print(path)
                written += 1
        if len(sessions) > 1 and (kinds is None or "replicates" in kinds):
            from workbench.plots.replicates import source_groups

            groups = source_groups(sessions)
            if len(groups) > 1:
                print(
                    "workbench plot: WARNING: the replicates were measured on different kernel "
                    "sources: "
                    + "; ".join(
                        f"{d}: {', '.join(sessions[i - 1].path.name for i in ix)}"
                        for d, ix in groups.items()
                    ),
                    file=sys.stderr,
                )
            for path in iter_replicates(analyses, out, formats):
                print(path)
                written += 1
    except KeyboardInterrupt:
        # every file listed above is complete (written to a temporary name, then renamed)
        print(f"workbench plot: interrupted; {written} file(s) written to {out}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if kinds is not None and written == 0:  # only --figure can leave nothing to draw
        names = ", ".join(s.path.name for s in sessions)
        raise BadArgument(f"--figure {args.figure}: {names} has no figure of that kind")
    return 0
