"""A tune run (docs/DESIGN.md §11): screen every candidate, confirm the best few against the
default with the full block protocol, then time the readers at the best parameters. One
session holds it all; the runner's session, Ctrl-C and failure handling are reused: ``Tune`` is
the work a Runner walks (workbench.run.rounds.Work: its rounds and the runner's hooks, given
the runner only as a ``rounds.Host``), and ``tune_runner`` makes that Runner.

A tune walks its rounds as `workbench ab` does (``Tune.rounds``, data): round "screen"
shares the candidates out over one worker per GPU (on Ray with ``--ray``; in this process on
one GPU), each candidate's record made as its worker finishes it; round "tune" confirms the
best ``--top`` against the default on the run's pool (workbench.run.pool: the interval of a
confirmed candidate runs over workers, and a candidate whose kernel faults the GPU ends its
worker alone and is EXCLUDED, naming the fault); round "reader" times the readers at the best
parameters. ``RunConfig.workers`` 1 (--single-process) confirms in this process (debugging: the
verdicts say they ignore process variance).

Torch-free at module level (the device modules load inside the run).
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
from dataclasses import dataclass
from typing import Any

from workbench.analysis.recommend import overall, recommendations
from workbench.analysis.words import reason
from workbench.core import defaults
from workbench.core.errors import (
    BadArgument,
    WorkbenchError,
)
from workbench.core.vocab import SETS
from workbench.data.shapes import Shape
from workbench.measure.abba import ProtocolConfig
from workbench.run.config import RunConfig
from workbench.run.messages import Group
from workbench.run.pool import Outcome, fault_ids
from workbench.run.rounds import Host, Round
from workbench.run.runner import Runner
from workbench.tune import cache
from workbench.tune.space import Candidate, comparisons, reader_comparisons

DEFAULT_SCREEN_PAIRS = 3  # a screen ranks candidates; the confirmation decides
DEFAULT_TOP = 3
BEST_RULE = (
    "screen: every candidate against the default, one placement, a few ABBA pairs per set, "
    "ranked by the geometric mean of its B/A ratios; confirm: the best --top against the default "
    "with the full block protocol; a candidate is FASTER if FASTER in one set and SLOWER in "
    "none; the best configuration is the FASTER one with the lowest estimate, else the default"
)


@dataclass
class TuneConfig:
    kernel: str
    arm: str
    candidates: list[Candidate]  # the default first (space.candidates)
    screen_pairs: int = DEFAULT_SCREEN_PAIRS
    top: int = DEFAULT_TOP
    workers: int | None = None  # None: one per visible GPU
    resume: bool = True
    setup: tuple[str, dict[str, Any]] | None = None  # tests: installs the simulated device
    ray: str | None = None  # a Ray cluster's address: screen on its GPUs (run/ray_workers.py)
    ray_init: dict[str, Any] | None = None  # tests: ray.init arguments of a local instance

    def validate(self) -> TuneConfig:
        for name, v, lo, hi in (("--screen-pairs", self.screen_pairs, 1, 1000),
                                ("--top", self.top, 0, 64)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise BadArgument(f"{name} {v!r} must be an integer in {lo}..{hi}")
        w = self.workers
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 64):
            raise BadArgument(f"--workers {w!r} must be an integer in 1..64")
        if self.ray is not None and (not isinstance(self.ray, str) or not self.ray.strip()):
            raise BadArgument(f"--ray {self.ray!r} must be a Ray address (host:port, auto)")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "arm": self.arm, "screen_pairs": self.screen_pairs,
            "top": self.top, "workers": self.workers, "resume": self.resume, "ray": self.ray,
            "candidates": [dict(c.params) for c in self.candidates],
            "default": dict(self.candidates[0].params),
        }  # fmt: skip


def make_run_config(
    shape: Shape, tcfg: TuneConfig, base: RunConfig | None = None, **kw: Any
) -> RunConfig:
    """The RunConfig of a tune run: its comparisons are the screening plan (so the engine
    builds every candidate, in parallel, before anything is timed)."""
    tcfg.validate()
    sets = kw.pop("sets", SETS)
    default = tcfg.candidates[0]
    plan = [
        c
        for cand in tcfg.candidates[1:]
        for c in comparisons("screen", default, cand, sets, f"screen/{cand.name}")
    ]
    extra = {"tune": tcfg.to_dict(), **kw.pop("extra", {})}
    w = kw.setdefault("workers", defaults.WORKERS)  # the confirmation's worker processes
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise BadArgument(f"--confirm-workers {w!r} must be an integer >= 1")
    cfg = RunConfig(shape=shape.validate(), comparisons=plan, sets=tuple(sets), confirm=False,
                    mode="tune", slug=kw.pop("slug", None) or f"tune-{tcfg.kernel}",
                    extra=extra, **kw)  # fmt: skip
    cfg.protocol = cfg.protocol.validate()
    return cfg


def _excluded_why(outcomes: tuple[Outcome, ...], ids: list[str]) -> str | None:
    """Why a worker round left a candidate out: the GPU fault of one of its comparisons (the
    worker it ended named), else its numerics failure; None when it was measured."""
    for o in outcomes:
        if o.fault and set(fault_ids(o.fault)) & set(ids):
            return f"worker {o.job.index}: {o.fault['error']}"
    for o in outcomes:
        for cmps, error in o.excluded:
            if set(cmps) & set(ids):
                return f"numerics: {error}"
    return None


def score(sets: dict[str, dict[str, Any]]) -> float | None:
    """Geometric mean over the expert sets of the candidate/default ratio (< 1: faster)."""
    ratios = [s["ratio"] for s in sets.values() if s.get("ratio")]
    if not ratios or len(ratios) < len(sets):
        return None
    return math.exp(sum(math.log(x) for x in ratios) / len(ratios))


class Tune:
    """A tune's work (workbench.run.rounds.Work): its candidates' state, its rounds and the
    hooks the runner calls, each given the runner as a ``rounds.Host``; see the module
    docstring. ``tune_runner`` hands it to a Runner."""

    faults_fail = False  # a candidate whose kernel faults a worker is EXCLUDED, naming the fault
    pool_ahead = False  # each round's pool starts when it is planned (the screen's hold the GPUs)
    # the screen plans before any worker opens the session: its notes and the candidates the
    # cache knew are journaled once it does
    keep_early = True

    def __init__(self, tcfg: TuneConfig) -> None:
        self.tcfg = tcfg.validate()
        self.worker_setup = tcfg.setup
        # screen every candidate, confirm the best against the default, then time the readers
        # at the best parameters
        self.rounds = (Round("screen", self.plan_screen, "exclude", self.screened_all, split=True),
                       Round("tune", self.plan_tune, "exclude", self.confirm),
                       Round("reader", self.plan_reader, done=self.read))  # fmt: skip
        self.screened: dict[str, dict[str, Any]] = {}
        self.confirmed: dict[str, dict[str, Any]] = {}
        self.best: dict[str, Any] | None = None
        self.screen_seconds: float | None = None
        self.workers_used = 1
        self.gpu_name = ""
        self.hosts: list[dict[str, Any]] = []  # a Ray sweep's workers: host, GPU, name, node
        self.top: list[Candidate] = []  # the candidates of round "tune"
        self.planned: dict[str, list[Any]] = {}  # candidate (or "reader") -> its comparisons
        self.screen_pool: Any = None  # the pool round "screen" runs on
        self._unstored: list[dict[str, Any]] = []  # screened before the session existed
        self._t0 = 0.0

    # ------------------------------------------------------------------ the rounds

    def plan_screen(self, host: Host, an: Any) -> list[Any]:
        """Round "screen": every candidate the resume cache does not know, against the default,
        one group each, the groups shared out over one worker per GPU (docs/DESIGN.md §11.2)."""
        import time

        import torch

        self.gpu_name = torch.cuda.get_device_properties(torch.cuda.current_device()).name
        default, rest = self.tcfg.candidates[0], self.tcfg.candidates[1:]
        keys = {c.name: self._key(host.cfg, c, default) for c in rest}
        todo = []
        for c in rest:
            hit = cache.load(keys[c.name]) if self.tcfg.resume else None
            if hit is not None:
                self._screened(host, {**hit, "source": "cache"}, store=False)
            else:
                todo.append(c)
        if len(rest) - len(todo):
            host.note(f"resumed: {len(rest) - len(todo)} candidate(s) screened before (cache)")
        self._make_screen_pool(host, len(todo))
        self._t0 = time.monotonic()
        return [x for c in todo for x in comparisons("screen", default, c, host.cfg.sets,
                                                     f"screen/{c.name}")]  # fmt: skip

    def screened_all(self, host: Host, an: Any, outcomes: tuple[Outcome, ...]) -> None:
        """The screen's seconds; a screen where every worker failed ends the run."""
        import time

        self.screen_seconds = time.monotonic() - self._t0
        left = [c.name for c in self.tcfg.candidates[1:] if c.name not in self.screened]
        if not left or host.cancel.is_set():
            return
        if self.tcfg.ray is not None and not any(x.get("source") == "measured"
                                                 for x in self.screened.values()):  # fmt: skip
            raise WorkbenchError(
                f"no Ray screening actor screened anything ({len(left)} candidate(s) not "
                "screened): see the session's notes"
            )
        if sum(o.status in ("failed", "fault") for o in outcomes) >= len(outcomes):
            raise WorkbenchError(
                f"every screening worker stopped ({len(left)} candidate(s) not screened): "
                "see the session's notes"
            )

    def plan_tune(self, host: Host, an: Any) -> list[Any]:
        """Round "tune": the best ``--top`` screened candidates against the default."""
        if self.tcfg.top == 0:  # --top 0: screen only
            return []
        host.emit("phase", "confirm")
        default = self.tcfg.candidates[0]
        self.top = [self._candidate(res["candidate"]) for res in self.ranked()[: self.tcfg.top]]
        self.planned = {c.name: comparisons("tune", default, c, host.cfg.sets, f"tune/{c.name}")
                        for c in self.top}  # fmt: skip
        return [c for cs in self.planned.values() for c in cs]

    def confirm(self, host: Host, an: Any, outcomes: tuple[Outcome, ...]) -> None:
        """Each candidate's verdict from the merged journal, its interval over the workers
        (docs/DESIGN.md §7.3), or why it was excluded; then the best configuration."""
        for cand in self.top:
            ids = [c.id for c in self.planned[cand.name]]
            why = _excluded_why(outcomes, ids)
            if why is None and not any(x.id in ids and x.verdict.n for x in an.results):
                errors = host.errors()
                why = "no worker measured it" + (f" ({'; '.join(errors)})" if errors else "")
            if why is not None:
                self._exclude(host, cand, why)
            elif not host.cancel.is_set():
                self._confirmed(host, cand, ids, an.results)
        if host.cancel.is_set() and len(self.confirmed) < len(self.top):
            return
        self.best = self._choose(self.tcfg.candidates[0])
        host.emit("best", self.best)

    def plan_reader(self, host: Host, an: Any) -> list[Any]:
        """Round "reader": scalar against cooperative at the best parameters."""
        if self.best is None:
            return []
        best = self._candidate(self.best["candidate"])
        if not best.arm.startswith("b3-"):
            host.note(f"reader verdict skipped: {best.arm} has one reader only")
            return []
        host.emit("phase", "reader")
        self.planned = {"reader": reader_comparisons(best, host.cfg.sets)}
        return self.planned["reader"]

    def read(self, host: Host, an: Any, outcomes: tuple[Outcome, ...]) -> None:
        """The one reader rule (docs/DESIGN.md §7.5) on the reader comparisons: scalar against
        cooperative at the same parameters is a reader pair (plan.is_reader_comparison)."""
        ids = {c.id for c in self.planned["reader"]}
        done = [x for x in an.results if x.id in ids and x.verdict.n]
        kernel = self.tcfg.kernel
        rec = recommendations(done).get(kernel) if done else None
        if rec is not None:
            host.recommend({kernel: rec})

    # ------------------------------------------------------------------ the runner's hooks

    def pool_for(self, name: str) -> Any:
        return self.screen_pool if name == "screen" else None

    def pools(self) -> list[Any]:
        return [p for p in (self.screen_pool,) if p is not None]

    def tags(self, o: Outcome) -> dict[str, Any]:
        """The GPU that measured each record, every round's (its index among its pool's GPUs;
        on Ray, on its host), and on Ray the host of every record."""
        hello = o.hello or {}
        out: dict[str, Any] = {"gpu": self._gpu_of(o.job, hello)}
        if self.tcfg.ray is not None:
            out["host"] = hello.get("host") or socket.gethostname()
        return out

    def on_hello(self, host: Host, job: Any, data: dict[str, Any]) -> None:
        if job.round == "screen" and data.get("host"):  # a Ray worker: say where it runs
            gpu = (data.get("environment") or {}).get("gpu") or {}
            facts = {"host": data["host"], "gpu": self._gpu_of(job, data),
                     "cuda_visible_devices": data.get("gpu"), "node": data.get("ray_node"),
                     "name": gpu.get("name"), "uuid": gpu.get("uuid"),
                     "nvml": data.get("nvml")}  # fmt: skip
            host.emit("worker", facts)
            if facts["name"] == self.gpu_name:
                self.hosts.append(facts)
                host.note(f"screening actor on host {facts['host']} GPU {facts['gpu']}: "
                          f"{facts['name']} (Ray node {str(facts['node'])[:12]})")  # fmt: skip

    def on_group(self, host: Host, job: Any, hello: dict[str, Any] | None, group: Group) -> None:
        """A screened candidate as its worker finished it: its record, at once."""
        if job.round != "screen":
            return
        name = group.cmps[0].split("/")[1]
        cand = self._candidate(name)
        res: dict[str, Any] = {
            "candidate": cand.name, "params": dict(cand.params), "arm": cand.arm,
            "gpu": self._gpu_of(job, hello or {}),
            "gate": "rel_l2" if cand.tolerance is not None else "bit-identical",
            "sets": group.sets,
        }  # fmt: skip
        if (hello or {}).get("host"):
            res["host"] = hello["host"]
        if group.status == "excluded":
            res.update(status="excluded", reason=group.reason)
        elif group.status == "cancelled":
            res.update(seconds=group.seconds, status="cancelled",
                       reason="interrupted while screening")  # fmt: skip
        else:
            res.update(seconds=group.seconds, score=score(group.sets), status="screened",
                       reason=None)  # fmt: skip
        self._screened(host, res)

    def on_session(self, host: Host) -> None:
        """The candidates screened before the session opened, into the screen cache now."""
        for res in self._unstored:
            self._store(host, res)
        self._unstored = []

    def summary(self, host: Host) -> dict[str, Any]:
        ranked = [r["candidate"] for r in self.ranked()]
        return {"tune": {
            "kernel": self.tcfg.kernel, "arm": self.tcfg.arm, "gpu": self.gpu_name,
            "default": self.tcfg.candidates[0].name, "workers": self.workers_used,
            "ray": self.tcfg.ray, "hosts": self.hosts,
            "screen_seconds": self.screen_seconds, "screened": list(self.screened.values()),
            "ranked": ranked, "confirmed": list(self.confirmed.values()), "best": self.best,
            "reader": {k: r.to_dict() for k, r in host.recommendations.items()},
            "unscreened": [c.name for c in self.tcfg.candidates[1:]
                           if c.name not in self.screened],
            "m": host.cfg.m, "rule": BEST_RULE,
        }}  # fmt: skip

    # ------------------------------------------------------------------ the screen

    def _make_screen_pool(self, host: Host, todo: int) -> None:
        """The screen's pool: one worker per GPU used, on Ray (``tcfg.ray``), in spawned
        processes (several GPUs), else in this process."""
        import torch

        from workbench.run.gpus import GPU
        from workbench.run.pool import Pool, ProcessPool

        visible = max(1, torch.cuda.device_count())
        workers = min(self.tcfg.workers or visible, visible)
        if self.tcfg.workers and self.tcfg.workers > visible and self.tcfg.ray is None:
            host.note(
                f"--workers {self.tcfg.workers}: only {visible} GPU(s) visible, using {visible}"
            )
        cfg = dataclasses.replace(host.cfg, protocol=self._screen_protocol(host.cfg),
                                  ray=self.tcfg.ray, ray_init=self.tcfg.ray_init,
                                  workers=1)  # fmt: skip
        if self.tcfg.ray is not None:
            from workbench.run.ray_workers import RayPool

            pool: Pool = RayPool(cfg, self.worker_setup, host.cancel)
            pool.expect_gpu = self.gpu_name  # screening ratios rank within one GPU model
            pool.start()
            n = min(len(pool.gpus), self.tcfg.workers or len(pool.gpus), max(1, todo))
        else:
            n = min(workers, max(1, todo))
            env = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = ([x.strip() for x in env.split(",") if x.strip()] if env else [])[:n]
            ids = ids or [str(i) for i in range(n)]
            gpus = [GPU(d, int(d) if d.isdigit() else i) for i, d in enumerate(ids)]
            cfg = dataclasses.replace(cfg, workers=n)  # one spare per GPU from the start
            pool = (ProcessPool if n > 1 else Pool)(cfg, self.worker_setup, host.cancel)
            pool.start(gpus)
        pool.cfg = dataclasses.replace(cfg, workers=n)  # on Ray: once the cluster is known
        self.screen_pool, self.workers_used = pool, n

    def _gpu_of(self, job: Any, hello: dict[str, Any]) -> int:
        """The index of the GPU a worker measured on: a Ray worker's on its host, else its
        lane's among its pool's GPUs (the run's own process: the first)."""
        vis = hello.get("gpu")  # a Ray worker: the GPU Ray gave it
        if vis is None and job.inline and self.tcfg.ray is not None:
            vis = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
        if isinstance(vis, str) and vis.isdigit():
            return int(vis)
        return int(job.lane)

    def _screen_protocol(self, cfg: RunConfig) -> ProtocolConfig:
        return dataclasses.replace(
            cfg.protocol, blocks=1, pairs=self.tcfg.screen_pairs, adaptive=False, budget_s=None,
        )  # fmt: skip

    def _key(self, cfg: RunConfig, c: Candidate, default: Candidate) -> dict[str, Any]:
        import torch

        from workbench.kernels.build import build_name

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        arch = f"{props.major}.{props.minor}"
        p = self._screen_protocol(cfg)
        proto = {"pairs": p.pairs, "blocks": 1, "warmup": p.warmup, "calls": cfg.calls,
                 "replays": cfg.replays, "seed": cfg.seed, "sets": list(cfg.sets),
                 "gate": c.tolerance}  # fmt: skip
        return cache.screen_key(
            build_name(c.variant, arch), build_name(default.variant, arch),
            cfg.shape.to_dict(), props.name, proto,
        )  # fmt: skip

    def _screened(self, host: Host, res: dict[str, Any], store: bool = True) -> None:
        res = {**res, "source": res.get("source", "measured")}
        self.screened[res["candidate"]] = res
        host.record("candidate", **{k: v for k, v in res.items() if k != "t"})
        host.emit("candidate", res)
        if store and res["status"] in ("screened", "excluded"):
            if host.session_path() is None:  # another worker describes the run: it may be late
                self._unstored.append(res)
            else:
                self._store(host, res)

    def _store(self, host: Host, res: dict[str, Any]) -> None:
        """A screened candidate into the screen cache, with the session that measured it (a
        resumed run's record points back to its samples)."""
        cand = self._candidate(res["candidate"])
        cache.store(self._key(host.cfg, cand, self.tcfg.candidates[0]),
                    {**res, "session": str(host.session_path())})  # fmt: skip

    # ------------------------------------------------------------------ the confirmation

    def ranked(self) -> list[dict[str, Any]]:
        ok = [r for r in self.screened.values() if r["status"] == "screened" and r.get("score")]
        return sorted(ok, key=lambda r: r["score"])

    def _candidate(self, name: str) -> Candidate:
        for c in self.tcfg.candidates:
            if c.name == name:
                return c
        raise WorkbenchError(f"no candidate named {name!r} in this sweep")

    def _exclude(self, host: Host, cand: Candidate, why: str) -> None:
        self.confirmed[cand.name] = {"candidate": cand.name, "params": dict(cand.params),
                                     "verdict": "EXCLUDED", "reason": why, "sets": {}}  # fmt: skip
        host.note(f"{cand.name}: excluded at confirmation: {why}")
        host.emit("confirmed", self.confirmed[cand.name])

    def _confirmed(self, host: Host, cand: Candidate, ids: list[str], results: list[Any]) -> None:
        """A confirmed candidate's record from its comparisons' results (the analysis model's)."""
        sets, verdicts = {}, {}
        for r in results:
            if r.id in ids:
                v = verdicts[r.set] = r.verdict
                sets[r.set] = {"cmp": r.id, "verdict": v.verdict, "estimate": v.median,
                               "ci": [v.ci_low, v.ci_high], "blocks": v.blocks,
                               "workers": v.workers, "reason": reason(v)}  # fmt: skip
        direction = overall(verdicts)  # the reader rule's combination of the sets (§7.5)
        est = [x["estimate"] for x in sets.values() if x["estimate"]]
        gm = math.exp(sum(map(math.log, est)) / len(est)) if est else None
        self.confirmed[cand.name] = {"candidate": cand.name, "params": dict(cand.params),
                                     "verdict": direction, "estimate": gm,
                                     "sets": sets}  # fmt: skip
        host.emit("confirmed", self.confirmed[cand.name])

    def _choose(self, default: Candidate) -> dict[str, Any]:
        """The best configuration: the FASTER confirmed candidate with the lowest estimate,
        else the default (nothing beat it with evidence)."""
        faster = [c for c in self.confirmed.values() if c["verdict"] == "FASTER"]
        if faster:
            b = min(faster, key=lambda c: c["estimate"])
            return {**b, "is_default": False,
                    "why": f"confirmed FASTER than the default {default.name}"}  # fmt: skip
        return {"candidate": default.name, "params": dict(default.params), "is_default": True,
                "verdict": "DEFAULT",
                "why": "no confirmed candidate was FASTER than the default"}  # fmt: skip


def tune_runner(cfg: RunConfig, tcfg: TuneConfig, **kw: Any) -> Runner:
    """The Runner of a tune: ``cfg`` (make_run_config) with the tune's work; ``kw``: the
    Runner's listeners and ``cancel``."""
    return Runner(cfg, work=Tune(tcfg), **kw)


def run_tune_session(
    config: dict[str, Any],
    root: str,
    events: Any = None,
    cancelled: Any = None,
) -> Any:
    """Entry point for the TUI: run a tune from a plain dict (kernel, arm, params {name:
    [values]}, top, screen_pairs, workers, ray, preset, tp, pairs, blocks) and return the session
    path. ``events(kind, data)`` gets the run's events (from this thread); ``cancelled()`` is
    polled five times a second (a cancelled tune keeps its session, status "interrupted")."""
    import threading

    from workbench.data.shapes import resolve_shape
    from workbench.tune import space

    c = dict(config)
    kernel, arm = c.get("kernel", "w13"), c.get("arm", "b3-scalar")
    shape = resolve_shape(preset=c.get("preset"), tp=c.get("tp"))
    overrides = {k: tuple(v) for k, v in (c.get("params") or {}).items()}
    space.parse_overrides(kernel, [f"{k}={','.join(map(str, v))}" for k, v in overrides.items()])
    cands = space.candidates(kernel, arm, overrides, shape.validate())
    tcfg = TuneConfig(kernel, arm, cands, screen_pairs=int(c.get("screen_pairs", 3)),
                      top=int(c.get("top", 3)), workers=c.get("workers"),
                      ray=c.get("ray"))  # fmt: skip
    proto = ProtocolConfig(pairs=int(c.get("pairs", 2)), blocks=int(c.get("blocks", 6)))
    cfg = make_run_config(shape, tcfg, protocol=proto, sessions_dir=str(root),
                          extra={"source": "tui"})  # fmt: skip
    cancel, done = threading.Event(), threading.Event()

    def poll() -> None:
        while not done.wait(0.2):
            if cancelled is not None and cancelled():
                cancel.set()

    watcher = threading.Thread(target=poll, name="tune-cancel", daemon=True)
    watcher.start()
    try:
        result = tune_runner(cfg, tcfg, events=events, cancel=cancel).run()
    finally:
        done.set()
    return result.session_path
