"""Compile checks of the torch-free kernels for older GPUs, without their toolkit.

CUDA 13 cannot target Volta (sm_70), where this work began. The registries still carry the
CUDA 12.9 pieces as wheels (dev extra): NVRTC 12 (`nvidia-cuda-nvrtc-cu12`) turns the headers in
csrc/kernels/ into PTX for compute_70 and ptxas 12 (`nvidia-cuda-nvcc-cu12`) assembles it for
sm_70 with its register/spill report. This proves the kernels are NVRTC-clean and use nothing newer
than sm_70 (an sm_70 build fails on any instruction that needs a newer GPU).

The registries carry no disassembler that still reads sm_70 code (nvdisasm and cuobjdump come as
wheels from 13.2 on, and refuse SM70 as deprecated), so the tensor-core instructions are counted in
the cubin itself: Volta and Turing encode each instruction in 128 bits with the opcode in the low
12 bits: HMMA is 0x236 (the m8n8k4 form, four per m8n8k4) or 0x23c (Turing's m16n8k8 form, one per
m16n8k8). `hmma_probe` compiles kernels with a known number of `mma` instructions, so a test sees
the count move with them, and the CUDA-core build (WB_DOT_FMA) counts none (docs/DESIGN.md §4.3).
"""

from __future__ import annotations

import ctypes
import importlib.util
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import BuildError
from workbench.kernels.compiler_log import parse_ptxas
from workbench.kernels.sources import csrc_dir
from workbench.kernels.variants import Variant


@dataclass
class Toolchain12:
    nvrtc: Path  # libnvrtc.so.12
    ptxas: Path  # ptxas 12.x
    include: Path  # cuda_fp16.h and friends


def _pkg_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_toolchain12() -> Toolchain12 | None:
    """The CUDA 12 NVRTC, ptxas and headers from the nvidia-*-cu12 wheels, if installed."""
    nvrtc, nvcc, rt = (_pkg_dir(f"nvidia.{n}") for n in ("cuda_nvrtc", "cuda_nvcc", "cuda_runtime"))
    if not (nvrtc and nvcc and rt):
        return None
    lib, ptxas, inc = nvrtc / "lib" / "libnvrtc.so.12", nvcc / "bin" / "ptxas", rt / "include"
    if lib.exists() and ptxas.exists() and (inc / "cuda_fp16.h").exists():
        return Toolchain12(lib, ptxas, inc)
    return None


def _nvrtc_ptx(tc: Toolchain12, source: str, options: list[str]) -> str:
    nv = ctypes.CDLL(str(tc.nvrtc))
    prog = ctypes.c_void_p()

    def ok(rc: int, what: str) -> None:
        if rc != 0:
            nv.nvrtcGetErrorString.restype = ctypes.c_char_p
            raise BuildError(f"NVRTC {what} failed: {nv.nvrtcGetErrorString(rc).decode()}")

    ok(
        nv.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"wb.cu", 0, None, None),
        "create",
    )
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = nv.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nv.nvrtcGetProgramLog(prog, log)
        if rc != 0:
            raise BuildError(
                f"NVRTC compile failed ({options[0]})", log.value.decode(errors="replace")
            )
        nv.nvrtcGetPTXSize(prog, ctypes.byref(size))
        ptx = ctypes.create_string_buffer(size.value)
        ok(nv.nvrtcGetPTX(prog, ptx), "get PTX")
        return ptx.value.decode()
    finally:
        nv.nvrtcDestroyProgram(ctypes.byref(prog))


HMMA_OPCODES = (0x236, 0x23C)  # low 12 bits of a Volta/Turing HMMA: the 884 form, the 1688 form
_VOLTA_ENCODING = ("70", "72", "75")  # archs whose 128-bit encoding puts the opcode there


def _text_sections(cubin: bytes) -> dict[str, bytes]:
    """The ELF64 cubin's code sections by name (``.text.<kernel>``)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise BuildError("ptxas output is not an ELF64 cubin")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = heads[shstrndx][4]
    out = {}
    for name, _type, _flags, _addr, off, size in heads:
        start = names_at + name
        sec = cubin[start : cubin.index(b"\0", start)].decode()
        if sec.startswith(".text."):
            out[sec[len(".text.") :]] = cubin[off : off + size]
    return out


def opcode_counts(code: bytes) -> dict[int, int]:
    """How often each 12-bit opcode occurs in Volta/Turing code (16 bytes per instruction)."""
    counts: dict[int, int] = {}
    for i in range(0, len(code) - len(code) % 16, 16):
        op = struct.unpack_from("<Q", code, i)[0] & 0xFFF
        counts[op] = counts.get(op, 0) + 1
    return counts


def _hmma(code: bytes) -> int:
    counts = opcode_counts(code)
    return sum(counts.get(op, 0) for op in HMMA_OPCODES)


def _assemble(tc: Toolchain12, ptx: str, arch: str, what: str) -> tuple[str, bytes]:
    """ptxas 12 -v for sm_<arch>: (its report, the cubin)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        proc = subprocess.run(
            [str(tc.ptxas), f"-arch=sm_{arch}", "-v", str(src), "-o", str(out)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise BuildError(f"ptxas 12 for sm_{arch} failed on {what}", proc.stderr)
        return proc.stdout + proc.stderr, out.read_bytes()


def _need(tc: Toolchain12 | None) -> Toolchain12:
    tc = tc or find_toolchain12()
    if tc is None:
        raise BuildError(
            "CUDA 12 NVRTC/ptxas wheels not found: pip install nvidia-cuda-nvrtc-cu12 "
            "nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12"
        )
    return tc


def kernel_ptx(
    v: Variant, tc: Toolchain12 | None = None, arch: str = "70", defines: tuple[str, ...] = ()
) -> str:
    """The PTX (compute_<arch>) of variant v's kernel from NVRTC 12, with extra -D ``defines``."""
    tc = _need(tc)
    opts = [
        f"--gpu-architecture=compute_{arch}",
        "--std=c++17",
        f"-I{csrc_dir() / 'kernels'}",
        f"-I{tc.include}",
    ]
    source = f'#include "{v.kernel}.cuh"\n'
    return _nvrtc_ptx(tc, source, opts + v.defines() + [f"-D{d}" for d in defines])


def compile_sm70(
    v: Variant, tc: Toolchain12 | None = None, arch: str = "70", defines: tuple[str, ...] = ()
) -> dict:
    """NVRTC 12 -> PTX (compute_XX) -> ptxas 12 (sm_XX); returns the kernel's ptxas report, plus
    ``mma``: the PTX's mma instructions and, on Volta/Turing, ``hmma``: the cubin's HMMA
    instructions in the kernel. ``defines`` adds -D flags (``WB_DOT_FMA``: the CUDA-core path)."""
    tc = _need(tc)
    ptx = kernel_ptx(v, tc, arch, defines)
    log, cubin = _assemble(tc, ptx, arch, v.name)
    report = parse_ptxas(log)
    for fn, info in report.items():
        if f"{v.kernel}_kernel" in fn:
            out = {"variant": v.name, "function": fn, **info, "mma": ptx.count("mma.sync.aligned")}
            if arch in _VOLTA_ENCODING:
                code = _text_sections(cubin).get(fn, b"")
                out["hmma"] = _hmma(code)
                out["instructions"] = len(code) // 16
            return out
    raise BuildError(f"ptxas 12 reported no {v.kernel}_kernel for {v.name}", log)


def hmma_probe(
    n: int, shape: str = "m8n8k4", tc: Toolchain12 | None = None, arch: str = "70"
) -> int:
    """HMMA instructions counted in a probe kernel with ``n`` chained ``mma`` of ``shape``
    (m8n8k4: 4 per mma on sm_70, m16n8k8: 1 on sm_75): the check of the counting itself."""
    tc = _need(tc)
    regs = {"m8n8k4": (8, 2, 2), "m16n8k8": (4, 2, 1)}[shape]
    nd, na, nb = regs
    ops = [f"%{i}" for i in range(nd + na + nb)]
    d, a, b = ops[:nd], ops[nd : nd + na], ops[nd + na :]
    asm = (
        f"mma.sync.aligned.{shape}.row.col.f32.f16.f16.f32 {{{','.join(d)}}}, {{{','.join(a)}}}, "
        f"{{{','.join(b)}}}, {{{','.join(d)}}};"
    )
    outs = ", ".join(f'"+f"(c[{i}])' for i in range(nd))
    ins = ", ".join(f'"r"(r[{i}] + {{k}}u)' for i in range(na + nb))
    body = "".join(f'  asm volatile("{asm}" : {outs} : {ins.format(k=k)});\n' for k in range(n))
    src = (
        'extern "C" __global__ void probe(float* out, const unsigned* in) {\n'
        f"  float c[{nd}] = {{}};\n  unsigned r[{na + nb}];\n"
        f"  for (int i = 0; i < {na + nb}; ++i) r[i] = in[threadIdx.x + 32 * i];\n"
        f"{body}"
        f"  for (int i = 0; i < {nd}; ++i) out[threadIdx.x * {nd} + i] = c[i];\n}}\n"
    )
    ptx = _nvrtc_ptx(tc, src, [f"--gpu-architecture=compute_{arch}", f"-I{tc.include}"])
    _, cubin = _assemble(tc, ptx, arch, f"the {shape} probe")
    return _hmma(_text_sections(cubin)["probe"])
