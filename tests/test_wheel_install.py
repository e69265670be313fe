"""The package installs anywhere (issue 26, item 1; issue 25, item 2): a wheel carries the kernel
sources and the example, builds go to the user's cache folder, and the light install (no GPU
stack) browses.

- compile tier: the wheel, installed into a folder of its own (``pip install --target``) beside
  the torch of the interpreter running the tests, builds kernels with nvcc from another folder
  into ``$XDG_CACHE_HOME/workbench/build`` and answers ``workbench check --help``. A venv with
  ``--system-site-packages`` would see the *base* interpreter's packages, which inside a venv has
  none of torch's (issue 34, item 5): the target folder works the same from a venv and from the
  system Python;
- slow tier: the wheel with its base dependencies only (pip resolves them, no torch) in a venv
  without system site-packages lists the committed sessions and names the extra for ``check``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cuda_toolchain import cuda_build_skip_reason
from fixtures_sessions import REPO

from workbench.core.errors import DIST, EXIT_NO_GPU

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane


def _sh(cmd: list[str], cwd: Path, env: dict | None = None, timeout: int = 900):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this checkout (built without an index: setuptools from this Python), from a
    copy of what the wheel is made of, so the build leaves nothing in the checkout."""
    src, dist = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("workbench", "csrc", "examples"):
        shutil.copytree(REPO / name, src / name, ignore=skip)
    _sh(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(dist), str(src)],
        cwd=dist,
    )  # fmt: skip
    (whl,) = dist.glob(f"{DIST.replace('-', '_')}-*.whl")
    return whl


def _clean_env(**extra: str) -> dict:
    """The environment of a user who has only the venv: no PYTHONPATH, no cache override."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_CACHE")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def test_the_wheel_carries_the_kernel_sources_and_the_example(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tree = {
        p.relative_to(REPO).as_posix()
        for top in ("csrc", "examples")
        for p in (REPO / top).rglob("*")
        if p.is_file() and p.suffix in {".cu", ".cuh", ".h", ".cpp", ".toml", ".md"}
    }
    assert "csrc/kernels/w13.cuh" in tree and "examples/w13_unroll4/variant.toml" in tree
    missing = sorted(f for f in tree if f"workbench/_data/{f}" not in names)
    assert missing == [], f"not in the wheel: {missing}"


@pytest.mark.compile
def test_the_installed_wheel_builds_from_another_folder(wheel, tmp_path):
    if reason := cuda_build_skip_reason():
        pytest.skip(reason)
    site = tmp_path / "site"
    _sh(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site),
         str(wheel)],
        tmp_path, _clean_env(),
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the wheel's folder first: it shadows the checkout's editable install, whose finder comes last
    env = _clean_env(
        XDG_CACHE_HOME=str(tmp_path / "xdg"), TORCH_CUDA_ARCH_LIST="9.0", PYTHONPATH=str(site)
    )
    where = _sh(
        [sys.executable, "-c", "import workbench, workbench.kernels.specs as s; "
         "print(workbench.__file__); print(s.csrc_dir())"],
        elsewhere, env,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(site) for p in where), where  # the wheel's, not a checkout's
    wb = str(site / "bin" / "workbench")
    rows = json.loads(
        _sh([wb, "build", "--kernel", "w2", "--no-calib", "--json"], elsewhere, env).stdout
    )
    assert [r["variant"] for r in rows] == ["w2:b4-scalar", "w2:b3-scalar", "w2:b3-coop"]
    assert all(r["cache"] == "built" and r["registers"] > 0 for r in rows)
    built = sorted(p.name for p in (tmp_path / "xdg" / "workbench" / "build").glob("wb_w2_*"))
    assert len(built) == 3, built  # in the user's cache folder (XDG), not the current folder
    example = Path(where[1]).parent / "examples" / "w13_unroll4" / "variant.toml"
    (row,) = json.loads(_sh([wb, "build", str(example), "--json"], elsewhere, env).stdout)
    assert row["variant"] == "w13:w13-unroll4" and row["registers"] > 0
    assert "--kernel" in _sh([wb, "check", "--help"], elsewhere, env).stdout
    assert sorted(p.name for p in elsewhere.iterdir()) == []  # nothing written where it ran


@pytest.mark.slow
def test_the_light_install_has_no_torch_and_browses(wheel, tmp_path):
    venv = tmp_path / "light"
    _sh([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    py = str(venv / "bin" / "python")
    _sh([py, "-m", "pip", "install", "-q", str(wheel)], tmp_path, _clean_env(), timeout=1200)
    env = _clean_env()
    probe = subprocess.run([py, "-c", "import torch"], capture_output=True, text=True, env=env)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr
    wb = str(venv / "bin" / "workbench")
    out = _sh([wb, "sessions", "list", "--root", str(REPO / "sessions")], tmp_path, env).stdout
    assert "20261129T140359Z_default" in out and "NVIDIA H200" in out
    check = subprocess.run([wb, "check"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert check.returncode == EXIT_NO_GPU, check.stderr
    assert f"pip install '{DIST}[gpu]'" in check.stderr and "Traceback" not in check.stderr
