"""Do the nvcc-alone builds make the same kernels as the torch-extension builds they replace?

For every variant (or those named), builds it twice:

- **old**: the kernel sources of ``--old-commit`` (default 35df7ad, the last torch-extension
  tree) as a torch extension, with the flags workbench/kernels/build.py gave
  ``torch.utils.cpp_extension.load`` there;
- **new**: this tree's ``build_variant`` (nvcc alone, C ABI, ctypes).

Then compares, and exits 5 on any difference:

1. the SASS of every kernel function (``cuobjdump -sass``, CPU only): the device code;
2. every invalid-argument case of workbench/kernels/argcases.py (CPU tensors, CPU only): the same
   exception type and the same message, so every refusal is still reached;
3. with a GPU (skipped by ``--cpu-only``): outputs on seeded banks and inputs of every preset at
   tp 1 and 4, several seeds, bit for bit (fp16 bits), eager and replayed from a CUDA graph
   captured on torch's stream; calibration builds also with spin cycles > 0.

Usage (from the repository root; the GPU run is owed to a GPU session)::

    python3 benchmarks/fast_build_identity.py --out benchmarks/results/fast_build_identity.json
    python3 benchmarks/fast_build_identity.py --cpu-only --variants w13:b3-coop,w2:b3-scalar+calib
    # a copy without .git (the GPU machine): extract the old csrc/ beforehand and carry it
    git archive 35df7ad csrc | tar -x -C build/old35
    python3 benchmarks/fast_build_identity.py --old-csrc build/old35/csrc --out ...

Needs nvcc, a CUDA build of torch (for the old builds), and cuobjdump + nvdisasm on the PATH (or
``--cuobjdump``) for the SASS step.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.kernels import argcases  # noqa: E402
from workbench.kernels.build import build_variant, cuda_home, target_arch  # noqa: E402
from workbench.kernels.variants import Variant, all_variants  # noqa: E402

SEEDS = (11, 12, 13)
TPS = (1, 4)


def old_sources(commit: str, dest: Path) -> Path:
    """csrc/ of ``commit`` (git archive), into ``dest``/csrc."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "csrc"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "csrc"


def build_old(v: Variant, csrc: Path, work: Path, arch: str):
    """``v`` as the torch extension of the old tree, flags as its build.py gave them."""
    from torch.utils.cpp_extension import load

    os.environ.update(CUDA_HOME=cuda_home() or "", TORCH_CUDA_ARCH_LIST=arch)
    name = "old_" + re.sub(r"[^A-Za-z0-9]", "_", v.name)
    out = work / name
    out.mkdir(parents=True, exist_ok=True)
    defines = v.defines()
    t0 = time.perf_counter()
    module = load(
        name=name,
        sources=[str(csrc / f"{v.kernel}.cu"), str(csrc / "binding.cpp")],
        extra_cflags=["-O3", *defines],
        extra_cuda_cflags=["-O3", "-lineinfo", "-Xptxas=-v", *v.kernel_spec.cuda_flags, *defines],
        extra_include_paths=[str(csrc)],
        build_directory=str(out),
        verbose=False,
    )
    return module, str(out / f"{name}.so"), time.perf_counter() - t0


def sass(lib: str, cuobjdump: str) -> dict[str, str]:
    """Kernel function -> its SASS text, from one library."""
    text = subprocess.run(
        [cuobjdump, "-sass", lib], capture_output=True, text=True, check=True
    ).stdout
    out: dict[str, str] = {}
    for block in re.split(r"\n\s*Function : ", text)[1:]:
        fn, _, body = block.partition("\n")
        out[fn.strip()] = body.split("\n\t\t..........")[0]
    return out


def refusals(old, new, v: Variant) -> list[str]:
    """The argcases whose refusal differs between the two builds (type or message)."""
    bad = []
    for case in argcases.cases(v.kernel, v.layout, calibration_build=v.calib):
        got = []
        for module in (old, new):
            a = argcases.valid_args(v.kernel, v.layout)
            case.mutate(a)
            try:
                argcases.call(module, v.kernel, a)
                got.append(("no error", ""))
            except Exception as e:  # noqa: BLE001  (the type is what is compared)
                got.append((type(e).__name__, str(e).splitlines()[0]))
        if got[0] != got[1] or got[1][0] != "ValueError":
            bad.append(f"{case.name}: old {got[0]} / new {got[1]}")
    return bad


def gpu_outputs(old, new, v: Variant) -> list[str]:
    """Seeded calls of both builds, eager and from a CUDA graph: the cases whose bits differ."""
    import torch

    from workbench.data.shapes import PRESETS, resolve_shape
    from workbench.kernels.ops import make_bank, make_inputs

    bad = []
    spins = (0, 200) if v.calib else (0,)
    for preset in PRESETS:
        for tp in TPS:
            shape = resolve_shape(preset, tp=tp)
            for seed in SEEDS:
                bank = make_bank(shape, v.kernel, v.layout, seed)
                inp = make_inputs(shape, v.kernel, seed)
                act = inp["x" if v.kernel == "w13" else "inter"]
                for spin in spins:
                    args = (act, bank.weights, bank.meta, inp["ids"])
                    args += () if v.kernel == "w13" else (inp["rw"],)

                    def call(module, out, args=args, spin=spin):
                        module.forward(*args, out, spin)

                    outs = {}
                    for label, module in (("old", old), ("new", new)):
                        out = torch.full_like(inp["out"], float("nan"))
                        call(module, out)
                        outs[label] = out
                    g_out = torch.full_like(inp["out"], float("nan"))
                    stream = torch.cuda.Stream()
                    stream.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(stream):
                        call(new, g_out)  # warm-up on the capture stream
                    torch.cuda.current_stream().wait_stream(stream)
                    g_out.fill_(float("nan"))
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        call(new, g_out)
                    graph.replay()
                    torch.cuda.synchronize()
                    outs["new graph"] = g_out
                    ref = outs["old"].view(torch.int16)
                    where = f"{shape.name} tp={tp} seed={seed} spin={spin}"
                    if outs["old"].isnan().any():
                        bad.append(f"{where}: the old build left NaN in its output")
                    for label in ("new", "new graph"):
                        if not torch.equal(outs[label].view(torch.int16), ref):
                            n = int((outs[label].view(torch.int16) != ref).sum())
                            bad.append(f"{where}: {label} differs from old in {n} elements")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-commit", default="35df7ad", help="the torch-extension tree")
    ap.add_argument(
        "--old-csrc",
        type=Path,
        help="csrc/ of --old-commit already extracted (`git archive 35df7ad csrc | tar -x -C D`,"
        " then D/csrc), for a machine whose copy has no .git",
    )
    ap.add_argument("--variants", help="comma list of variant names (default: every built-in)")
    ap.add_argument("--cpu-only", action="store_true", help="SASS and refusals only, no GPU")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump"), help="path of cuobjdump")
    ap.add_argument("--out", type=Path, help="JSON file for the results")
    a = ap.parse_args(argv)
    import torch

    gpu = torch.cuda.is_available() and not a.cpu_only
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    arch = target_arch()
    variants = all_variants(calib=True)
    if a.variants:
        want = a.variants.split(",")
        unknown = sorted(set(want) - {v.name for v in variants})
        if unknown:
            ap.error(
                f"--variants: {unknown[0]!r} is not one of {', '.join(v.name for v in variants)}"
            )
        variants = [v for v in variants if v.name in want]
    if not a.cuobjdump:
        ap.error("cuobjdump not found: put it (and nvdisasm) on the PATH or pass --cuobjdump")
    rows, failed = [], False
    with tempfile.TemporaryDirectory(prefix="wb-identity-") as tmp:
        work = Path(tmp)
        os.environ["WORKBENCH_CACHE"] = str(work / "cache")
        if a.old_csrc:
            if not (a.old_csrc / "kernels").is_dir():
                ap.error(f"--old-csrc {a.old_csrc}: no kernels/ folder there (give D/csrc)")
            csrc = a.old_csrc.resolve()
        else:
            csrc = old_sources(a.old_commit, work / "old")
        for v in variants:
            old, old_lib, old_s = build_old(v, csrc, work / "old-builds", arch)
            t0 = time.perf_counter()
            new = build_variant(v)
            new_s = time.perf_counter() - t0
            s_old, s_new = sass(old_lib, a.cuobjdump), sass(new.lib_path, a.cuobjdump)
            kernels = sorted(f for f in s_old if f"{v.kernel}_kernel" in f)
            sass_diff = [f for f in kernels if s_old[f] != s_new.get(f)]
            if not kernels:
                sass_diff = ["no kernel function found in the old build's SASS"]
            row = {
                "variant": v.name,
                "old_build_s": round(old_s, 1),
                "new_build_s": round(new_s, 1),
                "kernel_functions": kernels,
                # instructions compared (a comparison of empty texts would prove nothing)
                "sass_instructions": {f: s_old[f].count(";") for f in kernels},
                "sass_differs": sass_diff,
                "refusals_differ": refusals(old, new.module, v),
                "gpu_outputs_differ": gpu_outputs(old, new.module, v) if gpu else None,
            }
            ok = not (row["sass_differs"] or row["refusals_differ"] or row["gpu_outputs_differ"])
            failed |= not ok
            rows.append(row)
            print(
                f"{v.name:22s} {'identical' if ok else 'DIFFERENT'}: SASS of {len(kernels)} "
                f"kernel(s) {'differs' if sass_diff else 'same'}, "
                f"{len(row['refusals_differ'])} refusal(s) differ, GPU outputs "
                + ("not run" if row["gpu_outputs_differ"] is None else
                   f"{len(row['gpu_outputs_differ'])} case(s) differ"),
                flush=True,
            )  # fmt: skip
            for k in ("sass_differs", "refusals_differ", "gpu_outputs_differ"):
                for line in (row[k] or [])[:5]:
                    print(f"    {k}: {line}")
    if a.out:
        info = {
            "old_commit": a.old_commit,
            "arch": arch,
            "gpu": torch.cuda.get_device_name() if gpu else None,
            "torch": torch.__version__,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        a.out.write_text(json.dumps({**info, "variants": rows}, indent=1) + "\n")
    return 5 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
