"""What a command line may ask for: upper bounds of its numbers and the session slug rule.

A number past these bounds is a typo or a unit mistake, not an experiment. Each bound is far
above real use and its comment says why it is where it is. The commands check them before any
build or GPU work, so a bad command line exits 2 at once (issue 15). Lower bounds stay with the
code that owns each knob (ProtocolConfig, make_config); the dimensions of a shape are bounded in
workbench.data.shapes.
"""

from __future__ import annotations

import math
import re
from typing import Any

from workbench.core.errors import BadArgument

# ABBA pairs per comparison (--pairs, --max-pairs): a pair is 4 samples; at the defaults
# (50 replays x 48 calls x ~2 µs) 10,000 pairs take ~30 min per comparison, and the CI of the
# median has long stopped narrowing.
MAX_PAIRS = 10_000
# Blocks per comparison (--blocks, --max-blocks): each places the banks anew (~0.5 s) and
# captures its graphs; past 1,000 the t-interval has long stopped narrowing.
MAX_BLOCKS = 1_000
MAX_WORKERS = 256  # worker processes of one run (docs/DESIGN.md §5.10)
# Kernel calls captured in one CUDA graph (--calls): the graph's memory and its instantiation
# time grow with the node count; 48 is the default and 10,000 is already ~20 ms per replay.
MAX_CALLS = 10_000
# Timed replays per sample (--replays): a sample is their median; 10,000 replays of 48 calls
# take ~1 s, and one sample is meant to be short against clock and thermal drift.
MAX_REPLAYS = 10_000
# Re-measures of a flagged sample (--retries): a sample still flagged after 100 retries says the
# GPU is unstable, which more retries cannot fix.
MAX_RETRIES = 100
# Time budget per comparison (--budget): one day; longer runs belong in several sessions.
MAX_BUDGET_S = 86_400.0
# Seeds (--seed): numpy's SeedSequence and torch.manual_seed both take 32-bit seeds, and a larger
# seed draws nothing a smaller one cannot.
MAX_SEED = 2**32 - 1
# Injected SM cycles per CTA (--spins, --base-spin): 10 million cycles are ~5 ms at 2 GHz, three
# orders of magnitude above a ~2 µs kernel call; the ladder is meant to span ~0.1 % to ~30 %.
MAX_SPIN_CYCLES = 10_000_000
# Fresh banks per shape in `workbench check` (--banks): each holds one layer's experts in device
# memory; 64 of the largest preset are ~20 GiB, and two already catch a layout mix-up.
MAX_BANKS = 64
# Parallel compile jobs (--jobs): more than the variants times their sources gains nothing.
MAX_JOBS = 1_024
# KV-cache bytes per token on one rank (capacity --kv-bytes-per-token): 1 GiB per token is far
# beyond any model (a few hundred KiB at most today).
MAX_KV_BYTES_PER_TOKEN = 1 << 30
# Session slugs become folder names: portable characters only, readable, well under NAME_MAX.
MAX_SLUG_LEN = 64
SLUG_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def check_min_effect(value: Any, option: str = "--min-effect") -> float:
    """The minimum effect m as every command takes it: a fraction in (0, 0.5), open at both
    ends (m = 0 would call any difference an effect; 0.5 would call a 2x slowdown "the same").
    The one rule of ab, calibrate, tune, sessions show/compare/pool, the report and the stored
    config (workbench/store/session_schema.py M_RANGE)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and 0 < value < 0.5):
        raise BadArgument(f"{option} {value!r} must be a fraction in (0, 0.5), e.g. 0.01")
    return float(value)


def check_max(option: str, value: Any, maximum: float, name: str) -> None:
    """BadArgument when ``value`` (a number, or None for "not given") exceeds ``maximum``.

    ``name`` is the constant's name, so the message says which bound was hit. NaN and infinities fail too."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return  # absent, or a type the owner of the knob rejects with its own message
    if isinstance(value, float) and not math.isfinite(value):
        raise BadArgument(f"{option} {value!r} must be a finite number")
    if value > maximum:
        shown = f"{maximum:,}" if isinstance(maximum, int) else f"{maximum:g}"
        raise BadArgument(f"{option} {value!r} is above the maximum {shown} ({name})")


def check_slug(slug: str | None, option: str = "--slug") -> str | None:
    """A slug is [A-Za-z0-9._-], no leading dot, at most MAX_SLUG_LEN characters (None passes)."""
    if slug is None:
        return None
    if not SLUG_RE.fullmatch(slug) or len(slug) > MAX_SLUG_LEN:
        raise BadArgument(
            f"{option} {slug!r}: use 1 to {MAX_SLUG_LEN} characters from A-Z a-z 0-9 . _ - "
            "(no path separator, space or leading dot)"
        )
    return slug
