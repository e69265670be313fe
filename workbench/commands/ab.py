"""`workbench ab`: headless A/B timing of reader variants (docs/DESIGN.md §5-§7, §9).

Per (kernel, expert set): ABBA pairs of CUDA-Graph replays after a bit-identity gate, with
reference arms (b4-scalar, tinygemm, triton-moe) timed alongside, and the main hot comparisons of
w13 and w2 timed by a second method too (docs/DESIGN.md §5.11); then a reader recommendation per
kernel and, over both kernels, a confirmation of the recommended mix on the combined step.
With --counters, Nsight Compute then profiles one launch of A and one of B per w13/w2
comparison, after the timed blocks and in processes of its own, into the session's counters.json.
Exit codes: 0 done, 2 bad arguments, 3 no usable GPU (or, with --counters, no ncu or no permission
to read the counters; the timed session is kept), 4 build failed, 5 numerics differ,
130 interrupted (the session is kept as interrupted).
"""

from __future__ import annotations

import argparse
import sys

from workbench.commands._measure import (
    add_protocol_arguments,
    add_ray_argument,
    drive,
    finish_output,
)
from workbench.core import arms, defaults
from workbench.data.checkpoint import add_checkpoint_arguments

HELP = "A/B-time two reader variants (ABBA pairs of CUDA-Graph replays) and recommend per kernel"


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to compare")
    g.add_argument(
        "--kernel",
        default=",".join(defaults.KERNELS),
        help="comma list of w13, w2, step (W13 then W2 per call) (default %(default)s)",
    )
    g.add_argument(
        "--set", default=",".join(defaults.SETS), help="comma list of hot, rotating (%(default)s)"
    )
    g.add_argument(
        "--a",
        default=defaults.ARM_A,
        help=f"arm A: {', '.join(a.name for a in arms.TABLE)}, or a spec file "
        '(path/to/variant.toml: a CUDA kernel, or a Python arm with kind = "python"); for step '
        "also w13=ARM,w2=ARM (default b3-scalar)",
    )
    g.add_argument(
        "--b", default=defaults.ARM_B, help="arm B (default %(default)s); B = A is an A/A run"
    )
    g.add_argument(
        "--reference",
        default=",".join(defaults.REFERENCES),
        help=f"comma list of reference arms timed against B: {', '.join(arms.REFERENCE_ARMS)}, or "
        "none (default %(default)s; tinygemm, ~25x slower, costs a quarter of a run)",
    )
    g.add_argument(
        "--no-reference",
        action="store_true",
        help="skip every reference arm (as --reference none)",
    )
    g.add_argument(
        "--no-confirm",
        action="store_true",
        help="skip the step confirmation of the recommended mix after w13 and w2",
    )
    g.add_argument(
        "--counters",
        action="store_true",
        help="after timing, profile one launch of A and one of B per w13/w2 comparison with "
        "Nsight Compute (ncu) and keep the counters side by side in the session",
    )
    add_ray_argument(g, "run the worker processes as Ray tasks")
    g.add_argument(
        "--overlap",
        action="store_true",
        help="each worker process makes its CUDA context before its turn, while the one before "
        "it may still be timing (off by default: kept only if an A/A shows no effect, "
        "docs/DESIGN.md §5.10)",
    )
    g.add_argument(
        "--settle",
        type=int,
        nargs="?",
        const=defaults.SETTLE_LOOKS,
        default=0,
        metavar="LOOKS",
        help="while a main comparison's label is undecided (its interval straddles 1 - m, 1 or "
        "1 + m), add as many workers again, up to LOOKS looks (default "
        f"{defaults.SETTLE_LOOKS}) and within --budget; every look's interval is widened so that "
        "all of them hold together at 95 %% (docs/DESIGN.md §7.4)",
    )
    add_protocol_arguments(p, defaults.REPLAYS)
    add_checkpoint_arguments(p)


def config_from_args(args: argparse.Namespace):
    """The validated RunConfig; BadArgument (exit 2) names the option. No torch, no GPU."""
    from workbench.commands._measure import protocol_from_args, ray_from_args, workers_from_args
    from workbench.core.vocab import KERNEL_CHOICES, SETS
    from workbench.data.checkpoint import checkpoint_from_args
    from workbench.data.shapes import shape_from_args
    from workbench.measure.plan import parse_list
    from workbench.run.config import make_config

    ckpt = checkpoint_from_args(args)
    shape = ckpt.shape if ckpt is not None else shape_from_args(args)
    cfg = make_config(
        shape,
        kernels=parse_list(args.kernel, KERNEL_CHOICES, "--kernel"),
        sets=parse_list(args.set, SETS, "--set"),
        a=args.a,
        b=args.b,
        reference=_references(args),
        workers=workers_from_args(args),
        confirm=not args.no_confirm,
        calls=args.calls,
        replays=args.replays,
        seed=args.seed,
        m=args.min_effect,
        protocol=protocol_from_args(args),
        sessions_dir=args.sessions_dir,
        slug=args.slug,
        counters=args.counters,
        ray=ray_from_args(args),
        overlap=args.overlap,
        settle=args.settle,
        extra=None if ckpt is None else {"checkpoint": ckpt.summary()},
    )
    cfg.checkpoint = ckpt  # banks from its experts (docs/DESIGN.md §3.8)
    return cfg


def _references(args: argparse.Namespace) -> tuple[str, ...]:
    from workbench.core.errors import BadArgument
    from workbench.measure.plan import REFERENCE_ARMS, parse_list

    given = args.reference.strip()
    if args.no_reference:
        if given not in (",".join(defaults.REFERENCES), "none", ""):
            raise BadArgument(f"--no-reference cannot be combined with --reference {given}")
        return ()
    if given in ("none", ""):
        return ()
    return parse_list(given, REFERENCE_ARMS, "--reference")


def run(args: argparse.Namespace) -> int:
    from workbench.commands._tables import render_ab

    cfg = config_from_args(args)
    ncu_path = None
    if cfg.counters:  # before any timing: a missing ncu costs no run
        from workbench.measure.ncu import find_ncu

        ncu_path = find_ncu()
    result, code = drive(cfg, args)
    if result is not None:
        code = finish_output(result, args, render_ab) or code
    if result is not None and ncu_path is not None:
        if code == 0:
            code = _counters(cfg, args, result.session_path, ncu_path)
        else:  # counters explain a finished run; an interrupted or failed one gets none
            print(f"counters: not recorded (the run ended with exit {code})", file=sys.stderr)
    return code


def _counters(cfg, args: argparse.Namespace, session_path, ncu_path: str) -> int:
    """Profile A and B after the timed run; the tables on stdout (stderr with --json)."""
    from workbench.run.counters import record

    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    lines = record(cfg, session_path, ncu_path, say)
    print("\n".join(lines), file=sys.stderr if args.json else sys.stdout)
    return 0
