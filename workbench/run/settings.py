"""The settings of a run in one form (docs/ARCHITECTURE.md "Run configuration"): `RunSettings`, what a
user chooses. The TUI's run form edits it, the TUI's run entry (`runner.run_session`) runs it, and
the runner's resolved `RunConfig` (shape, comparisons, protocol) is derived from it through
`config.make_config`, which the CLI calls with the same values from its options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from workbench.core import defaults
from workbench.core.arms import offered
from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNEL_CHOICES, SETS
from workbench.data.shapes import DEFAULT_PRESET, Shape, resolve_shape
from workbench.measure.abba import ProtocolConfig

# The arms a user may put on either side of an A/B, the defaults first (the arm table: the peers
# are timed but never recommended).
ARMS = offered((defaults.ARM_A, defaults.ARM_B))


def _open_checkpoint(folder: str, tp: int, rank: int) -> Any:
    """workbench.data.checkpoint.Checkpoint(folder, tp, rank), kept while its config.json and the
    folder's files are unchanged: the form validates on every keystroke, and opening reads every
    shard's header."""
    from workbench.data.checkpoint import Checkpoint

    path = Path(folder)
    try:
        stamp = tuple(
            sorted((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in path.iterdir())
        )
    except OSError:
        stamp = None  # absent or unreadable: Checkpoint names the problem
    key = (str(path.resolve()) if stamp is not None else folder, tp, rank, stamp)
    if stamp is None or key not in _OPENED:
        ckpt = Checkpoint(folder, tp=tp, rank=rank)
        if stamp is None:
            return ckpt
        _OPENED.clear()  # one form, one checkpoint at a time
        _OPENED[key] = ckpt
    return _OPENED[key]


_OPENED: dict[tuple, Any] = {}


@dataclass(frozen=True)
class RunSettings:
    """What a user chooses for a run (the TUI's run form, the TUI's run entry ``run_session``);
    ``config.config_from_settings`` derives the runner's resolved ``RunConfig`` from it. Shape
    fields left as None take the preset's value. A new option is a field here (its default from
    workbench.core.defaults), a check in ``validate`` and a keyword of ``make_config`` that
    ``config_from_settings`` passes it to."""

    preset: str = DEFAULT_PRESET
    tp: int = 4
    hidden: int | None = None
    inter: int | None = None
    experts: int | None = None
    top_k: int | None = None
    layers: int | None = None
    kernels: tuple[str, ...] = defaults.KERNELS  # the run's defaults: workbench.core.defaults
    sets: tuple[str, ...] = defaults.SETS
    a: str = defaults.ARM_A
    b: str = defaults.ARM_B
    pairs: int = defaults.PAIRS  # ABBA pairs per block (docs/DESIGN.md §5.5)
    blocks: int = defaults.BLOCKS
    adaptive: bool = False
    target_pct: float = defaults.TARGET * 100
    calls: int = defaults.CALLS
    replays: int = defaults.REPLAYS
    seed: int = defaults.SEED
    # A real AWQ checkpoint's folder ("" = synthetic banks; docs/DESIGN.md §3.8): its config.json
    # gives the shape (only tp may be set beside it), and rank picks the tensor-parallel slice.
    checkpoint: str = ""
    rank: int = 0
    # after a complete run, Nsight Compute counters of A and B into the session (`ab --counters`,
    # workbench/run/counters.py): needs ncu and the permission to read the GPU's counters
    counters: bool = False

    def open_checkpoint(self) -> Any:
        """The opened checkpoint (workbench.data.checkpoint.Checkpoint), or None for synthetic banks;
        BadArgument names the field or the file. Reads config.json and the safetensors headers."""
        if not self.checkpoint.strip():
            if self.rank != 0:
                raise BadArgument(
                    f"rank={self.rank} needs a checkpoint: synthetic banks have no ranks"
                )
            return None
        for name in ("hidden", "inter", "experts", "top_k", "layers"):
            if getattr(self, name) is not None:
                raise BadArgument(
                    f"{name}={getattr(self, name)} cannot be combined with a checkpoint: the shape "
                    "is read from its config.json (only tp may be set; the preset is not used)"
                )
        if not 0 <= self.rank < self.tp:
            raise BadArgument(f"rank={self.rank} must be in 0..{self.tp - 1} for tp={self.tp}")
        return _open_checkpoint(self.checkpoint.strip(), self.tp, self.rank)

    def shape(self) -> Shape:
        """The validated shape (raises BadArgument naming the dimension)."""
        ckpt = self.open_checkpoint()
        if ckpt is not None:
            return ckpt.shape
        return resolve_shape(
            preset=self.preset,
            tp=self.tp,
            hidden=self.hidden,
            inter=self.inter,
            experts=self.experts,
            top_k=self.top_k,
            layers=self.layers,
        )

    def validate(self) -> RunSettings:
        """Raise BadArgument naming the first field that cannot be run; return self."""
        self.shape()
        if not self.kernels:
            raise BadArgument("kernels=() must name at least one of w13, w2, step")
        for k in self.kernels:
            if k not in KERNEL_CHOICES:
                raise BadArgument(f"kernels={k!r} is not one of {', '.join(KERNEL_CHOICES)}")
        if not self.sets:
            raise BadArgument("sets=() must name at least one of hot, rotating")
        for s in self.sets:
            if s not in SETS:
                raise BadArgument(f"sets={s!r} is not one of {', '.join(SETS)}")
        for side in ("a", "b"):
            arm = getattr(self, side)
            if arm not in ARMS and not str(arm).endswith(".toml"):  # a user's spec file
                raise BadArgument(
                    f"{side}={arm!r} is not one of {', '.join(ARMS)} or a spec file (.toml)"
                )
        for name, low in (("pairs", 1), ("blocks", 1), ("calls", 1), ("replays", 1)):
            value = getattr(self, name)
            if value < low:
                raise BadArgument(f"{name}={value} must be at least {low}")
        if not isinstance(self.counters, bool):
            raise BadArgument(f"counters={self.counters!r} must be true or false")
        if not 0.0 < self.target_pct < 50.0:
            raise BadArgument(f"target_pct={self.target_pct} must lie in (0, 50) percent")
        return self

    def protocol(self) -> ProtocolConfig:
        """The ABBA protocol these settings ask for (validated: BadArgument names the knob)."""
        return ProtocolConfig(
            pairs=self.pairs, blocks=self.blocks, adaptive=self.adaptive,
            target=self.target_pct / 100.0,
        ).validate()  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSettings:
        """Settings from a mapping of field names (lists become tuples); an unknown name is a
        BadArgument naming it. Missing fields keep their defaults."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise BadArgument(
                f"{unknown[0]!r} is not a run setting: one of {', '.join(sorted(names))}"
            )
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
