"""`workbench check`: numerics gate of every variant and the invalid-argument rejections."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from workbench.core.errors import EXIT_NUMERICS_DIFFER, BadArgument, NoGPUError
from workbench.core.limits import MAX_BANKS, MAX_SEED, check_max
from workbench.core.vocab import KERNELS
from workbench.data.checkpoint import add_checkpoint_arguments, checkpoint_from_args
from workbench.data.shapes import PRESETS, add_shape_arguments, shape_from_args, valid_tps

HELP = "check that every variant is bit-identical, fully written, graph-safe and near the float64 reference"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_shape_arguments(p)
    p.add_argument("--kernel", default="w13,w2", help="comma-separated: w13, w2 (default both)")
    p.add_argument(
        "--all-presets", action="store_true", help="every preset at every valid tp in 1,2,4,8"
    )
    p.add_argument(
        "--banks", type=int, default=2, help="fresh banks (hot + rotating) per shape (default 2)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-args", action="store_true", help="skip the invalid-argument rejections")
    p.add_argument("--json", action="store_true", help="machine-readable result on stdout")
    add_checkpoint_arguments(p)
    p.add_argument(
        "specs",
        nargs="*",
        metavar="SPEC",
        help="users' kernel spec files (.toml) checked beside the built-ins, each against its "
        "promise (docs/DESIGN.md §4.1)",
    )


def _specs(args: argparse.Namespace) -> tuple:
    from workbench.kernels.specs import is_spec_path, load_spec

    for s in args.specs:
        if not is_spec_path(s):
            raise BadArgument(f"SPEC {s!r} is not a kernel spec file (.toml)")
    return tuple(load_spec(s) for s in args.specs)


def _validated(args: argparse.Namespace) -> tuple[tuple[str, ...], list]:
    """(kernels, shapes) from the arguments; BadArgument names the option. No torch, no GPU."""
    from workbench.measure.plan import parse_list

    kernels = parse_list(args.kernel, KERNELS, "--kernel")
    args.loaded_specs = _specs(args)
    for s in args.loaded_specs:
        if s.kernel not in kernels:
            raise BadArgument(
                f"SPEC {s.origin} implements {s.kernel}, not in --kernel {args.kernel}"
            )
    if args.banks < 1:
        raise BadArgument(f"--banks {args.banks} must be >= 1")
    check_max("--banks", args.banks, MAX_BANKS, "MAX_BANKS")
    if args.seed < 0:
        raise BadArgument(f"--seed {args.seed} must be >= 0")
    check_max("--seed", args.seed, MAX_SEED, "MAX_SEED")
    args.loaded_checkpoint = ckpt = checkpoint_from_args(args)
    if ckpt is not None and args.all_presets:
        raise BadArgument("--all-presets cannot be combined with --checkpoint (its own shape)")
    # validated even with --all-presets: a typo is still a typo
    shape = ckpt.shape if ckpt is not None else shape_from_args(args)
    if args.all_presets:
        return kernels, [replace(s, tp=tp) for s in PRESETS.values() for tp in valid_tps(s)]
    return kernels, [shape]


def _bank_source(args: argparse.Namespace):
    """The checkpoint's banks (with its repeat note on stderr), or None for synthetic ones."""
    ckpt = args.loaded_checkpoint
    if ckpt is None:
        return None
    from workbench.measure.banks import CheckpointBanks

    source = CheckpointBanks(ckpt)
    layers = ", ".join(str(source.layer_of(b)) for b in range(args.banks))
    print(
        f"checkpoint {ckpt.folder}: banks 0..{args.banks - 1} are its layers {layers}",
        file=sys.stderr,
    )
    for kernel in KERNELS:
        note = source.note(kernel, args.banks)
        if note:
            print(f"note: {note}", file=sys.stderr)
            break  # the same banks for both kernels: one note says it
    return source


def run(args: argparse.Namespace) -> int:
    kernels, shapes = _validated(args)
    from workbench.kernels.build import writable_cache

    writable_cache()  # the pre-flight: the builds' folder before the GPU check
    import torch

    if not torch.cuda.is_available():
        raise NoGPUError(
            "no CUDA device: `workbench check` runs the kernels (the compile tests run without one)"
        )
    from workbench.kernels.variants import all_variants
    from workbench.measure.check import check_args, check_kernel

    source = _bank_source(args)
    rows = []
    for shape in shapes:
        for kernel in kernels:
            rows_of = check_kernel(
                shape,
                kernel,
                seed=args.seed,
                banks=args.banks,
                specs=args.loaded_specs,
                source=source,
            )
            for r in rows_of:
                rows.append({**r.to_dict(), "tp": shape.tp})
                if not args.json:
                    print(
                        f"{shape.name:>22} tp{shape.tp} {kernel:>3} bank {r.bank} {r.arm:>9}: "
                        f"{'ok  ' if r.ok else 'FAIL'} relL2 {r.rel_l2:.2e} written={r.fully_written} "
                        f"graph={r.graph_equal} identical={r.identical_to_first} worst {r.worst}",
                        file=sys.stderr,
                    )
    arg_rows = []
    if not args.no_args:
        from workbench.kernels.build import build_variant

        for v in all_variants(calib=True):
            mod = build_variant(v).module
            for name, ok, msg in check_args(v.kernel, v.layout, v.reader, mod):
                arg_rows.append({"variant": v.name, "case": name, "rejected": ok, "message": msg})
        bad = [a for a in arg_rows if not a["rejected"]]
        print(
            f"invalid-argument cases: {len(arg_rows) - len(bad)}/{len(arg_rows)} rejected with the "
            f"expected message",
            file=sys.stderr,
        )
        for a in bad:
            print(
                f"  NOT REJECTED AS EXPECTED: {a['variant']} {a['case']}: {a['message']}",
                file=sys.stderr,
            )
    failed = [r for r in rows if not r["ok"]]
    if args.json:
        out = {"numerics": rows, "arguments": arg_rows, "ok": not failed}
        if source is not None:
            out["banks"] = source.describe({k: args.banks for k in kernels})
        print(json.dumps(out, indent=1))
    print(f"numerics: {len(rows) - len(failed)}/{len(rows)} rows ok", file=sys.stderr)
    if failed:
        return EXIT_NUMERICS_DIFFER
    return 1 if any(not a["rejected"] for a in arg_rows) else 0
