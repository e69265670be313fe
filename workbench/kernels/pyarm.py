"""Python arms: an arm that is a Python callable, not a CUDA spec (docs/DESIGN.md §4.8).

A spec file with ``kind = "python"`` names a callable by ``entry = "path/to/file.py:make_arm"``
(relative to the spec) or ``entry = "package.module:make_arm"``. Before every capture the engine
calls it once per call of every graph with an ``ArmCall`` (the bank, the inputs and the output of
the op contract, §4.1) and captures the launcher it returns, a callable of no arguments that
writes ``call.out``, into the same CUDA graphs as the kernel arms. The two peers (tinygemm,
triton-moe) are the built-in Python specs (``BUILTIN``): the engine has one way to run an arm
that is not a CUDA spec.

Spec validation is torch-free (a bad spec fails before anything is imported); importing the
entry and running it happen on the device side (``PythonArms``), each failure one BadArgument
naming the spec, the entry and what is wrong.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.core.errors import BadArgument, WorkbenchError
from workbench.core.vocab import KERNELS
from workbench.data.layouts import layout_info
from workbench.kernels.specs import (
    ARMS,
    DEFAULT_TOLERANCE,
    REPO,
    _fail,
    _promise,
    _str,
    read_toml,
)
from workbench.kernels.variants import PEER_ARMS

_KEYS = {"name", "kind", "kernel", "layout", "entry", "promise", "sources", "description"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,47}$")
_HERE = Path(__file__).resolve().parent

# The peers of docs/DESIGN.md §4.5 as Python specs. tinygemm's bf16 arithmetic (8 mantissa bits)
# makes a tight bound meaningless and its outputs were seen to change between placements
# (sessions/20261130T142829Z_default-r1, rel_l2 0.35 in one block): its promise is recorded, not
# gated. triton-moe promises what our kernels meet (§4.7).
BUILTIN: dict[str, dict[str, Any]] = {
    "tinygemm": {
        "name": "tinygemm", "kind": "python", "kernel": list(KERNELS), "layout": "b3",
        "entry": "workbench.kernels.tinygemm:make_arm",
        "promise": {"tolerance": 2e-2, "gated": False},
        "description": "torch int4 tinygemm, bf16, one call per routed expert",
    },
    "triton-moe": {
        "name": "triton-moe", "kind": "python", "kernel": list(KERNELS), "layout": "b3",
        "entry": "workbench.kernels.triton_moe:make_arm", "sources": ["triton_moe_kernels.py"],
        "promise": {"tolerance": DEFAULT_TOLERANCE},
        "description": "fused W4A16 MoE Triton kernel, fp16",
    },
}  # fmt: skip
assert set(BUILTIN) == set(PEER_ARMS)


@dataclass(frozen=True)
class PythonSpec:
    name: str
    kernels: tuple[str, ...]  # op contracts it implements (w13, w2 or both)
    layout: str  # the bank layout it reads
    entry: str  # as written: "file.py:function" or "module:function"
    path: Path | None  # the entry's file (file form), else None
    module: str | None  # the entry's module (module form), else None
    function: str
    identical_to: str | None = None
    tolerance: float | None = None
    gated: bool = True  # False: the promise is checked and recorded but never stops a run
    sources: tuple[Path, ...] = ()  # further files whose bytes the arm depends on (hashed)
    origin: str = "built-in"
    description: str = ""

    @property
    def builtin(self) -> bool:
        return self.origin == "built-in"

    @property
    def label(self) -> str:
        """How an error names the arm: its name, spec file and entry."""
        where = "built-in" if self.builtin else self.origin
        return f"Python arm {self.name} ({where}, entry {self.entry})"

    def files(self) -> list[Path]:
        """The entry's file and the further sources (the module's file for the module form)."""
        main = self.path
        if main is None:
            found = importlib.util.find_spec(self.module)  # type: ignore[arg-type]
            main = Path(found.origin) if found and found.origin else None
        return [p for p in (main, *self.sources) if p is not None]

    def source_hashes(self) -> dict[str, str]:
        out = {}
        for p in self.files():
            try:
                shown = p.resolve().relative_to(REPO).as_posix()
            except ValueError:
                shown = str(p)
            out[shown] = hashlib.sha256(p.read_bytes()).hexdigest()
        return out

    def to_record(self, kernel: str) -> dict[str, Any]:
        """What a session records about the arm (provenance.specs), with its files' SHA-256."""
        promise: dict[str, Any] = (
            {"identical_to": self.identical_to}
            if self.identical_to
            else {"tolerance": self.tolerance}
        )
        if not self.gated:
            promise["gated"] = False
        return {
            "name": self.name, "kind": "python", "kernel": kernel, "layout": self.layout,
            "entry": self.entry, "origin": self.origin, "promise": promise,
            "sources": self.source_hashes(),
        }  # fmt: skip


def _kernels(d: Mapping[str, Any], origin: str) -> tuple[str, ...]:
    v = d.get("kernel")
    items = [v] if isinstance(v, str) else v
    if (
        not isinstance(items, list)
        or not items
        or not all(isinstance(k, str) and k in KERNELS for k in items)
        or len(set(items)) != len(items)
    ):
        raise _fail(
            origin, "kernel", f"must be an op contract or a list of them ({', '.join(KERNELS)}), "
            f"got {v!r}",
        )  # fmt: skip
    return tuple(items)


def _entry(text: str, base: Path, origin: str) -> tuple[Path | None, str | None, str]:
    target, sep, fn = text.rpartition(":")
    if not sep or not target or not _IDENT.match(fn):
        raise _fail(
            origin, "entry",
            f'{text!r} must be "path/to/file.py:function" or "package.module:function"',
        )  # fmt: skip
    if target.endswith(".py") or "/" in target or "\\" in target or (base / target).is_file():
        p = (base / target).resolve()
        if p.suffix != ".py":
            raise _fail(origin, "entry", f"{target!r} is not a .py file")
        if not p.is_file():
            raise _fail(origin, "entry", f"file {target!r} does not exist ({p})")
        return p, None, fn
    if not _MODULE.match(target):
        raise _fail(origin, "entry", f"{target!r} is neither a .py file nor a module name")
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError) as e:
        raise _fail(origin, "entry", f"module {target!r} cannot be found: {e}") from None
    if found is None:
        raise _fail(origin, "entry", f"module {target!r} cannot be found (is it installed?)")
    return None, target, fn


def python_spec_from_dict(d: Mapping[str, Any], base: Path, origin: str) -> PythonSpec:
    """The validated Python spec of ``d``; each error one BadArgument naming ``origin`` and the
    field, as for CUDA specs (workbench.kernels.specs)."""
    extra = set(d) - _KEYS
    if extra:
        raise _fail(
            origin, sorted(extra)[0],
            f"unknown key for a Python arm; known: {', '.join(sorted(_KEYS))}",
        )  # fmt: skip
    name = _str(d, "name", origin)
    if not _NAME.match(name):
        raise _fail(
            origin, "name", f"{name!r} must be a letter then letters, digits, _ . - (48 at most)"
        )
    kernels = _kernels(d, origin)
    layout = _str(d, "layout", origin, "b3")
    try:
        layout_info(layout)
    except BadArgument as e:
        raise _fail(origin, "layout", str(e)) from None
    path, module, fn = _entry(_str(d, "entry", origin), base, origin)
    raw = d.get("promise")
    gated = True
    if isinstance(raw, dict) and "gated" in raw:
        raw = dict(raw)
        gated = raw.pop("gated")
        if not isinstance(gated, bool):
            raise _fail(origin, "promise.gated", f"must be true or false, got {gated!r}")
    identical_to, tolerance = _promise(raw, origin)
    srcs = d.get("sources", [])
    if not isinstance(srcs, list) or not all(isinstance(s, str) and s for s in srcs):
        raise _fail(origin, "sources", f"must be a list of file names, got {srcs!r}")
    sources = []
    for s in srcs:
        p = (base / s).resolve()
        if not p.is_file():
            raise _fail(origin, "sources", f"{s!r} does not exist ({p})")
        sources.append(p)
    return PythonSpec(
        name, kernels, layout, d["entry"], path, module, fn, identical_to, tolerance, gated,
        tuple(sources), origin, str(d.get("description", "")),
    )  # fmt: skip


def is_python_spec(d: Mapping[str, Any]) -> bool:
    return d.get("kind") == "python"


def load_python_spec(path: str | Path) -> PythonSpec:
    """A user's Python arm from its TOML file (``kind = "python"``)."""
    p = Path(path)
    d = read_toml(p)
    origin = str(p.resolve())
    if not is_python_spec(d):
        raise _fail(origin, "kind", f'{d.get("kind", "cuda")!r} is not "python"')
    spec = python_spec_from_dict(d, p.resolve().parent, origin)
    if spec.name in ARMS or spec.name in PEER_ARMS:
        raise _fail(origin, "name", f"{spec.name!r} is a built-in arm's name: choose another")
    return spec


_BUILT: dict[str, PythonSpec] = {}


def builtin_python(name: str) -> PythonSpec:
    """The built-in Python spec of peer ``name`` (tinygemm, triton-moe)."""
    if name not in _BUILT:
        _BUILT[name] = python_spec_from_dict(BUILTIN[name], _HERE, "built-in")
    return _BUILT[name]


# ------------------------------------------------------------------------ the call contract


@dataclass(frozen=True)
class ArmCall:
    """What a Python arm's callable receives, once per call of every graph, before capture.

    ``inputs`` are the op contract's (docs/DESIGN.md §4.1): w13 ``x`` f16 [1, K] and ``ids`` i32
    [top_k]; w2 ``inter`` f16 [top_k, K], ``ids`` and ``rw`` f32 [top_k]. ``out`` is the call's
    output, allocated by the engine (w13 f16 [top_k, N/2], w2 f16 [1, N]), NaN-poisoned before
    the gate. ``bank``: the layer's experts in ``layout`` (workbench.kernels.ops.Bank: weights
    i32 [E, K/32, N, 4], meta u8 [E, K/32, N*R], ``dequantize(ids)`` for their fp16 weights on
    the device). ``experts``: the routed ids on the host, for an arm that binds its routing at
    construction. ``state``: a dict this arm keeps per kernel over every call, graph and block of
    one kernel's comparisons (what it converts once per bank or routing); at each block's
    placement its tensors are cloned and its objects' ``relocate()`` is called (§5.5).
    ``note(text)``: a line in the session's notes (each distinct text once)."""

    kernel: str
    shape: Any
    bank: Any
    bank_index: int
    experts: tuple[int, ...]
    inputs: Mapping[str, Any]
    out: Any
    state: dict[Any, Any]
    note: Callable[[str], None]


def _describe(t: Any) -> str:
    shape = getattr(t, "shape", None)
    if shape is None:
        return type(t).__name__
    return f"{type(t).__name__} {str(getattr(t, 'dtype', '')).removeprefix('torch.')} {list(shape)}"


@dataclass
class _Launcher:
    """The arm's launcher, checked on every call it makes outside a replay (warm-up, capture):
    it returns None and raises nothing; otherwise one BadArgument names the arm and the fault."""

    spec: PythonSpec
    kernel: str
    fn: Callable[[], Any]
    out: Any

    def __call__(self) -> None:
        want = f"call.out ({_describe(self.out)})"
        try:
            got = self.fn()
        except WorkbenchError:
            raise
        except Exception as e:
            raise BadArgument(
                f"{self.spec.label}: its {self.kernel} launcher raised {type(e).__name__}: {e} "
                f"(it writes {want})"
            ) from e
        if got is not None:
            raise BadArgument(
                f"{self.spec.label}: its {self.kernel} launcher returned {_describe(got)}: a "
                f"launcher writes its result into {want} and returns None"
            )


@dataclass
class PythonArms:
    """The engine's Python arms: their callables (imported once), their per-kernel ``state`` and
    its relocation, notes."""

    note: Callable[[str], None]
    _fns: dict[PythonSpec, Callable[..., Any]] = field(default_factory=dict)
    states: dict[tuple[PythonSpec, str], dict[Any, Any]] = field(default_factory=dict)
    _noted: set[str] = field(default_factory=set)

    def resolve(self, spec: PythonSpec) -> Callable[..., Any]:
        """The spec's callable, imported once (BadArgument names what is missing)."""
        if spec in self._fns:
            return self._fns[spec]
        where = spec.path or spec.module
        try:
            if spec.path is not None:
                digest = hashlib.sha256(str(spec.path).encode()).hexdigest()[:12]
                loader = importlib.util.spec_from_file_location(f"wb_arm_{digest}", spec.path)
                assert loader is not None and loader.loader is not None
                mod = importlib.util.module_from_spec(loader)
                loader.loader.exec_module(mod)
            else:
                mod = importlib.import_module(spec.module)  # type: ignore[arg-type]
        except Exception as e:
            raise BadArgument(
                f"{spec.label}: importing {where} raised {type(e).__name__}: {e}"
            ) from e
        fn = getattr(mod, spec.function, None)
        if fn is None:
            public = sorted(n for n, v in vars(mod).items() if callable(v) and n[:1] != "_")
            raise BadArgument(
                f"{spec.label}: {where} defines no {spec.function!r} "
                f"(its functions: {', '.join(public) or 'none'})"
            )
        if not callable(fn):
            raise BadArgument(
                f"{spec.label}: {spec.function} in {where} is a {type(fn).__name__}, not a callable"
            )
        self._fns[spec] = fn
        return fn

    def supported(self, spec: PythonSpec) -> bool:
        """The callable's optional ``supported()`` hook (no hook: supported)."""
        hook = getattr(self.resolve(spec), "supported", None)
        if hook is None:
            return True
        ok = hook()
        if not isinstance(ok, bool):
            raise BadArgument(
                f"{spec.label}: {spec.function}.supported() returned {_describe(ok)}, not a bool"
            )
        return ok

    def _note_once(self, text: str) -> None:
        if text not in self._noted:
            self._noted.add(text)
            self.note(text)

    def launcher(
        self,
        spec: PythonSpec,
        kernel: str,
        shape: Any,
        bank: Any,
        bank_index: int,
        experts: list[int],
        inputs: Mapping[str, Any],
        out: Any,
    ) -> Callable[[], None]:
        """The checked launcher of one call (made outside any capture)."""
        fn = self.resolve(spec)
        state = self.states.setdefault((spec, kernel), {})
        call = ArmCall(
            kernel, shape, bank, bank_index, tuple(experts), inputs, out, state, self._note_once
        )
        try:
            made = fn(call)
        except WorkbenchError:
            raise
        except Exception as e:
            raise BadArgument(
                f"{spec.label}: {spec.function}(call) raised {type(e).__name__}: {e} "
                f"({kernel}, bank {bank_index})"
            ) from e
        if not callable(made):
            raise BadArgument(
                f"{spec.label}: {spec.function}(call) returned {_describe(made)}, not a launcher "
                "(a callable of no arguments that writes call.out)"
            )
        try:
            inspect.signature(made).bind()
        except TypeError:
            raise BadArgument(
                f"{spec.label}: the launcher {spec.function}(call) returned takes arguments "
                f"{inspect.signature(made)}; a launcher takes none"
            ) from None
        except ValueError:  # no signature to inspect (a builtin): it is called as it is
            pass
        return _Launcher(spec, kernel, made, out)

    def relocate(self) -> None:
        """Every state in fresh memory (a block's placement, docs/DESIGN.md §5.5)."""
        for state in self.states.values():
            for k, v in state.items():
                state[k] = _relocated(v)

    def clear(self) -> None:
        self.states.clear()


def _relocated(v: Any) -> Any:
    import torch

    if hasattr(v, "relocate") and callable(v.relocate):
        v.relocate()
        return v
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, list | tuple):
        return type(v)(_relocated(x) for x in v)
    if isinstance(v, dict):
        return {k: _relocated(x) for k, x in v.items()}
    return v
