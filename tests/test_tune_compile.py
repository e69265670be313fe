"""Compile tier (marker compile): a tune candidate builds through the public build path, its
parameters reaching nvcc as -D flags and its build living under a name of its own."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.compile


def test_a_parameter_variant_builds_in_its_own_cache_entry(tmp_path, monkeypatch):
    from cuda_toolchain import cuda_build_skip_reason

    from workbench.kernels.build import build_name, build_variant

    if reason := cuda_build_skip_reason():
        pytest.skip(reason)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    from workbench.tune.space import Candidate

    v = Candidate("w13", "b3-scalar", (("unroll", 4), ("max_warps", 16)), False).variant
    base = Candidate("w13", "b3-scalar", (("unroll", 5), ("max_warps", 16)), True).variant
    res = build_variant(v, load=False)  # the child process gets the variant with its parameters
    assert res.name == build_name(v, "9.0") != build_name(base, "9.0")
    meta = json.loads((tmp_path / "build" / res.name / "workbench_build.json").read_text())
    assert meta["variant"] == "w13:b3-scalar[unroll=4]"
    assert "-DWB_W13_UNROLL=4" in meta["log"]  # the flag reached nvcc
    assert res.ptxas["spill_stores"] == 0
