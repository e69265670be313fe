"""Wall time of the browsing commands, run as a user runs them: the real CLI in subprocesses.

    python3 benchmarks/bench_browse.py [--repo DIR] [--root sessions] [--repeats 5] [--out FILE]

Cases (each repeated ``--repeats`` times; the figure is the median, the spread min..max):

* ``list``: ``workbench sessions list``, warm (the session index already filled by one run);
* ``list cold``: the same with an empty cache folder (every session validated, index written);
* ``list --json``: warm;
* ``show``: ``workbench sessions show`` of EVERY session under ``--root``, each repeated; the
  figure is the slowest session's median (the goal holds for all of them), with the median over
  sessions beside it;
* ``pool``: ``workbench sessions pool`` of the 15 default sessions of 2026-11-30
  (``20261130T*default*``: ten ``default-r*`` replicates at 14:28-14:41, r11, the 17:17 default
  and three more at 19:53-20:16).

``--repo`` is the checkout whose ``workbench`` package runs (PYTHONPATH), so one script times any
commit: ``git archive 35df7ad | tar -x -C /tmp/before`` then ``--repo /tmp/before``. The sessions
are always read from ``--root`` (default: this checkout's sessions/), the same files for both.
Each run has its own cache folder (WORKBENCH_CACHE), so nothing leaks between runs or into
the user's cache. Uses only the standard library.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import _timing

HERE = Path(__file__).resolve().parent.parent
POOL_GLOB = "20261204T0[34]*_default-*"  # the nine default runs of 519ef2b: one source tree


CPU: list[float] = []  # CPU seconds (user + system) of each timed run, beside its wall time


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall seconds of one run; its CPU seconds go to CPU (the machine is shared: on a busy
    one the wall time grows with the load, the CPU time much less)."""
    wall, cpu, _ = _timing.run(cmd, env, cwd)
    CPU.append(cpu)
    return wall


def summary(times: list[float]) -> dict[str, float]:
    return {**_timing.summary(times, CPU[-len(times) :]), "runs": len(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=HERE, help="checkout to time (default: this one)")
    ap.add_argument("--root", type=Path, default=HERE / "sessions", help="sessions folder")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    ap.add_argument("--label", default="", help="a name for this run (e.g. the commit)")
    ap.add_argument("--shows", default="", help="time `show` of these sessions only (a,b,...)")
    args = ap.parse_args()
    repo, root = args.repo.resolve(), args.root.resolve()
    cache = Path(tempfile.mkdtemp(prefix="bench-browse-"))
    env = {**os.environ, "PYTHONPATH": str(repo), "WORKBENCH_CACHE": str(cache / "warm")}
    wb = [sys.executable, "-m", "workbench", "sessions"]
    names = sorted(p.name for p in root.iterdir() if (p / "session.json").is_file())
    pool = sorted(p.name for p in root.glob(POOL_GLOB) if (p / "session.json").is_file())
    res: dict[str, object] = {**_timing.start(args.label, args.repeats), "sessions": len(names)}
    lst = [*wb, "list", "--root", str(root)]
    timed(lst, env, repo)  # fills the index of the warm cache
    res["list"] = summary([timed(lst, env, repo) for _ in range(args.repeats)])
    cold = []
    for i in range(args.repeats):
        cold.append(timed(lst, {**env, "WORKBENCH_CACHE": str(cache / f"cold{i}")}, repo))
    res["list cold"] = summary(cold)
    lj = [*wb, "list", "--json", "--root", str(root)]
    res["list --json"] = summary([timed(lj, env, repo) for _ in range(args.repeats)])
    shows = {}
    for n in args.shows.split(",") if args.shows else names:
        cmd = [*wb, "show", n, "--root", str(root)]
        shows[n] = summary([timed(cmd, env, repo) for _ in range(args.repeats)])
        print(f"show {n}: {shows[n]['median_s']:.3f} s", file=sys.stderr)
    worst = max(shows, key=lambda n: shows[n]["median_s"])
    res["show"] = {
        "slowest": worst,
        **shows[worst],
        "median_over_sessions_s": statistics.median(s["median_s"] for s in shows.values()),
    }
    res["show per session"] = shows
    pc = [*wb, "pool", *pool, "--root", str(root)]
    res["pool"] = {
        "sessions": len(pool),
        **summary([timed(pc, env, repo) for _ in range(args.repeats)]),
    }
    for k in ("list", "list cold", "list --json", "show", "pool"):
        r = res[k]
        extra = f" (slowest: {r['slowest']})" if k == "show" else ""
        print(
            f"{k:12s} median {r['median_s']:.3f} s  [{r['min_s']:.3f}..{r['max_s']:.3f}]"
            f"  cpu {r['cpu_median_s']:.3f} s{extra}"
        )
    return _timing.finish(res, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
