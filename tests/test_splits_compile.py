"""Compile tier, on the CPU: the split-K builds of benchmarks/bench_splits.py
(csrc/kernels/split_sum.cuh). Each keeps its tensor-core instructions without spills for sm_70
and sm_75 (NVRTC 12 and ptxas 12, the check every built-in passes) and for sm_90, launches the
grid and block the benchmark reports (split_count's fallback to one CTA per tile included), builds
with nvcc and refuses every invalid argument, and each W13 split CTA copies exactly the groups of
x its warps read (split_x_word, on the host). That
a default build's device code does not change is benchmarks/device_code.py's record
(tests/test_evidence.py); that the split builds give the one-CTA bits is the GPU's to show
(benchmarks/evidence.sh splits)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from cuda_toolchain import cuda_build_skip_reason
from test_volta_compile import tc, tensor_core_problems  # noqa: F401 (tc: a fixture)

from workbench.kernels.portable import compile_sm70
from workbench.kernels.variants import Variant

pytestmark = pytest.mark.compile
ROOT = Path(__file__).resolve().parents[1]
SPLITS = (("w13", 2), ("w13", 3), ("w13", 4), ("w2", 2), ("w2", 3))  # 3: idle warp slots


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load("bench_splits")


def test_split_builds_keep_tensor_cores_without_spills(tc, bench):  # noqa: F811
    problems = []
    for kernel, splits in SPLITS:
        for arm in bench.READERS:
            v = Variant.of_spec(bench.split_spec(kernel, arm, splits))
            for arch in ("70", "75"):
                r = compile_sm70(v, tc, arch)
                problems += [f"{v.name} sm_{arch}: {p}" for p in tensor_core_problems(v, r, arch)]
            r = compile_sm70(v, tc, "90")
            if r["spill_stores"] or r["spill_loads"] or r["stack"]:
                problems.append(
                    f"{v.name} sm_90: spills ({r['spill_stores']} B, {r['stack']} B stack)"
                )
    assert problems == []


def test_split_launches_are_what_the_benchmark_reports(bench, tmp_path, monkeypatch):
    why = cuda_build_skip_reason()
    if why:
        pytest.skip(why)
    device_code = _load("device_code")
    # the preset (W13 100 tiles, W2 80), the benchmark's loop shape, one where 3 splits leave an
    # idle warp slot (W2 25 warps), and one whose W13 tiles do not fit the workspace (fallback)
    rows = {
        "w13": [(2560, 320, 10), (4096, 4096, 4), (2048, 4096, 64)],
        "w2": [(160, 2560, 10), (2048, 4096, 4), (512, 2048, 2)],
    }
    max_warps = {k: bench._warp_params(k) for k in rows}
    seen_fallback = False
    for kernel, splits in SPLITS:
        dims = [(kernel, K, N, k) for K, N, k in rows[kernel]]
        monkeypatch.setattr(device_code, "launch_dims", lambda dims=dims: dims)
        v = Variant.of_spec(bench.split_spec(kernel, "b3-scalar", splits))
        lines = device_code.launch_shapes(ROOT / "csrc", v, tmp_path).splitlines()
        for (_, K, N, k), line in zip(dims, lines, strict=True):
            hidden, inter = (K, N // 2) if kernel == "w13" else (N, K)
            shape = bench.Shape(hidden=hidden, inter=inter, experts=64, top_k=k, layers=1, tp=1)
            want = bench.expected_launch(kernel, shape, splits, *max_warps[kernel])
            tiles = N // 32
            grid = (tiles, k, want["splits"]) if kernel == "w13" else (tiles, want["splits"], 1)
            assert f"grid {grid[0]} {grid[1]} {grid[2]} block {want['threads']} 1 1" in line, (
                kernel, splits, line, want)  # fmt: skip
            seen_fallback |= want["splits"] == 1
    assert seen_fallback  # the workspace bound was exercised


@pytest.fixture(scope="module")
def nvcc_builds(bench):
    why = cuda_build_skip_reason()
    if why:
        pytest.skip(why)
    import os

    from workbench.kernels.build import build_many

    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # the H200; without a GPU nothing says so
    vs = [Variant.of_spec(bench.split_spec(k, "b3-coop", s)) for k, s in (("w13", 4), ("w2", 3))]
    return {r.variant.kernel: r for r in build_many(vs)}


def test_split_builds_build_with_nvcc_and_refuse_every_invalid_argument(nvcc_builds):
    import re

    from workbench.kernels import argcases

    for kernel, r in nvcc_builds.items():
        p = r.ptxas
        assert p["arch"] == "sm_90" and p["spill_stores"] == 0 and p["spill_loads"] == 0, p
        cases = argcases.cases(kernel, "b3", calibration_build=False)
        assert cases
        for case in cases:  # the launcher is the one-CTA build's: the same checks, before launch
            a = argcases.valid_args(kernel, "b3")
            case.mutate(a)
            with pytest.raises(ValueError, match=re.escape(case.expect)):
                argcases.call(r.module, kernel, a)


STAGING_CHECK = r"""
#include <cstdio>
#include <set>
#include "split_sum.cuh"
// Every split CTA's threads copy exactly the words of x its warps read (W13: groups vw + k * W
// of its virtual warps), each once: split_x_word as SplitStaging deals it out.
int main() {
  long long cases = 0;
  for (int G = 1; G <= 160; ++G)
    for (int unroll = 1; unroll <= 8; ++unroll)
      for (int max_warps : {4, 8, 16, 32})
        for (int splits = 2; splits <= 8; ++splits) {
          const unsigned W = wb::warps_for(G, unroll, max_warps);
          const unsigned S = wb::split_count(splits, W, 1);
          const int warps = static_cast<int>((W + S - 1) / S), threads = 32 * warps;
          for (unsigned s = 0; s < S; ++s, ++cases) {
            const int vw0 = static_cast<int>(s) * warps;
            std::multiset<int> got;
            std::set<int> want;
            for (int vw = vw0; vw < vw0 + warps && vw < static_cast<int>(W); ++vw)
              for (int g = vw; g < G; g += static_cast<int>(W))
                for (int word = 0; word < 4; ++word) want.insert(4 * g + word);
            for (int t = 0; t < threads; ++t)
              for (int i = t;; i += threads) {
                const int a = wb::split_x_word(i, warps, G, static_cast<int>(W), vw0);
                if (a == -2) break;
                if (a >= 0) got.insert(a);
              }
            if (std::set<int>(got.begin(), got.end()) != want || got.size() != want.size()) {
              std::printf("FAIL G %d unroll %d max_warps %d splits %d split %u\n", G, unroll, max_warps, splits, s);
              return 1;
            }
          }
        }
  std::printf("ok %lld\n", cases);
  return 0;
}
"""


def test_each_split_cta_stages_exactly_the_x_its_warps_read(tmp_path):
    why = cuda_build_skip_reason()
    if why:
        pytest.skip(why)
    import subprocess

    from workbench.kernels.build import cuda_home

    src, exe = tmp_path / "staging.cu", tmp_path / "staging"
    src.write_text(STAGING_CHECK)
    nvcc = str(Path(cuda_home() or "/usr/local/cuda") / "bin" / "nvcc")
    flags = ["-std=c++17", f"-I{ROOT / 'csrc' / 'kernels'}", "-DWB_LAYOUT_B3", "-DWB_READER_SCALAR"]
    subprocess.run([nvcc, *flags, str(src), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("ok "), out.stdout
