"""`workbench calibrate`: the protocol's resolution on this GPU now (docs/DESIGN.md §5.8).

With the calibration build of an arm (it can spin N SM-clock cycles per CTA), A = spin base and
B = spin base + s for each rung s of a ladder, each an ABBA comparison like `workbench ab`'s. The
report gives the measured delay per call against the injected one, and the smallest injected
effect detected reliably (SLOWER at that rung and every larger one) as a % of the kernel time.
Rung 0 (base against base) is the A/A control of the same build. The base spin (default 256
cycles) makes A run the same spin code as B: on the H200, with base 0, the first rung (10 cycles)
read +4.75 % for W13 and the next +2.96 %, the fixed cost of entering that code rather than the
injected cycles (sessions/20261129T111036Z_calibrate).
"""

from __future__ import annotations

import argparse

from workbench.commands._measure import add_protocol_arguments, drive, finish_output
from workbench.core import defaults
from workbench.core.errors import BadArgument
from workbench.core.limits import MAX_SPIN_CYCLES, check_max
from workbench.core.vocab import KERNEL_CHOICES
from workbench.data.checkpoint import add_checkpoint_arguments

HELP = "inject known delays with the calibration build: the smallest effect detected reliably"
# At ~1.9 GHz one cycle is ~0.5 ns; a call of these kernels takes ~1-3 µs, so the rungs span
# from well under the 1 % default minimum effect to ~30 %.
DEFAULT_SPINS = "0,10,20,40,80,160,320,640"
DEFAULT_BASE_SPIN = 256


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("calibration")
    kernels, sets = ",".join(defaults.CALIBRATE_KERNELS), ",".join(defaults.CALIBRATE_SETS)
    g.add_argument("--kernel", default=kernels, help="comma list of w13, w2 (default %(default)s)")
    g.add_argument("--set", default=sets, help="comma list of hot, rotating (default %(default)s)")
    g.add_argument(
        "--arm", default=defaults.CALIBRATE_ARM, help="arm whose calibration build is used"
    )
    g.add_argument(
        "--spins",
        default=DEFAULT_SPINS,
        help=f"ladder of injected SM cycles per CTA, comma list (default {DEFAULT_SPINS})",
    )
    g.add_argument(
        "--base-spin",
        type=int,
        default=DEFAULT_BASE_SPIN,
        help=f"cycles A spins too, so both arms run the same spin code (default {DEFAULT_BASE_SPIN})",
    )
    g.add_argument(
        "--trials",
        type=int,
        default=1,
        help="repeat the ladder as independent trials, each with its own blocks and placements "
        "(ids .../trial=T); the summary counts how often each rung was called SLOWER (1)",
    )
    add_protocol_arguments(p, defaults.REPLAYS)
    add_checkpoint_arguments(p)  # the ladder on a real checkpoint's experts (docs/DESIGN.md §3.8)


def parse_spins(text: str) -> tuple[int, ...]:
    """'0,10,20' -> (0, 10, 20), sorted, unique; BadArgument names --spins."""
    try:
        spins = sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        raise BadArgument(f"--spins {text!r} must be a comma list of integers") from None
    if not spins or spins[0] < 0:
        raise BadArgument(f"--spins {text!r} must list cycle counts >= 0")
    if len([s for s in spins if s > 0]) < 1:
        raise BadArgument(f"--spins {text!r} needs at least one spin > 0")
    check_max("--spins", spins[-1], MAX_SPIN_CYCLES, "MAX_SPIN_CYCLES")
    return tuple(spins)


MAX_TRIALS = 200  # a ladder repeated more often than this is a typo, not a plan


def plan_calibration(kernels, sets, arm: str, spins, base_spin: int = 0, trials: int = 1) -> list:
    """A spins `base_spin` cycles, B `base_spin + s` for each rung s. With a base above zero both
    arms run the same spin code (clock reads, CTA barrier), so B differs from A by the injected
    cycles alone; with base 0, A skips that code and the smallest rungs carry its fixed cost."""
    from workbench.measure.plan import ComparisonSpec, parse_arm_spec, with_spin

    if base_spin < 0:
        raise BadArgument(f"--base-spin {base_spin} must be >= 0")
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_TRIALS:
        raise BadArgument(f"--trials {trials!r} must be an integer in 1..{MAX_TRIALS}")
    check_max("--base-spin", base_spin, MAX_SPIN_CYCLES, "MAX_SPIN_CYCLES")
    out = []
    for kernel in kernels:
        if kernel == "step":
            raise BadArgument("--kernel step is not calibrated: use w13 or w2")
        base = parse_arm_spec(kernel, arm, "--arm", calib=True)
        a = with_spin(base, base_spin)
        for t in range(trials):
            tag = f"/trial={t}" if trials > 1 else ""
            for s in sets:
                for spin in spins:
                    b = with_spin(base, base_spin + spin)
                    cid = f"{kernel}/{s}/spin={spin}{tag}"
                    out.append(ComparisonSpec(cid, kernel, s, "calibration", a, b, group=tag))
    return out


def config_from_args(args: argparse.Namespace):
    """The validated RunConfig of a calibration run (torch-free; BadArgument -> exit 2)."""
    import dataclasses

    from workbench.commands._measure import protocol_from_args, workers_from_args
    from workbench.core.vocab import SETS
    from workbench.data.checkpoint import checkpoint_from_args
    from workbench.data.shapes import shape_from_args
    from workbench.measure.plan import parse_list
    from workbench.run.config import make_config

    ckpt = checkpoint_from_args(args)
    kernels = parse_list(args.kernel, KERNEL_CHOICES, "--kernel")
    sets = parse_list(args.set, SETS, "--set")
    spins = parse_spins(args.spins)
    comparisons = plan_calibration(kernels, sets, args.arm, spins, args.base_spin, args.trials)
    extra = {"spins": list(spins), "arm": args.arm, "trials": args.trials}
    if ckpt is not None:
        extra["checkpoint"] = ckpt.summary()
    base = make_config(
        ckpt.shape if ckpt is not None else shape_from_args(args), kernels=kernels, sets=sets, a=args.arm, b=args.arm,
        reference=False, confirm=False, calls=args.calls, replays=args.replays, seed=args.seed,
        m=args.min_effect, protocol=protocol_from_args(args), sessions_dir=args.sessions_dir,
        slug=args.slug or "calibrate", extra=extra, workers=workers_from_args(args),
    )  # fmt: skip
    # banks from the checkpoint's experts when one is given (docs/DESIGN.md §3.8), as in `ab`
    return dataclasses.replace(base, comparisons=comparisons, mode="calibrate", checkpoint=ckpt)


def run(args: argparse.Namespace) -> int:
    from workbench.commands._tables import render_calibration

    cfg = config_from_args(args)
    result, code = drive(cfg, args)
    if result is not None:
        code = finish_output(result, args, render_calibration) or code
    return code
