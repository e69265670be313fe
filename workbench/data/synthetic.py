"""Seeded synthetic data with realistic ranges (docs/DESIGN.md §3): no checkpoint needed to run.

Each kind of data draws from its own stream, ``np.random.default_rng([seed, STREAM])``, so the
weights, activations and routing made from one seed are independent of each other, and the
same seed always gives the same data on every machine (NumPy's PCG64 is platform-stable).
Timing runs draw whole banks on the GPU instead (`ops.make_bank`, gigabytes per run): the same
distributions from these constants, through torch's generator, so not the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.core.errors import BadArgument

SCALE_RANGE = (1e-3, 1e-2)  # typical AWQ group scales of MoE expert weights
_WEIGHTS, _ACTIVATIONS, _ROUTING = 1, 2, 3  # stream tags


def _positive(**kv: object) -> None:
    for name, v in kv.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise BadArgument(f"{name}={v!r} must be a positive integer")


def _rng(seed: int, stream: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise BadArgument(f"seed={seed!r} must be a non-negative integer")
    return np.random.default_rng([int(seed), stream])


def _never_all_zero(a: np.ndarray) -> np.ndarray:
    # Zeros as data hide bugs (a kernel that writes nothing would pass). With realistic sizes an
    # all-zero draw has probability ~16^-size; this only guards the tiniest shapes, deterministically.
    if not a.any():
        a.flat[0] = 1
    return a


@dataclass(frozen=True)
class ExpertWeights:
    """q: uint8 ``[E, K, N]`` (0..15); scales: float16 ``[E, K/G, N]`` (log-uniform 1e-3..1e-2);
    zeros: uint8 ``[E, K/G, N]`` (0..15)."""

    q: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray


def expert_weights(seed: int, K: int, N: int, experts: int, group: int = 32) -> ExpertWeights:
    """Quantized weights of ``experts`` experts of shape ``[K, N]`` in groups of ``group`` along K.

    Memory: ``experts * K * N`` bytes for q (e.g. 419 MB for one layer of the default W13).
    """
    _positive(K=K, N=N, experts=experts, group=group)
    if K % group:
        raise BadArgument(f"K={K} is not a multiple of group={group}")
    rng = _rng(seed, _WEIGHTS)
    q = _never_all_zero(rng.integers(0, 16, (experts, K, N), dtype=np.uint8))
    lo, hi = np.log(SCALE_RANGE[0]), np.log(SCALE_RANGE[1])
    scales = np.exp(rng.uniform(lo, hi, (experts, K // group, N))).astype(np.float16)
    zeros = _never_all_zero(rng.integers(0, 16, (experts, K // group, N), dtype=np.uint8))
    return ExpertWeights(q, scales, zeros)


def activations(seed: int, K: int) -> np.ndarray:
    """One token's activations: float16 ``[K]`` drawn from N(0, 1)."""
    _positive(K=K)
    x = _rng(seed, _ACTIVATIONS).standard_normal(K).astype(np.float16)
    if not x.any():  # see _never_all_zero; a float draw of exact zeros everywhere
        x[0] = np.float16(1.0)
    return x


@dataclass(frozen=True)
class Routing:
    """ids: int32 ``[top_k]``, distinct experts; rw: float32 ``[top_k]``, softmax weights."""

    ids: np.ndarray
    rw: np.ndarray


def routing(seed: int, experts: int, top_k: int) -> Routing:
    """Distinct routed experts and router weights (softmax of N(0, 1) logits over the top_k)."""
    _positive(experts=experts, top_k=top_k)
    if top_k > experts:
        raise BadArgument(f"top_k={top_k} exceeds experts={experts}")
    rng = _rng(seed, _ROUTING)
    ids = rng.choice(experts, size=top_k, replace=False).astype(np.int32)
    logits = rng.standard_normal(top_k)
    e = np.exp(logits - logits.max())
    return Routing(ids, (e / e.sum()).astype(np.float32))
