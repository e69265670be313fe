"""A command's rounds and hooks see the runner only as ``rounds.Host`` (workbench/run/rounds.py),
and a command hands the Runner its work by composition: nothing subclasses the Runner.

Checked three ways: an `ab` and a tune run on the simulated device (in this process) with every
round and hook given a host that has the protocol's members and nothing else; the source of the
rounds and hooks read for ``host.<name>`` outside it; and no class of workbench/ derives from
Runner. Each checker is shown to find a planted violation."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import sim_device

from workbench.data.shapes import resolve_shape
from workbench.measure.abba import ProtocolConfig
from workbench.run import config, rounds, runner
from workbench.tune import space, tuner

REPO = Path(__file__).resolve().parents[1]
SHAPE = dict(hidden=64, inter=128, experts=8, top_k=2, tp=1)
# what a round or a hook may ask of the runner: the protocol's attributes and methods
HOST = {n for n in vars(rounds.Host) if not n.startswith("_")} | set(rounds.Host.__annotations__)
# the hooks the runner calls with itself as their host
HOOKS = {n for n, f in vars(rounds.Work).items()
         if inspect.isfunction(f) and "host" in inspect.signature(f).parameters}  # fmt: skip
# where rounds and hooks live
SOURCES = ("workbench/run/rounds.py", "workbench/tune/tuner.py")


class OnlyHost:
    """The runner as the protocol shows it: its members of rounds.Host, nothing else."""

    def __init__(self, r: runner.Runner) -> None:
        object.__setattr__(self, "_r", r)

    def __getattr__(self, name: str):
        if name not in HOST:
            raise AssertionError(f"a round or hook asked the runner for {name!r} (not rounds.Host)")
        return getattr(self._r, name)

    def __setattr__(self, name: str, value) -> None:
        raise AssertionError(f"a round or hook set the runner's {name!r}")


class StrictWork:
    """``work`` whose round functions and hooks get the runner as an OnlyHost."""

    def __init__(self, work) -> None:
        self.work = work
        self.rounds = tuple(dataclasses.replace(r, plan=self._via(r.plan), done=self._via(r.done))
                            for r in work.rounds)  # fmt: skip

    @staticmethod
    def _via(fn):
        return lambda host, *a: fn(OnlyHost(host), *a)

    def __getattr__(self, name: str):
        attr = getattr(self.work, name)
        return self._via(attr) if name in HOOKS else attr


@pytest.fixture
def device(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    return sim_device.install(monkeypatch)


def ab_config(tmp_path, **kw):
    return config.make_config(
        resolve_shape(**SHAPE), reference=False, calls=2, replays=3,
        protocol=ProtocolConfig(pairs=2, blocks=2), sessions_dir=str(tmp_path), workers=1, **kw,
    )  # fmt: skip


def tune_configs(tmp_path):
    shape = resolve_shape(**SHAPE)
    cands = space.candidates("w13", "b3-scalar", {"unroll": (4, 5), "max_warps": (16,)}, shape)
    tc = tuner.TuneConfig("w13", "b3-scalar", cands, screen_pairs=2, top=1, workers=1)
    cfg = tuner.make_run_config(shape, tc, calls=2, replays=3,
                                protocol=ProtocolConfig(pairs=2, blocks=2),
                                sessions_dir=str(tmp_path / "sessions"), workers=1)  # fmt: skip
    return cfg, tc


def test_the_runner_is_a_host_and_the_protocol_is_narrow():
    r = runner.Runner(ab_config("unused"))
    assert all(hasattr(r, n) for n in HOST), sorted(n for n in HOST if not hasattr(r, n))
    assert len(HOST) <= 12  # a narrow protocol: a wider one is a decision, made here
    assert {"on_hello", "on_group", "on_session", "summary"} == HOOKS


def test_ab_rounds_run_on_nothing_but_the_host_protocol(device, tmp_path):
    res = runner.Runner(ab_config(tmp_path), work=StrictWork(rounds.AB_WORK)).run()
    assert res.status == "complete" and set(res.summary["recommendations"]) == {"w13", "w2"}
    assert any(c["id"].startswith("step/") for c in res.summary["comparisons"])  # confirm ran


def test_a_tune_runs_on_nothing_but_the_host_protocol(device, tmp_path):
    cfg, tc = tune_configs(tmp_path)
    res = runner.Runner(cfg, work=StrictWork(tuner.Tune(tc))).run()
    t = res.summary["tune"]
    assert res.status == "complete" and t["screened"] and t["confirmed"] and t["best"]
    assert "w13" in t["reader"]  # every round ran: screen, tune, reader


def test_a_round_asking_for_more_than_the_protocol_fails(device, tmp_path):
    def peek(r, an):
        return list(r.pool.cfg.comparisons)  # the runner's pool: not the round's to see

    planted = rounds.AbWork(rounds=(rounds.Round("main", peek),))
    with pytest.raises(AssertionError, match="asked the runner for 'pool'"):
        runner.Runner(ab_config(tmp_path), work=StrictWork(planted)).run()


def outside_the_protocol(tree: ast.Module, path: str) -> list[str]:
    """``host.<name>`` (a parameter annotated ``Host``) where <name> is not rounds.Host's."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        args = fn.args.args + fn.args.kwonlyargs
        hosts = {a.arg for a in args
                 if isinstance(a.annotation, ast.Name) and a.annotation.id == "Host"}  # fmt: skip
        for n in ast.walk(fn):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id in hosts and n.attr not in HOST):  # fmt: skip
                out.append(f"{path}:{n.lineno} asks the host for {n.attr!r}")
    return out


def test_rounds_and_hooks_ask_the_host_for_its_protocol_only():
    found, hosts = [], 0
    for path in SOURCES:
        tree = ast.parse((REPO / path).read_text())
        found += outside_the_protocol(tree, path)
        hosts += sum(isinstance(a.annotation, ast.Name) and a.annotation.id == "Host"
                     for a in ast.walk(tree) if isinstance(a, ast.arg))  # fmt: skip
    assert found == [] and hosts >= 20  # every round and hook of both is read
    planted = "def _plan(r: Host, an):\n    r._journal(an)\n    return r.cfg.comparisons\n"
    assert outside_the_protocol(ast.parse(planted), "x.py") == [
        "x.py:2 asks the host for '_journal'"
    ]


def runner_subclasses(tree: ast.Module, path: str) -> list[str]:
    """Classes deriving from ``Runner`` (by name or as ``runner.Runner``)."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef):
            for b in n.bases:
                name = b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None)
                if name == "Runner":
                    out.append(f"{path}:{n.lineno} class {n.name} derives from Runner")
    return out


def test_nothing_subclasses_the_runner():
    found = []
    for p in sorted((REPO / "workbench").rglob("*.py")):
        found += runner_subclasses(ast.parse(p.read_text()), str(p.relative_to(REPO)))
    assert found == []
    assert not [v for v in vars(tuner).values()
                if inspect.isclass(v) and issubclass(v, runner.Runner)
                and v is not runner.Runner]  # fmt: skip
    planted = "class TuneRunner(Runner):\n    rounds = ()\n"
    assert runner_subclasses(ast.parse(planted), "x.py") == [
        "x.py:1 class TuneRunner derives from Runner"
    ]
