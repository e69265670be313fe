"""benchmarks/volta_jit.py, the GPU run owed by the sm_70 path, as far as a CPU gets: it writes the
compute_70 PTX of every variant (tensor-core and CUDA-core paths) with parameter blocks the size
of its ctypes structures, and a GPU run refuses PTX from other sources before touching a GPU."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from workbench.kernels.portable import find_toolchain12
from workbench.kernels.variants import all_variants

pytestmark = pytest.mark.compile
ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("volta_jit", ROOT / "benchmarks" / "volta_jit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ptx_dir(tmp_path_factory):
    if find_toolchain12() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CUDA 12 NVRTC/ptxas wheels not installed (the dev extra)")
        pytest.skip("CUDA 12 NVRTC/ptxas wheels not installed (the dev extra)")
    d = tmp_path_factory.mktemp("volta_ptx")
    assert _script().main(["--write-ptx", str(d)]) == 0
    return d


def test_every_variant_and_path_is_written_with_its_sources(ptx_dir):
    mod = _script()
    index = json.loads((ptx_dir / "index.json").read_text())
    assert index["sources_sha256"] == mod.sources_sha256()
    got = {(b["variant"], b["path"]) for b in index["builds"]}
    assert got == {(v.name, p) for v in all_variants() for p in ("m8n8k4", "fma")}
    for b in index["builds"]:
        ptx = (ptx_dir / b["file"]).read_text()
        assert ".target sm_70" in ptx
        assert ("mma.sync.aligned.m8n8k4" in ptx) == (b["path"] == "m8n8k4"), b
        assert mod.entry(ptx, b["variant"].split(":")[0])[0] == b["entry"]


def test_a_gpu_run_refuses_ptx_of_other_sources(ptx_dir, tmp_path, capsys):
    mod = _script()
    index = json.loads((ptx_dir / "index.json").read_text())
    index["sources_sha256"] = "0" * 64
    for f in ptx_dir.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert mod.main(["--ptx-dir", str(tmp_path)]) == 2
    assert "other kernel sources" in capsys.readouterr().out
    assert mod.main(["--ptx-dir", str(tmp_path / "missing")]) == 2
    assert mod.main(["--ptx-dir", str(ptx_dir), "--seeds", "0"]) == 2


def test_launch_shapes_follow_the_spec_parameters():
    mod = _script()
    w13, w2 = (next(v for v in all_variants() if v.kernel == k) for k in ("w13", "w2"))
    # default shape: W13 K 2560 (80 groups, unroll 5, at most 16 warps), W2 K 160 x top_k 10
    assert mod.launch_shape(w13, 2560, 320, 10) == ((10, 10), 16 * 32, (320 + 4) * 16)
    assert mod.launch_shape(w2, 160, 2560, 10) == ((80, 1), 25 * 32, 0)
