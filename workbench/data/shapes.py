"""MoE shapes (docs/DESIGN.md §2): presets, per-rank kernel dimensions and validation.

A shape describes one model's MoE layers and the tensor-parallel split. Per rank:
W13 (gate+up, column-parallel) has ``K = hidden, N = 2 * inter / tp``; W2 (down, row-parallel)
has ``K = inter / tp, N = hidden``. Everything here is integer arithmetic: no torch, no NumPy.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace

from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNELS

# The kernels dequantize one group of 32 weights per metadata record and give each warp lane
# one column of a 32-column tile, so both the group size and the tile width are fixed at 32.
GROUP = 32
TILE_COLS = 32
TP_CHOICES = (1, 2, 4, 8)
# Upper bounds of a shape: far past every released model, so that a typo such as
# --hidden 1000000000000 is an error rather than 3.7e17 bytes of arithmetic.
MAX_DIMS = {
    "hidden": 65_536,  # released models: 2,048 to 16,384 (Llama-3 405B is the widest)
    "inter": 65_536,  # dense FFNs reach 53,248 (Llama-3 405B); MoE experts are far narrower
    "experts": 4_096,  # released MoEs route over at most a few hundred (512 in the presets)
    "top_k": 64,  # released MoEs pick 1 to 16 experts per token
    "layers": 1_024,  # the deepest released models have ~130 layers
    "tp": 64,  # one NVLink domain (NVL72) bounds useful tensor parallelism
}


@dataclass(frozen=True)
class Shape:
    """One MoE configuration: model dimensions plus the tensor-parallel size and group size."""

    hidden: int
    inter: int
    experts: int
    top_k: int
    layers: int
    tp: int = 4
    group: int = GROUP
    name: str = "custom"

    @property
    def w13_k(self) -> int:
        return self.hidden

    @property
    def w13_n(self) -> int:
        # gate and up halves of this rank's slice of the intermediate dimension
        return 2 * self.inter // self.tp

    @property
    def w2_k(self) -> int:
        return self.inter // self.tp

    @property
    def w2_n(self) -> int:
        return self.hidden

    def dims(self, kernel: str) -> tuple[int, int]:
        """Per-rank ``(K, N)`` of ``kernel`` ("w13" or "w2")."""
        if kernel == "w13":
            return self.w13_k, self.w13_n
        if kernel == "w2":
            return self.w2_k, self.w2_n
        raise BadArgument(f"kernel={kernel!r} is not one of {', '.join(KERNELS)}")

    def validate(self) -> Shape:
        """Raise BadArgument naming the first dimension the kernels cannot serve; return self."""
        for field in ("hidden", "inter", "experts", "top_k", "layers", "tp", "group"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise BadArgument(f"{field}={value!r} must be a positive integer")
        if self.group != GROUP:
            raise BadArgument(
                f"group={self.group} is not supported: the kernels serve group {GROUP}"
            )
        if self.top_k > self.experts:
            raise BadArgument(f"top_k={self.top_k} exceeds experts={self.experts}")
        for field, maximum in MAX_DIMS.items():
            value = getattr(self, field)
            if value > maximum:
                raise BadArgument(f"{field}={value} is above the maximum {maximum:,} (MAX_DIMS)")
        if self.inter % self.tp:
            raise BadArgument(f"inter={self.inter} is not divisible by tp={self.tp}")
        checks = [
            ("W13 K (hidden)", self.w13_k, self.group, "the group size"),
            ("W13 N (2*inter/tp)", self.w13_n, TILE_COLS, "the 32-column tile"),
            ("W13 N/2 (inter/tp, gate and up halves)", self.w13_n // 2, TILE_COLS, "the tile"),
            ("W2 K (inter/tp)", self.w2_k, self.group, "the group size"),
            ("W2 N (hidden)", self.w2_n, TILE_COLS, "the 32-column tile"),
        ]
        for what, value, multiple, why in checks:
            if value % multiple:
                raise BadArgument(
                    f"{what}={value} is not a multiple of {multiple} ({why}) "
                    f"for hidden={self.hidden}, inter={self.inter}, tp={self.tp}"
                )
        return self

    def to_dict(self) -> dict:
        return asdict(self)


PRESETS: dict[str, Shape] = {
    # Facts from public model configs (docs/DESIGN.md §2); the first is the seed's shape and the default.
    "qwen3.8-flash-next": Shape(2560, 640, 512, 10, 48, tp=4, name="qwen3.8-flash-next"),
    "qwen3-next-80b-a3b": Shape(2048, 512, 512, 10, 48, tp=4, name="qwen3-next-80b-a3b"),
    "qwen3.5-397b-a17b": Shape(4096, 1024, 512, 10, 60, tp=4, name="qwen3.5-397b-a17b"),
}
DEFAULT_PRESET = "qwen3.8-flash-next"


def get_preset(name: str) -> Shape:
    try:
        return PRESETS[name]
    except KeyError:
        raise BadArgument(
            f"preset={name!r} is unknown; known presets: {', '.join(PRESETS)}"
        ) from None


def resolve_shape(
    preset: str | None = None,
    tp: int | None = None,
    hidden: int | None = None,
    inter: int | None = None,
    experts: int | None = None,
    top_k: int | None = None,
    layers: int | None = None,
) -> Shape:
    """The preset (default: DEFAULT_PRESET) with every explicitly given field overriding it.

    The result is validated. Overriding any model dimension renames the shape to
    ``"<preset>+custom"`` so that a session never claims to be a preset it is not.
    """
    base = get_preset(preset if preset is not None else DEFAULT_PRESET)
    dims = {"hidden": hidden, "inter": inter, "experts": experts, "top_k": top_k, "layers": layers}
    overrides = {k: v for k, v in dims.items() if v is not None}
    changed = any(getattr(base, k) != v for k, v in overrides.items())
    if tp is not None:
        overrides["tp"] = tp
    if changed:
        overrides["name"] = f"{base.name}+custom"
    return replace(base, **overrides).validate()


def valid_tps(preset: str | Shape) -> list[int]:
    """Which of the usual tp sizes (1, 2, 4, 8) the kernels can serve for ``preset``."""
    base = preset if isinstance(preset, Shape) else get_preset(preset)
    out = []
    for tp in TP_CHOICES:
        try:
            replace(base, tp=tp).validate()
        except BadArgument:
            continue
        out.append(tp)
    return out


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--preset --tp --hidden --inter --experts --top-k --layers`` to ``parser``."""
    g = parser.add_argument_group("shape (docs/DESIGN.md §2)")
    g.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help=f"built-in shape: {', '.join(PRESETS)} (default {DEFAULT_PRESET})",
    )
    g.add_argument("--tp", type=int, default=None, help="tensor-parallel size (default 4)")
    g.add_argument("--hidden", type=int, default=None, help="hidden size H (overrides preset)")
    g.add_argument("--inter", type=int, default=None, help="MoE intermediate size I (overrides)")
    g.add_argument("--experts", type=int, default=None, help="experts per layer E (overrides)")
    g.add_argument("--top-k", type=int, default=None, help="routed experts per token (overrides)")
    g.add_argument("--layers", type=int, default=None, help="MoE layers L (overrides)")


def shape_from_args(args: argparse.Namespace) -> Shape:
    """The validated Shape that the arguments of add_shape_arguments describe."""
    return resolve_shape(
        preset=getattr(args, "preset", None),
        tp=getattr(args, "tp", None),
        hidden=getattr(args, "hidden", None),
        inter=getattr(args, "inter", None),
        experts=getattr(args, "experts", None),
        top_k=getattr(args, "top_k", None),
        layers=getattr(args, "layers", None),
    )
