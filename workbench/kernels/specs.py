"""Kernel specs: a kernel variant as data (docs/DESIGN.md §4.1).

A spec names the op contract it implements (``w13`` or ``w2``, argument lists in docs/DESIGN.md
§4.1), its sources (a source tree root, the files to compile, include folders), compile-time
defines and flags, its metadata layout and reader (from the layout registry in
workbench/data/layouts.py), its numerics promise (bit-identical to a named built-in arm, or a relative
L2 tolerance against the float64 reference) and its tunable compile-time parameters (each a -D
macro with allowed values and a default; ``workbench tune`` sweeps them).

The six built-in variants are specs written as Python dicts in the same shape as a TOML file and
checked by the same validator; a user's spec is a TOML file whose paths resolve relative to it.
Torch-free, so a bad spec fails before anything is imported or built.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.core.arms import BY_NAME, KERNEL_ARMS
from workbench.core.errors import BadArgument
from workbench.core.vocab import KERNELS
from workbench.data.layouts import LAYOUTS, READERS, layout_info
from workbench.kernels.sources import REPO, SOURCE_SUFFIXES, csrc_dir  # noqa: F401 (API)

ARMS = KERNEL_ARMS  # the built-in arms of our CUDA sources (the arm table, core/arms.py)
MAX_TREE_FILES = 2000  # an include folder that large is a mistake (e.g. "/"), not a kernel
# Relative L2 against the float64 reference that the built-ins (and triton-moe) promise and the
# check holds them to: the one home of the number (tests/test_one_home.py)
DEFAULT_TOLERANCE = 2e-3
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,47}$")
_MACRO = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEFINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(=[^\s]*)?$")
_TOP_KEYS = {"name", "kernel", "layout", "reader", "root", "sources", "include_dirs", "defines",
             "cuda_flags", "promise", "params", "description"}  # fmt: skip


@dataclass(frozen=True)
class Param:
    """A tunable compile-time parameter: ``-D<macro>=<value>``, value one of ``values``."""

    name: str
    macro: str
    values: tuple[int, ...]
    default: int
    help: str = ""


@dataclass(frozen=True)
class KernelSpec:
    name: str  # the arm name: "b3-scalar", or a user's "w13-unroll4"
    kernel: str  # op contract: w13 | w2
    layout: str
    reader: str
    root: Path  # source tree root: every source file under it is part of the build's hash
    sources: tuple[Path, ...]  # files compiled (absolute)
    include_dirs: tuple[Path, ...]  # -I folders (absolute), hashed like the root
    defines: tuple[str, ...] = ()  # extra "NAME" / "NAME=VALUE"
    cuda_flags: tuple[str, ...] = ()  # extra nvcc flags
    identical_to: str | None = None  # promise: bit-identical to this built-in arm ...
    tolerance: float | None = None  # ... or relative L2 vs the float64 reference at most this
    params: tuple[Param, ...] = ()
    origin: str = "built-in"  # or the TOML file it was read from
    description: str = ""

    @property
    def builtin(self) -> bool:
        return self.origin == "built-in"

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        raise BadArgument(f"spec {self.name}: no parameter {name!r} (its parameters: {known})")

    def resolve(self, values: Mapping[str, int] | None = None) -> tuple[tuple[str, int], ...]:
        """(name, value) of every parameter: ``values`` where given (checked), else the default."""
        values = dict(values or {})
        for name, v in values.items():
            p = self.param(name)
            if isinstance(v, bool) or v not in p.values:
                raise BadArgument(
                    f"spec {self.name}: parameter {name}={v!r} is not one of "
                    f"{', '.join(map(str, p.values))}"
                )
        return tuple((p.name, int(values.get(p.name, p.default))) for p in self.params)

    def non_default(self, values: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
        """Only the values that differ from the defaults (what a variant's name shows)."""
        return tuple((n, v) for n, v in self.resolve(values) if v != self.param(n).default)

    def flags(self, values: Mapping[str, int] | None = None) -> list[str]:
        """The -D flags of this spec (kernel, layout, reader, its defines, every parameter)."""
        out = [
            f"-DWB_KERNEL_{self.kernel.upper()}",
            f"-D{LAYOUTS[self.layout].define}",
            f"-D{READERS[self.reader]}",
        ]
        out += [f"-D{d}" for d in self.defines]
        by_name = {p.name: p for p in self.params}
        out += [f"-D{by_name[n].macro}={v}" for n, v in self.resolve(values)]
        return out

    def tree_files(self) -> list[tuple[str, Path]]:
        """(name, path) of every source file the binary may depend on: the sources, every source
        file under the root and under each include folder. Names are relative to their tree (so a
        copied tree hashes the same), prefixed by the tree's index."""
        seen: dict[Path, str] = {}
        for i, tree in enumerate((self.root, *self.include_dirs)):
            files = sorted(
                p for p in tree.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()
            )
            if len(files) > MAX_TREE_FILES:
                raise BadArgument(
                    f"{self.origin}: {tree} holds {len(files)} source files (more than "
                    f"{MAX_TREE_FILES}): name a smaller root or include folder"
                )
            for p in files:
                seen.setdefault(p.resolve(), f"{i}/{p.relative_to(tree).as_posix()}")
        for p in self.sources:
            seen.setdefault(p.resolve(), f"src/{p.name}")
        return sorted(((n, p) for p, n in seen.items()), key=lambda t: t[0])

    def source_hashes(self) -> dict[str, str]:
        """File -> SHA-256 of every file of the tree (provenance of a user kernel)."""
        out = {}
        for _, p in self.tree_files():
            try:
                shown = p.relative_to(REPO).as_posix()
            except ValueError:
                shown = str(p)
            out[shown] = hashlib.sha256(p.read_bytes()).hexdigest()
        return out

    def tree_digest(self) -> hashlib._Hash:
        h = hashlib.sha256()
        for name, p in self.tree_files():
            h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
        h.update(("\0".join(s.name for s in self.sources)).encode())
        return h

    def to_record(self, values: Mapping[str, int] | None = None) -> dict[str, Any]:
        """What a session records about the spec (with the source hashes for a user kernel)."""
        rec: dict[str, Any] = {
            "name": self.name, "kernel": self.kernel, "layout": self.layout,
            "reader": self.reader, "origin": self.origin, "defines": list(self.defines),
            "cuda_flags": list(self.cuda_flags), "params": dict(self.resolve(values)),
            "promise": {"identical_to": self.identical_to} if self.identical_to
            else {"tolerance": self.tolerance},
        }  # fmt: skip
        if not self.builtin:
            rec["sources"] = self.source_hashes()
        return rec


# ------------------------------------------------------------------------------- validation


def _fail(origin: str, field: str, msg: str) -> BadArgument:
    return BadArgument(f"{origin}: {field}: {msg}")


def _str(d: Mapping, key: str, origin: str, default: str | None = None) -> str:
    v = d.get(key, default)
    if not isinstance(v, str) or not v:
        raise _fail(origin, key, f"must be a non-empty string, got {v!r}")
    return v


def _str_list(d: Mapping, key: str, origin: str) -> list[str]:
    v = d.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise _fail(origin, key, f"must be a list of non-empty strings, got {v!r}")
    return v


def _params(raw: object, origin: str) -> tuple[Param, ...]:
    if not isinstance(raw, dict):
        raise _fail(origin, "params", f"must be a table of parameters, got {raw!r}")
    out = []
    for name, t in raw.items():
        f = f"params.{name}"
        if not _MACRO.match(name):
            raise _fail(origin, f, "a parameter name must be an identifier")
        if not isinstance(t, dict):
            raise _fail(origin, f, f"must be a table with macro, values, default; got {t!r}")
        extra = set(t) - {"macro", "values", "default", "help"}
        if extra:
            raise _fail(
                origin, f"{f}.{sorted(extra)[0]}", "unknown key (macro, values, default, help)"
            )
        macro = t.get("macro")
        if not isinstance(macro, str) or not _MACRO.match(macro):
            raise _fail(origin, f"{f}.macro", f"must be a C macro name, got {macro!r}")
        values = t.get("values")
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            or len(set(values)) != len(values)
        ):
            raise _fail(
                origin,
                f"{f}.values",
                f"must be a non-empty list of distinct integers, got {values!r}",
            )
        default = t.get("default")
        if default not in values or isinstance(default, bool):
            raise _fail(origin, f"{f}.default", f"{default!r} is not one of the values {values}")
        out.append(Param(name, macro, tuple(values), default, str(t.get("help", ""))))
    macros = [p.macro for p in out]
    if len(set(macros)) != len(macros):
        raise _fail(origin, "params", "two parameters set the same macro")
    return tuple(out)


def _promise(raw: object, origin: str) -> tuple[str | None, float | None]:
    if not isinstance(raw, dict) or len(raw) != 1 or not set(raw) <= {"identical_to", "tolerance"}:
        raise _fail(
            origin, "promise",
            'must be a table with exactly one of identical_to = "<built-in arm>" or '
            f"tolerance = <relative L2 vs the float64 reference>; got {raw!r}",
        )  # fmt: skip
    if "identical_to" in raw:
        arm = raw["identical_to"]
        if arm not in ARMS:
            raise _fail(
                origin, "promise.identical_to", f"{arm!r} is not a built-in arm ({', '.join(ARMS)})"
            )
        return arm, None
    tol = raw["tolerance"]
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 < tol < 1:
        raise _fail(origin, "promise.tolerance", f"must be a number in (0, 1), got {tol!r}")
    return None, float(tol)


def spec_from_dict(d: Mapping[str, Any], base: Path, origin: str) -> KernelSpec:
    """The validated spec of ``d`` (a parsed TOML file or a built-in's dict); relative paths
    resolve against ``base``. Every error is one BadArgument line naming ``origin`` and the field."""
    extra = set(d) - _TOP_KEYS
    if extra:
        raise _fail(origin, sorted(extra)[0], f"unknown key; known: {', '.join(sorted(_TOP_KEYS))}")
    name = _str(d, "name", origin)
    if not _NAME.match(name):
        raise _fail(
            origin, "name", f"{name!r} must be a letter then letters, digits, _ . - (48 at most)"
        )
    kernel = _str(d, "kernel", origin)
    if kernel not in KERNELS:
        raise _fail(origin, "kernel", f"{kernel!r} is not an op contract ({', '.join(KERNELS)})")
    layout = _str(d, "layout", origin)
    try:
        lay = layout_info(layout)
    except BadArgument as e:
        raise _fail(origin, "layout", str(e)) from None
    reader = _str(d, "reader", origin)
    if reader not in lay.readers:
        raise _fail(
            origin,
            "reader",
            f"{reader!r} is not a reader of layout {layout} ({', '.join(lay.readers)})",
        )

    def folder(text: str, field: str) -> Path:
        p = (base / text).resolve()
        if not p.is_dir():
            raise _fail(origin, field, f"{text!r} is not a folder ({p})")
        return p

    root = folder(_str(d, "root", origin, "."), "root")
    sources = []
    for s in _str_list(d, "sources", origin):
        p = (base / s).resolve()
        if p.suffix not in (".cu", ".cpp", ".cc"):
            raise _fail(origin, "sources", f"{s!r} is not a .cu, .cpp or .cc file")
        if not p.is_file():
            raise _fail(origin, "sources", f"{s!r} does not exist ({p})")
        sources.append(p)
    if not sources:
        raise _fail(origin, "sources", "names no file to compile")
    includes = tuple(folder(s, "include_dirs") for s in _str_list(d, "include_dirs", origin))
    defines = _str_list(d, "defines", origin)
    for x in defines:
        if not _DEFINE.match(x) or x.startswith(("WB_KERNEL_", "WB_LAYOUT_", "WB_READER_")):
            raise _fail(
                origin,
                "defines",
                f"{x!r} must be NAME or NAME=VALUE, not a WB_KERNEL/LAYOUT/READER macro (those come from kernel, layout, reader)",
            )
    flags = _str_list(d, "cuda_flags", origin)
    for x in flags:
        if not x.startswith("-") or x.startswith(("-D", "-I", "-o")):
            raise _fail(
                origin,
                "cuda_flags",
                f"{x!r} must be an nvcc option (defines go in defines, folders in include_dirs)",
            )
    identical_to, tolerance = _promise(d.get("promise"), origin)
    params = _params(d.get("params", {}), origin)
    clash = {p.macro for p in params} & {x.split("=")[0] for x in defines}
    if clash:
        raise _fail(origin, "defines", f"{sorted(clash)[0]} is also a parameter's macro")
    return KernelSpec(
        name, kernel, layout, reader, root, tuple(sources), includes, tuple(defines),
        tuple(flags), identical_to, tolerance, params, origin, str(d.get("description", "")),
    )  # fmt: skip


def read_toml(p: Path) -> dict[str, Any]:
    """A spec file's table; BadArgument names the file when it is missing or not TOML."""
    if not p.is_file():
        raise BadArgument(f"spec file {str(p)!r} does not exist")
    try:
        import tomllib
    except ImportError:  # Python 3.10: the same parser as the tomli package
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(p.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BadArgument(f"{p}: not valid TOML: {e}") from None


def load_spec(path: str | Path) -> KernelSpec:
    """A user's spec from its TOML file; BadArgument names the file and the bad field. A Python
    arm (``kind = "python"``, workbench.kernels.pyarm) has nothing to build or check here."""
    p = Path(path)
    d = read_toml(p)
    kind = d.pop("kind", "cuda")
    if kind == "python":
        raise _fail(
            str(p.resolve()), "kind",
            "a Python arm has nothing to build or check: time it with "
            f"workbench ab --a/--b {path}",
        )  # fmt: skip
    if kind != "cuda":
        raise _fail(str(p.resolve()), "kind", f'{kind!r} is not "cuda" or "python"')
    spec = spec_from_dict(d, p.resolve().parent, str(p.resolve()))
    if spec.name in ARMS:
        raise _fail(spec.origin, "name", f"{spec.name!r} is a built-in arm's name: choose another")
    return spec


def is_spec_path(text: str) -> bool:
    """An arm argument names a spec file when it ends in .toml."""
    return isinstance(text, str) and text.strip().endswith(".toml")


# ------------------------------------------------------------------------------- built-ins

# The parameters that move the built-in kernels' speed (docs/DESIGN.md §4.1): the groups (W13) or
# units (W2) a warp loads before it computes, and the most warps a CTA may have. The defaults must
# equal the #ifndef defaults in csrc/kernels/*.cuh (a CPU test holds them together).
BUILTIN_PARAMS: dict[str, dict[str, dict[str, Any]]] = {
    "w13": {
        "unroll": {"macro": "WB_W13_UNROLL", "values": [1, 2, 3, 4, 5, 6, 8], "default": 5,
                   "help": "groups a warp loads before it computes (bytes in flight)"},
        "max_warps": {"macro": "WB_W13_MAX_WARPS", "values": [4, 8, 16, 32], "default": 16,
                      "help": "warps per CTA at most (the launcher picks ceil(groups / unroll))"},
    },
    "w2": {
        "unroll": {"macro": "WB_W2_UNROLL", "values": [1, 2, 3, 4, 6, 8], "default": 2,
                   "help": "units a warp loads before it computes (bytes in flight)"},
        "max_warps": {"macro": "WB_W2_MAX_WARPS", "values": [8, 16, 32], "default": 32,
                      "help": "warps per CTA at most (the launcher picks ceil(units / unroll))"},
    },
}  # fmt: skip
# b3-scalar is the root of the built-ins' identity: held to the float64 reference; the others
# promise its bits exactly.
BUILTIN_PROMISES = {
    "b4-scalar": {"identical_to": "b3-scalar"},
    "b3-scalar": {"tolerance": DEFAULT_TOLERANCE},
    "b3-coop": {"identical_to": "b3-scalar"},
}
assert set(BUILTIN_PROMISES) == set(ARMS)  # one promise per built-in arm of the table


def builtin_dict(kernel: str, arm: str) -> dict[str, Any]:
    """The built-in spec of (kernel, arm) as the dict a TOML file would hold."""
    layout, reader = BY_NAME[arm].layout, BY_NAME[arm].reader
    return {
        "name": arm, "kernel": kernel, "layout": layout, "reader": reader, "root": ".",
        "sources": [f"{kernel}.cu", "binding.cpp"], "include_dirs": ["."],
        "promise": BUILTIN_PROMISES[arm], "params": BUILTIN_PARAMS[kernel],
    }  # fmt: skip


_BUILTIN: dict[tuple[str, str, str], KernelSpec] = {}


def builtin_spec(kernel: str, arm: str) -> KernelSpec:
    """The registry entry of a built-in variant (over the current csrc_dir())."""
    root = csrc_dir()
    key = (kernel, arm, str(root))
    if key not in _BUILTIN:
        _BUILTIN[key] = spec_from_dict(builtin_dict(kernel, arm), root, "built-in")
    return _BUILTIN[key]
