"""A run's resolved configuration (docs/DESIGN.md §5): ``RunConfig``, everything a run needs,
made and validated by ``make_config`` from a command's options, or from the run settings'
one form (workbench.run.settings) by ``config_from_settings``. Torch-free: bad input fails
before any GPU work, with BadArgument naming the option and its value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.core import defaults, sequential, stats
from workbench.core.errors import BadArgument
from workbench.core.limits import check_min_effect
from workbench.core.vocab import KERNEL_CHOICES, SETS
from workbench.data.shapes import Shape
from workbench.measure.abba import ProtocolConfig
from workbench.measure.plan import ComparisonSpec, plan_ab
from workbench.run.settings import RunSettings


@dataclass
class RunConfig:
    """Everything a run needs; ``comparisons`` come from workbench.measure.plan."""

    shape: Shape
    comparisons: list[ComparisonSpec]
    sets: tuple[str, ...] = defaults.SETS
    calls: int = defaults.CALLS
    replays: int = defaults.REPLAYS
    seed: int = defaults.SEED
    m: float = defaults.M
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    confirm: bool = True  # end a run over w13 and w2 with the step confirmation
    # worker processes (docs/DESIGN.md §5.10): each runs protocol.blocks blocks of every
    # comparison; 1 measures in this process (debugging: its intervals ignore process variance)
    workers: int = 1  # make_config gives defaults.WORKERS
    # a Ray cluster's address: the workers run there, one per GPU (workbench/run/ray_workers.py);
    # ray_init: more ray.init arguments (tests: a local instance with fake GPUs)
    ray: str | None = None
    ray_init: dict[str, Any] | None = None
    sessions_dir: str = defaults.SESSIONS_DIR
    slug: str = "ab"
    mode: str = "ab"  # or "calibrate"
    extra: dict[str, Any] = field(default_factory=dict)  # more config for session.json
    # An open workbench.data.checkpoint.Checkpoint: banks from its experts instead of synthetic ones
    # (docs/DESIGN.md §3.7); its record goes to the provenance, its path to extra.
    checkpoint: Any = None
    # after a complete run, Nsight Compute counters of A and B (workbench/run/counters.py); never
    # read by a verdict, so not in session_config
    counters: bool = False
    # each worker's CUDA context made before its turn, while the worker before it times
    # (`ab --overlap`, off by default until the GPU's A/A shows no effect; issue 44)
    overlap: bool = False
    # settle the main round's labels over up to this many looks of `workers` workers each
    # (`ab --settle`, workbench.core.sequential; 0: one look, the plain run)
    settle: int = 0

    def session_config(self) -> dict[str, Any]:
        p = dataclasses.asdict(self.protocol)
        return {
            "mode": self.mode,
            "shape": self.shape.to_dict(),
            "preset": self.shape.name,
            "comparisons": [c.id for c in self.comparisons],
            "sets": list(self.sets),
            "calls": self.calls,
            "replays": self.replays,
            "seed": self.seed,
            "m": self.m,
            "protocol": p,
            "confirm": self.confirm,
            "workers": self.workers,
            **({"ray": self.ray} if self.ray is not None else {}),
            **({"overlap": True} if self.overlap else {}),
            "labels": stats.RULE,  # how its intervals become verdicts (analysis.session_rule)
            **({"settle": self.settle_record()} if self.settle else {}),
            **self.extra,
        }

    def settle_record(self) -> dict[str, Any]:
        """The settling design a session records (its analysis recomputes the level from it)."""
        return {
            "looks": self.settle,
            "workers_per_look": self.workers,
            "conf": sequential.look_conf(self.settle, defaults.CONF),
            "spending": "bonferroni",
        }


def _positive_int(value: Any, option: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BadArgument(f"{option} {value!r} must be an integer >= {low}")
    return value


def make_config(
    shape: Shape,
    *,
    kernels: tuple[str, ...] = defaults.KERNELS,
    sets: tuple[str, ...] = defaults.SETS,
    a: str = defaults.ARM_A,
    b: str = defaults.ARM_B,
    reference: bool = True,
    confirm: bool = True,
    calls: int = defaults.CALLS,
    replays: int = defaults.REPLAYS,
    seed: int = defaults.SEED,
    m: float = defaults.M,
    protocol: ProtocolConfig | None = None,
    sessions_dir: str = defaults.SESSIONS_DIR,
    slug: str | None = None,
    extra: dict[str, Any] | None = None,
    workers: int | None = None,
    counters: bool = False,
    ray: str | None = None,
    overlap: bool = False,
    settle: int = 0,
) -> RunConfig:
    """A validated RunConfig for `workbench ab` (torch-free: bad input fails before GPU work).
    Errors are BadArgument naming the command-line option and its value."""
    for k in kernels:
        if k not in KERNEL_CHOICES:
            raise BadArgument(f"--kernel {k!r} is not one of {', '.join(KERNEL_CHOICES)}")
    for s in sets:
        if s not in SETS:
            raise BadArgument(f"--set {s!r} is not one of {', '.join(SETS)}")
    if not kernels or not sets:
        raise BadArgument("--kernel and --set must each name at least one choice")
    _positive_int(calls, "--calls")
    _positive_int(replays, "--replays")
    _positive_int(seed, "--seed", low=0)
    workers = defaults.WORKERS if workers is None else workers
    _positive_int(workers, "--workers")
    if overlap and (workers < 2 or ray is not None):
        raise BadArgument(
            f"--overlap needs local worker processes (--workers {workers}"
            + (", --ray" if ray is not None else "")
            + "): nothing would overlap"
        )
    if settle:
        sequential.check_looks(settle)
        if workers < 2:
            raise BadArgument(
                f"--settle {settle} adds worker processes, and --workers {workers} runs none "
                "(--single-process): its intervals are over workers"
            )
    check_min_effect(m, "--min-effect")
    protocol = (protocol or ProtocolConfig()).validate()
    comparisons = plan_ab(tuple(kernels), tuple(sets), a, b, reference=reference)
    if slug is None:
        slug = "aa" if all(c.role == "aa" for c in comparisons) else "ab"
    return RunConfig(
        shape=shape.validate(), comparisons=comparisons, sets=tuple(sets), calls=calls,
        replays=replays, seed=seed, m=float(m), protocol=protocol, confirm=confirm,
        sessions_dir=str(sessions_dir), slug=slug, mode="ab", workers=workers, counters=counters,
        ray=ray, overlap=bool(overlap), settle=int(settle),
        extra={"kernels": list(kernels), "a": a, "b": b, "reference": reference, **(extra or {})},
    )  # fmt: skip


def config_from_settings(
    settings: RunSettings, sessions_dir: str | Path, extra: dict[str, Any] | None = None
) -> RunConfig:
    """The runner's RunConfig derived from ``settings`` (validated: BadArgument names the field);
    a checkpoint's record goes into the session config, its experts into the banks."""
    ckpt = settings.validate().open_checkpoint()
    extra = dict(extra or {})
    if ckpt is not None:
        extra["checkpoint"] = ckpt.summary()
    cfg = make_config(
        settings.shape(), kernels=tuple(settings.kernels), sets=tuple(settings.sets),
        a=settings.a, b=settings.b, calls=settings.calls, replays=settings.replays,
        seed=settings.seed, protocol=settings.protocol(), sessions_dir=str(sessions_dir),
        extra=extra, counters=settings.counters,
    )  # fmt: skip
    cfg.checkpoint = ckpt  # banks from its experts when one is given
    return cfg
