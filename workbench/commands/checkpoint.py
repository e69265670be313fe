"""`workbench checkpoint make DIR | show DIR`: write a random AWQ test checkpoint, or show what
`ab --checkpoint` / `check --checkpoint` would read from one (docs/DESIGN.md §3.8).

Exit codes: 0 done; 2 bad arguments (also an unreadable or inconsistent checkpoint, a DIR that
cannot be written); 3 a package missing (`show` of a checkpoint needs torch: the gpu extra).
"""

from __future__ import annotations

import argparse
import json
import sys

from workbench.commands._paths import new_or_empty_dir
from workbench.core.errors import BadArgument
from workbench.core.limits import MAX_SEED, check_max
from workbench.data.shapes import add_shape_arguments

# what `checkpoint make DIR` writes unless told otherwise: the default preset's hidden and
# intermediate sizes in 78 MiB, seconds to write (README's example)
MAKE_LAYERS = 1
MAKE_EXPERTS = 32

HELP = "write a random AWQ test checkpoint (make) or show what a run reads from one (show)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    make = sub.add_parser(
        "make",
        help="write config.json + safetensors (AutoAWQ packing, random weights) into DIR "
        f"(new or empty): a preset's dims with {MAKE_LAYERS} layer of {MAKE_EXPERTS} experts "
        "unless --layers/--experts etc. say otherwise (the default preset's own 48 layers of "
        "512 experts would take 58 GiB)",
    )
    make.add_argument("dir", metavar="DIR")
    add_shape_arguments(make)
    make.set_defaults(layers=MAKE_LAYERS, experts=MAKE_EXPERTS)
    make.add_argument(
        "--group-size", type=int, default=128, help="AWQ group size, a multiple of 32 (128)"
    )
    make.add_argument("--shards", type=int, default=1, help="1: model.safetensors; n: n shards")
    make.add_argument("--seed", type=int, default=0, help="seed of the random weights (0)")
    show = sub.add_parser("show", help="shape, layers, files and tp slice read from DIR")
    show.add_argument("dir", metavar="DIR")
    show.add_argument("--tp", type=int, default=None, help="tensor-parallel size (default 4)")
    show.add_argument("--rank", type=int, default=0, help="tensor-parallel rank (default 0)")
    show.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def _make(args: argparse.Namespace) -> int:
    from workbench.data.checkpoint_write import checkpoint_bytes, write_checkpoint
    from workbench.data.shapes import resolve_shape

    new_or_empty_dir(args.dir, "DIR")  # the pre-flight: the folder before the sizes
    if args.seed < 0:
        raise BadArgument(f"--seed {args.seed} must be >= 0")
    check_max("--seed", args.seed, MAX_SEED, "MAX_SEED")
    # --tp only checks that the kernels can serve the written dims at that tp (default 1)
    s = resolve_shape(
        preset=args.preset, tp=1 if args.tp is None else args.tp, hidden=args.hidden,
        inter=args.inter, experts=args.experts, top_k=args.top_k, layers=args.layers,
    )  # fmt: skip
    if args.group_size <= 0 or args.group_size % 32:
        raise BadArgument(f"--group-size {args.group_size} must be a positive multiple of 32")
    if args.shards <= 0:
        raise BadArgument(f"--shards {args.shards} must be >= 1")
    try:
        files = write_checkpoint(
            args.dir, s.hidden, s.inter, s.experts, s.top_k, s.layers, group=args.group_size,
            seed=args.seed, shards=args.shards, origin=s.name,
        )  # fmt: skip
    except OSError as e:  # a full disk, a folder taken away while writing
        raise BadArgument(f"DIR {args.dir!r}: cannot write the checkpoint ({e.strerror})") from None
    size = checkpoint_bytes(s.hidden, s.inter, s.experts, s.layers, args.group_size)
    print(f"wrote {size / 2**20:.1f} MiB of random AWQ experts ({s.name} dims)", file=sys.stderr)
    for f in files:
        print(f)
    return 0


def _show(args: argparse.Namespace) -> int:
    from workbench.data.checkpoint import Checkpoint

    ckpt = Checkpoint(args.dir, tp=args.tp, rank=args.rank)
    rec = {"shape": ckpt.shape.to_dict(), **ckpt.describe()}
    if args.json:
        print(json.dumps(rec, indent=1))
        return 0
    s = ckpt.shape
    print(f"{ckpt.folder}: hidden {s.hidden}, moe_intermediate {s.inter}, {s.experts} experts, "
          f"top_k {s.top_k}, {s.layers} layers, AWQ group {ckpt.config.group}")  # fmt: skip
    print(f"MoE layers with experts: {len(ckpt.layers)} ({', '.join(map(str, ckpt.layers))})")
    print(f"tp {ckpt.tp} rank {ckpt.rank}: W13 K,N = {s.dims('w13')}, W2 K,N = {s.dims('w2')}")
    for f in rec["files"]:
        digest = f.get("sha256", "size+mtime only")
        print(f"  {f['name']}: {f['bytes']:,} bytes, {digest}")
    return 0


def run(args: argparse.Namespace) -> int:
    return _make(args) if args.action == "make" else _show(args)
