"""Wall time of `workbench plot`, run as a user runs it: the real CLI in subprocesses.

    python3 benchmarks/bench_plots.py [--repo DIR] [--root sessions] [--repeats 5] [--out FILE]

Cases (each repeated ``--repeats`` times, into a fresh output folder each time; the figure is the
median, the spread min..max, with the CPU seconds of the command beside the wall seconds):

* ``one``: ``workbench plot`` of ONE session (PNG and SVG, the default formats): 10 figures;
* ``eight``: ``workbench plot`` of EIGHT sessions in one command: their 80 figures and the
  replicates figure.

The sessions are the eight default replicates of 2026-12-04 committed under ``sessions/``
(``EIGHT``; ``one`` is the sixth of them, ``default-r8``), read from ``--root`` (default: this
checkout's sessions/), the same files whichever code runs. ``--repo`` is the checkout whose
``workbench`` package runs (PYTHONPATH), so one script times any commit:
``git archive COMMIT | tar -x -C /tmp/before``, then ``--repo /tmp/before``. Uses only the
standard library; the figures are checked to be there after each run (a faster run that drew
fewer files would not count).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import _timing

HERE = Path(__file__).resolve().parent.parent
EIGHT = (
    "20261204T034541Z_default-r2",
    "20261204T034742Z_default-r3",
    "20261204T034943Z_default-r4",
    "20261204T035642Z_default-r6",
    "20261204T035812Z_default-r7",
    "20261204T035946Z_default-r8",
    "20261204T040114Z_default-r9",
    "20261204T040236Z_default-r10",
)
ONE = EIGHT[5]


def case(sessions: list[Path], repo: Path, repeats: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    walls, cpus, files = [], [], set()
    for _ in range(repeats):
        out = Path(tempfile.mkdtemp(prefix="bench-plots-"))
        try:
            cmd = [
                sys.executable,
                "-m",
                "workbench",
                "plot",
                *map(str, sessions),
                "--out",
                str(out),
            ]
            wall, cpu, stdout = _timing.run(cmd, env, repo)
            listed = len(stdout.split())
            on_disk = sum(1 for p in out.iterdir() if not p.name.startswith("."))
            if on_disk != listed:
                raise SystemExit(f"listed {listed} files, {on_disk} on disk")
            walls.append(wall)
            cpus.append(cpu)
            files.add(on_disk)
        finally:
            shutil.rmtree(out)
    if len(files) != 1:
        raise SystemExit(f"the runs wrote different numbers of files: {sorted(files)}")
    return {
        "sessions": len(sessions),
        "files": files.pop(),
        **_timing.summary(walls, cpus),
        "runs": walls,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=HERE, help="checkout to time (default: this one)")
    ap.add_argument("--root", type=Path, default=HERE / "sessions", help="sessions folder")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each case (default: 5)")
    ap.add_argument("--cases", default="one,eight", help="which cases (default: one,eight)")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    ap.add_argument("--label", default="", help="a name for this run (e.g. the commit)")
    args = ap.parse_args()
    repo, root = args.repo.resolve(), args.root.resolve()
    res = _timing.start(args.label, args.repeats)
    chosen = {"one": [root / ONE], "eight": [root / n for n in EIGHT]}
    for name in args.cases.split(","):
        r = case(chosen[name], repo, args.repeats)
        res[name] = r
        print(
            f"{name:6s} {r['sessions']} session(s), {r['files']} files: median {r['median_s']:.2f} s"
            f"  [{r['min_s']:.2f}..{r['max_s']:.2f}]  cpu {r['cpu_median_s']:.2f} s"
        )
    return _timing.finish(res, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
