"""The invalid-argument cases every kernel build must reject before launch (issue 3, item 3).

Each case mutates one argument of an otherwise valid call and names the text the error must
contain (the argument's name and its bad value). Used by the compile tests (CPU tensors: every
check but the device one runs before anything touches a GPU) and by `workbench check` on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from workbench.data.layouts import RECORD_BYTES, record_bytes

# A small shape every check can be exercised on: E=4 experts, K=64 (2 groups), N=64, top_k=2.
E, K, N, TOP_K = 4, 64, 64, 2
MAX_TOP_K = 64  # csrc/checks.h kMaxTopKArgs: the most routed experts a build accepts


@dataclass(frozen=True)
class Case:
    kernel: str
    name: str
    mutate: Callable[[dict], None]  # edits the argument dict in place
    expect: str  # a substring the error message must contain


def valid_args(kernel: str, layout: str, device: str | torch.device = "cpu") -> dict:
    """A valid call (random data, never zeros) of `kernel` for a build reading `layout` records."""
    rb = record_bytes(layout)
    g = torch.Generator().manual_seed(7)
    n_out = N // 2 if kernel == "w13" else N
    a = {
        "weights": torch.randint(
            -(2**31), 2**31 - 1, (E, K // 32, N, 4), generator=g, dtype=torch.int32
        ),
        "meta": torch.randint(0, 256, (E, K // 32, N * rb), generator=g, dtype=torch.uint8),
        "ids": torch.tensor([2, 0], dtype=torch.int32),
        "spin_cycles": 0,
    }
    if kernel == "w13":
        a["x"] = torch.randn(1, K, generator=g).half()
        a["out"] = torch.full((TOP_K, n_out), float("nan"), dtype=torch.half)
    else:
        a["inter"] = torch.randn(TOP_K, K, generator=g).half()
        a["rw"] = torch.softmax(torch.randn(TOP_K, generator=g), 0)
        a["out"] = torch.full((1, n_out), float("nan"), dtype=torch.half)
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in a.items()}


def call(module, kernel: str, a: dict) -> None:
    if kernel == "w13":
        module.forward(a["x"], a["weights"], a["meta"], a["ids"], a["out"], a["spin_cycles"])
    else:
        module.forward(
            a["inter"],
            a["weights"],
            a["meta"],
            a["ids"],
            a["rw"],
            a["out"],
            a["spin_cycles"],
        )


def _set(key: str, fn: Callable[[torch.Tensor], object]) -> Callable[[dict], None]:
    def mutate(a: dict) -> None:
        a[key] = fn(a[key])

    return mutate


def _noncontig(t: torch.Tensor) -> torch.Tensor:
    """Same shape and dtype, but a strided view (every other element of a doubled last dim)."""
    return torch.stack([t, t], dim=-1)[..., 0]


def _misaligned(t: torch.Tensor, elems: int = 1) -> torch.Tensor:
    """Same shape, contiguous, but starting `elems` elements past an aligned allocation."""
    flat = torch.empty(t.numel() + elems, dtype=t.dtype, device=t.device)
    return flat[elems:].view(t.shape).copy_(t)


def _grow_k(act: str, rows: int, groups: int) -> Callable[[dict], None]:
    """A consistent call whose K (= 32 * groups) is too large for the kernel's shared memory."""

    def mutate(a: dict) -> None:
        w, m = a["weights"], a["meta"]
        a["weights"] = torch.randint(0, 2**31 - 1, (E, groups, N, 4), dtype=torch.int32).to(
            w.device
        )
        a["meta"] = torch.randint(0, 256, (E, groups, m.shape[2]), dtype=torch.uint8).to(m.device)
        a[act] = torch.randn(rows, 32 * groups).half().to(a[act].device)

    return mutate


def _more_experts(experts: int) -> Callable[[dict], None]:
    """A bank of `experts` experts (same K, N, record width) and all of them routed."""

    def mutate(a: dict) -> None:
        w, m = a["weights"], a["meta"]
        a["weights"] = torch.randint(0, 2**31 - 1, (experts, *w.shape[1:]), dtype=torch.int32).to(
            w.device
        )
        a["meta"] = torch.randint(0, 256, (experts, *m.shape[1:]), dtype=torch.uint8).to(m.device)
        a["ids"] = torch.arange(experts, dtype=torch.int32, device=a["ids"].device)

    return mutate


def _common(kernel: str, act: str, other_layout_width: int) -> list[tuple[str, Callable, str]]:
    """Checks both ops share. `act` is the activation argument's name (x or inter)."""
    return [
        ("weights dtype", _set("weights", lambda t: t.float()), "'weights' must be Int"),
        ("weights dims", _set("weights", lambda t: t[0]), "'weights' must have 4 dimensions"),
        (
            "weights words",
            _set("weights", lambda t: t[..., :2].contiguous()),
            "size 2 in dimension 3",
        ),
        ("weights N % 32", _set("weights", lambda t: t[:, :, :48].contiguous()), "N = 48"),
        ("weights contiguous", _set("weights", _noncontig), "'weights' must be contiguous"),
        (
            "weights aligned",
            _set("weights", lambda t: _misaligned(t, 1)),
            "'weights' must start 16-byte aligned",
        ),
        ("weights no experts", _set("weights", lambda t: t[:0]), "holds 0 experts"),
        ("weights no groups", _set("weights", lambda t: t[:, :0].contiguous()), "holds 0 groups"),
        ("weights no columns", _set("weights", lambda t: t[:, :, :0].contiguous()), "N = 0"),
        # one group or column repeated by a zero stride (no memory): the size check comes first
        (
            "weights K beyond 32-bit indexing",
            _set("weights", lambda t: t[:, :1].expand(-1, 2**21 + 1, -1, -1)),
            "holds 2097153 groups (K = 67108896), more than the 2097152",
        ),
        (
            "weights N beyond 32-bit indexing",
            _set("weights", lambda t: t[:, :, :1].expand(-1, -1, 2**24 + 32, -1)),
            "has N = 16777248 columns, more than the 16777216",
        ),
        ("meta dtype", _set("meta", lambda t: t.to(torch.int8)), "'meta' must be Byte"),
        ("meta dims", _set("meta", lambda t: t[0]), "'meta' must have 3 dimensions"),
        ("meta experts", _set("meta", lambda t: t[:3].contiguous()), "size 3 in dimension 0"),
        ("meta groups", _set("meta", lambda t: t[:, :1].contiguous()), "size 1 in dimension 1"),
        (
            "meta layout width",
            _set(
                "meta",
                lambda t: torch.randint(
                    0,
                    256,
                    (*t.shape[:2], N * other_layout_width),
                    dtype=torch.uint8,
                    device=t.device,
                ),
            ),
            "-byte records",
        ),
        ("meta contiguous", _set("meta", _noncontig), "'meta' must be contiguous"),
        (
            "meta aligned",
            _set("meta", lambda t: _misaligned(t, 1)),
            "'meta' must start 4-byte aligned",
        ),
        ("ids dtype", _set("ids", lambda t: t.long()), "'ids' must be Int"),
        ("ids dims", _set("ids", lambda t: t.view(1, -1)), "'ids' must have 1 dimensions"),
        ("ids contiguous", _set("ids", _noncontig), "'ids' must be contiguous"),
        ("ids empty", _set("ids", lambda t: t[:0]), "top_k = 0"),
        (
            "ids too many",
            _set("ids", lambda t: torch.arange(E + 1, dtype=torch.int32, device=t.device)),
            f"top_k = {E + 1}",
        ),
        (f"{act} dtype", _set(act, lambda t: t.float()), f"'{act}' must be Half"),
        (f"{act} contiguous", _set(act, _noncontig), f"'{act}' must be contiguous"),
        (
            f"{act} aligned",
            _set(act, lambda t: _misaligned(t, 2)),
            f"'{act}' must start 16-byte aligned",
        ),
        ("out dtype", _set("out", lambda t: t.float()), "'out' must be Half"),
        ("out contiguous", _set("out", _noncontig), "'out' must be contiguous"),
        ("spin negative", _set("spin_cycles", lambda v: -5), "'spin_cycles' = -5"),
    ]


def cases(kernel: str, layout: str, calibration_build: bool = False) -> list[Case]:
    # a record size of another registered layout: the build must reject that bank
    other = next(
        r for name, r in RECORD_BYTES.items() if name != layout and r != record_bytes(layout)
    )
    if kernel == "w13":
        specific = [
            (
                "x length",
                _set("x", lambda t: t[:, :32].contiguous()),
                "'x' must have shape [1, K] or [K] with K = 64",
            ),
            ("x rows", _set("x", lambda t: t.repeat(2, 1)), "'x' must have shape"),
            (
                "out rows",
                _set("out", lambda t: t[:1].contiguous()),
                "'out' has size 1 in dimension 0",
            ),
            (
                "out cols",
                _set("out", lambda t: t[:, :16].contiguous()),
                "'out' has size 16 in dimension 1",
            ),
            ("out dims", _set("out", lambda t: t.reshape(-1)), "'out' must have 2 dimensions"),
            # K elements but not [1, K] or [K]: the shape check's dims and rows conditions alone
            ("x 3-D", _set("x", lambda t: t.view(1, 1, K)), "with K = 64, got [1, 1, 64]"),
            ("x rows of K/2", _set("x", lambda t: t.view(2, K // 2)), "with K = 64, got [2, 32]"),
            (
                "ids beyond the build's top_k",
                _more_experts(MAX_TOP_K + 1),
                f"top_k = {MAX_TOP_K + 1} experts, this build supports at most {MAX_TOP_K}",
            ),
            # 736 groups: 47,168 bytes of x, over the 47,104 left beside the static 2 KB
            ("K beyond shared memory", _grow_k("x", 1, 736), "bytes of shared memory"),
            (
                "W13 N/2 % 32",
                lambda a: a.update(
                    weights=a["weights"][:, :, :32].contiguous(),
                    meta=a["meta"][:, :, : 32 * (7 - other)].contiguous(),
                ),
                "N/2",
            ),
        ]
        act = "x"
    else:
        specific = [
            (
                "inter rows",
                _set("inter", lambda t: t[:1].contiguous()),
                "'inter' has size 1 in dimension 0",
            ),
            (
                "inter cols",
                _set("inter", lambda t: t[:, :32].contiguous()),
                "'inter' has size 32 in dimension 1",
            ),
            (
                "inter dims",
                _set("inter", lambda t: t.reshape(-1)),
                "'inter' must have 2 dimensions",
            ),
            ("rw dtype", _set("rw", lambda t: t.half()), "'rw' must be Float"),
            (
                "rw length",
                _set("rw", lambda t: t[:1].contiguous()),
                "'rw' must have shape [top_k] = [2]",
            ),
            ("rw contiguous", _set("rw", _noncontig), "'rw' must be contiguous"),
            # top_k elements but two dimensions: the shape check, not the count, must reject it
            (
                "rw 2-D",
                _set("rw", lambda t: t.reshape(1, -1)),
                "'rw' must have shape [top_k] = [2]",
            ),
            (
                "out length",
                _set("out", lambda t: t[:, :32].contiguous()),
                "'out' must have shape [1, N] or [N] with N = 64",
            ),
        ]
        act = "inter"
    out = [Case(kernel, n, m, e) for n, m, e in [*_common(kernel, act, other), *specific]]
    if not calibration_build:
        out.append(
            Case(
                kernel,
                "spin without calibration build",
                _set("spin_cycles", lambda v: 100),
                "needs a calibration build",
            )
        )
    # All-CPU arguments pass every other check; the first device check names the activation.
    out.append(Case(kernel, f"{act} on cpu", lambda a: None, f"'{act}' must be a CUDA tensor"))
    return out


def device_cases(kernel: str, layout: str) -> list[Case]:
    """Cases that need a GPU: everything valid on cuda but one argument left on the CPU."""
    names = ["meta", "ids", "out", "x" if kernel == "w13" else "inter"]
    if kernel == "w2":
        names.append("rw")
    return [
        Case(kernel, f"{n} on cpu", _set(n, lambda t: t.cpu()), f"'{n}' must be a CUDA tensor")
        for n in names
    ]
