"""A run's device banks per (kernel, layout), grown on demand, moved per block (imports torch).

The engine (workbench/measure/engine.py) asks this store for banks; each batch it allocates writes a
``memory`` record (NVML used memory before and after, against the computed bytes). Bank i comes from
the run's bank source (workbench/measure/banks.py): synthetic, or a checkpoint layer (docs/DESIGN.md §3.8).
A block's placement moves the banks to fresh memory (docs/DESIGN.md §5.5).
"""

from __future__ import annotations

import functools
import gc
import os
import time
from typing import Any

import torch

from workbench.core.errors import WorkbenchError
from workbench.data.capacity import expert_footprint
from workbench.measure.monitor import others_changed
from workbench.measure.plan import bank_seed

DEVICE = "cuda"
MEMORY_HEADROOM = 0.9  # never plan banks beyond this share of the free device memory


class BankStore:
    """Banks per (kernel, layout), grown on demand; each batch writes a ``memory`` record.
    Bank i comes from the run's bank source (workbench.measure.banks): synthetic from bank_seed(seed, i),
    or the experts of a checkpoint layer (docs/DESIGN.md §3.8)."""

    def __init__(self, engine: Any) -> None:  # the workbench.measure.engine.Engine it serves
        from workbench.measure.banks import source_for

        self.e = engine
        self.banks: dict[tuple[str, str], list[Any]] = {}
        cfg = engine.cfg
        seed_of = functools.partial(bank_seed, cfg.seed)
        self.source = source_for(engine.shape, seed_of, getattr(cfg, "checkpoint", None))
        self._noted: set[str] = set()  # kernels whose repeat note was given

    def get(self, kernel: str, layout: str, n: int) -> list[Any]:
        have = self.banks.setdefault((kernel, layout), [])
        if len(have) >= n:
            return have
        shape, need = self.e.shape, n - len(have)
        fp = expert_footprint(*shape.dims(kernel), group=shape.group)
        total = need * shape.experts * fp.total(layout)
        free, _ = torch.cuda.mem_get_info()
        if total > MEMORY_HEADROOM * free:
            raise WorkbenchError(
                f"{need} {layout} banks of {kernel} need {total / 2**30:.1f} GiB but only "
                f"{free / 2**30:.1f} GiB is free; try --set hot, --no-reference, or fewer "
                "--layers/--experts"
            )
        note = self.source.note(kernel, n)
        if note and kernel not in self._noted:
            self._noted.add(kernel)
            self.e.sink.note(note)
        self._warm_generation(kernel, layout)
        gc.collect()  # objects dropped earlier (other kernels' banks) must not free memory inside the window
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # cached blocks would hide the allocation from NVML
        mon = self.e.monitor
        procs = mon.processes()
        before, t_before, t0 = mon.memory_used(), torch.cuda.memory_allocated(), time.perf_counter()
        derived = 0
        for i in range(len(have), n):
            bank, was_derived = self._make(kernel, layout, i)
            derived += was_derived
            have.append(bank)
            # Release the generation's temporaries now: cached, the next bank's tensors would be
            # carved out of their larger segments, and NVML would count the unused remainders
            # (seen on the H200: W13 b3 banks measured 288 MiB above their bytes).
            torch.cuda.empty_cache()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # drop temporaries of the generation, keep the banks
        after = mon.memory_used()
        others = others_changed(procs, mon.processes(), os.getpid())
        meta = fp.meta(layout)
        rec = {
            "kernel": kernel,
            "layout": layout,
            "banks": need,
            "experts": shape.experts,
            "used_before": before,
            "used_after": after,
            "measured": None if before is None or after is None else after - before,
            # other processes whose GPU memory changed in the window: NVML's change is theirs too
            "others": others,
            "computed": need * shape.experts * meta,
            "computed_total": total,
            "bank_nbytes": sum(int(b.nbytes) for b in have[len(have) - need :]),
            "torch_allocated": torch.cuda.memory_allocated() - t_before,
            "seconds": time.perf_counter() - t0,
            "source": self.source.kind,
            "derived": derived,  # banks copied from their b3 twins (SyntheticBanks.derive)
        }
        if self.source.kind == "checkpoint":
            rec["layers"] = [self.source.layer_of(i) for i in range(len(have) - need, len(have))]
        self.e.sink.record("memory", **rec)
        self.e.sink.emit("memory", rec)
        return have

    def _make(self, kernel: str, layout: str, index: int) -> tuple[Any, bool]:
        """Bank ``index``: derived from its b3 twin where the source can (the same bytes as a
        generation, for a copy's cost), else made by the source. Returns (bank, derived)."""
        twins = self.banks.get((kernel, "b3"), [])
        derive = getattr(self.source, "derive", None)
        if layout != "b3" and derive is not None and index < len(twins):
            return derive(twins[index], layout), True
        return self.source.make(kernel, layout, index, DEVICE), False

    def _warm_generation(self, kernel: str, layout: str) -> None:
        """Make and drop one full-size bank first, the way the batch will make them: CUDA loads
        kernel images lazily and the allocator sets itself up on first use; that one-time
        device memory would otherwise be counted as the first bank set's."""
        bank, _ = self._make(kernel, layout, 0)
        torch.cuda.synchronize()
        del bank

    def relocate(self, key: tuple[str, str]) -> None:
        """Move the banks of ``key`` = (kernel, layout) to fresh memory (copies made while the
        old ones still exist, so they land behind the current padding; then the old go). Where
        two copies do not fit, the banks are freed first and made again by the source."""
        from workbench.kernels.ops import relocate_bank

        have = self.banks.get(key, [])
        if not have:
            return
        need = sum(int(b.nbytes) for b in have)
        free, _ = torch.cuda.mem_get_info()
        if need <= MEMORY_HEADROOM * free:
            self.banks[key] = [relocate_bank(b) for b in have]
        else:
            count = len(have)
            self.banks[key] = []
            del have
            gc.collect()
            torch.cuda.empty_cache()
            kernel, layout = key
            self.banks[key] = [self.source.make(kernel, layout, i, DEVICE) for i in range(count)]
        torch.cuda.synchronize()

    def release(self, keep: set[tuple[str, str]]) -> None:
        for key in list(self.banks):
            if key not in keep:
                del self.banks[key]
        torch.cuda.empty_cache()
