"""Block 0 against the later blocks, per session and comparison
(docs/investigations/2026-11-30-block-zero.md).

For every counted block: median B over median A of its kept samples (the measure issue 23 used);
then block 0's log ratio minus the mean of the others', and whether block 0 is the most extreme
block. Priming placements and warm-up blocks are never in the samples, so they never count.

    python3 benchmarks/block_shift.py SESSION [SESSION ...] [--cmp w13/hot,w2/hot]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.store.session import load_session  # noqa: E402


def block_ratios(samples: list[dict], cmp: str) -> list[float]:
    ms: dict[tuple[int, str], list[float]] = defaultdict(list)
    for s in samples:
        if s["cmp"] == cmp and not s.get("excluded") and s.get("block") is not None:
            ms[(s["block"], s["arm"])].append(s["ms"])
    blocks = sorted({b for b, _ in ms if (b, "A") in ms and (b, "B") in ms})
    return [statistics.median(ms[(b, "B")]) / statistics.median(ms[(b, "A")]) for b in blocks]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sessions", nargs="+")
    p.add_argument("--cmp", default="w13/hot,w2/hot", help="comma list (%(default)s)")
    args = p.parse_args(argv)
    cmps = [c for c in args.cmp.split(",") if c]
    print("session\tcmp\tprotocol\tblock ratios\tblock0 shift\tblock0 most extreme")
    for path in args.sessions:
        s = load_session(path)
        proto = s.config.get("protocol", {})
        kind = (
            f"prime={proto.get('prime_placements', 0)} "
            f"neighbours_first={proto.get('neighbours_first', 'warmup_blocks' in proto)} "
            f"warmup_blocks={proto.get('warmup_blocks', 0)}"
        )
        for c in cmps:
            r = block_ratios(s.samples, c)
            if len(r) < 2:
                continue
            logs = [math.log(x) for x in r]
            shift = logs[0] - statistics.fmean(logs[1:])
            centre = statistics.fmean(logs)
            extreme = max(range(len(logs)), key=lambda i: abs(logs[i] - centre)) == 0
            ratios = " ".join(f"{x:.4f}" for x in r)
            print(f"{Path(path).name}\t{c}\t{kind}\t{ratios}\t{shift:+.4f}\t{extreme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
