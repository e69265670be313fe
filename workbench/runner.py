"""The measurement engine (docs/DESIGN.md §5-§7): builds, banks, graphs, gate, ABBA pairs, session.

``Runner(cfg).run()`` measures the comparisons of a plan (workbench.plan) on the GPU and keeps
everything in a session folder as it goes. The CLI (`workbench ab`, `workbench calibrate`) and the
TUI drive the same Runner; they listen through ``progress`` (abba.Progress after every sample)
and ``events`` (``events(kind, data)``: "builds", "session", "memory", "comparison", "gate",
"result", "recommendation", "note"). ``cancel`` (threading.Event) stops between samples; the
session is then kept as "interrupted" with what was measured, as on Ctrl-C.

torch is imported inside the methods that need it, so this module loads on a CPU-only machine.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import statistics
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import stats
from workbench.abba import ProtocolConfig
from workbench.errors import BadArgument, NoGPUError, WorkbenchError
from workbench.plan import (
    KERNEL_CHOICES,
    SETS,
    ComparisonSpec,
    is_reader_comparison,
    parse_arm_spec,
    plan_ab,
)
from workbench.results import CmpResult
from workbench.shapes import Shape

NO_GPU_MESSAGE = (
    "no usable GPU ({why}). Timing needs an NVIDIA GPU with a CUDA build of torch. "
    "Without one you can still use: `workbench capacity` (memory arithmetic), "
    "`workbench sessions` / `workbench plot` / `workbench report` on saved sessions, "
    "`workbench` (the TUI, in browse mode) and the tests (`python3 -m pytest`)."
)
# One replay of 48 calls takes ~0.1-0.3 ms on an H200 (~1.5 ms for the tinygemm peer): 50 timed
# replays per sample keep the default run (both kernels, both sets, references, confirmation)
# well inside 90 s while each sample's median still rests on 50 values.
DEFAULT_REPLAYS = 50


def require_gpu() -> None:
    """Raise NoGPUError (exit 3) with the plain message unless torch sees a CUDA device."""
    try:
        import torch
    except ImportError as e:
        raise NoGPUError(NO_GPU_MESSAGE.format(why=f"torch is not importable: {e}")) from None
    if not torch.cuda.is_available():
        why = "torch sees no CUDA device"
        if torch.version.cuda is None:
            why += f"; torch {torch.__version__} is a CPU-only build"
        raise NoGPUError(NO_GPU_MESSAGE.format(why=why))


@dataclass
class RunConfig:
    """Everything a run needs; ``comparisons`` come from workbench.plan."""

    shape: Shape
    comparisons: list[ComparisonSpec]
    sets: tuple[str, ...] = ("hot", "rotating")
    calls: int = 48
    replays: int = DEFAULT_REPLAYS
    seed: int = 0
    m: float = stats.DEFAULT_M
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    confirm: bool = True  # end a run over w13 and w2 with the step confirmation
    sessions_dir: str = "sessions"
    slug: str = "ab"
    mode: str = "ab"  # or "calibrate"
    extra: dict[str, Any] = field(default_factory=dict)  # more config for session.json
    # An open workbench.checkpoint.Checkpoint: banks from its experts instead of synthetic ones
    # (docs/DESIGN.md §3.7); its record goes to the provenance, its path to extra.
    checkpoint: Any = None

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
            **self.extra,
        }


@dataclass
class RunResult:
    status: str  # complete | interrupted | failed
    session_path: Path | None
    summary: dict[str, Any]


class Runner:
    """Runs one plan on the GPU into one session. Not reusable: make one per run."""

    def __init__(
        self,
        cfg: RunConfig,
        *,
        progress: Callable[[Any], Any] | None = None,
        events: Callable[[str, Any], Any] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.cfg = cfg
        self.progress = progress
        self._events = events
        self.cancel = cancel or threading.Event()
        self.results: list[CmpResult] = []
        self.recommendations: dict[str, stats.Recommendation] = {}
        self.memory: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.session = None
        self.monitor = None
        self.nvml_status: str | None = None  # "available" or why not, as it was while measuring
        self.clock_mhz: float | None = None  # the GPU's rated SM clock (torch), for calibration

    # ------------------------------------------------------------------ plumbing

    def emit(self, kind: str, data: Any) -> None:
        if self._events is not None:
            self._events(kind, data)

    def note(self, text: str) -> None:
        self.notes.append(text)
        if self.session is not None:
            self.session.record("note", text=text)
        self.emit("note", text)

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        """Measure the plan. Raises NoGPUError, BuildError, NumericsError (the session, when one
        exists, is marked failed first); KeyboardInterrupt keeps the session as interrupted."""
        from workbench.monitor import Monitor
        from workbench.session import SessionWriter

        require_gpu()
        if self.cfg.protocol.placement_seed is None:
            # a fresh seed per run (docs/DESIGN.md §5.5): runs must sample placements, not
            # repeat one; it is journaled, and --placement-seed replays the run's blocks
            self.cfg.protocol = dataclasses.replace(
                self.cfg.protocol, placement_seed=secrets.randbits(62)
            )
        engine = self.make_engine()
        builds = engine.build()
        self.monitor = Monitor()
        env = engine.environment(builds)
        prov = engine.provenance(builds)
        writer = SessionWriter(
            self.cfg.sessions_dir, self.cfg.slug, self.cfg.session_config(), prov, env
        )
        self.session = writer
        self.emit("session", writer.path)
        self.monitor.sink = writer.nvml
        self.monitor.start()
        # stop() later rewrites the monitor's reason: keep what was true while measuring
        self.nvml_status = self.monitor.reason or "available"
        if not self.monitor.available:
            self.note(self.monitor.reason)
        status, error = "complete", None
        try:
            engine.run_plan()
            if self.cancel.is_set():
                status = "interrupted"
        except KeyboardInterrupt:
            self._finish("interrupted", "interrupted (KeyboardInterrupt)")
            raise
        except BaseException as e:
            self._finish("failed", f"{type(e).__name__}: {e}")
            raise
        finally:
            self.monitor.stop()
            engine.release()
        self._finish(status, error)
        return RunResult(status, writer.path, self.summary(status))

    def make_engine(self) -> Any:
        """The device side of the run (`workbench tune` runs its own plan on a subclass)."""
        from workbench.engine import Engine

        return Engine(self)

    def _finish(self, status: str, error: str | None) -> None:
        if self.session is not None and not self.session.finished:
            self.session.finish(status, self.summary(status), error=error)

    # ------------------------------------------------------------------ results

    def add_result(self, res: CmpResult) -> None:
        self.results.append(res)
        self.emit("result", res.summary(self.cfg.calls))

    def recommend(self) -> dict[str, stats.Recommendation]:
        """Per-kernel recommendations from the main scalar-vs-coop comparisons measured so far."""
        out: dict[str, stats.Recommendation] = {}
        for kernel in ("w13", "w2"):
            mains = [
                r
                for r in self.results
                if r.spec.kernel == kernel
                and r.spec.role == "main"
                and is_reader_comparison(r.spec.a, r.spec.b)
                and r.outcome.complete > 0
            ]
            if not mains:
                continue
            verdicts = {r.spec.set: r.verdict for r in mains}
            out[kernel] = stats.recommend(
                kernel, verdicts, a=mains[0].spec.a.name, b=mains[0].spec.b.name
            )
        self.recommendations = out
        return out

    def confirmation_plan(self) -> list[ComparisonSpec]:
        """The step comparisons of the recommended mix against the all-A (scalar) baseline."""
        recs = self.recommendations
        if not self.cfg.confirm or set(recs) != {"w13", "w2"}:
            return []
        base = parse_arm_spec("step", ",".join(f"{k}={self._main_a(k)}" for k in ("w13", "w2")))
        mix = parse_arm_spec("step", ",".join(f"{k}={recs[k].arm}" for k in ("w13", "w2")), "mix")
        if base.name == mix.name:
            self.note(
                f"step confirmation skipped: the recommended mix {mix.name} is the baseline itself"
            )
            return []
        return [
            ComparisonSpec(f"step/{s}/confirm", "step", s, "confirm", base, mix)
            for s in self.cfg.sets
        ]

    def _main_a(self, kernel: str) -> str:
        for r in self.results:
            if r.spec.kernel == kernel and r.spec.role == "main":
                return r.spec.a.name
        raise WorkbenchError(f"no main comparison for {kernel}")

    def summary(self, status: str) -> dict[str, Any]:
        calls = self.cfg.calls
        out: dict[str, Any] = {
            "status": status,
            "session": None if self.session is None else str(self.session.path),
            "shape": self.cfg.shape.to_dict(),
            "calls": calls,
            "replays": self.cfg.replays,
            "m": self.cfg.m,
            "comparisons": [r.summary(calls) for r in self.results],
            "recommendations": {k: r.to_dict() for k, r in self.recommendations.items()},
            "memory": self.memory,
            "flagged": sum(r.outcome.flagged for r in self.results),
            "excluded": sum(r.outcome.excluded for r in self.results),
            "notes": list(self.notes),
            "nvml": self.nvml_status,
        }
        if self.cfg.mode == "calibrate":
            out["calibration"] = calibration_summary(out["comparisons"], self.cfg.m, self.clock_mhz)
        return json_safe(out)


def json_safe(x: Any) -> Any:
    """``x`` with non-finite floats as None and tuples as lists (strict JSON for --json)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    return x


def _positive_int(value: Any, option: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BadArgument(f"{option} {value!r} must be an integer >= {low}")
    return value


def make_config(
    shape: Shape,
    *,
    kernels: tuple[str, ...] = ("w13", "w2"),
    sets: tuple[str, ...] = SETS,
    a: str = "b3-scalar",
    b: str = "b3-coop",
    reference: bool = True,
    confirm: bool = True,
    calls: int = 48,
    replays: int = DEFAULT_REPLAYS,
    seed: int = 0,
    m: float = stats.DEFAULT_M,
    protocol: ProtocolConfig | None = None,
    sessions_dir: str = "sessions",
    slug: str | None = None,
    extra: dict[str, Any] | None = None,
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
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 < m < 0.5:
        raise BadArgument(f"--min-effect {m!r} must be a fraction in (0, 0.5), e.g. 0.01")
    protocol = (protocol or ProtocolConfig()).validate()
    comparisons = plan_ab(tuple(kernels), tuple(sets), a, b, reference=reference)
    if slug is None:
        slug = "aa" if all(c.role == "aa" for c in comparisons) else "ab"
    return RunConfig(
        shape=shape.validate(), comparisons=comparisons, sets=tuple(sets), calls=calls,
        replays=replays, seed=seed, m=float(m), protocol=protocol, confirm=confirm,
        sessions_dir=str(sessions_dir), slug=slug, mode="ab",
        extra={"kernels": list(kernels), "a": a, "b": b, "reference": reference, **(extra or {})},
    )  # fmt: skip


def run_session(
    config: Mapping[str, Any],
    root: str | Path = "sessions",
    progress: Callable[[Any], Any] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Path:
    """Entry point for the TUI: run the TUI's RunConfig (as a dict) and return the session path.

    ``progress`` receives workbench.tui.backend.ProgressEvent records; ``cancelled`` is polled
    after every sample (a cancelled run returns its session, status "interrupted").
    """
    from workbench.shapes import resolve_shape
    from workbench.tui.backend import ProgressEvent

    c = dict(config)
    shape = resolve_shape(
        preset=c.get("preset"), tp=c.get("tp"), hidden=c.get("hidden"), inter=c.get("inter"),
        experts=c.get("experts"), top_k=c.get("top_k"), layers=c.get("layers"),
    )  # fmt: skip
    proto = ProtocolConfig(
        pairs=int(c.get("pairs", ProtocolConfig.pairs)),
        blocks=int(c.get("blocks", ProtocolConfig.blocks)),
        adaptive=bool(c.get("adaptive", False)),
        target=float(c.get("target_pct", 0.5)) / 100.0,
    )  # fmt: skip
    cfg = make_config(
        shape, kernels=tuple(c.get("kernels", ("w13", "w2"))), sets=tuple(c.get("sets", SETS)),
        a=c.get("a", "b3-scalar"), b=c.get("b", "b3-coop"), calls=int(c.get("calls", 48)),
        replays=int(c.get("replays", DEFAULT_REPLAYS)), seed=int(c.get("seed", 0)),
        protocol=proto, sessions_dir=str(root), extra={"source": "tui"},
    )  # fmt: skip
    cancel = threading.Event()
    ids = [x.id for x in cfg.comparisons]

    def on_progress(p: Any) -> None:
        if cancelled is not None and cancelled():
            cancel.set()
        if progress is None:
            return
        step = ids.index(p.cmp) + 1 if p.cmp in ids else len(ids)
        ci = None if p.ci_low is None else (p.ci_low, p.ci_high)
        # pairs over the comparison's blocks so far (p.complete counts the block in flight)
        done = (p.block or 0) * proto.pairs + p.complete
        progress(
            ProgressEvent(
                p.cmp, step, max(step, len(ids)), done,
                None if p.adaptive else proto.pairs * proto.blocks, p.pair * 4 + p.slot + 1,
                p.median, ci,
                "flagged sample: re-measuring" if p.flagged_last else "",
            )
        )  # fmt: skip

    result = Runner(cfg, progress=on_progress, cancel=cancel).run()
    assert result.session_path is not None
    return result.session_path


def _rung(c: dict[str, Any], fallback_mhz: float | None) -> dict[str, Any]:
    a_us, b_us = c["a_us_per_call"], c["b_us_per_call"]
    mhz = c["sm_mhz"] or fallback_mhz
    v = c["verdict"]
    injected_us = c["spin"] / mhz if mhz else None  # cycles / MHz = microseconds (per CTA)
    return {
        "id": c["id"],
        "group": f"{c['kernel']}/{c['set']}",  # trials of a rung share its group
        "spin_cycles": c["spin"],
        "sm_mhz": mhz,
        "injected_us_per_cta": injected_us,
        "injected_pct": None if not (injected_us and a_us) else injected_us / a_us * 100,
        "measured_us_per_call": None if a_us is None or b_us is None else b_us - a_us,
        "effect_pct": None if v["median"] is None else (v["median"] - 1) * 100,
        "verdict": v["verdict"],
        "pairs": c["pairs"],
    }


def _detection(rungs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per (kernel/set) and injected spin: how many trials called it SLOWER (FASTER, SAME,
    AMBIGUOUS), with the median measured effect: the detection rate of that delay."""
    out: dict[str, dict[str, Any]] = {}
    for r in rungs:
        d = out.setdefault(r["group"], {}).setdefault(
            str(r["spin_cycles"]), {"trials": 0, "verdicts": {}, "effects_pct": []}
        )
        d["trials"] += 1
        d["verdicts"][r["verdict"]] = d["verdicts"].get(r["verdict"], 0) + 1
        if r["effect_pct"] is not None:
            d["effects_pct"].append(r["effect_pct"])
    for g in out.values():
        for d in g.values():
            d["median_effect_pct"] = (
                statistics.median(d["effects_pct"]) if d["effects_pct"] else None
            )
    return out


def calibration_summary(
    comparisons: list[dict[str, Any]], m: float, fallback_mhz: float | None = None
) -> dict[str, Any]:
    """Measured vs injected delay per rung of the spin ladder, per (kernel, set), and the
    resolution of each: the smallest injected spin detected SLOWER at that rung and at every
    larger one. The overall resolution is the coarsest of them (torch-free).

    ``fallback_mhz`` converts cycles to µs when NVML gave no SM clock."""
    cal = [c for c in comparisons if c["role"] == "calibration"]
    rungs = [_rung(c, fallback_mhz) for c in sorted(cal, key=lambda c: c["spin"])]
    groups: dict[str, dict[str, Any]] = {}
    for g in dict.fromkeys(r["group"] for r in rungs):
        mine = [r for r in rungs if r["group"] == g]
        res = None
        for i, r in enumerate(mine):
            if r["spin_cycles"] > 0 and all(x["verdict"] == "SLOWER" for x in mine[i:]):
                res = r
                break
        groups[g] = {
            "resolution": res,
            "controls": [r["verdict"] for r in mine if r["spin_cycles"] == 0],
        }
    found = [g["resolution"] for g in groups.values()]
    overall = None
    if found and all(r is not None for r in found):
        overall = max(found, key=lambda r: (r["effect_pct"] or 0.0, r["spin_cycles"]))
    return {
        "m": m,
        "rungs": rungs,
        "groups": groups,
        "resolution": overall,
        "control_verdicts": [r["verdict"] for r in rungs if r["spin_cycles"] == 0],
        "detection": _detection(rungs),
        "rule": (
            "resolution = the smallest injected spin whose comparison is SLOWER and every larger "
            "spin SLOWER too (per kernel and set; overall the coarsest); its effect_pct, the "
            "measured median effect, is the smallest effect this GPU and protocol detect "
            "reliably now"
        ),
    }
