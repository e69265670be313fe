"""Where the built-in kernels' sources are and their hashes, with nothing heavy imported.

`sessions list` marks a session STALE when the csrc/ it was measured on differs from the
working tree's; that needs these hashes and nothing else of the kernels layer (specs and builds
import NumPy through the layouts, 0.1-0.2 s of a listing's 0.3 s).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".inc")


def csrc_dir() -> Path:
    """Kernel sources: $WORKBENCH_CSRC (tests build a broken copy), else csrc/ of this checkout
    or of the installed package (workbench/core/paths.py)."""
    env = os.environ.get("WORKBENCH_CSRC")
    if env:
        return Path(env)
    from workbench.core.paths import data_folder

    return data_folder("csrc")


def all_source_files() -> list[Path]:
    """Every source file of the built-ins' tree (what their build names hash)."""
    d = csrc_dir()
    return sorted(p for p in d.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())


def source_hashes() -> dict[str, str]:
    """Relative path -> SHA-256 of every kernel source (for provenance)."""
    d = csrc_dir()
    return {
        f"csrc/{p.relative_to(d)}": hashlib.sha256(p.read_bytes()).hexdigest()
        for p in all_source_files()
    }
