"""Runs the sm_70 (Volta) kernels on a newer GPU through the driver's PTX JIT: the checks owed by
the Volta tensor-core path (docs/DESIGN.md §4.3), which no machine here can execute otherwise.

CUDA 13 cannot target compute_70, so the PTX comes from NVRTC 12 (the dev extra's wheels, as in
workbench/kernels/portable.py) with __CUDA_ARCH__ = 700: the m8n8k4 path. The CUDA driver
JIT-compiles it for the present GPU (cuModuleLoadDataEx), and the kernels are launched through the
driver API (ctypes) on torch's tensors, with the launch shapes of csrc/kernels/*.cuh. Per shape
and kernel it checks, and prints:

* every built-in arm (b4-scalar, b3-scalar, b3-coop) gives the same bits (the reader is the only
  difference), and no output is left NaN;
* the relative L2 against the float64 reference is within the arm's tolerance (2e-3);
* the CUDA-core build (WB_DOT_FMA, compute_70) the same, and how far both are from the sm_90
  build of the torch extension (`workbench build`): different sums, so not bit-identical.

Times on this GPU say nothing about a V100 (the PTX ISA marks m8n8k4 as tuned for sm_70 only), so
nothing is timed. NVRTC 12 (about 110 MB) does not travel to the GPU machine, so the PTX is written
on a CPU machine first, with the SHA-256 of the kernel sources it came from:

  PYTHONPATH=. python3 benchmarks/volta_jit.py --write-ptx build/volta_ptx          # CPU machine
  PYTHONPATH=. python3 benchmarks/volta_jit.py --ptx-dir build/volta_ptx --seeds 3  # GPU machine

(build/ is ignored by git: carry build/volta_ptx to the GPU machine.) The GPU run refuses PTX
written from other sources than its own. Exit 0 when every check holds, 1 otherwise (2: bad
arguments or PTX missing).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import re
import sys
from pathlib import Path

from workbench.data.shapes import PRESETS, Shape
from workbench.kernels.build import csrc_dir
from workbench.kernels.portable import find_toolchain12, kernel_ptx
from workbench.kernels.variants import all_variants

SHAPES = {
    "default": PRESETS["qwen3.8-flash-next"],
    # W13 warps loop over several rounds, W2 has many units per warp (as the sanitize step's shape)
    "rounds": Shape(4096, 2048, 8, 4, 2, tp=1, name="rounds"),
}


class W13Params(ctypes.Structure):  # csrc/kernels/w13.cuh, field for field
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("weights", ctypes.c_void_p),
        ("meta", ctypes.c_void_p),
        ("ids", ctypes.c_void_p),
        ("inter", ctypes.c_void_p),
        ("K", ctypes.c_int),
        ("N", ctypes.c_int),
        ("experts", ctypes.c_int),
        ("spin_cycles", ctypes.c_longlong),
    ]


class W2Params(ctypes.Structure):  # csrc/kernels/w2.cuh, field for field
    _fields_ = [
        ("inter", ctypes.c_void_p),
        ("weights", ctypes.c_void_p),
        ("meta", ctypes.c_void_p),
        ("ids", ctypes.c_void_p),
        ("rw", ctypes.c_void_p),
        ("y", ctypes.c_void_p),
        ("K", ctypes.c_int),
        ("N", ctypes.c_int),
        ("experts", ctypes.c_int),
        ("top_k", ctypes.c_int),
        ("spin_cycles", ctypes.c_longlong),
    ]


PARAMS = {"w13": W13Params, "w2": W2Params}


def entry(ptx: str, kernel: str) -> tuple[str, int]:
    """(mangled entry name, parameter block bytes) of the kernel in the PTX."""
    m = re.search(
        rf"\.entry (\S*{kernel}_kernel\S*)\(\s*\.param \.align \d+ \.b8 \S+\[(\d+)\]", ptx
    )
    if m is None:
        raise SystemExit(f"no {kernel}_kernel entry with one parameter block in the PTX")
    return m.group(1), int(m.group(2))


def warps_for(items: int, per_warp: int, max_warps: int) -> int:  # awq_meta.cuh, warps_for
    return max(1, min(max_warps, -(-items // per_warp)))


def launch_shape(v, K: int, N: int, top_k: int) -> tuple[tuple[int, int], int, int]:
    """(grid, threads, dynamic smem bytes) as w13_launch_shape / w2_launch_shape compute them."""
    p = dict(v.kernel_spec.resolve(dict(v.params)))
    G = K // 32
    if v.kernel == "w13":
        return (N // 32, top_k), 32 * warps_for(G, p["unroll"], p["max_warps"]), (K // 8 + 4) * 16
    return (N // 32, 1), 32 * warps_for(top_k * G, p["unroll"], p["max_warps"]), 0


class Driver:
    """The few CUDA driver calls this needs, in torch's current (primary) context."""

    def __init__(self) -> None:
        import torch

        torch.cuda.init()
        torch.zeros(1, device="cuda")  # makes the primary context current in this thread
        self.cu = ctypes.CDLL("libcuda.so.1")

    def ok(self, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            self.cu.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{what}: {name.value.decode() if name.value else rc}")

    def function(self, ptx: str, name: str) -> ctypes.c_void_p:
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.ok(self.cu.cuModuleLoadDataEx(ctypes.byref(mod), ptx.encode() + b"\0", 0, None, None),
                "cuModuleLoadDataEx (driver JIT of compute_70 PTX)")  # fmt: skip
        self.ok(
            self.cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction"
        )
        return fn

    def launch(self, fn, grid, threads: int, smem: int, params: ctypes.Structure) -> None:
        import torch

        arg = ctypes.c_void_p(ctypes.addressof(params))
        args = (ctypes.c_void_p * 1)(arg)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.ok(self.cu.cuLaunchKernel(fn, grid[0], grid[1], 1, threads, 1, 1, smem, stream, args, None),
                "cuLaunchKernel")  # fmt: skip
        torch.cuda.synchronize()


def run_jit(drv: Driver, fn, v, bank, inp) -> object:
    import torch

    K, N, E = bank.K, bank.N, bank.experts
    top_k = inp["ids"].numel()
    out = torch.full_like(inp["out"], float("nan"))
    if v.kernel == "w13":
        p = W13Params(inp["x"].data_ptr(), bank.weights.data_ptr(), bank.meta.data_ptr(),
                      inp["ids"].data_ptr(), out.data_ptr(), K, N, E, 0)  # fmt: skip
    else:
        p = W2Params(inp["inter"].data_ptr(), bank.weights.data_ptr(), bank.meta.data_ptr(),
                     inp["ids"].data_ptr(), inp["rw"].data_ptr(), out.data_ptr(), K, N, E, top_k, 0)  # fmt: skip
    grid, threads, smem = launch_shape(v, K, N, top_k)
    drv.launch(fn, grid, threads, smem, p)
    return out


def reference(kernel: str, bank, inp):
    from workbench.data import reference as ref

    ids = inp["ids"].cpu().tolist()
    w = bank.dequantized(ids)
    if kernel == "w13":
        return ref.w13_reference(inp["x"].cpu().numpy()[0], w).inter_fp16
    r = ref.w2_reference(inp["inter"].cpu().numpy(), w, inp["rw"].cpu().numpy())
    return r.y_fp16[None, :]


PATHS = (("m8n8k4", ()), ("fma", ("WB_DOT_FMA",)))  # the tensor-core path, the CUDA-core path


def sources_sha256() -> str:
    """SHA-256 over csrc/kernels/ (names and bytes): the sources the PTX is built from."""
    h = hashlib.sha256()
    for f in sorted((csrc_dir() / "kernels").iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def write_ptx(out: Path) -> int:
    tc = find_toolchain12()
    if tc is None:
        print("CUDA 12 NVRTC/ptxas wheels not found: pip install nvidia-cuda-nvrtc-cu12 "
              "nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12")  # fmt: skip
        return 2
    out.mkdir(parents=True, exist_ok=True)
    index = {"sources_sha256": sources_sha256(), "builds": []}
    for v in all_variants():
        for path, defines in PATHS:
            ptx = kernel_ptx(v, tc, "70", defines)
            name, size = entry(ptx, v.kernel)
            if size != ctypes.sizeof(PARAMS[v.kernel]):
                print(f"{v.name}: the PTX takes {size} parameter bytes, this script passes "
                      f"{ctypes.sizeof(PARAMS[v.kernel])}")  # fmt: skip
                return 1
            file = f"{v.kernel}_{v.arm}_{path}.ptx"
            (out / file).write_text(ptx)
            index["builds"].append({"variant": v.name, "path": path, "entry": name, "file": file})
    (out / "index.json").write_text(json.dumps(index, indent=1))
    print(f"{len(index['builds'])} compute_70 PTX files in {out}, parameter blocks match, "
          f"sources {index['sources_sha256'][:16]}")  # fmt: skip
    return 0


def read_ptx(ptx_dir: Path) -> dict | None:
    try:
        index = json.loads((ptx_dir / "index.json").read_text())
    except (OSError, ValueError) as e:
        print(f"--ptx-dir {ptx_dir}: no readable index.json ({e}); write it with --write-ptx")
        return None
    if index.get("sources_sha256") != sources_sha256():
        print(f"--ptx-dir {ptx_dir}: written from other kernel sources than these; write it again")
        return None
    by_name = {v.name: v for v in all_variants()}
    return {
        (b["variant"], b["path"]): (
            by_name[b["variant"]],
            (ptx_dir / b["file"]).read_text(),
            b["entry"],
        )
        for b in index["builds"]
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write-ptx", type=Path, metavar="DIR", help="CPU: write the PTX to DIR")
    mode.add_argument("--ptx-dir", type=Path, metavar="DIR", help="GPU: run the PTX in DIR")
    ap.add_argument("--seeds", type=int, default=3, help="inputs per shape and kernel (1..20)")
    a = ap.parse_args(argv)
    if not 1 <= a.seeds <= 20:
        print(f"--seeds must be in 1..20, not {a.seeds}")
        return 2
    if a.write_ptx:
        return write_ptx(a.write_ptx)
    builds = read_ptx(a.ptx_dir)
    if builds is None:
        return 2
    print(f"PTX for compute_70 from sources {sources_sha256()[:16]}: {len(builds)} builds")

    import numpy as np
    import torch

    from workbench.data.reference import rel_l2
    from workbench.kernels.build import build_variant
    from workbench.kernels.ops import make_bank, make_inputs

    drv = Driver()
    fns = {key: drv.function(ptx, name) for key, (v, ptx, name) in builds.items()}
    print(
        f"GPU {torch.cuda.get_device_name()}: the driver JIT-compiled {len(fns)} compute_70 modules"
    )
    failed = 0
    for sname, shape in SHAPES.items():
        for kernel in ("w13", "w2"):
            arms = [v for v in all_variants() if v.kernel == kernel]
            banks = {lay: make_bank(shape, kernel, lay, seed=1) for lay in ("b4", "b3")}
            for seed in range(a.seeds):
                inp = make_inputs(shape, kernel, seed=100 + seed)
                want = reference(kernel, banks["b3"], inp)
                outs = {}
                for v in arms:
                    for path in ("m8n8k4", "fma"):
                        outs[v.arm, path] = run_jit(drv, fns[v.name, path], v, banks[v.layout], inp)
                    native = build_variant(v).module
                    o = torch.full_like(inp["out"], float("nan"))
                    act = inp["x"] if kernel == "w13" else inp["inter"]
                    args = (act, banks[v.layout].weights, banks[v.layout].meta, inp["ids"])
                    if kernel == "w13":
                        native.forward(*args, o, 0)
                    else:
                        native.forward(*args, inp["rw"], o, 0)
                    outs[v.arm, "native"] = o
                for path in ("m8n8k4", "fma", "native"):
                    got = [outs[v.arm, path].cpu().numpy() for v in arms]
                    same = all(
                        np.array_equal(g.view(np.uint16), got[0].view(np.uint16)) for g in got
                    )
                    nan = any(np.isnan(g).any() for g in got)
                    err = rel_l2(got[0], want)
                    ok = same and not nan and err <= arms[0].tolerance
                    failed += not ok
                    print(f"{sname} {kernel} seed {seed} {path:7s}: arms bit-identical {same}, "
                          f"NaN {nan}, rel L2 {err:.3e} (tolerance {arms[0].tolerance:g}) "
                          f"{'ok' if ok else 'FAILED'}")  # fmt: skip
                for path in ("m8n8k4", "fma"):
                    a32 = outs[arms[0].arm, path].float().cpu().numpy()
                    n32 = outs[arms[0].arm, "native"].float().cpu().numpy()
                    print(f"{sname} {kernel} seed {seed} {path} vs native sm_90: rel L2 "
                          f"{rel_l2(a32, n32):.3e}, {int((a32 != n32).sum())} of {a32.size} differ")  # fmt: skip
    print("all checks hold" if not failed else f"{failed} checks FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
