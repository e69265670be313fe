"""Which arm moves in block 0, and does a group without a rotating comparison show it at all?

    python3 benchmarks/block_history.py SESSION... [--cmp w13/hot,w2/hot]

For each session and comparison: the protocol (priming placements, neighbours first, warm-up
blocks), the sets its first group measured, each counted block's median A and B (µs per
replay), block 0's A and B against the median of blocks 1.., and the verdict's t-interval over
blocks with and without block 0 (workbench.core.stats, as the sessions' verdicts use). Read from
the journals only. Calibration comparisons (w13/hot/spin=0...) match a --cmp prefix.
(docs/investigations/2026-11-30-block-zero.md; the evidence it printed:
benchmarks/results/h200_e414c6c/README.md.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.core import stats  # noqa: E402
from workbench.store.session import load_session  # noqa: E402


def _interval(ratios: list, drop: int | None) -> str:
    kept = [r for r in ratios if r.block != drop]
    ci = stats.block_ci(kept)
    if ci is None:
        return "n/a"
    return f"{ci.center:.4f} [{ci.low:.4f}, {ci.high:.4f}] {stats.decide(kept)[1]}"


def rows(path: str, prefixes: list[str]) -> list[str]:
    s = load_session(path)
    proto = s.config.get("protocol", {})
    sets = s.config.get("sets")
    ms: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for x in s.samples:
        if not x.get("excluded") and x.get("block") is not None:
            ms[(x["cmp"], x["block"], x["arm"])].append(x["ms"] * 1e3)
    cmps = sorted({c for c, _, _ in ms if any(c == p or c.startswith(p + "/") for p in prefixes)})
    out = []
    for c in cmps:
        blocks = sorted({b for cc, b, _ in ms if cc == c})
        med = {(b, a): statistics.median(ms[(c, b, a)]) for b in blocks for a in "AB"}
        rest = {a: statistics.median(med[(b, a)] for b in blocks[1:]) for a in "AB"}
        shift = {a: 100 * (med[(blocks[0], a)] / rest[a] - 1) for a in "AB"}
        ratios = list(stats.pair_ratios([x for x in s.samples if x["cmp"] == c]))
        out.append(
            f"{Path(path).name}\t{c}\tprime={proto.get('prime_placements', 0)} "
            f"neighbours_first={proto.get('neighbours_first', 'warmup_blocks' in proto)} "
            f"warmup={proto.get('warmup_blocks', 0)}\tsets={','.join(sets or [])}\t"
            + " ".join(f"{med[(b, 'A')]:.1f}/{med[(b, 'B')]:.1f}" for b in blocks)
            + f"\tblock0 A {shift['A']:+.2f} % B {shift['B']:+.2f} %"
            + f"\tall {_interval(ratios, None)}\twithout 0 {_interval(ratios, blocks[0])}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sessions", nargs="+")
    ap.add_argument("--cmp", default="w13/hot,w2/hot", help="comparison ids (or prefixes)")
    a = ap.parse_args(argv)
    print(
        "session\tcmp\tprotocol\tsets\tblock medians A/B (µs per replay)\tblock 0 vs median "
        "of blocks 1..\tt-interval over blocks\twithout block 0"
    )
    for p in a.sessions:
        try:
            for line in rows(p, a.cmp.split(",")):
                print(line)
        except (OSError, ValueError, KeyError) as e:
            print(f"{p}: not read: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
