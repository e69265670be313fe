"""What a run sets up once and hands to its workers (docs/DESIGN.md §5.10, issue 44).

Some of a worker's set-up does not depend on its process: the triton-moe peer's autotuned launch
configuration (where the committed table has no entry for this GPU) and the float64 reference
outputs its gates compare with (they depend on the banks' seed, the expert ids and the inputs,
all fixed by the run's seed). The first worker that has them sends them back in its exit message
(``collect``); the parent keeps them (``merge``) and puts them in every later job, and a worker
takes them in before it measures (``install``). What must stay per process (the banks'
placement, the CUDA context, the captures, each block's gate run) is not handed over.

A worker reports in its ``worker`` record what it was given and what it computed itself
(``counts``), so a session shows that the hand-over happened.

Torch-free at import; what it installs imports torch (it runs inside a worker).
"""

from __future__ import annotations

from typing import Any

EMPTY: dict[str, Any] = {"triton": {}, "references": {}}


def collect(engine: Any) -> dict[str, Any]:
    """This worker's hand-over: the autotuned triton-moe configurations of the process (if the
    peer was imported) and the engine's float64 references (plain data, picklable)."""
    import sys

    out: dict[str, Any] = {"triton": {}, "references": {}}
    tm = sys.modules.get("workbench.kernels.triton_moe")  # imported only where the peer ran
    if tm is not None:
        out["triton"] = tm.tuned()
    if engine is not None:
        out["references"] = dict(getattr(engine, "references", {}) or {})
    return out


def merge(into: dict[str, Any], given: Any) -> dict[str, Any]:
    """``into`` with what ``given`` (a worker's ``collect``) adds; the first value of a key stays."""
    if not isinstance(given, dict):
        return into
    for part in EMPTY:
        for k, v in (given.get(part) or {}).items():
            into.setdefault(part, {}).setdefault(k, v)
    return into


def install(setup: dict[str, Any] | None, engine: Any) -> dict[str, int]:
    """Take a run's hand-over in before measuring: the configurations into the triton-moe peer
    (imported only when there are any), the references into ``engine``'s cache. Returns the
    counts given."""
    setup = setup or EMPTY
    triton = setup.get("triton") or {}
    if triton:
        from workbench.kernels import triton_moe

        triton_moe.give_tuned(triton)
    refs = setup.get("references") or {}
    engine.references.update(refs)
    return {"triton_given": len(triton), "references_given": len(refs)}


def counts(given: dict[str, int], engine: Any) -> dict[str, int]:
    """The ``setup`` field of a worker record: what it was handed and what it computed."""
    return {**given, "references_computed": int(getattr(engine, "references_computed", 0))}
