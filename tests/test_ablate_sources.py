"""benchmarks/ablate_sources.py keeps matching the kernel sources (each ablation edits both)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_ablation_edits_both_kernels(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "ablate", ROOT / "benchmarks" / "ablate_sources.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([str(ROOT / "csrc"), str(tmp_path)]) == 0
    for name, marker in [
        ("E1_null", "if (p.K > 0) return;"),
        ("E2_noload", "0x1c002c00u"),
        ("E3_nocompute", "__uint_as_float"),
        ("E4_noids", "const int id = j"),
        ("E5_loadonly", "__uint_as_float"),
        ("E7_nosum", "const float sum = acc_of_lane(acc, lane);"),
        ("E8_norecords", "0x1c002c00u ^ (lane << 3)"),
        ("E9_noweights", "0x12345678u + lane"),
        ("E10_noquad", "QuadMeta{{m["),
    ]:
        for kernel in mod.KERNELS.get(name, ("w13", "w2")):
            text = (tmp_path / name / "kernels" / f"{kernel}.cuh").read_text()
            assert marker in text, (name, kernel)
            assert text != (ROOT / "csrc" / "kernels" / f"{kernel}.cuh").read_text()
            if name in ("E3_nocompute", "E5_loadonly"):
                assert "dot_group(" not in text.split("__global__")[1], (name, kernel)
    # every ablation keeps the launch's griddepcontrol.wait: none may read before the previous kernel
    for name, _ in mod.ABLATIONS:
        for kernel in ("w13", "w2"):
            text = (tmp_path / name / "kernels" / f"{kernel}.cuh").read_text()
            assert "kernel_prologue();" in text.split("__global__")[1], (name, kernel)
