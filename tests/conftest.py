"""Test tiers: CPU tests always; `compile` tests where nvcc + a CUDA torch exist; `gpu` tests on a GPU.

Also the `roots` fixture of the TUI tests (tests/test_tui*.py), here so that each of them can take
it without importing it (a fixture imported by name reads as an unused import to ruff).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# One thread of BLAS and OpenMP per test process. The command runs a process per core
# (pytest-xdist, -n auto) and the engine's worker processes beside them; numpy's and torch's
# CPU pools each start a thread per core and spin while they wait, so two test processes on two
# cores ran four spinning threads: a simulated-device test took 32 s beside a copy of itself
# and 11 s with one thread each (benchmarks/results/test_suite.md). Set before numpy or torch is
# imported here, and inherited by the xdist workers, the engine's spawned workers and the
# subprocesses; a value already in the environment is kept.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _whole_file_slow(item) -> bool:
    """Whether the item's file is slow or compile as a whole (its module's ``pytestmark``)."""
    marks = getattr(item.module, "pytestmark", []) if item.module is not None else []
    marks = marks if isinstance(marks, list) else [marks]
    return any(m.name in ("slow", "compile") for m in marks)


def pytest_collection_modifyitems(config, items):
    # The files marked slow or compile as a whole run first, the rest after them (each file's
    # tests in their order): pytest-xdist hands out whole files (--dist loadfile) in this order,
    # and the many short files then even out the workers' ends, where two long files last in
    # alphabetical order (the wheel, the workers) left one core idle for half a minute.
    items.sort(key=lambda item: not _whole_file_slow(item))  # stable: files stay whole
    # The slow lane is declared by marks alone (`pytestmark = pytest.mark.slow` in a file, or
    # `@pytest.mark.slow` on a test: tests/test_one_home.py), never by a list of files here.
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (gpu marker); none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CI=true) the compile tier must run: a compile test that skips (no nvcc, no torch)
    fails, naming why, so a CI machine that lost its toolchain cannot pass by skipping."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and os.environ.get("CI") == "true" and item.get_closest_marker("compile"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"compile tier skipped in CI (CI=true), which must run it: {reason}"


@pytest.fixture(autouse=True)
def _session_index(tmp_path_factory, monkeypatch) -> Path:
    """Each test its own session index (workbench/store/index.py), never the user's cache."""
    path = tmp_path_factory.mktemp("index") / "sessions-index.json"
    monkeypatch.setenv("WORKBENCH_SESSION_INDEX", str(path))
    return path


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(source session, sessions root, plots root) of a synthetic session for the TUI tests."""
    from tui_backend_double import make_roots

    return make_roots(tmp_path)
