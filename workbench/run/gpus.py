"""The GPUs a run's worker processes run on (docs/DESIGN.md §5.10): those this process may use, and
the refusal of a mix of models before anything runs. Torch-free (NVML only, where it is there).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from workbench.core.errors import BadArgument


@dataclass(frozen=True)
class GPU:
    """A GPU a worker may run on: ``visible`` is the CUDA_VISIBLE_DEVICES entry it gets."""

    visible: str
    nvml: int
    name: str | None = None
    uuid: str | None = None


def visible_gpus() -> list[GPU]:
    """The GPUs of this run: the entries of $CUDA_VISIBLE_DEVICES, else every GPU NVML lists,
    with NVML's names and UUIDs (None where NVML cannot tell; then one GPU, as CUDA sees it)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = [x.strip() for x in env.split(",") if x.strip()] if env else None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            known = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name, uuid = pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h)
                known.append(
                    (i, name.decode() if isinstance(name, bytes) else str(name),
                     uuid.decode() if isinstance(uuid, bytes) else str(uuid))
                )  # fmt: skip
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML: the one device CUDA picks, unnamed
        return [GPU(entries[0] if entries else "0", 0)]
    if not known:
        return [GPU(entries[0] if entries else "0", 0)]
    if entries is None:
        return [GPU(str(i), i, n, u) for i, n, u in known]
    out = []
    for e in entries:
        hit = next((k for k in known if str(k[0]) == e or k[2] == e or k[2].startswith(e)), None)
        out.append(GPU(e, hit[0], hit[1], hit[2]) if hit else GPU(e, len(out)))
    return out


def check_one_model(gpus: list[GPU]) -> None:
    """Refuse a mix of GPU models before anything runs: a verdict is per model (§5.10)."""
    names = sorted({g.name for g in gpus if g.name})
    if len(names) > 1:
        listing = ", ".join(f"{g.visible}: {g.name}" for g in gpus)
        raise BadArgument(
            f"the visible GPUs are of {len(names)} models ({listing}): a verdict holds for one "
            "model; set CUDA_VISIBLE_DEVICES to GPUs of one model"
        )
