"""Compile tier (marker compile): users' kernel specs build through the public CLI, from a folder
outside the package without editing any file of it, and the examples/ variant builds
(docs/DESIGN.md §4.1). Needs nvcc (and torch for the tensors), no GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_toolchain import cuda_build_skip_reason

from workbench.kernels.specs import REPO, csrc_dir

pytestmark = pytest.mark.compile
EXAMPLE = REPO / "examples" / "w13_unroll4" / "variant.toml"


def _package_state() -> dict[str, float]:
    """Modification times of every file of the package and its kernel sources."""
    return {
        str(p): p.stat().st_mtime
        for top in (REPO / "workbench", csrc_dir())
        for p in top.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _cli_build(spec: Path, cwd: Path) -> dict:
    """`python -m workbench build SPEC --json` as a user would run it (from ``cwd``)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "build", str(spec), "--json"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json.loads(proc.stdout)
    assert len(rows) == 1, rows
    return rows[0]


def _load(spec: Path):
    from workbench.kernels.build import build_variant
    from workbench.kernels.specs import load_spec
    from workbench.kernels.variants import Variant

    return build_variant(Variant.of_spec(load_spec(spec)))  # a cache hit after the CLI's build


def test_a_new_spec_outside_the_package_builds_through_the_cli(tmp_path):
    if reason := cuda_build_skip_reason():
        pytest.skip(reason)
    folder = tmp_path / "my_kernels" / "w2_unroll3"
    folder.mkdir(parents=True)
    # A W2 variant of the user's own: the project's launcher through an include folder, a
    # parameter of its own (3 units in flight) and a define of its own.
    (folder / "my_w2.cu").write_text(
        "// my W2: the project's launcher, built with my unroll\n"
        "#ifndef MY_VARIANT_TAG\n#error MY_VARIANT_TAG must come from the spec's defines\n#endif\n"
        '#include "w2.cu"\n'
    )
    spec = folder / "variant.toml"
    spec.write_text(
        f'name = "my-w2-unroll3"\nkernel = "w2"\nlayout = "b3"\nreader = "coop"\n'
        f'sources = ["my_w2.cu", "{csrc_dir() / "binding.cpp"}"]\n'
        f'include_dirs = ["{csrc_dir()}"]\ndefines = ["MY_VARIANT_TAG=1"]\n'
        "[promise]\ntolerance = 2e-3\n"
        '[params.unroll]\nmacro = "WB_W2_UNROLL"\nvalues = [1, 3]\ndefault = 3\n'
    )
    before = _package_state()
    row = _cli_build(spec, cwd=tmp_path)
    assert _package_state() == before, "building a user's spec edited a file of the package"
    assert row["variant"] == "w2:my-w2-unroll3" and row["cache"] in ("built", "hit")
    assert row["registers"] > 0 and row["spill_stores"] == 0 and len(row["lib_sha256"]) == 64
    res = _load(spec)
    m = res.module
    assert (m.kernel, m.layout, m.reader, m.calibration) == ("w2", "b3", "coop", False)
    assert res.name.startswith("wb_w2_my_w2_unroll3_") and res.lib_sha256 == row["lib_sha256"]
    # the built-in of the same layout and reader lives beside it in this process, by its own name
    from workbench.kernels.build import build_variant
    from workbench.kernels.variants import parse_arm

    builtin = build_variant(parse_arm("w2", "b3-coop"))
    assert builtin.name != res.name and builtin.module is not m


def test_the_examples_variant_builds():
    if reason := cuda_build_skip_reason():
        pytest.skip(reason)
    row = _cli_build(EXAMPLE, cwd=REPO)
    assert row["variant"] == "w13:w13-unroll4" and row["registers"] > 0
    m = _load(EXAMPLE).module
    assert (m.kernel, m.layout, m.reader) == ("w13", "b3", "scalar")
