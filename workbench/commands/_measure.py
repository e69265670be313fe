"""What `workbench ab` and `workbench calibrate` share: protocol options, driving the Runner
with a progress bar on stderr, Ctrl-C handling, build/numerics error display and plots.

Light to import: rich, torch and the runner are imported inside the functions.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from workbench.commands import _tables
from workbench.commands._output import console as make_console
from workbench.commands._paths import writable_dir
from workbench.core import defaults, limits
from workbench.core.errors import (
    EXIT_GPU_FAULT,
    EXIT_INTERRUPTED,
    BadArgument,
    BuildError,
    NumericsError,
)
from workbench.data.shapes import add_shape_arguments
from workbench.measure.abba import ProtocolConfig


def add_protocol_arguments(
    p: argparse.ArgumentParser, replays_default: int, workers: str = "--workers"
) -> None:
    """The protocol's options; ``workers`` spells the option of the worker processes beside
    --single-process (`workbench tune`: --confirm-workers, its --workers are screening's)."""
    g = p.add_argument_group("timing protocol (docs/DESIGN.md §5)")
    d = ProtocolConfig()
    _worker_arguments(g, workers)
    g.add_argument(
        "--blocks",
        type=int,
        default=d.blocks,
        help=f"blocks per comparison and worker, each with its banks at a fresh memory placement "
        f"({d.blocks})",
    )
    g.add_argument(
        "--pairs", type=int, default=d.pairs, help=f"ABBA pairs per block (default {d.pairs})"
    )
    g.add_argument(
        "--placement-seed",
        type=int,
        default=None,
        help="seed of the blocks' placements (default: fresh per run, journaled; give a "
        "session's seed to replay its blocks)",
    )
    g.add_argument(
        "--adaptive",
        action="store_true",
        help="add blocks until the ratio's 95%% CI half-width <= --target or --budget ends",
    )
    g.add_argument(
        "--target", type=float, default=None, help=f"adaptive CI half-width ({d.target})"
    )
    g.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time budget per comparison (and, with ab --settle, for the main round's looks)",
    )
    g.add_argument(
        "--max-blocks",
        type=int,
        default=d.max_blocks,
        help=f"adaptive cap on blocks ({d.max_blocks})",
    )
    g.add_argument(
        "--warmup-blocks",
        type=int,
        default=d.warmup_blocks,
        metavar="N",
        help="whole blocks of every comparison of a group, run and journaled but not counted, so "
        "that every counted block follows the same history (docs/DESIGN.md §5.5; default "
        f"{d.warmup_blocks})",
    )
    g.add_argument(
        "--warmup-sets",
        default="",
        metavar="SET[,SET]",
        help="the expert sets whose comparisons a warm-up block runs (default: every set; the "
        "banks are placed alike either way): a trial of a shorter warm-up (issue 44), e.g. rotating",
    )
    g.add_argument(
        "--calls",
        type=int,
        default=defaults.CALLS,
        help="kernel calls per graph replay (%(default)s)",
    )
    g.add_argument(
        "--replays",
        type=int,
        default=replays_default,
        help=f"timed replays per sample; a sample is their median ({replays_default})",
    )
    g.add_argument(
        "--retries",
        type=int,
        default=d.retries,
        help="re-measures of a flagged sample (%(default)s)",
    )
    g.add_argument(
        "--keep-flagged",
        action="store_true",
        help="keep a sample still flagged after its retries (default: exclude it, lose the pair)",
    )
    g.add_argument(
        "--min-effect",
        type=float,
        default=defaults.M,
        help="minimum effect m, a fraction (%(default)s)",
    )
    g.add_argument(
        "--seed",
        type=int,
        default=defaults.SEED,
        help="seed of weights, inputs and routing (%(default)s)",
    )
    add_shape_arguments(p)
    o = p.add_argument_group("output")
    o.add_argument(
        "--sessions-dir", default=defaults.SESSIONS_DIR, help="where sessions go (%(default)s)"
    )
    o.add_argument("--plots-dir", default=defaults.PLOTS_DIR, help="where plots go (%(default)s)")
    o.add_argument("--no-plots", action="store_true", help="do not draw plots after the run")
    o.add_argument("--slug", default=None, help="session folder suffix (default: the command)")
    o.add_argument("--json", action="store_true", help="machine-readable summary on stdout")


def _worker_arguments(g: Any, option: str) -> None:
    g.add_argument(
        option,
        type=int,
        default=None,
        metavar="N",
        help=f"fresh worker processes, one after another per GPU and one per GPU at once; the "
        f"interval runs over them (default {defaults.WORKERS})",
    )
    g.add_argument(
        "--single-process",
        action="store_true",
        help="measure in this process (debugging): every verdict then says that its interval "
        "ignores process variance",
    )


def add_ray_argument(g: Any, what: str) -> None:
    """--ray ADDRESS: ``what`` runs on every GPU of a Ray cluster (default $RAY_ADDRESS)."""
    g.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help=f"{what} on every GPU of this Ray cluster, one per GPU (default $RAY_ADDRESS; "
        "unset: local worker processes)",
    )


def ray_from_args(args: argparse.Namespace) -> str | None:
    """The Ray address (--ray, else $RAY_ADDRESS) or None; without ray installed, BadArgument
    naming where the address came from (exit 2). --single-process ignores $RAY_ADDRESS and
    refuses --ray."""
    from workbench.run.ray_workers import address, require_ray

    if getattr(args, "single_process", False):
        if args.ray:
            raise BadArgument(f"--single-process cannot be combined with --ray {args.ray}")
        return None
    ray = address(args.ray)
    if ray is not None:
        require_ray("--ray" if args.ray else "RAY_ADDRESS")
    return ray


# option, attribute, maximum, the maximum's name in workbench.core.limits
_UPPER = (
    ("--pairs", "pairs", limits.MAX_PAIRS, "MAX_PAIRS"),
    ("--blocks", "blocks", limits.MAX_BLOCKS, "MAX_BLOCKS"),
    ("--max-blocks", "max_blocks", limits.MAX_BLOCKS, "MAX_BLOCKS"),
    ("--warmup-blocks", "warmup_blocks", limits.MAX_BLOCKS, "MAX_BLOCKS"),
    ("--calls", "calls", limits.MAX_CALLS, "MAX_CALLS"),
    ("--replays", "replays", limits.MAX_REPLAYS, "MAX_REPLAYS"),
    ("--retries", "retries", limits.MAX_RETRIES, "MAX_RETRIES"),
    ("--budget", "budget", limits.MAX_BUDGET_S, "MAX_BUDGET_S"),
    ("--seed", "seed", limits.MAX_SEED, "MAX_SEED"),
    ("--target", "target", 1.0, "a fraction"),
)


def check_limits(args: argparse.Namespace) -> None:
    """Upper bounds and the slug rule (workbench.core.limits); lower bounds are checked by their
    owners (ProtocolConfig, make_config); then the folders the run writes (sessions, plots, the
    build cache). Torch-free: runs before any GPU check."""
    from workbench.kernels.build import writable_cache

    limits.check_slug(args.slug)
    for option, attr, maximum, name in _UPPER:
        limits.check_max(option, getattr(args, attr), maximum, name)
    limits.check_min_effect(args.min_effect, "--min-effect")
    if args.target is not None and not args.adaptive:
        raise BadArgument(f"--target {args.target!r} needs --adaptive (else --blocks decide)")
    # the pre-flight of every path the run will write, before any build or GPU check
    writable_dir(args.sessions_dir, "--sessions-dir")
    if not args.no_plots:
        writable_dir(args.plots_dir, "--plots-dir")
    writable_cache()


def workers_from_args(args: argparse.Namespace, option: str = "--workers") -> int:
    """``option`` (--workers), or 1 with --single-process (both at once is refused: exit 2)."""
    given = getattr(args, option.lstrip("-").replace("-", "_"))
    if args.single_process and given not in (None, 1):
        raise BadArgument(f"--single-process cannot be combined with {option} {given}")
    if args.single_process:
        return 1
    workers = defaults.WORKERS if given is None else given
    limits.check_max(option, workers, limits.MAX_WORKERS, "MAX_WORKERS")
    return workers


def protocol_from_args(args: argparse.Namespace) -> ProtocolConfig:
    """The validated protocol (BadArgument names the option)."""
    check_limits(args)
    return ProtocolConfig(
        pairs=args.pairs,
        blocks=args.blocks,
        placement_seed=args.placement_seed,
        adaptive=args.adaptive,
        target=ProtocolConfig.target if args.target is None else args.target,
        budget_s=args.budget,
        max_blocks=args.max_blocks,
        warmup_blocks=args.warmup_blocks,
        warmup_sets=tuple(
            x.strip() for x in getattr(args, "warmup_sets", "").split(",") if x.strip()
        ),
        retries=args.retries,
        keep_flagged=args.keep_flagged,
    ).validate()


class _Live:
    """Progress bar (one task per comparison) and event lines, both on stderr."""

    def __init__(self, console, pairs_per_block: int = 0, blocks: int = 1) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = console
        self.bar = Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stat]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,  # the results table follows; finished bars would only repeat it
        )
        self.tasks: dict[str, Any] = {}
        self.measuring = False
        self.ppb, self.blocks = pairs_per_block, blocks

    def progress(self, p) -> None:
        task = self.tasks.get(p.cmp)
        total = p.goal * self.blocks if p.block is not None else p.goal
        if task is None:
            task = self.tasks[p.cmp] = self.bar.add_task(p.cmp, total=total, stat="")
        done = p.complete + (p.block or 0) * (self.ppb or p.goal)
        stat = "" if p.block is None else f"block {p.block + 1}/{self.blocks} "
        stat += "" if p.median is None else f"B/A {p.median:.4f}"
        if p.half_width is not None:
            stat += f" ±{p.half_width * 100:.2f}%"
        if p.flagged:
            stat += f"  flagged {p.flagged}"
        self.bar.update(task, completed=min(done, total), total=total, stat=stat)

    def event(self, kind: str, data: Any) -> None:
        if kind == "session":
            self.measuring = True
        line = _tables.event_line(kind, data)
        if line:
            self.console.print(line)


def _sigint_handler(live: _Live, cancel: threading.Event):
    def handler(signum, frame):
        if live.measuring and not cancel.is_set():
            cancel.set()
            live.console.print(
                "[yellow]Ctrl-C: stopping after the sample in flight (Ctrl-C again aborts)[/]"
            )
            return
        raise KeyboardInterrupt

    return handler


def drive(cfg, args: argparse.Namespace):
    """Run ``cfg`` with progress on stderr. Returns (RunResult or None, exit code)."""
    from workbench.run.runner import Runner, require_gpu

    console = make_console()
    live = _Live(console, cfg.protocol.pairs, cfg.protocol.block_goal)
    cancel = threading.Event()
    runner = Runner(cfg, progress=live.progress, events=live.event, cancel=cancel)
    runner.start_workers()  # their imports overlap this process's torch import just below
    try:
        if cfg.ray is None:  # with --ray the workers run on the cluster's GPUs, not this host's
            require_gpu()  # NoGPUError -> exit 3 with the plain message, before any build
    except BaseException:
        runner.end_workers()
        raise
    in_main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, _sigint_handler(live, cancel)) if in_main else None
    try:
        with live.bar:
            result = runner.run()
    except BuildError as e:
        show_build_error(console, e)
        return None, e.exit_code
    except NumericsError as e:
        console.print(f"[bold red]numerics differ[/]: {e}")
        if runner.session is not None:
            console.print(f"session kept (failed) at {runner.session.path}")
        return None, e.exit_code
    except KeyboardInterrupt:
        if runner.session is None:
            console.print("[yellow]interrupted[/] before the session began: nothing was measured")
        else:
            console.print(
                f"[yellow]interrupted[/]: session kept as interrupted at {runner.session.path}"
            )
        return None, EXIT_INTERRUPTED
    finally:
        runner.end_workers()  # a no-op once run() has joined them
        if in_main:
            signal.signal(signal.SIGINT, old)
    fault = result.summary.get("fault")
    if fault:  # one line: the arm, the comparison, the lost context; the session keeps the rest
        console.print(f"[bold red]{fault['error']}[/]")
        console.print(f"session kept (failed) at {result.session_path}")
        return result, EXIT_GPU_FAULT
    return result, EXIT_INTERRUPTED if result.status == "interrupted" else 0


def show_build_error(console, e: BuildError, tail: int = 40) -> None:
    """The compiler's message and the end of its log, framed, instead of a traceback."""
    from rich.panel import Panel
    from rich.text import Text

    console.print(f"[bold red]build failed[/]: {e}")
    log = (e.log or "").rstrip()
    if log:
        lines = log.splitlines()
        shown = "\n".join(lines[-tail:])
        title = f"compiler log (last {min(tail, len(lines))} of {len(lines)} lines)"
        console.print(Panel(Text(shown), title=title, border_style="red"))


def make_plots(session_path, plots_dir: str, console) -> list:
    """Plots of the session via workbench.plots, after the answer, with a progress line (the
    files as they are written; a status line on a terminal); a failure is reported, never
    fatal."""
    import time

    t0, paths = time.monotonic(), []
    console.print(f"plots: drawing into {plots_dir} (Ctrl-C stops the plots; the session is saved)")
    try:
        from workbench.plots import plot_session

        with console.status("plots: drawing the first figure") as status:

            def written(path) -> None:
                paths.append(path)
                status.update(f"plots: {len(paths)} file(s) written, last {Path(path).name}")

            out = plot_session(session_path, plots_dir, progress=written)
    except Exception as e:  # a missing/failed plot must never lose the session
        console.print(f"[yellow]plots skipped[/]: {type(e).__name__}: {e}")
        return []
    paths = list(out) if isinstance(out, (list, tuple)) else [out] if out else []
    if paths:
        console.print(f"plots: {len(paths)} file(s) in {plots_dir} ({time.monotonic() - t0:.1f} s)")
    return paths


def finish_output(result, args: argparse.Namespace, render) -> int:
    """Tables (stdout, or stderr with --json) and the session: the answer first; then the plots
    with their progress line; then the JSON summary on stdout. Returns 0, or EXIT_INTERRUPTED
    when Ctrl-C stopped the plots (the session is saved)."""
    err = make_console()
    out = err if args.json else make_console(stderr=False)
    render(out, result)
    out.print(f"session: {result.session_path} ({result.status})")
    try:
        plots = [] if args.no_plots else make_plots(result.session_path, args.plots_dir, err)
    except KeyboardInterrupt:
        err.print(
            f"[yellow]interrupted[/] while drawing the plots: session saved at "
            f"{result.session_path} ({result.status})"
        )
        return EXIT_INTERRUPTED
    if args.json:
        summary = dict(result.summary)
        summary["plots"] = [str(p) for p in plots]
        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0
