"""Where the figures of a session lie: the file names `workbench plot` writes and the report links.

Its own module, below both: the plots write these files and the report links them, and neither
imports the other (docs/DESIGN.md §8).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

KIND_ORDER = ["summary", "ratios", "distributions", "nvml", "calibration", "floor"]


def plot_name(session_name: str, kind: str, fmt_: str) -> str:
    return f"{session_name}_{kind}.{fmt_}"


def existing_plots(session_name: str, plots_dir: str | os.PathLike) -> dict[str, Path]:
    """PNG figures of ``session_name`` already in ``plots_dir``: {kind: path}, summary first."""
    d = Path(plots_dir)
    if not d.is_dir():
        return {}
    pat = re.compile(re.escape(session_name) + r"_(.+)\.png$")
    found = {m.group(1): p for p in sorted(d.iterdir()) if (m := pat.match(p.name))}
    return {k: found[k] for k in sorted(found, key=lambda k: (KIND_ORDER + [k]).index(k))}
