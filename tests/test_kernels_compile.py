"""Compile tier (marker compile): every variant builds with nvcc alone for the H200's sm_90,
loads without a GPU, reports its ptxas resources, rejects every invalid argument before launch, and
compiles for sm_70 through NVRTC 12 + ptxas 12. Needs nvcc (and torch for the tensors), no GPU."""

from __future__ import annotations

import os
import re
import shutil
import time

import pytest
from cuda_toolchain import cuda_build_skip_reason

from workbench.core.errors import BuildError
from workbench.kernels import argcases
from workbench.kernels.variants import all_variants

pytestmark = pytest.mark.compile

VARIANTS = all_variants(calib=True)


SKIP = cuda_build_skip_reason()


@pytest.fixture(scope="session")
def builds():
    if SKIP:
        pytest.skip(SKIP)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # the H200; without a GPU nothing says so
    from workbench.kernels.build import build_many

    return {r.variant.name: r for r in build_many(VARIANTS)}


def test_every_variant_builds_for_sm90_without_spills(builds):
    assert set(builds) == {v.name for v in VARIANTS}
    for name, r in builds.items():
        p = r.ptxas
        assert p["arch"] == "sm_90", (name, p)
        assert 16 <= p["registers"] <= 255, (name, p)
        assert p["spill_stores"] == 0 and p["spill_loads"] == 0, (name, p)
        assert r.module.kernel == name.split(":")[0]
        assert r.module.layout == r.variant.layout and r.module.reader == r.variant.reader
        assert bool(r.module.calibration) == r.variant.calib
        assert len(r.lib_sha256) == 64


def test_repeat_build_is_a_cache_hit_well_under_a_second(builds):
    from workbench.kernels.build import build_variant

    v = VARIANTS[0]
    t0 = time.perf_counter()
    r = build_variant(v)
    dt = time.perf_counter() - t0
    assert r.cache_hit and r.module is builds[v.name].module
    assert dt < 1.0, f"cache hit took {dt:.2f} s"


CASES = [
    (v, c)
    for v in VARIANTS
    if v.arm in ("b4-scalar", "b3-coop") or v.calib
    for c in argcases.cases(v.kernel, v.layout, calibration_build=v.calib)
]


@pytest.mark.parametrize("variant,case", CASES, ids=[f"{v.name}-{c.name}" for v, c in CASES])
def test_invalid_argument_rejected_before_launch(builds, variant, case):
    a = argcases.valid_args(
        variant.kernel, variant.layout
    )  # CPU tensors: checks run, nothing launches
    case.mutate(a)
    with pytest.raises(ValueError, match=re.escape(case.expect)):
        argcases.call(builds[variant.name].module, variant.kernel, a)


def test_at_least_48_distinct_invalid_argument_cases():
    names = {(c.kernel, c.name) for c in argcases.cases("w13", "b3") + argcases.cases("w2", "b4")}
    assert len(names) >= 48


def test_failed_build_gives_the_compiler_error_not_a_traceback(tmp_path, monkeypatch):
    if SKIP:
        pytest.skip(SKIP)
    from workbench.kernels.build import CSRC, build_variant
    from workbench.kernels.variants import parse_arm

    broken = tmp_path / "csrc"
    shutil.copytree(CSRC, broken)
    src = broken / "w2.cu"
    src.write_text(
        src.read_text().replace(
            "wb::W2Params p{};", "wb::W2Params p{}; int oops = undeclared_thing;"
        )
    )
    monkeypatch.setenv("WORKBENCH_CSRC", str(broken))
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(BuildError) as ei:
        build_variant(parse_arm("w2", "b3-scalar"))
    msg = str(ei.value)
    assert "undeclared_thing" in msg and "w2.cu" in msg
    assert "Traceback" not in msg
    assert "undeclared_thing" in ei.value.log


def test_kernels_compile_for_sm70_with_nvrtc12():
    from workbench.kernels.portable import compile_sm70, find_toolchain12

    tc = find_toolchain12()
    if tc is None:
        pytest.skip("CUDA 12 NVRTC/ptxas wheels not installed (dev extra)")
    reports = [compile_sm70(v, tc) for v in VARIANTS]
    for r in reports:
        print(
            f"sm_70 {r['variant']}: {r['registers']} registers, {r['spill_stores']} B spill stores, "
            f"{r['stack']} B stack, {r['smem']} B smem"
        )
        assert r["arch"] == "sm_70"
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
        assert r["registers"] <= 255


def test_floor_probe_builds(tmp_path):
    """benchmarks/floor_probe.cu (the launch/streaming yardstick of the README) keeps compiling."""
    import subprocess
    from pathlib import Path

    if SKIP:
        pytest.skip(SKIP)
    from workbench.kernels.build import cuda_home

    nvcc = Path(cuda_home()) / "bin" / "nvcc"
    src = Path(__file__).resolve().parents[1] / "benchmarks" / "floor_probe.cu"
    out = tmp_path / "floor_probe"
    r = subprocess.run(
        [str(nvcc), "-O3", "-std=c++17", "-arch=sm_90", "-o", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert out.stat().st_size > 0


def test_floor_probe_builds_with_nvcc_alone(tmp_path, monkeypatch):
    """benchmarks/floor_ext.cu, the probe bench_kernels.py times in its own process, builds with
    nvcc alone (no torch header: 4 s, against 38 s as a torch extension) and loads without a GPU,
    exports the launch bounds floor_inproc.py reads, and refuses what it cannot launch with a
    message that names it (its launch arguments are checked before the tensors' device, so a
    machine without a GPU reaches every check)."""
    from pathlib import Path

    import torch

    if SKIP:
        pytest.skip(SKIP)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import floor_inproc

    ext = floor_inproc.load_probe()
    # every math kind has a shape it fits; the two-CTA kinds' bound is the smaller
    assert ext.MATH2_THREADS <= ext.MATH_THREADS
    assert any(b <= ext.MATH2_THREADS for _, b in floor_inproc.SHAPES)
    src = torch.zeros(512, dtype=torch.uint8)
    ids, out = torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    refused = (  # (block, math16, kind) -> what the message names
        ((32, 32, "bogus"), "kind must be 'u8', 'u4x2', 'u2x2' or 'arith', not 'bogus'"),
        ((32, 0, "arith"), "kind 'arith' needs math16 > 0"),
        ((640, 32, "u2x2"), "block must be <= 512"),
        ((1024, 32, "u8"), "block must be <= 800"),
        ((32, 16, "u8"), "math16 must be a multiple of 32"),
        ((32, 64, "u8"), "math16 must be a multiple of 32 in 0..src's 16-byte elements"),
        ((32, 32, "u8"), "src must be a contiguous CUDA uint8 tensor"),  # the arguments are fine
    )
    for (block, math16, kind), message in refused:
        with pytest.raises(ValueError, match=re.escape(message)):
            ext.launch(src, ids, out, 1, block, True, math16, kind)
    assert floor_inproc.load_probe().__file__ == ext.__file__  # built once, then found
