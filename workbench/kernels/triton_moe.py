"""The ``triton-moe`` peer: a fused-MoE W4A16 Triton kernel of the kind inference engines run
where no Marlin MoE kernel applies (docs/DESIGN.md §4.7). One launch per call over (routed slot,
N tile) for W13; for W2 either one launch over N tiles looping over the slots, or (the split form)
one over (N tile, slot group) writing FP32 partials to a scratch buffer allocated here, plus a
launch summing them. The routed ids are read on the device, so one peer serves every routing of
its bank and the call is CUDA-Graph capturable once compiled.

The peer converts a bank of ours into its own format at construction (``convert_bank``, on the
bank's device) and picks its block sizes from the committed table ``triton_moe_configs.json``
(written by benchmarks/tune_triton_moe.py); without an entry for this GPU and shape it autotunes
once at construction, so a timed run never autotunes inside its measurement, and once per run: the
first worker's choice is handed to the next (``tuned``, ``give_tuned``). The engine runs it
as a Python arm (workbench.kernels.pyarm): ``make_arm`` below is its entry.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNELS
from workbench.kernels.ops import GROUP, Bank, decode_meta_torch, unpack_int4_torch

if TYPE_CHECKING:
    from workbench.data.shapes import Shape

TABLE = Path(__file__).with_name("triton_moe_configs.json")
CONFIG_KEYS = ("BLOCK_N", "BLOCK_K", "DOT", "num_warps", "num_stages", "SPLIT", "SLOTS")
FORM_KEYS = {"SPLIT": False, "SLOTS": 1}  # W2's slot form; absent (W13, older tables): the loop
_CHUNK = 64  # experts converted at a time: bounds the [chunk, K, N] temporaries


@dataclass(frozen=True)
class Launch:
    """One kernel configuration: block sizes, dot form, warps, pipeline stages, and for W2 the
    slot form (``SPLIT``: a launch per (N tile, group of ``SLOTS`` slots) plus a sum launch)."""

    BLOCK_N: int
    BLOCK_K: int
    DOT: bool
    num_warps: int
    num_stages: int
    source: str = "table"  # "table", "table (not yet measured)", "autotuned" or "given"
    SPLIT: bool = False
    SLOTS: int = 1

    def __str__(self) -> str:
        form = "tl.dot" if self.DOT else "fma"
        slots = f" split slots={self.SLOTS}" if self.SPLIT else ""
        return (f"BLOCK_N={self.BLOCK_N} BLOCK_K={self.BLOCK_K} {form}{slots} "
                f"warps={self.num_warps} stages={self.num_stages} ({self.source})")  # fmt: skip

    @property
    def form(self) -> str:
        return "split" if self.SPLIT else "loop"

    def meta(self, kernel: str = "w2") -> dict[str, Any]:
        """The launch's keyword arguments; W13's kernel has no slot form."""
        keys = [k for k in CONFIG_KEYS if kernel == "w2" or k not in FORM_KEYS]
        return {k: getattr(self, k) for k in keys}

    @classmethod
    def from_triton(cls, cfg: Any, source: str = "autotuned") -> Launch:
        """From a ``triton.Config`` of triton_moe_kernels.config_space."""
        kw = cfg.kwargs
        return cls(kw["BLOCK_N"], kw["BLOCK_K"], bool(kw["DOT"]), cfg.num_warps, cfg.num_stages,
                   source, bool(kw.get("SPLIT", False)), int(kw.get("SLOTS", 1)))  # fmt: skip


# Configurations autotuned in this process, per (gpu, kernel, K, N): every bank's peer reuses them.
_TUNED: dict[tuple[str, str, int, int], Launch] = {}
GIVEN = "autotuned by this run's first worker"  # the source of a configuration handed over


def tuned() -> dict[tuple[str, str, int, int], dict[str, Any]]:
    """This process's autotuned configurations as plain data, for the next workers of the run
    (workbench.run.setup): autotuning runs once per run, and every worker times the same one."""
    return {k: {c: getattr(v, c) for c in CONFIG_KEYS} for k, v in _TUNED.items()}


def give_tuned(configs: dict[tuple[str, str, int, int], dict[str, Any]]) -> None:
    """Configurations autotuned by an earlier worker of the run (``tuned()``): used as this
    process's own, so it does not autotune again."""
    for key, cfg in configs.items():
        _TUNED.setdefault(tuple(key), Launch(**cfg, source=GIVEN))  # type: ignore[arg-type]


def table_key(kernel: str, K: int, N: int) -> str:
    return f"{kernel} K={K} N={N}"


def load_table(path: Path = TABLE) -> dict[str, dict[str, dict[str, Any]]]:
    """{gpu name: {table_key: config}}; an absent file is an empty table."""
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def table_config(gpu: str, kernel: str, K: int, N: int, path: Path = TABLE) -> Launch | None:
    entry = load_table(path).get(gpu, {}).get(table_key(kernel, K, N))
    if entry is None:
        return None
    measured = entry.get("measured", False)
    return Launch(**{k: entry.get(k, FORM_KEYS[k]) if k in FORM_KEYS else entry[k]
                     for k in CONFIG_KEYS},
                  source="table" if measured else "table (not yet measured)")  # fmt: skip


# ------------------------------------------------------------------------- conversion


def pack_k8(q: torch.Tensor) -> torch.Tensor:
    """uint8 [..., K, N] (0..15) -> int32 [..., K/8, N], q[8r + j] at bits 4j of word r."""
    *lead, k, n = q.shape
    q8 = q.reshape(*lead, k // 8, 8, n).to(torch.int32)
    words = torch.zeros((*lead, k // 8, n), dtype=torch.int32, device=q.device)
    for j in range(8):
        words |= q8[..., j, :] << (4 * j)  # j = 7 may set bit 31: int32 wraps like the u32 it is
    return words


def convert_bank(bank: Bank) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(qweight int32 [E, K/8, N], scales fp16 [E, K/G, N], biases fp16 [E, K/G, N]) of every
    expert of ``bank``, on its device."""
    E, K, N, G = bank.experts, bank.K, bank.N, bank.K // GROUP
    dev = bank.weights.device
    qw = torch.empty((E, K // 8, N), dtype=torch.int32, device=dev)
    sc = torch.empty((E, G, N), dtype=torch.float16, device=dev)
    bi = torch.empty((E, G, N), dtype=torch.float16, device=dev)
    for e0 in range(0, E, _CHUNK):
        e1 = min(E, e0 + _CHUNK)
        qw[e0:e1] = pack_k8(unpack_int4_torch(bank.weights[e0:e1]))
        sc[e0:e1], bi[e0:e1] = decode_meta_torch(bank.meta[e0:e1], bank.layout, N)
    return qw, sc, bi


# ------------------------------------------------------------------------- the peer


def kernels_module() -> ModuleType:
    from workbench.kernels import triton_moe_kernels

    return triton_moe_kernels


class TritonMoePeer:
    """Fused W4A16 MoE in Triton over one bank: ``peer(inp, bank, ids, out, rw=None)`` with
    KernelOp's signature (w13: x fp16 [1, K] -> out fp16 [top_k, N/2]; w2: inter fp16 [top_k, K],
    rw fp32 [top_k] -> out fp16 [1, N]). ``kernels`` is the module of jit functions (tests pass
    one loaded under TRITON_INTERPRET); ``config`` overrides the table."""

    def __init__(
        self,
        kernel: str,
        shape: Shape,
        bank: Bank,
        config: Launch | None = None,
        kernels: ModuleType | None = None,
    ) -> None:
        if kernel not in KERNELS or bank.kernel != kernel:
            raise BadArgument(f"triton-moe: kernel {kernel!r} does not match bank {bank.kernel!r}")
        self.kernel, self.shape = kernel, shape
        self.K, self.N, self.E, self.seed = bank.K, bank.N, bank.experts, bank.seed
        self.top_k = shape.top_k
        self.k = kernels if kernels is not None else kernels_module()
        self.qweight, self.scales, self.biases = convert_bank(bank)
        # the split form's per-slot partials: allocated once here, never inside a capture; every
        # call rewrites every row before its sum reads them, so nothing needs zeroing. One call
        # at a time per peer (calls on one stream are ordered)
        self.scratch = None
        if kernel == "w2":
            dev = bank.weights.device
            self.scratch = torch.empty((self.top_k, self.N), dtype=torch.float32, device=dev)
        self.config = config or self._pick_config(bank)
        if self.config.SPLIT and (kernel != "w2" or self.config.SLOTS < 1):
            raise BadArgument(f"triton-moe {kernel}: no split form with SLOTS={self.config.SLOTS} "
                              "(the split form is W2's, SLOTS >= 1)")  # fmt: skip

    def _pick_config(self, bank: Bank) -> Launch:
        gpu = torch.cuda.get_device_name(bank.weights.device)
        found = table_config(gpu, self.kernel, self.K, self.N)
        if found is not None:
            return found
        key = (gpu, self.kernel, self.K, self.N)
        if key not in _TUNED:
            _TUNED[key] = self.autotune()
        return _TUNED[key]

    def autotune(self, wide: bool = False) -> Launch:
        """Run triton.autotune over the config space on this bank, outside any capture; returns
        the winner."""
        return self.autotune_with(self.k.autotuned(self.kernel, wide))

    def autotune_with(self, tuner: Any) -> Launch:
        """Launch ``tuner`` (a triton.autotune of this peer's kernel) once on fresh random inputs,
        which benchmarks every config of its space; returns the winner."""
        dev = self.qweight.device
        rows = 1 if self.kernel == "w13" else self.top_k
        act = torch.randn((rows, self.K), device=dev).to(torch.float16)
        ids = torch.randperm(self.E, device=dev)[: self.top_k].to(torch.int32)
        rw = torch.softmax(torch.randn(self.top_k, device=dev), 0)
        out_shape = (self.top_k, self.N // 2) if self.kernel == "w13" else (1, self.N)
        out = torch.empty(out_shape, dtype=torch.float16, device=dev)
        self._launch(tuner, act, ids, out, rw, {})
        torch.cuda.synchronize(dev)
        return Launch.from_triton(tuner.best_config)

    def relocate(self) -> None:
        """Its converted experts in fresh memory (a block's placement, docs/DESIGN.md §5.5)."""
        self.qweight, self.scales, self.biases = (
            self.qweight.clone(), self.scales.clone(), self.biases.clone()
        )  # fmt: skip
        if self.scratch is not None:  # read and written every call: part of the placement too
            self.scratch = torch.empty_like(self.scratch)

    @staticmethod
    def supported() -> bool:
        if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (7, 5):
            return False
        try:
            import triton  # noqa: F401
        except ImportError:
            return False
        return True

    def _check(self, inp, bank: Bank, ids, out, rw) -> None:
        """Shapes, dtypes and devices, on the host without synchronizing (capturable)."""
        if (bank.kernel, bank.K, bank.N, bank.experts, bank.seed) != (
            self.kernel, self.K, self.N, self.E, self.seed
        ):  # fmt: skip
            raise BadArgument(
                f"bank is {bank.kernel} K={bank.K} N={bank.N} seed {bank.seed} but this "
                f"triton-moe peer converted {self.kernel} K={self.K} N={self.N} seed {self.seed}"
            )
        rows = 1 if self.kernel == "w13" else self.top_k
        want = {
            "inp": (inp, torch.float16, (rows, self.K)),
            "ids": (ids, torch.int32, (self.top_k,)),
            "out": (out, torch.float16,
                    (self.top_k, self.N // 2) if self.kernel == "w13" else (1, self.N)),
        }  # fmt: skip
        if self.kernel == "w2":
            if rw is None:
                raise BadArgument("w2 needs router weights rw (fp32 [top_k]), got None")
            want["rw"] = (rw, torch.float32, (self.top_k,))
        dev = self.qweight.device
        for name, (t, dtype, shp) in want.items():
            if not isinstance(t, torch.Tensor):
                raise BadArgument(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dtype != dtype or tuple(t.shape) != shp or not t.is_contiguous():
                raise BadArgument(
                    f"{name} must be a contiguous {dtype} {list(shp)}, got {t.dtype} "
                    f"{list(t.shape)}{'' if t.is_contiguous() else ' (not contiguous)'}"
                )
            if t.device != dev:
                raise BadArgument(f"{name} is on {t.device} but the peer's weights are on {dev}")

    def __call__(self, inp, bank: Bank, ids, out, rw=None) -> None:
        self._check(inp, bank, ids, out, rw)
        fn = self.k.w13_kernel if self.kernel == "w13" else self.k.w2_kernel
        self._launch(fn, inp, ids, out, rw, self.config.meta(self.kernel))
        if self.kernel == "w2" and self.config.SPLIT:
            self.k.launch_reduce(self.scratch, out, self.N, self.top_k)

    def _launch(self, fn, inp, ids, out, rw, meta: dict[str, Any]) -> None:
        common = (self.qweight, self.scales, self.biases, ids)
        if self.kernel == "w13":

            def grid(m):
                return (self.top_k, -(-(self.N // 2) // m["BLOCK_N"]))

            fn[grid](inp, *common, out, self.K, self.N, self.E, GROUP=GROUP, **meta)
        else:

            def grid(m):
                tiles = -(-self.N // m["BLOCK_N"])
                return (tiles, -(-self.top_k // m["SLOTS"])) if m["SPLIT"] else (tiles,)

            fn[grid](inp, *common, rw, out, self.scratch, self.K, self.N, self.E, self.top_k,
                     GROUP=GROUP, **meta)  # fmt: skip


# ------------------------------------------------------------------------- the Python arm


def make_arm(call: Any) -> Any:
    """The Python-arm entry (workbench.kernels.pyarm.ArmCall): one peer per bank, kept in the
    arm's state (it reads the routed ids on the device, so it serves every routing of its bank);
    its block sizes are noted once."""
    peer = call.state.get(call.bank_index)
    if peer is None:
        peer = call.state[call.bank_index] = TritonMoePeer(call.kernel, call.shape, call.bank)
        call.note(f"triton-moe {call.kernel}: {peer.config}")
    inp = call.inputs
    if call.kernel == "w13":
        return functools.partial(peer, inp["x"], call.bank, inp["ids"], call.out)
    return functools.partial(peer, inp["inter"], call.bank, inp["ids"], call.out, rw=inp["rw"])


# looked up at call time, so a test's stand-in for TritonMoePeer answers
make_arm.supported = lambda: TritonMoePeer.supported()  # type: ignore[attr-defined]
