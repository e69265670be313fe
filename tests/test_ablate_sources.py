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
        ("E6_prefetch", "load(warp * kUnroll);\n  kernel_prologue();"),
    ]:
        for kernel in mod.KERNELS.get(name, ("w13", "w2")):
            text = (tmp_path / name / "kernels" / f"{kernel}.cuh").read_text()
            assert marker in text, (name, kernel)
            assert text != (ROOT / "csrc" / "kernels" / f"{kernel}.cuh").read_text()
            if name in ("E3_nocompute", "E5_loadonly"):
                assert "dot_group(" not in text.split("__global__")[1], (name, kernel)
    # E6 moves W2's prologue after the first loads but keeps inter behind it
    text = (tmp_path / "E6_prefetch" / "kernels" / "w2.cuh").read_text().split("__global__")[1]
    assert text.index("load(warp * kUnroll);") < text.index("kernel_prologue();")
    assert text.index("kernel_prologue();") < text.index("stage.begin(")
    assert (tmp_path / "E6_prefetch" / "kernels" / "w13.cuh").read_text() == (
        ROOT / "csrc" / "kernels" / "w13.cuh"
    ).read_text()
