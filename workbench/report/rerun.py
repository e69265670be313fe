"""The command that reproduces a session, rebuilt from the configuration it recorded (the
report's answer quotes it: docs/DESIGN.md §8).

The command spells out what differs from today's defaults, and the placement seed, which replays
the session's block placements. A setting the session recorded that no option of today sets (an
older protocol's, say ``prime_placements``) is named in ``Rerun.unmatched``, so that a reader
knows where the command reproduces less than the session did.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from workbench.analysis.words import TIMING_WORDS
from workbench.core import defaults
from workbench.data.shapes import DEFAULT_PRESET, PRESETS
from workbench.measure.abba import ProtocolConfig

# protocol field -> (its option, how the option spells a value: None for a flag)
PROTOCOL_OPTIONS: dict[str, tuple[str, Any]] = {
    "pairs": ("--pairs", str),
    "blocks": ("--blocks", str),
    "adaptive": ("--adaptive", None),
    "target": ("--target", lambda x: _num(x)),
    "budget_s": ("--budget", lambda x: _num(x)),
    "max_blocks": ("--max-blocks", str),
    "warmup_blocks": ("--warmup-blocks", str),
    "warmup_sets": ("--warmup-sets", lambda x: _csv(x)),
    "retries": ("--retries", str),
    "keep_flagged": ("--keep-flagged", None),
}
# retired protocol switches (removed with their investigation) and the value today's code runs
AS_TODAY = {"prime_placements": 0, "neighbours_first": True, "fresh_placements": False}
ADAPTIVE_ONLY = ("target", "max_blocks", "min_pairs", "max_pairs")  # read by adaptive runs alone
SHAPE_OPTIONS = (("hidden", "--hidden"), ("inter", "--inter"), ("experts", "--experts"),
                 ("top_k", "--top-k"), ("layers", "--layers"))  # fmt: skip


@dataclass(frozen=True)
class Rerun:
    """``argv``: the command, as a shell would split it; ``unmatched``: "name=value" of each
    recorded setting that no option of today sets."""

    argv: tuple[str, ...]
    unmatched: tuple[str, ...] = ()
    error: str | None = None  # why the recorded config spells no command (a damaged one)

    def text(self) -> str:
        return shlex.join(self.argv)


def _csv(xs: Iterable[Any] | Any) -> str:
    return ",".join(str(x) for x in xs) if isinstance(xs, (list, tuple)) else str(xs)


def _same(recorded: Any, today: Any) -> bool:
    """A recorded value (JSON: lists) equals today's default (tuples)."""
    if isinstance(recorded, (list, tuple)) and isinstance(today, (list, tuple)):
        return list(recorded) == list(today)
    return recorded == today


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _shape(cfg: Mapping[str, Any]) -> list[str]:
    ckpt = cfg.get("checkpoint")
    shape = cfg.get("shape") if isinstance(cfg.get("shape"), dict) else {}
    if isinstance(ckpt, dict) and ckpt.get("path"):  # the shape is the checkpoint's
        out = ["--checkpoint", str(ckpt["path"])]
        out += ["--tp", str(ckpt["tp"])] if ckpt.get("tp") is not None else []
        return out + (["--rank", str(ckpt["rank"])] if ckpt.get("rank") else [])
    name = str(shape.get("name") or cfg.get("preset") or DEFAULT_PRESET).removesuffix("+custom")
    base = PRESETS.get(name, PRESETS[DEFAULT_PRESET])
    out = ["--preset", base.name] if base.name != DEFAULT_PRESET else []
    for key, option in (*SHAPE_OPTIONS, ("tp", "--tp")):
        if key in shape and shape[key] != getattr(base, key):
            out += [option, str(shape[key])]
    return out


def _protocol(cfg: Mapping[str, Any], unmatched: list[str]) -> list[str]:
    p = cfg.get("protocol") if isinstance(cfg.get("protocol"), dict) else {}
    today = asdict(ProtocolConfig())
    out = []
    if "blocks" not in p:  # a session before blocks: its pairs at one placement
        out += ["--blocks", "1"]
    if "warmup_blocks" not in p:  # a session before the warm-up block
        out += ["--warmup-blocks", "0"]
    for key, value in p.items():
        if key == "placement_seed" or _same(value, {**today, **AS_TODAY}.get(key, ...)):
            continue
        if key in ADAPTIVE_ONLY and not p.get("adaptive"):
            continue
        if key in PROTOCOL_OPTIONS:
            option, spell = PROTOCOL_OPTIONS[key]
            out += [option] if spell is None else [option, spell(value)]
        else:  # an older protocol's setting, or one no option sets
            unmatched.append(f"{key}={value}")
    if p.get("placement_seed") is not None:
        out += ["--placement-seed", str(p["placement_seed"])]
    return out


def _run(cfg: Mapping[str, Any], unmatched: list[str]) -> list[str]:
    """The options every measuring command shares: workers, calls, replays, seed, m."""
    out = []
    workers = cfg.get("workers", 1)  # a session before worker processes measured in one
    if workers == 1:
        out.append("--single-process")
    elif workers != defaults.WORKERS and cfg.get("mode") != "tune":
        out += ["--workers", str(workers)]
    for key, option, default in (("calls", "--calls", defaults.CALLS),
                                 ("replays", "--replays", defaults.REPLAYS),
                                 ("seed", "--seed", defaults.SEED),
                                 ("m", "--min-effect", defaults.M)):  # fmt: skip
        if key in cfg and cfg[key] != default:
            out += [option, _num(cfg[key])]
    if cfg.get("ray"):
        out += ["--ray", str(cfg["ray"])]
    return out


def _references(cfg: Mapping[str, Any]) -> list[str]:
    """The reference arms, read off the comparison ids ("w13/hot/b4-scalar"): a session of
    any age names them there, whatever its ``reference`` field held. A method check's id
    ("w13/hot/batch") names a timing method, not an arm: every ab runs it."""
    ids = [str(c) for c in cfg.get("comparisons") or []]
    main = {c for c in ids if c.count("/") == 1}
    arms = [c.split("/")[2] for c in ids if c.count("/") == 2]
    arms = [x for x in arms if x not in TIMING_WORDS]
    refs = list(dict.fromkeys(arms))
    if not main or refs == list(defaults.REFERENCES):
        return []
    return ["--reference", _csv(refs)] if refs else ["--no-reference"]


def _ab(cfg: Mapping[str, Any]) -> list[str]:
    out = []
    if list(cfg.get("kernels") or defaults.KERNELS) != list(defaults.KERNELS):
        out += ["--kernel", _csv(cfg["kernels"])]
    if list(cfg.get("sets") or defaults.SETS) != list(defaults.SETS):
        out += ["--set", _csv(cfg["sets"])]
    for key, option, default in (("a", "--a", defaults.ARM_A), ("b", "--b", defaults.ARM_B)):
        if cfg.get(key, default) != default:
            out += [option, str(cfg[key])]
    out += _references(cfg)
    if cfg.get("confirm") is False and set(defaults.KERNELS) <= set(cfg.get("kernels") or ()):
        out.append("--no-confirm")
    if cfg.get("overlap"):
        out.append("--overlap")
    settle = cfg.get("settle")
    if isinstance(settle, dict) and settle.get("looks"):
        out += ["--settle", str(settle["looks"])]
    return out


def _calibrate(cfg: Mapping[str, Any], base_spin: int | None) -> list[str]:
    out = []
    if list(cfg.get("kernels") or ()) != list(defaults.CALIBRATE_KERNELS):
        out += ["--kernel", _csv(cfg.get("kernels") or ())]
    if list(cfg.get("sets") or ()) != list(defaults.CALIBRATE_SETS):
        out += ["--set", _csv(cfg.get("sets") or ())]
    if cfg.get("arm", defaults.CALIBRATE_ARM) != defaults.CALIBRATE_ARM:
        out += ["--arm", str(cfg["arm"])]
    out += ["--spins", _csv(cfg.get("spins") or ())]
    out += [] if base_spin is None else ["--base-spin", str(base_spin)]
    return out + (["--trials", str(cfg["trials"])] if (cfg.get("trials") or 1) > 1 else [])


def _tune(cfg: Mapping[str, Any]) -> list[str]:
    t = cfg.get("tune") if isinstance(cfg.get("tune"), dict) else {}
    out = ["--kernel", str(t.get("kernel", "?"))]
    out += ["--arm", str(t["arm"])] if t.get("arm", defaults.ARM_A) != defaults.ARM_A else []
    values: dict[str, list[Any]] = {}
    for cand in t.get("candidates") or []:
        for name, v in cand.items() if isinstance(cand, dict) else ():
            values.setdefault(name, [])
            if v not in values[name]:
                values[name].append(v)
    for name, vs in values.items():
        out += ["--param", f"{name}={_csv(sorted(vs, key=lambda v: (str(type(v)), v)))}"]
    if list(cfg.get("sets") or defaults.SETS) != list(defaults.SETS):
        out += ["--set", _csv(cfg["sets"])]
    for key, option, default in (("top", "--top", 3), ("screen_pairs", "--screen-pairs", 3)):
        if t.get(key, default) != default:
            out += [option, str(t[key])]
    out += ["--no-resume"] if t.get("resume") is False else []
    if cfg.get("workers") not in (None, 1, defaults.WORKERS):
        out += ["--confirm-workers", str(cfg["workers"])]
    return out


def rerun(config: Mapping[str, Any], base_spin: int | None = None) -> Rerun:
    """The command that reproduces a session of this recorded ``config`` (session.json's
    ``config``); ``base_spin``: a calibration's, which its comparison records carry."""
    mode = str(config.get("mode") or "ab")
    unmatched: list[str] = []
    if mode == "calibrate":
        own = _calibrate(config, base_spin)
    elif mode == "tune":
        own = _tune(config)
    else:
        own = _ab(config)
    argv = ["workbench", mode, *own, *_shape(config), *_run(config, unmatched)]
    argv += _protocol(config, unmatched)
    return Rerun(tuple(argv), tuple(unmatched))


def session_rerun(session: Any) -> Rerun:
    """``rerun`` of a loaded session (workbench.store.session.Session); a calibration's base
    spin is read off its first rung's A arm ("b3-scalar+spin=256")."""
    base = None
    for c in session.comparisons:
        a = str(c.get("a", ""))
        spin = a.rsplit("+spin=", 1)[-1]
        if c.get("role") == "calibration" and "+spin=" in a and spin.isdigit():
            base = int(spin)
            break
    try:
        return rerun(session.config, base)
    except (TypeError, ValueError, AttributeError) as e:  # fields the loader does not check
        mode = str(session.config.get("mode") or "ab")
        return Rerun(("workbench", mode), error=f"{type(e).__name__}: {e}")
