"""Where a run's banks come from (docs/DESIGN.md §3.8): synthetic weights or a real checkpoint.

A bank source makes bank ``index`` of a kernel and layout on a device, ``make(kernel, layout,
index, device)``; the engine's BankStore and `workbench check` ask it for banks 0, 1, 2, ... and
never care which kind it is:

* ``SyntheticBanks``: ``ops.make_bank`` from a per-bank seed (the default, §3.4); a bank of
  another layout is derived from the b3 bank of its seed (``derive``), bit-identical and cheaper;
* ``CheckpointBanks``: bank i holds the experts of the checkpoint's MoE layer i mod L, converted
  on the CPU (``Checkpoint.host_experts``) and copied to the device afresh for every bank, so a
  layer used twice is two distinct copies in memory. When a run needs more banks than the
  checkpoint has layers, ``note`` says how often each layer is repeated.

torch is imported by the code that runs, not at import.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.data.checkpoint import Checkpoint, HostExperts
    from workbench.data.shapes import Shape

HOST_CACHE_BYTES = 4 << 30  # converted layers kept on the CPU (b3 and b4 banks share them)


class SyntheticBanks:
    """Seeded synthetic banks (``ops.make_bank``); bank ``i`` draws from ``seed_of(i)``."""

    kind = "synthetic"

    def __init__(self, shape: Shape, seed_of: Callable[[int], int]) -> None:
        self.shape, self.seed_of = shape, seed_of

    def make(self, kernel: str, layout: str, index: int, device: Any = "cuda") -> Any:
        from workbench.kernels.ops import make_bank

        return make_bank(self.shape, kernel, layout, self.seed_of(index), device)

    def derive(self, bank: Any, layout: str) -> Any:
        """The bank of ``bank``'s seed in ``layout``, from ``bank`` (b3) without drawing again
        (``ops.derive_bank``: the bytes ``make`` would give, by a copy and a re-encoding)."""
        from workbench.kernels.ops import derive_bank

        return derive_bank(bank, layout)

    def layer_of(self, index: int) -> int | None:
        return None

    def note(self, kernel: str, banks: int) -> str | None:
        return None

    def describe(self, banks: dict[str, int] | None = None) -> dict[str, Any]:
        return {"source": self.kind, "banks": dict(banks or {})}


class CheckpointBanks:
    """Banks from a checkpoint's experts; layers converted once and kept while they fit in
    HOST_CACHE_BYTES (the b3 and b4 banks of one layer share one conversion)."""

    kind = "checkpoint"

    def __init__(self, checkpoint: Checkpoint, cache_bytes: int = HOST_CACHE_BYTES) -> None:
        self.ckpt = checkpoint
        self.shape = checkpoint.shape
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[str, int], HostExperts] = OrderedDict()

    def host(self, kernel: str, layer: int) -> HostExperts:
        key = (kernel, layer)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        h = self.ckpt.host_experts(kernel, layer)
        self._cache[key] = h
        while (
            len(self._cache) > 1 and sum(v.nbytes for v in self._cache.values()) > self.cache_bytes
        ):
            self._cache.popitem(last=False)
        return h

    def make(self, kernel: str, layout: str, index: int, device: Any = "cuda") -> Any:
        from workbench.data.layouts import encode_metadata
        from workbench.kernels.ops import upload_bank

        layer, _ = self.ckpt.layer_for(index)
        h = self.host(kernel, layer)
        meta = encode_metadata(h.scales, h.zeros, layout)
        return upload_bank(kernel, layout, h.weights, meta, seed=index, device=device)

    def layer_of(self, index: int) -> int:
        return self.ckpt.layer_for(index)[0]

    def note(self, kernel: str, banks: int) -> str | None:
        """The repeat note when ``banks`` banks of ``kernel`` need more layers than there are."""
        n = len(self.ckpt.layers)
        if banks <= n:
            return None
        times = -(-banks // n)
        return (
            f"{kernel}: {banks} banks from {n} checkpoint layers: each layer's experts are "
            f"used up to {times} times, as distinct device copies (bank i reads layer i mod {n})"
        )

    def describe(self, banks: dict[str, int] | None = None) -> dict[str, Any]:
        """The checkpoint's record plus, per kernel, the banks planned and the layer repeats."""
        banks = dict(banks or {})
        n = len(self.ckpt.layers)
        return {
            "source": self.kind,
            "checkpoint": self.ckpt.describe(),
            "banks": banks,
            "layers_used": {
                k: sorted({self.layer_of(i) for i in range(b)}) for k, b in banks.items()
            },
            "repeats": {k: max(0, -(-b // n) - 1) for k, b in banks.items()},
        }


def source_for(shape: Shape, seed_of: Callable[[int], int], checkpoint: Checkpoint | None) -> Any:
    """The checkpoint's banks when one is given, else synthetic ones."""
    return CheckpointBanks(checkpoint) if checkpoint is not None else SyntheticBanks(shape, seed_of)
