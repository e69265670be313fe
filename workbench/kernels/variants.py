"""The variant table: the one place that says which kernel builds exist (docs/DESIGN.md §4).

A variant is a kernel spec (workbench/kernels/specs.py: the six built-ins, or a user's TOML file) built
with some values of its parameters, plus an optional calibration build that can spin a known
number of SM cycles per CTA (docs/DESIGN.md §5.8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from workbench.core.arms import PEER_ARMS
from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNELS
from workbench.data.layouts import RECORD_BYTES, layout_info
from workbench.kernels.specs import ARMS, KernelSpec, builtin_spec

__all__ = ["ARMS", "KERNELS", "PEER_ARMS", "RECORD_BYTES", "Variant", "all_variants", "parse_arm"]


@dataclass(frozen=True)
class Variant:
    kernel: str
    layout: str
    reader: str
    calib: bool = False
    spec: KernelSpec | None = None  # a user's spec; None: the built-in spec of layout-reader
    params: tuple[tuple[str, int], ...] = ()  # parameter values other than the spec's defaults

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise BadArgument(f"unknown kernel {self.kernel!r}; known: {', '.join(KERNELS)}")
        if self.spec is None:
            if f"{self.layout}-{self.reader}" not in ARMS:
                raise BadArgument(
                    f"unknown variant {self.layout}-{self.reader!s} for {self.kernel}; "
                    f"known: {', '.join(ARMS)}"
                )
        elif (self.spec.kernel, self.spec.layout, self.spec.reader) != (
            self.kernel,
            self.layout,
            self.reader,
        ):
            raise BadArgument(
                f"variant {self.kernel}:{self.layout}-{self.reader} does not match its spec "
                f"{self.spec.name} ({self.spec.kernel}, {self.spec.layout}, {self.spec.reader})"
            )
        layout_info(self.layout)
        # normalised: only non-default values, in the spec's order, so equal builds compare equal
        object.__setattr__(self, "params", self.kernel_spec.non_default(dict(self.params)))

    @classmethod
    def of_spec(
        cls, spec: KernelSpec, calib: bool = False, params: Mapping[str, int] | None = None
    ) -> Variant:
        user = None if spec.builtin else spec
        return cls(
            spec.kernel, spec.layout, spec.reader, calib, user, tuple((params or {}).items())
        )

    @property
    def kernel_spec(self) -> KernelSpec:
        return self.spec or builtin_spec(self.kernel, f"{self.layout}-{self.reader}")

    @property
    def user(self) -> bool:
        """A user's kernel (a spec file), not one of the built-ins."""
        return self.spec is not None

    @property
    def arm(self) -> str:
        """The arm name: 'b3-coop', a user spec's name; non-default parameters as '[unroll=4]'."""
        base = self.spec.name if self.spec else f"{self.layout}-{self.reader}"
        if self.params:
            base += "[" + ",".join(f"{n}={v}" for n, v in self.params) + "]"
        return base

    @property
    def name(self) -> str:
        return f"{self.kernel}:{self.arm}" + ("+calib" if self.calib else "")

    @property
    def record_bytes(self) -> int:
        return RECORD_BYTES[self.layout]

    def defines(self) -> list[str]:
        """The -D flags that select this variant at compile time (parameters included)."""
        flags = self.kernel_spec.flags(dict(self.params))
        if self.calib:
            flags.append("-DWB_CALIBRATION")
        return flags

    def identity(self) -> str:
        """Variants with the same identity must give bit-identical outputs (docs/DESIGN.md §4.1):
        a spec promising ``identical_to`` an arm shares that arm's identity at its default
        parameters; a tolerance promise, or other parameter values, is an identity of its own."""
        s = self.kernel_spec
        if self.params:
            return self.name
        return f"{self.kernel}:{s.identical_to or s.name}"

    @property
    def tolerance(self) -> float:
        """The relative L2 this variant is held to against the float64 reference."""
        from workbench.kernels.specs import DEFAULT_TOLERANCE

        return self.kernel_spec.tolerance or DEFAULT_TOLERANCE


def parse_arm(kernel: str, arm: str, calib: bool = False) -> Variant:
    """'b3-coop' -> Variant(kernel, 'b3', 'coop'); unknown names raise BadArgument naming them."""
    if arm not in ARMS:
        raise BadArgument(
            f"unknown variant {arm!r} for {kernel}; known: {', '.join(ARMS)} or a spec file "
            "(.toml)"
            + (" (peers such as tinygemm are timed but not built)" if arm in PEER_ARMS else "")
        )
    layout, reader = arm.split("-")
    return Variant(kernel, layout, reader, calib)


def all_variants(calib: bool = False, user: bool = False) -> list[Variant]:
    """The built-in variants (and their calibration builds); with ``user``, then the users'
    kernels found by user_specs()."""
    out = [parse_arm(k, a) for k in KERNELS for a in ARMS]
    if calib:
        out += [parse_arm(k, "b3-scalar", calib=True) for k in KERNELS]
    if user:
        out += [Variant.of_spec(s) for s in user_specs()[0]]
    return out


def user_specs() -> tuple[list[KernelSpec], list[str]]:
    """Users' kernel specs a listing shows (the TUI's variant matrix): every .toml file named in
    $WORKBENCH_SPECS (files or folders, separated like PATH), by default those under examples/
    (the checkout's, or the installed package's copy).
    Returns (specs, one-line errors of the files that are not valid specs)."""
    import os
    from pathlib import Path

    from workbench.core.paths import data_folder
    from workbench.kernels.specs import load_spec, read_toml

    entries = os.environ.get("WORKBENCH_SPECS", str(data_folder("examples"))).split(os.pathsep)
    files: list[Path] = []
    for e in filter(None, entries):
        p = Path(e)
        files += sorted(p.rglob("*.toml")) if p.is_dir() else [p]
    specs, errors = [], []
    for f in files:
        try:
            if read_toml(f).get("kind") == "python":
                continue  # a Python arm: no build to list (workbench.kernels.pyarm)
            specs.append(load_spec(f))
        except BadArgument as err:
            errors.append(str(err))
    return specs, errors
