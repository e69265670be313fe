"""`workbench tune`: sweep a kernel's compile-time parameters (docs/DESIGN.md §11).

Builds every candidate (parallel, cached), gates each against the default, screens every one
on the hot and rotating sets (one worker process per visible GPU, or with --ray one Ray
actor per GPU of every host of a cluster), confirms the best --top against the default with
the full block protocol in fresh worker processes (--confirm-workers, as `workbench ab`'s
--workers; --single-process confirms in this process), and times scalar against cooperative reader at
the best parameters. One session holds it all, with a sweep plot. A second run over the same
space resumes from the screened results of the first. Exit codes as `workbench ab`.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from workbench.commands._measure import add_protocol_arguments, add_ray_argument
from workbench.core.errors import EXIT_INTERRUPTED, BadArgument, BuildError, NumericsError
from workbench.core.limits import check_min_effect

HELP = "sweep a kernel's compile-time parameters: screen every candidate, confirm the best"
DEFAULT_REPLAYS = 50  # as `workbench ab`


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to tune")
    g.add_argument("--kernel", required=True, help="w13 or w2")
    g.add_argument(
        "--arm", default="b3-scalar", help="the arm whose parameters are swept (b3-scalar)"
    )
    g.add_argument(
        "--param", action="append", metavar="NAME=V1,V2",
        help="narrow a parameter to these values (repeatable); default: every allowed value",
    )  # fmt: skip
    g.add_argument("--set", default="hot,rotating", help="comma list of hot, rotating (both)")
    g.add_argument(
        "--top",
        type=int,
        default=3,
        help="candidates confirmed with the full protocol (3; 0: screen only)",
    )
    g.add_argument(
        "--screen-pairs", type=int, default=3, help="ABBA pairs per set when screening (3)"
    )
    g.add_argument(
        "--workers", type=int, default=None, help="screening workers (one per visible GPU)"
    )
    g.add_argument("--no-resume", action="store_true", help="screen again what the cache holds")
    add_ray_argument(g, "screen")
    g.add_argument(
        "--floor-file",
        default=None,
        help="streaming floor for the sweep plot (KERNEL/SET = US lines)",
    )
    add_protocol_arguments(p, DEFAULT_REPLAYS, workers="--confirm-workers")


def configs_from_args(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(RunConfig, TuneConfig, floor); BadArgument names the option. No torch, no GPU."""
    from workbench.commands._measure import protocol_from_args, ray_from_args, workers_from_args
    from workbench.core.vocab import SETS
    from workbench.data.shapes import shape_from_args
    from workbench.measure.plan import parse_list
    from workbench.tune import space, tuner

    space.params_of(args.kernel)  # an unknown kernel: BadArgument naming --kernel
    shape = shape_from_args(args)
    protocol = protocol_from_args(args)
    overrides = space.parse_overrides(args.kernel, args.param)
    cands = space.candidates(args.kernel, args.arm, overrides, shape.validate())
    if len(cands) < 2:
        raise BadArgument(f"--param {' '.join(args.param or [])!r} leaves only the default to tune")
    floor = None
    if args.floor_file:
        from workbench.plots.floor import read_floor_file

        floor = read_floor_file(args.floor_file)
    check_min_effect(args.min_effect, "--min-effect")
    ray = ray_from_args(args)
    tcfg = tuner.TuneConfig(args.kernel, args.arm, cands, screen_pairs=args.screen_pairs,
                            top=args.top, workers=args.workers, resume=not args.no_resume,
                            ray=ray)  # fmt: skip
    cfg = tuner.make_run_config(
        shape, tcfg, sets=parse_list(args.set, SETS, "--set"), calls=args.calls,
        replays=args.replays, seed=args.seed, m=args.min_effect, protocol=protocol,
        sessions_dir=args.sessions_dir, slug=args.slug,
        workers=workers_from_args(args, "--confirm-workers"),
    )  # fmt: skip
    return cfg, tcfg, floor


def candidate_line(res: dict[str, Any]) -> str:
    host = f"{res['host']} " if res.get("host") else ""  # a Ray sweep: several hosts
    where = "cache" if res.get("source") == "cache" else f"{host}GPU {res.get('gpu')}"
    if res["status"] != "screened":
        return f"  {res['candidate']:<28} {res['status']:<9} ({where}): {res.get('reason')}"
    sets = "  ".join(f"{k} {v['ratio']:.4f}" for k, v in res["sets"].items() if v.get("ratio"))
    return f"  {res['candidate']:<28} B/A {sets}  score {res.get('score') or 0:.4f} ({where})"


def render(console: Any, tune: dict[str, Any]) -> None:
    from rich.table import Table

    from workbench.analysis.words import SINGLE_PROCESS

    t = Table(title=f"tune {tune['kernel']} {tune['arm']} on {tune['gpu']}: screened "
              f"({tune['workers']} worker(s), {tune['screen_seconds'] or 0:.1f} s)")  # fmt: skip
    for col in ("candidate", "status", "gpu", "hot B/A", "rotating B/A", "score", "why"):
        t.add_column(col)
    rows = sorted(tune["screened"], key=lambda r: (r.get("score") is None, r.get("score") or 0))
    for r in rows:
        sets = r.get("sets") or {}
        ratio = {k: f"{v['ratio']:.4f}" if v.get("ratio") else "" for k, v in sets.items()}
        t.add_row(r["candidate"], r["status"], "cache" if r.get("source") == "cache" else str(r.get("gpu")),
                  ratio.get("hot", ""), ratio.get("rotating", ""),
                  f"{r['score']:.4f}" if r.get("score") else "", (r.get("reason") or "")[:60])  # fmt: skip
    console.print(t)
    for c in tune["confirmed"]:
        if c["verdict"] == "EXCLUDED":  # its gate failed, or its kernel faulted the GPU
            console.print(f"confirmed {c['candidate']}: EXCLUDED ({c.get('reason')})")
            continue
        per = ", ".join(f"{k} {v['verdict']} {v['estimate']:.4f} [{v['ci'][0]:.4f}, {v['ci'][1]:.4f}]"
                        for k, v in c["sets"].items())  # fmt: skip
        over = {v.get("workers") or 1 for v in c["sets"].values()}
        unit = (f"over {'/'.join(map(str, sorted(over)))} workers" if max(over, default=1) > 1
                else SINGLE_PROCESS)  # fmt: skip
        console.print(f"confirmed {c['candidate']}: {c['verdict']} ({per}; {unit})")
    if tune.get("best"):
        b = tune["best"]
        console.print(
            f"[bold]best[/] {tune['kernel']} on {tune['gpu']}: {b['candidate']} ({b['why']})"
        )
    for k, r in (tune.get("reader") or {}).items():
        console.print(f"reader verdict at the best parameters ({k}): {r['decision']} "
                      f"{r.get('verdicts')}")  # fmt: skip
    if tune.get("unscreened"):
        console.print(f"[yellow]not screened[/]: {', '.join(tune['unscreened'])}")


def run(args: argparse.Namespace) -> int:
    from workbench.commands._measure import _Live, show_build_error
    from workbench.commands._output import console as _console
    from workbench.run.runner import require_gpu
    from workbench.tune.tuner import tune_runner

    cfg, tcfg, floor = configs_from_args(args)
    require_gpu()
    console = _console()
    live = _Live(console, cfg.protocol.pairs, cfg.protocol.block_goal)
    cancel = threading.Event()

    def drop_bars(prefixes: tuple[str, ...]) -> None:
        """A finished candidate's bars go: a sweep of dozens would stack them otherwise."""
        for cmp_id in [c for c in live.tasks if c.startswith(prefixes)]:
            live.bar.remove_task(live.tasks.pop(cmp_id))

    def event(kind: str, data: Any) -> None:
        if kind in ("candidate", "confirmed"):
            drop_bars((f"screen/{data['candidate']}/", f"tune/{data['candidate']}/"))
        if kind == "candidate":
            console.print(candidate_line(data))
        elif kind == "phase":
            console.print(f"[bold]{data}[/]")
        elif kind in ("session", "note", "builds", "gate") and not (kind == "gate" and data["ok"]):
            live.event(kind, data)

    def on_sigint(signum: int, frame: Any) -> None:
        if live.measuring and not cancel.is_set():
            cancel.set()
            console.print("[yellow]Ctrl-C: stopping after the samples in flight (again aborts)[/]")
            return
        raise KeyboardInterrupt

    runner = tune_runner(cfg, tcfg, progress=live.progress, events=event, cancel=cancel)
    in_main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    try:
        with live.bar:
            result = runner.run()
    except BuildError as e:
        show_build_error(console, e)
        return e.exit_code
    except NumericsError as e:  # the reader comparison at the best parameters
        console.print(f"[bold red]numerics differ[/]: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        where = (
            "nothing was measured"
            if runner.session is None
            else f"session kept at {runner.session.path}"
        )
        console.print(f"[yellow]interrupted[/]: {where}; screened candidates stay in the cache")
        return EXIT_INTERRUPTED
    finally:
        if in_main:
            signal.signal(signal.SIGINT, old)
    out = console if args.json else _console(stderr=False)
    render(out, result.summary["tune"])
    plots = []
    if not args.no_plots:
        try:
            from workbench.plots.sweep import plot_sweep
            from workbench.store.session import load_session

            plots.append(str(plot_sweep(load_session(result.session_path), args.plots_dir, floor)))
            console.print(f"sweep plot: {plots[0]}")
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        except Exception as e:  # a plot must never lose the session
            console.print(f"[yellow]sweep plot skipped[/]: {type(e).__name__}: {e}")
    out.print(f"session: {result.session_path} ({result.status})")
    if args.json:
        json.dump({**result.summary, "plots": plots}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return EXIT_INTERRUPTED if result.status == "interrupted" else 0
