"""Provenance of a session (docs/DESIGN.md §8): package version, git commit, file hashes, Python/platform.

Torch-free on purpose: callers add the torch/CUDA/GPU facts they already hold (under
``environment``, see docs/ARCHITECTURE.md), so this module stays cheap and CPU-testable.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.core.errors import BadArgument

_GIT_TIMEOUT_S = 5.0  # provenance must never hang a run on a slow or locked repository
REPO_ROOT = Path(__file__).resolve().parents[2]


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes. A missing file is a BadArgument naming it."""
    p = Path(path)
    if not p.is_file():
        raise BadArgument(f"provenance file {str(p)!r} does not exist or is not a file")
    h = hashlib.sha256()
    with p.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_files(
    paths: Iterable[str | os.PathLike], base: str | os.PathLike | None = None
) -> dict[str, str]:
    """{name: sha256} for each file; names are relative to ``base`` (default: the repository root)
    when the file lies under it, else absolute, so the keys match across checkouts."""
    base_p = Path(base).resolve() if base is not None else REPO_ROOT
    out: dict[str, str] = {}
    for path in paths:
        p = Path(path).resolve()
        try:
            name = p.relative_to(base_p).as_posix()
        except ValueError:
            name = str(p)
        out[name] = sha256_file(p)
    return dict(sorted(out.items()))


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        r = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def git_info(repo: str | os.PathLike | None = None) -> dict[str, Any]:
    """{"commit": sha or None, "dirty": bool or None, "branch": name or None} of ``repo``.

    ``dirty`` counts modified tracked files only: new session folders (untracked) do not make a
    checkout dirty. All None when git or the repository is absent.
    """
    cwd = Path(repo) if repo is not None else REPO_ROOT
    commit = _git(["rev-parse", "HEAD"], cwd)
    told = os.environ.get("WORKBENCH_COMMIT") or None
    if told is not None and commit is not None and told != commit:
        # A tree shipped to a GPU machine may sit on an older checkout there (seen: the device's
        # copy carried the session's first commit, "dirty"). The sender knows better; keep both.
        return {"commit": told, "dirty": None, "branch": None, "checkout_commit": commit}
    if commit is None:
        # A copy of the tree without .git (e.g. shipped to a GPU machine): the sender may say which
        # commit it is; the source SHA-256 hashes pin the kernels either way.
        return {
            "commit": told,
            "dirty": None,
            "branch": None,
        }
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
    return {"commit": commit, "dirty": None if status is None else bool(status), "branch": branch}


def python_platform() -> dict[str, Any]:
    """Interpreter, OS and the numeric libraries' versions (not torch: callers add it)."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    for mod in ("numpy", "scipy"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    return info


def collect(
    files: Iterable[str | os.PathLike] = (), repo: str | os.PathLike | None = None
) -> dict[str, Any]:
    """The provenance dict for session.json.

    ``files``: kernel sources (and anything else whose exact bytes matter) to hash; the keys of
    ``"files"`` are repository-relative paths. Callers may add ``"builds"`` ({variant: sha256 of
    the built library}) themselves; `workbench sessions compare` compares ``"files"`` only,
    since built libraries differ legitimately across GPUs.
    """
    return {
        "package": "workbench",
        "version": __version__,
        "git": git_info(repo),
        "files": sha256_files(files, base=repo),
        **python_platform(),
    }


# ------------------------------------------------------------------------ stale evidence

KERNEL_PREFIX = "csrc/"  # provenance "files" keys of kernel sources (build.source_hashes)
# A session measured on other kernel sources than the working tree's: its mark in a listing and
# the sentences that say it, here beside the rule (`staleness`), the one home of both
STALE = "STALE"
STALE_NOTE = f"{STALE}: kernel sources (csrc/) differ from the working tree: re-measure"


def kernel_files(files: Mapping[str, str] | None) -> dict[str, str]:
    """The csrc/ entries of a provenance ``files`` dict."""
    return {k: v for k, v in (files or {}).items() if k.startswith(KERNEL_PREFIX)}


def current_sources() -> dict[str, str]:
    """SHA-256 of the working tree's kernel sources, keyed like provenance ``files``."""
    from workbench.kernels.sources import source_hashes  # no NumPy, no torch

    return source_hashes()


def source_digest(files: Mapping[str, str] | None, length: int = 8) -> str | None:
    """A short hash over the csrc/ entries of ``files`` (None when there are none): two
    sessions with the same digest were measured on the same kernel sources."""
    kf = kernel_files(files)
    if not kf:
        return None
    text = "".join(f"{k}\0{v}\n" for k, v in sorted(kf.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def stale_sources(
    files: Mapping[str, str] | None, current: Mapping[str, str] | None = None
) -> list[str] | None:
    """Kernel sources whose recorded hash differs from ``current`` (default: the working tree).

    A file present on one side only counts as different. Returns the sorted csrc/ paths ([] when
    the session matches), or None when it cannot be told: the session recorded no csrc/ hashes,
    or there are no current sources to compare with.
    """
    recorded = kernel_files(files)
    now = kernel_files(current_sources() if current is None else current)
    if not recorded or not now:
        return None
    return sorted(k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k))


# benchmarks/device_code.py's record: which old csrc/ trees give a GPU architecture the same device
# code and launches as the working tree (docs/EVIDENCE.md, "Same device code"); a checkout's file
EQUIVALENCE = REPO_ROOT / "benchmarks" / "results" / "device_code" / "equivalence.json"


def load_equivalence(path: Path = EQUIVALENCE) -> dict | None:
    """The device-code equivalence record, or None where there is none (an installed wheel)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _read_json(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read_json(path: str, mtime_ns: int, size: int) -> dict | None:
    import json

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def gpu_arch(gpu: Mapping[str, Any] | None) -> str | None:
    """compute_XY of a session's GPU (environment.gpu.sm, e.g. "9.0"), None where unknown."""
    sm = gpu.get("sm") if isinstance(gpu, Mapping) else None
    return f"compute_{str(sm).replace('.', '')}" if sm else None


def same_device_code(
    arch: str | None,
    files: Mapping[str, str] | None,
    current: Mapping[str, str] | None,
    eq: Mapping | None,
) -> bool:
    """Whether ``eq`` (the equivalence record) shows that sources ``files`` and the working tree
    (or ``current``) give a GPU of ``arch`` the same device code and launches: made for the
    working tree and, among its old trees, exactly ``files``, on that architecture, and found
    identical."""
    if not eq or not eq.get("identical") or arch is None or eq.get("arch") != arch:
        return False
    now = kernel_files(current_sources() if current is None else current)
    olds = [old.get("sources") for old in eq.get("from", []) if isinstance(old, Mapping)]
    return kernel_files(files) in olds and now == eq.get("to_sources")


@dataclass(frozen=True)
class Staleness:
    """Whether a session describes the working tree's kernels: the one rule of `sessions list`,
    `show`, the report, the TUI, `export` and the evidence test (docs/EVIDENCE.md).

    ``differ``: the csrc/ files whose hash differs from the working tree's ([]: none; None: not
    known); ``same_code``: the equivalence record shows those sources give the session's GPU the
    same device code and launches as the working tree. Stale = sources differ, not so shown."""

    differ: list[str] | None
    same_code: bool = False
    arch: str | None = None

    @property
    def stale(self) -> bool:
        return bool(self.differ) and not self.same_code

    def text(self) -> str:
        """One line: "kernel sources match ...", "STALE: ...", or why differing sources are
        current."""
        if self.differ and self.same_code:
            return (
                f"kernel sources differ from the working tree ({_files_text(self.differ)}) but "
                f"give {self.arch} the same device code and launches "
                "(benchmarks/results/device_code/equivalence.json): current"
            )
        return staleness_text(self.differ)


def staleness(
    files: Mapping[str, str] | None,
    arch: str | None,
    current: Mapping[str, str] | None = None,
    equivalence: Mapping | None | bool = True,
) -> Staleness:
    """The staleness of a session of kernel sources ``files`` measured on a GPU of ``arch``
    (``gpu_arch``) against ``current`` (default: the working tree), with ``equivalence`` (True:
    the committed record; None: none)."""
    differ = stale_sources(files, current)
    if not differ:
        return Staleness(differ, False, arch)
    eq = load_equivalence() if equivalence is True else equivalence
    return Staleness(differ, same_device_code(arch, files, current, eq or None), arch)


def session_staleness(s: Any, current: Mapping[str, str] | None = None) -> Staleness:
    """``staleness`` of a loaded Session."""
    return staleness(s.provenance.get("files"), gpu_arch(s.gpu), current)


def _files_text(files: list[str], limit: int = 6) -> str:
    return ", ".join(files[:limit]) + (
        f" and {len(files) - limit} more" if len(files) > limit else ""
    )


def staleness_text(stale: list[str] | None, limit: int = 6) -> str:
    """One line for `sessions show`, the report and the TUI, from `stale_sources`."""
    if stale is None:
        return "kernel sources unknown: the session recorded no csrc/ hashes"
    if not stale:
        return "kernel sources match the working tree"
    return f"{STALE}: kernel sources differ from the working tree: {_files_text(stale, limit)}"
