"""The package installs anywhere (issue 26, item 1; issue 25, item 2): a wheel carries the kernel
sources and the example, builds go to the user's cache folder, and the light install (no GPU
stack) browses.

- compile tier: the wheel, installed into a folder of its own (``pip install --target``) beside
  the torch of the interpreter running the tests, builds kernels with nvcc from another folder
  into ``$XDG_CACHE_HOME/workbench/build`` and answers ``workbench check --help``. A venv with
  ``--system-site-packages`` would see the *base* interpreter's packages, which inside a venv has
  none of torch's (issue 34, item 5): the target folder works the same from a venv and from the
  system Python;
- slow tier: the wheel with its base dependencies only (those its metadata names, and theirs, as
  this interpreter has them; `pip check` finds them complete; no torch) in a venv without system
  site-packages lists the committed sessions and names the extra for ``check``.
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


def base_distributions(wheel: Path) -> list:
    """The installed distributions the wheel's base requirements (no extra) name, and theirs in
    turn, as this interpreter has them: what pip would install for the light install."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    with zipfile.ZipFile(wheel) as z:
        (name,) = (n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        wanted = z.read(name).decode().splitlines()
    todo = [line.split(":", 1)[1] for line in wanted if line.startswith("Requires-Dist:")]
    found: dict[str, metadata.Distribution] = {}
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's, or another platform's or Python's
        key = canonicalize_name(req.name)
        if key in found:
            continue
        found[key] = dist = metadata.distribution(req.name)
        todo += dist.requires or []
    return list(found.values())


def _site_of(dists: list, folder: Path) -> None:
    """A folder holding exactly ``dists`` (a link to each of their top-level files and packages,
    their .dist-info included), to put on a venv's path: a site with nothing else in it."""
    folder.mkdir()
    for dist in dists:
        assert dist.files, f"{dist.metadata['Name']} records no files"
        for top in {f.parts[0] for f in dist.files if f.parts[0] != ".."}:
            link = folder / top
            if not link.exists():
                link.symlink_to(Path(dist.locate_file(top)).resolve())


@pytest.mark.slow
def test_the_light_install_has_no_torch_and_browses(wheel, tmp_path):
    """The wheel in a venv without system site-packages that sees only its base dependencies,
    as this interpreter has them installed (links to their files: pip resolving them from the
    index took 31 s of downloads, and this test checks what they are, not the index): `pip check`
    finds every requirement met, torch is absent, and it browses."""
    dists = base_distributions(wheel)
    names = {d.metadata["Name"].lower() for d in dists}
    assert {"numpy", "matplotlib", "textual", "platformdirs"} <= names, names
    assert not names & {"torch", "triton", "nvidia-ml-py"}, names
    venv = tmp_path / "light"
    _sh([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    py = str(venv / "bin" / "python")
    purelib = _sh(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path
    ).stdout.strip()
    _site_of(dists, tmp_path / "base")
    (Path(purelib) / "base_dependencies.pth").write_text(f"{tmp_path / 'base'}\n")
    env = _clean_env()
    pip = [sys.executable, "-m", "pip", "--python", py]  # this pip, working on the venv
    _sh([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp_path, env)
    assert "No broken requirements" in _sh([*pip, "check"], tmp_path, env).stdout
    probe = subprocess.run(
        [py, "-c", "import workbench; print(workbench.__file__); import torch"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr, probe.stderr
    assert Path(probe.stdout.strip()).is_relative_to(venv)  # the wheel's, not the checkout's
    wb = str(venv / "bin" / "workbench")
    out = _sh([wb, "sessions", "list", "--root", str(REPO / "sessions")], tmp_path, env).stdout
    assert "20261129T140359Z_default" in out and "NVIDIA H200" in out
    check = subprocess.run([wb, "check"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert check.returncode == EXIT_NO_GPU, check.stderr
    assert f"pip install '{DIST}[gpu]'" in check.stderr and "Traceback" not in check.stderr
