"""What a full garbage collection costs a worker process, with and without ``gc.freeze()``.

A worker (workbench/run/worker_proc.py) collects once per bank batch and once per placement so
that dropped tensors free their device memory before the next ones are placed: about ten full
collections per main worker. Each walks every tracked object, most of them made by importing
torch and the engine. This script imports what a worker imports, then times ``gc.collect()``
(median of ``--repeats``) before and after freezing those objects. CPU only; no GPU needed.

    python3 benchmarks/gc_freeze.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def collect_ms(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    t = time.perf_counter()
    import torch  # noqa: F401

    import workbench.measure.engine
    import workbench.measure.monitor  # noqa: F401

    imported = time.perf_counter() - t
    tracked = len(gc.get_objects())
    before = collect_ms(args.repeats)
    gc.freeze()
    after = collect_ms(args.repeats)
    print(f"imports {imported:.2f} s, {tracked} tracked objects")
    print(f"gc.collect(): {before:.1f} ms before gc.freeze(), {after:.3f} ms after "
          f"(median of {args.repeats})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
