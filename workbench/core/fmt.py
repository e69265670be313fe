"""The small number formatters every renderer shares, the one home of them (the report, the
figures, the CLI's tables and the TUI): a number or a placeholder, never "nan" or "inf" (an
infinite bound means too few pairs for an interval). `tests/test_one_home.py` fails on a second
formatter of this kind elsewhere."""

from __future__ import annotations

import math

NA = "n/a"
DASH = "-"  # the CLI tables' placeholder for a number there is none of
KIB, MIB, GIB = 1024, 1 << 20, 1 << 30


def num(x: float | None, spec: str = ".4f", none: str = NA) -> str:
    """``format(x, spec)``, or ``none`` for None, NaN and infinities."""
    return none if x is None or not math.isfinite(x) else format(x, spec)


def interval(low: float | None, high: float | None, spec: str = ".4f") -> str:
    """The CI as "[low, high]", or "n/a" when too few pairs give none (never "[-inf, inf]")."""
    if num(low) == NA or num(high) == NA:
        return NA
    return f"[{format(low, spec)}, {format(high, spec)}]"


def change_pct(ratio: float | None) -> str:
    """Change of a ratio B/A in percent, signed: 0.925 -> "-7.50 %"."""
    return NA if num(ratio) == NA else f"{(ratio - 1) * 100:+.2f} %"


def signed_pct(x: float | None) -> str:
    """A value already in percent, signed: 1.234 -> "+1.23 %"."""
    return NA if num(x) == NA else f"{x:+.2f} %"


def p_value(p: float | None) -> str:
    return num(p, ".2g")


def nbytes(n: float | None) -> str:
    """Bytes exactly, and in MiB (KiB below 1 MiB): "13,107,200 B (12.5 MiB)"."""
    if n is None:
        return NA
    if abs(n) < MIB:
        return f"{n:,.0f} B ({n / KIB:,.1f} KiB)"
    return f"{n:,.0f} B ({n / MIB:,.1f} MiB)"


def size(n: float | None) -> str:
    """Bytes in a readable unit (GiB for banks of real shapes, KiB for tiny test shapes)."""
    if n is None:
        return NA
    for unit, step in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= step:
            return f"{n / step:,.2f} {unit}"
    return f"{n} B"
