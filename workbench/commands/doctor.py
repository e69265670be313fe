"""`workbench doctor`: whether the GPU, torch and nvcc here agree, before a build that takes
minutes (docs/DESIGN.md §4.3.1). Exit 0 when runs and builds can go ahead, 3 when something stops
them (no GPU, a torch or nvcc that cannot serve it), each named with what to install."""

from __future__ import annotations

import argparse
import json
import sys

from workbench.core.errors import EXIT_NO_GPU, EXIT_OK
from workbench.core.vocab import KERNEL_CHOICES

HELP = (
    "what this machine's GPU, driver, torch and nvcc are, whether they agree, and what to install"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable facts and findings")


def hot_set_labels(l2_bytes: int | None) -> list[tuple[str, str]]:
    """(kernel, honest set name) of the default shape's hot sets, b3 against b4 arms."""
    from workbench.data.shapes import resolve_shape
    from workbench.measure.plan import geometry

    shape = resolve_shape()
    return [
        (k, geometry(shape, k, "hot", 48, {"b3", "b4"}, l2_bytes).label) for k in KERNEL_CHOICES
    ]


def run(args: argparse.Namespace) -> int:
    from workbench.kernels.toolchain import diagnose, gather

    facts = gather()
    findings = diagnose(facts)
    code = EXIT_NO_GPU if any(f.level == "error" for f in findings) else EXIT_OK
    hot = {g.index: hot_set_labels(g.l2_bytes) for g in facts.gpus if g.l2_bytes}
    if args.json:
        out = {
            "facts": facts.to_dict(),
            "findings": [f.to_dict() for f in findings],
            "default_shape_hot_sets": {str(i): dict(v) for i, v in hot.items()},
            "exit": code,
        }
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return code
    _print_human(facts, findings, hot, code)
    return code


def _print_human(facts, findings, hot, code) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from workbench.commands._output import console

    con = console(stderr=False, pipe_width=80)
    t = Table(title="this machine", box=box.SIMPLE_HEAD, pad_edge=False, show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value")
    if facts.gpus:
        for g in facts.gpus:
            l2 = (
                "unknown"
                if g.l2_bytes is None
                else f"{g.l2_bytes / (1 << 20):g} MiB ({g.l2_source})"
            )
            t.add_row(f"GPU {g.index}", f"{g.name}, {g.sm} (compute {g.cc[0]}.{g.cc[1]}), L2 {l2}")
    elif facts.nvml_missing:  # a missing package, not a missing GPU
        t.add_row("GPU", "unknown: pynvml is not installed, so NVML cannot be asked")
    else:
        t.add_row("GPU", f"none visible ({facts.nvml_error or 'NVML found no device'})")
    t.add_row("driver", f"{facts.driver or 'n/a'} (CUDA {facts.driver_cuda or 'n/a'})")
    if facts.torch_version:
        t.add_row("torch", f"{facts.torch_version}, CUDA {facts.torch_cuda or 'none (CPU build)'}")
        t.add_row("torch arch list", ", ".join(facts.torch_arch_list) or "empty")
    else:
        t.add_row("torch", f"not installed ({facts.torch_error})")
    if facts.nvcc:
        t.add_row("nvcc", f"{facts.nvcc_version} ({facts.nvcc})")
        t.add_row("nvcc targets", ", ".join(facts.nvcc_archs) or "none listed")
    else:
        t.add_row("nvcc", facts.nvcc_error or "not found")
    t.add_row("CUDA_HOME in use", facts.cuda_home or "none found")
    cache = (
        "cannot be written" if facts.build_cache_error else f"{facts.build_cache_entries} build(s)"
    )
    t.add_row("build cache", f"{facts.build_cache} ({cache})")
    con.print(t)
    for i, labels in hot.items():
        con.print(
            f"default shape on GPU {i}: hot sets "
            + ", ".join(f"{k} [bold]{lab}[/]" for k, lab in labels)
        )
    if not findings:
        con.print("[green]GPU, torch and nvcc agree: runs and builds can go ahead.[/]")
    for f in findings:
        colour = "red" if f.level == "error" else "yellow"
        # escaped: a fix such as `pip install -e ".[gpu]"` is not rich markup
        con.print(f"[{colour}]{f.level}[/]: {escape(f.what)}\n  [bold]fix[/]: {escape(f.fix)}")
    if code:
        con.print(f"exit {code}: runs cannot go ahead here until the errors above are fixed")
