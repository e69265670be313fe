"""Defaults live in workbench/core/defaults.py: the CLI, the TUI's run form, the runner, its protocol
and the statistics read them from there (no copy of a default anywhere else)."""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path

import pytest

from workbench.commands import ab, calibrate
from workbench.commands._measure import protocol_from_args
from workbench.core import defaults, stats
from workbench.measure.abba import ProtocolConfig
from workbench.run.config import RunConfig, make_config
from workbench.tui.backend import RunConfig as FormConfig

REPO = Path(__file__).resolve().parents[1]


def _parsed(module, argv=()) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    module.add_arguments(p)
    return p.parse_args(list(argv))


def test_cli_defaults_are_the_defaults():
    a = _parsed(ab)
    assert tuple(a.kernel.split(",")) == defaults.KERNELS
    assert tuple(a.set.split(",")) == defaults.SETS
    assert (a.a, a.b) == (defaults.ARM_A, defaults.ARM_B)
    for args in (a, _parsed(calibrate)):
        assert (args.pairs, args.blocks, args.max_blocks) == (
            defaults.PAIRS, defaults.BLOCKS, defaults.MAX_BLOCKS,
        )  # fmt: skip
        assert (args.calls, args.replays, args.seed) == (
            defaults.CALLS, defaults.REPLAYS, defaults.SEED,
        )  # fmt: skip
        assert (args.min_effect, args.retries) == (defaults.M, defaults.RETRIES)
        # --target is None unless given (it needs --adaptive); the protocol gets the default
        assert args.target is None and protocol_from_args(args).target == defaults.TARGET
        assert (args.sessions_dir, args.plots_dir) == (defaults.SESSIONS_DIR, defaults.PLOTS_DIR)
    c = _parsed(calibrate)
    assert (c.kernel, c.set, c.arm) == ("w13", "hot", defaults.CALIBRATE_ARM)


def test_runner_form_and_protocol_defaults_are_the_defaults():
    p = ProtocolConfig()
    assert (p.pairs, p.blocks, p.target, p.retries, p.max_blocks) == (
        defaults.PAIRS, defaults.BLOCKS, defaults.TARGET, defaults.RETRIES, defaults.MAX_BLOCKS,
    )  # fmt: skip
    f = FormConfig()
    assert (f.kernels, f.sets, f.a, f.b) == (
        defaults.KERNELS, defaults.SETS, defaults.ARM_A, defaults.ARM_B,
    )  # fmt: skip
    assert (f.pairs, f.blocks, f.calls, f.replays, f.seed) == (
        defaults.PAIRS, defaults.BLOCKS, defaults.CALLS, defaults.REPLAYS, defaults.SEED,
    )  # fmt: skip
    assert f.target_pct == pytest.approx(defaults.TARGET * 100)
    sig = inspect.signature(make_config).parameters
    got = {
        k: sig[k].default for k in ("kernels", "sets", "a", "b", "calls", "replays", "seed", "m")
    }
    assert got == {
        "kernels": defaults.KERNELS, "sets": defaults.SETS, "a": defaults.ARM_A,
        "b": defaults.ARM_B, "calls": defaults.CALLS, "replays": defaults.REPLAYS,
        "seed": defaults.SEED, "m": defaults.M,
    }  # fmt: skip
    fields = RunConfig.__dataclass_fields__
    assert (fields["calls"].default, fields["replays"].default) == (
        defaults.CALLS,
        defaults.REPLAYS,
    )
    assert (stats.DEFAULT_M, stats.DEFAULT_CONF, stats.DEFAULT_TARGET) == (
        defaults.M, defaults.CONF, defaults.TARGET,
    )  # fmt: skip


def literal_defaults(tree: ast.Module) -> list[tuple[int, object]]:
    """``default=<number or string literal>`` keyword arguments of the run's knobs, and dataclass
    fields of those knobs set to a literal: a default written down a second time."""
    knobs = {"calls", "replays", "pairs", "blocks", "seed", "target", "retries", "m", "a", "b"}
    knobs |= {"root", "out", "sessions", "plots", "sessions_dir", "plots_dir"}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            dests = [a.value for a in node.args if isinstance(a, ast.Constant)]
            name = next((str(d).lstrip("-").replace("-", "_") for d in dests), "")
            for kw in node.keywords:
                lit = isinstance(kw.value, ast.Constant) and kw.value.value is not None
                if kw.arg == "default" and lit and name in knobs | {"min_effect", "kernel", "set"}:
                    out.append((node.lineno, kw.value.value))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            v = node.value
            if node.target.id in knobs and isinstance(v, ast.Constant) and v.value is not None:
                out.append((node.lineno, v.value))
    return out


def test_no_literal_copy_of_a_default():
    files = ["workbench/commands/ab.py", "workbench/commands/calibrate.py",
             "workbench/commands/_measure.py", "workbench/run/runner.py", "workbench/measure/abba.py",
             "workbench/tui/backend.py", "workbench/run/settings.py", "workbench/commands/plot.py",
             "workbench/commands/report.py", "workbench/commands/sessions.py",
             "workbench/commands/tui.py"]  # fmt: skip
    found = {f: literal_defaults(ast.parse((REPO / f).read_text())) for f in files}
    assert {f: x for f, x in found.items() if x} == {}


def test_the_literal_check_finds_a_copy():
    tree = ast.parse(
        "p.add_argument('--calls', type=int, default=48)\n"
        "class C:\n    replays: int = 50\n    pairs: int = defaults.PAIRS\n"
    )
    assert literal_defaults(tree) == [(1, 48), (3, 50)]
