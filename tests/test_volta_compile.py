"""Compile tier, on the CPU: every variant (W13 and W2, every reader and layout, the calibration
builds) goes through NVRTC 12 and ptxas 12 for sm_70 (and sm_75) and keeps its tensor-core
instructions, with no spills; the CUDA-core build (WB_DOT_FMA) fails the same check. Needs the
CUDA 12 wheels of the dev extra (nvidia-cuda-nvrtc-cu12, -nvcc-cu12, -runtime-cu12); in CI
(CI=true) their absence is a failure, not a skip."""

from __future__ import annotations

import os

import pytest

from workbench.kernels.portable import compile_sm70, find_toolchain12, hmma_probe
from workbench.kernels.variants import all_variants

pytestmark = pytest.mark.compile

VARIANTS = all_variants(calib=True)
W2_MAX_REGISTERS = 64  # W2's 1024-thread CTAs (max_warps 32): 65536 registers / 1024 threads


@pytest.fixture(scope="module")
def tc():
    found = find_toolchain12()
    if found is None:
        why = (
            "CUDA 12 NVRTC/ptxas wheels not installed: pip install nvidia-cuda-nvrtc-cu12 "
            "nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 (the dev extra)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def reports(tc):
    out = {}
    for v in VARIANTS:
        for arch in ("70", "75"):
            out[v.name, arch] = compile_sm70(v, tc, arch)
        out[v.name, "fma"] = compile_sm70(v, tc, "70", defines=("WB_DOT_FMA",))
    return out


def tensor_core_problems(v, r: dict, arch: str) -> list[str]:
    """What is wrong with a Volta/Turing build of variant v: the check every variant must pass."""
    unroll = dict(v.kernel_spec.resolve(dict(v.params)))["unroll"]
    per_group = {"70": 8, "75": 8}[arch]  # m8n8k4 (sm_70); two m16n8k8 per m16n8k16 (sm_75)
    problems = []
    if r["hmma"] == 0:
        problems.append("no HMMA instruction in its SASS")
    if r["mma"] != per_group * unroll:
        problems.append(f"{r['mma']} mma in its PTX, not {per_group} per group x unroll {unroll}")
    if r["spill_stores"] or r["spill_loads"] or r["stack"]:
        problems.append(f"spills ({r['spill_stores']} B stores, {r['stack']} B stack)")
    limit = W2_MAX_REGISTERS if v.kernel == "w2" else 255
    if r["registers"] > limit:
        problems.append(f"{r['registers']} registers > {limit}")
    return problems


def test_hmma_count_follows_the_mma_instructions_of_a_probe(tc):
    # the counting itself: 4 HMMA per m8n8k4 on sm_70, 1 per m16n8k8 on sm_75, none without
    assert [hmma_probe(n, "m8n8k4", tc, "70") for n in range(3)] == [0, 4, 8]
    assert [hmma_probe(n, "m16n8k8", tc, "75") for n in range(3)] == [0, 1, 2]


@pytest.mark.parametrize("arch", ["70", "75"])
def test_every_variant_keeps_its_tensor_cores_without_spills(reports, arch):
    for v in VARIANTS:
        r = reports[v.name, arch]
        print(
            f"sm_{arch} {v.name}: {r['registers']} registers, {r['spill_stores']} B spill stores, "
            f"{r['stack']} B stack, {r['smem']} B smem, {r['mma']} mma (PTX), "
            f"{r['hmma']} HMMA of {r['instructions']} instructions (SASS)"
        )
        assert r["arch"] == f"sm_{arch}"
        assert tensor_core_problems(v, r, arch) == [], (v.name, r)


def test_the_cuda_core_build_fails_the_check(reports):
    # the negative control: the same variants on the FP32 FMA path have no tensor-core code
    for v in VARIANTS:
        r = reports[v.name, "fma"]
        assert r["hmma"] == 0 and r["mma"] == 0, (v.name, r)
        assert "no HMMA instruction in its SASS" in tensor_core_problems(v, r, "70"), v.name


def test_readers_and_layouts_share_the_dot_product(reports):
    # the reader is the only difference: every arm of a kernel runs the same number of products
    for arch in ("70", "75"):
        for kernel in ("w13", "w2"):
            counts = {reports[v.name, arch]["mma"] for v in VARIANTS if v.kernel == kernel}
            assert len(counts) == 1, (arch, kernel, counts)
