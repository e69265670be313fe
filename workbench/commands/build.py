"""`workbench build`: build every variant (cached, in parallel) and list its ptxas report."""

from __future__ import annotations

import argparse
import json
import sys
import threading

from workbench.core.vocab import KERNELS

HELP = (
    "build every kernel variant, or the given spec files (cached, parallel), and list build time, "
    "cache state and ptxas report"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", default="w13,w2", help="comma list of w13, w2 (default both)")
    p.add_argument("--no-calib", action="store_true", help="skip the calibration builds")
    p.add_argument(
        "--jobs", type=int, default=None, help="parallel compile jobs (default $MAX_JOBS or cores)"
    )
    p.add_argument(
        "--log", metavar="VARIANT", help="print the compiler log of one variant, e.g. w13:b3-coop"
    )
    p.add_argument(
        "--sm70",
        action="store_true",
        help="also compile for sm_70 with NVRTC 12 + ptxas 12 (dev extra)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable list on stdout")
    p.add_argument(
        "specs",
        nargs="*",
        metavar="SPEC",
        help="build these kernel spec files (.toml) instead of the built-ins (docs/DESIGN.md §4.1)",
    )


class BuildProgress:
    """Per-variant progress on stderr: live rows (state, seconds) on a terminal, one plain line
    per step otherwise (a log file or CI keeps them). Called from build_many's worker threads."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.bar = None
        self.tasks: dict[str, object] = {}
        self.done: set[str] = set()
        self.lock = threading.Lock()
        if self.console.is_terminal:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                SpinnerColumn(finished_text="•"),
                TextColumn("{task.description:<22}"),
                TextColumn("{task.fields[state]:<30}"),
                TimeElapsedColumn(),
                console=self.console,
            )

    def __enter__(self) -> BuildProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()

    @property
    def finished(self) -> int:
        return len(self.done)

    def __call__(self, e) -> None:
        text = {
            "started": "compiling",
            "waiting": "waiting for another build of it",
            "cached": "cached",
            "built": f"built in {e.seconds:.1f} s",
            "failed": "FAILED",
        }.get(e.state, e.state)
        with self.lock:
            if e.state in ("cached", "built"):
                self.done.add(e.variant)
            if self.bar is None:
                self.console.print(f"  {e.variant}: {text}", soft_wrap=True)
                return
            done = e.state in ("cached", "built", "failed")
            task = self.tasks.get(e.variant)
            if task is None:
                task = self.tasks[e.variant] = self.bar.add_task(e.variant, total=1, state=text)
            self.bar.update(task, state=text, completed=1 if done else 0)


def _variants(args: argparse.Namespace):
    from workbench.core.errors import BadArgument
    from workbench.kernels.specs import is_spec_path, load_spec
    from workbench.kernels.variants import Variant, all_variants
    from workbench.measure.plan import parse_list

    kernels = parse_list(args.kernel, KERNELS, "--kernel")
    if args.specs:
        bad = [s for s in args.specs if not is_spec_path(s)]
        if bad:
            raise BadArgument(f"SPEC {bad[0]!r} is not a kernel spec file (.toml)")
        return [Variant.of_spec(load_spec(s)) for s in args.specs]
    return [v for v in all_variants(calib=not args.no_calib) if v.kernel in kernels]


def run(args: argparse.Namespace) -> int:
    from workbench.core.errors import EXIT_INTERRUPTED, BadArgument
    from workbench.core.limits import MAX_JOBS, check_max

    if args.jobs is not None and args.jobs < 1:
        raise BadArgument(f"--jobs {args.jobs} must be >= 1")
    check_max("--jobs", args.jobs, MAX_JOBS, "MAX_JOBS")
    variants = _variants(args)
    if args.log:
        match = [v for v in variants if v.name == args.log]
        if not match:
            raise BadArgument(
                f"--log {args.log!r} is not a variant; known: {', '.join(v.name for v in variants)}"
            )
    from workbench.kernels.build import build_many, target_arch, writable_cache

    writable_cache()  # an unwritable WORKBENCH_CACHE: one line before any compile
    arch = target_arch()
    print(f"building {len(variants)} variants for sm_{arch.replace('.', '')} ...", file=sys.stderr)
    with BuildProgress() as progress:
        try:
            results = build_many(variants, max_jobs=args.jobs, load=False, progress=progress)
        except KeyboardInterrupt:
            # builds are renamed into the cache whole: the finished ones are kept, no half one
            progress.stop()
            print(
                f"workbench build: interrupted; {progress.finished} of {len(variants)} "
                "variant(s) built or cached stay in the cache",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
    if args.log:
        print(next(r for r in results if r.variant.name == args.log).log)
        return 0
    sm70 = {}
    if args.sm70:
        from workbench.kernels.portable import compile_sm70

        sm70 = {v.name: compile_sm70(v) for v in variants}
    rows = []
    for r in results:
        p = r.ptxas
        row = {
            "variant": r.variant.name, "cache": "hit" if r.cache_hit else "built",
            "build_seconds": r.seconds, "arch": p.get("arch"), "registers": p.get("registers"),
            "spill_stores": p.get("spill_stores"), "spill_loads": p.get("spill_loads"),
            "stack": p.get("stack"), "smem": p.get("smem"), "lib_sha256": r.lib_sha256,
        }  # fmt: skip
        if r.variant.name in sm70:
            s = sm70[r.variant.name]
            row["sm70"] = {
                k: s.get(k)
                for k in ("registers", "spill_stores", "spill_loads", "stack", "smem", "hmma")
            }
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"variants (sm_{arch.replace('.', '')})")
    cols = ["variant", "cache", "build s", "regs", "spills (st/ld B)", "stack B", "smem B"]
    if sm70:
        cols.append("sm_70 regs / spills / HMMA")
    for c in cols:
        t.add_column(c, justify="left" if c in ("variant", "cache") else "right", no_wrap=True)
    for row in rows:
        cells = [
            row["variant"], row["cache"], f"{row['build_seconds']:.1f}", str(row["registers"]),
            f"{row['spill_stores']}/{row['spill_loads']}", str(row["stack"]), str(row["smem"]),
        ]  # fmt: skip
        if sm70:
            s = row["sm70"]
            cells.append(f"{s['registers']} / {s['spill_stores']} / {s['hmma']}")
        t.add_row(*cells)
    Console(width=max(Console().width, 110)).print(t)
    return 0
