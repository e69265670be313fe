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
        ("E2_nocombine", "!= 0) return;"),
        ("E3_noload", "0x1c002c00u"),
        ("E4_nocompute", "__uint_as_float"),
        ("E5_bare", "!= 0) return;"),
        ("E6_noinputs", "__uint_as_float"),
    ]:
        for kernel in ("w13", "w2"):
            text = (tmp_path / name / "kernels" / f"{kernel}.cuh").read_text()
            assert marker in text, (name, kernel)
            assert text != (ROOT / "csrc" / "kernels" / f"{kernel}.cuh").read_text()
            if name in ("E4_nocompute", "E5_bare", "E6_noinputs"):
                assert "dot_group(" not in text.split("__global__")[1], (name, kernel)
            if name == "E6_noinputs":
                assert "stage_activations(" not in text.split("__global__")[1]
                assert "__ldg(p.ids" not in text and "__ldg(p.rw" not in text
