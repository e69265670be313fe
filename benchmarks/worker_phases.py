"""Where a run's time goes, per worker process and phase (docs/DESIGN.md §5.10).

    python3 benchmarks/worker_phases.py SESSION... [--json]

On the GPU machine, after a run: ``PYTHONPATH=. python3 -m workbench ab --no-plots`` then
``python3 benchmarks/worker_phases.py latest``. Each SESSION is a path, a name under
--root (default sessions/), a unique part of one, or "latest". The table is
workbench.run.phases (the same as `workbench sessions show SESSION --phases`): per worker its
wall, import, wait and turn seconds and the seconds of each phase of its turn, the phases summed
over the workers, and the parent's steps where the session recorded them. Exit 2: a SESSION not
found or not loadable (one line).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.core import defaults  # noqa: E402
from workbench.core.errors import WorkbenchError  # noqa: E402
from workbench.run.phases import phase_lines, phase_table  # noqa: E402
from workbench.store.listing import find_session  # noqa: E402
from workbench.store.session import load_session  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sessions", nargs="+", metavar="SESSION")
    ap.add_argument("--root", default=defaults.SESSIONS_DIR)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        tables = [phase_table(load_session(find_session(p, args.root), nvml=False))
                  for p in args.sessions]  # fmt: skip
    except WorkbenchError as e:  # a bad name or session: one line, exit 2
        print(f"worker_phases: {e}", file=sys.stderr)
        return 2
    if args.json:
        json.dump([t.to_dict() for t in tables], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for t in tables:
            print("\n".join(phase_lines(t)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
