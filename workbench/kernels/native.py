"""Loads a variant's library (nvcc's shared library with the C ABI of csrc/abi.h) through ctypes.

A built variant exports ``wb_forward`` and four attributes (``wb_kernel``, ``wb_layout``,
``wb_reader``, ``wb_calibration``); no torch headers went into it, so its build is nvcc alone
(docs/DESIGN.md §4). ``NativeModule`` gives it the interface the torch extension had:
``forward(...)`` with the op contract's arguments and the attributes ``kernel``, ``layout``,
``reader``, ``calibration``. Each tensor is passed as a ``wb_tensor`` descriptor (pointer, dtype,
device, sizes, strides, contiguity); every check runs in the library, so a refused argument raises
``ValueError`` with its message before anything launches, and a failed launch ``RuntimeError``.

The library links the CUDA runtime dynamically, as torch's extensions did: with torch imported
first, it shares torch's runtime (one current device, one set of streams and graph captures).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

ABI_VERSION = 1  # = WB_ABI_VERSION in csrc/abi.h
MAX_DIMS = 8  # = WB_MAX_DIMS
_OK, _VALUE_ERROR = 0, 1
_ERR_LEN = 2048
# Argument names of each op's tensors, in the contract's order (docs/DESIGN.md §4.1).
TENSOR_ARGS = {
    "w13": ("x", "weights", "meta", "ids", "out"),
    "w2": ("inter", "weights", "meta", "ids", "rw", "out"),
}


class WbTensor(ctypes.Structure):
    """csrc/abi.h's wb_tensor, field for field."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype_name", ctypes.c_char_p),
        ("device_type", ctypes.c_char_p),
        ("sizes", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("dim", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
        ("contiguous", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


_DTYPES: dict[Any, tuple[int, bytes]] = {}  # torch dtype -> (WB_DTYPE_*, torch's name of it)
_DEVICES = {"cpu": 1, "cuda": 2}  # WB_DEVICE_*; others are WB_DEVICE_OTHER (0)
_NAMES: dict[str, bytes] = {}  # interned device-type names (ctypes keeps no copy of a c_char_p)


def _dtype(dt) -> tuple[int, bytes]:
    if not _DTYPES:
        import torch

        # torch's own names (its ScalarType), as the torch extension's messages gave them
        known = {torch.uint8: (1, "Byte"), torch.int32: (2, "Int"), torch.float16: (3, "Half")}
        known[torch.float32] = (4, "Float")
        others = {torch.int8: "Char", torch.int16: "Short", torch.int64: "Long"}
        others |= {torch.float64: "Double", torch.bool: "Bool", torch.bfloat16: "BFloat16"}
        _DTYPES.update({d: (c, n.encode()) for d, (c, n) in known.items()})
        _DTYPES.update({d: (0, n.encode()) for d, n in others.items()})
    got = _DTYPES.get(dt)
    if got is None:
        got = _DTYPES[dt] = (0, str(dt).removeprefix("torch.").encode())
    return got


def describe(t, op: str, name: str, out: WbTensor) -> None:
    """Fill ``out`` with tensor ``t``'s descriptor; TypeError/ValueError name a bad argument."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: argument '{name}' must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() > MAX_DIMS:
        raise ValueError(
            f"{op}: argument '{name}' has {t.dim()} dimensions, more than the {MAX_DIMS} "
            "a tensor argument may have"
        )
    out.dtype, out.dtype_name = _dtype(t.dtype)
    dev = t.device
    out.device = _DEVICES.get(dev.type, 0)
    out.device_type = _NAMES.get(dev.type) or _NAMES.setdefault(dev.type, dev.type.encode())
    out.device_index = -1 if dev.index is None else dev.index
    n = t.dim()
    out.dim = n
    out.sizes[:n] = t.shape
    out.strides[:n] = t.stride()
    out.contiguous = int(t.is_contiguous())
    out.data = t.data_ptr()


class NativeModule:
    """One variant's library: ``forward`` and the attributes the torch extension had."""

    def __init__(self, name: str, path: str) -> None:
        import torch  # noqa: F401  (first: the library then shares torch's CUDA runtime)

        self.__name__, self.__file__ = name, path
        lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        for sym, res in (("wb_kernel", ctypes.c_char_p), ("wb_layout", ctypes.c_char_p)):
            getattr(lib, sym).restype = res
        lib.wb_reader.restype = ctypes.c_char_p
        lib.wb_abi_version.restype = lib.wb_calibration.restype = ctypes.c_int
        version = lib.wb_abi_version()
        if version != ABI_VERSION:
            raise ImportError(
                f"{path}: C ABI version {version}, this workbench speaks {ABI_VERSION}: rebuild it"
            )
        lib.wb_forward.restype = ctypes.c_int
        lib.wb_forward.argtypes = [
            ctypes.POINTER(WbTensor), ctypes.c_int, ctypes.c_int64, ctypes.c_void_p,
            ctypes.c_char_p, ctypes.c_size_t,
        ]  # fmt: skip
        self._lib = lib
        self.kernel = lib.wb_kernel().decode()
        self.layout = lib.wb_layout().decode()
        self.reader = lib.wb_reader().decode()
        self.calibration = bool(lib.wb_calibration())
        self._names = TENSOR_ARGS[self.kernel]

    def __repr__(self) -> str:
        return f"<NativeModule {self.__name__} ({self.kernel} {self.layout}-{self.reader})>"

    def forward(self, *args) -> None:
        """w13: ``forward(x, weights, meta, ids, out, spin_cycles)``; w2: ``forward(inter, weights,
        meta, ids, rw, out, spin_cycles)`` (dtypes and shapes: docs/DESIGN.md §4.1). Launches on
        torch's current stream of the weights' device; allocates nothing (graph-capturable)."""
        import torch

        names, op = self._names, self.kernel
        if len(args) != len(names) + 1:
            raise TypeError(
                f"{op}: forward takes {len(names) + 1} arguments ({', '.join(names)}, "
                f"spin_cycles), got {len(args)}"
            )
        *tensors, spin = args
        if isinstance(spin, bool) or not isinstance(spin, int):
            raise TypeError(f"{op}: argument 'spin_cycles' must be an int, got {spin!r}")
        if not -(2**63) <= spin < 2**63:
            raise ValueError(f"{op}: argument 'spin_cycles' = {spin} is out of the int64 range")
        descs = (WbTensor * len(names))()
        for i, (t, name) in enumerate(zip(tensors, names, strict=True)):
            describe(t, op, name, descs[i])
        weights = tensors[1]
        # The stream is asked for only on a GPU: CPU arguments reach every check, then the refusal
        # of their device, without touching CUDA.
        stream = torch.cuda.current_stream(weights.device).cuda_stream if weights.is_cuda else None
        err = ctypes.create_string_buffer(_ERR_LEN)
        rc = self._lib.wb_forward(descs, len(names), spin, stream, err, _ERR_LEN)
        if rc == _OK:
            return
        msg = err.value.decode(errors="replace")
        raise (ValueError if rc == _VALUE_ERROR else RuntimeError)(msg)


def load(name: str, path: str) -> NativeModule:
    return NativeModule(name, path)
