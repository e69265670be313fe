"""`workbench capacity`: memory arithmetic of a shape, and what 3-byte metadata saves per rank."""

from __future__ import annotations

import argparse
import json
import sys

from workbench.core.errors import BadArgument
from workbench.core.fmt import nbytes
from workbench.core.limits import MAX_KV_BYTES_PER_TOKEN, check_max
from workbench.core.vocab import KERNELS
from workbench.data.shapes import add_shape_arguments, shape_from_args

HELP = "bytes of int4 weights and 4-/3-byte metadata per expert, layer and rank; the saving"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_shape_arguments(p)
    p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    p.add_argument(
        "--kv-bytes-per-token",
        type=int,
        default=None,
        metavar="N",
        help="KV-cache bytes per token on one rank: turns the saving into tokens",
    )


def run(args: argparse.Namespace) -> int:
    from workbench.data.capacity import capacity

    kv = args.kv_bytes_per_token
    if kv is not None and kv < 1:
        raise BadArgument(f"--kv-bytes-per-token {kv} must be >= 1")
    check_max("--kv-bytes-per-token", kv, MAX_KV_BYTES_PER_TOKEN, "MAX_KV_BYTES_PER_TOKEN")
    cap = capacity(shape_from_args(args), kv)
    if args.json:
        json.dump(cap.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _print_human(cap)
    return 0


def _print_human(cap) -> None:
    from rich import box
    from rich.table import Table

    s = cap.shape
    from workbench.commands._output import console as make_console

    console = make_console(stderr=False, pipe_width=80)
    console.print(
        f"[bold]{s.name}[/bold]: hidden {s.hidden}, inter {s.inter}, experts {s.experts}, "
        f"top_k {s.top_k}, layers {s.layers}, tp {s.tp}, group {s.group}"
    )
    dims = Table(title="per-rank kernel dimensions", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("kernel", "K", "N", "groups (K/32)", "records per expert"):
        dims.add_column(col, justify="right")
    for kernel in KERNELS:
        k, n = s.dims(kernel)
        dims.add_row(kernel, str(k), str(n), str(k // s.group), f"{k // s.group * n:,}")
    console.print(dims)

    # compact box and short labels: the per-rank figures are 14 characters wide
    t = Table(title="bytes on one rank", box=None, pad_edge=False)
    rows = [(f"{k} expert", f) for k, f in cap.per_kernel.items()]
    rows += [
        ("expert", cap.per_expert),
        (f"layer (x{s.experts})", cap.per_layer),
        (f"rank (x{s.layers} layers)", cap.per_rank),
    ]
    cells = [
        [scope, f"{f.weights:,}", f"{f.meta_b4:,}", f"{f.meta_b3:,}", f"{f.saving:,}"]
        for scope, f in rows
    ]
    for i, col in enumerate(("scope", "int4 weights", "meta b4", "meta b3", "saved")):
        # size each column to its widest cell so rich never elides a digit
        width = max(len(col), *(len(r[i]) for r in cells))
        t.add_column(col, justify="left" if i == 0 else "right", no_wrap=True, min_width=width)
    for r in cells:
        t.add_row(*r)
    console.print(t)
    d = cap.to_dict()
    console.print(
        f"3-byte metadata saves {nbytes(cap.per_rank.saving)} per rank: "
        f"{d['saving_fraction_of_metadata']:.0%} of the metadata, "
        f"{d['saving_fraction_of_total_b4']:.2%} of weights + b4 metadata."
    )
    if cap.kv_tokens is not None:
        console.print(
            f"At {cap.kv_bytes_per_token:,} KV-cache bytes per token that is "
            f"{cap.kv_tokens:,} more tokens per rank."
        )
