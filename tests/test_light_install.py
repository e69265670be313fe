"""The light install (issue 25, item 2): browsing, reports, plots, compare and the TUI's browse
mode work without the GPU stack, and a command that needs it names the extra to install.

One child process with torch, triton and pynvml made unimportable (a sys.meta_path finder that
refuses them and records every attempt) runs the commands through the CLI in turn; the test then
requires each to succeed, no attempt at all to import the GPU stack outside the TUI (whose GPU and
NVML probes try it and fall back to browse mode), and, in a second child, that every workbench
module those commands loaded imports with the GPU stack refused, without trying it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_sessions import REPO

from workbench.core.errors import DIST, EXIT_NO_GPU, GPU_EXTRA

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

SESSION = "sessions/20261129T140359Z_default"
REPLICATE = "sessions/20261129T141409Z_default-r2"

CHILD = r"""
import contextlib, importlib.abc, io, json, sys

attempts = []

class NoGPUStack(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton", "pynvml"):
            attempts.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoGPUStack())
from workbench import cli

results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    results.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue(),
                    "attempts": list(attempts)})
    attempts.clear()
loaded = sorted(m for m in sys.modules if m == "workbench" or m.startswith("workbench."))
print(json.dumps({"results": results, "modules": loaded}))
"""

IMPORT_CHILD = r"""
import importlib, importlib.abc, json, sys

attempts = []

class NoGPUStack(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton", "pynvml"):
            attempts.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoGPUStack())
found = {}
for m in json.loads(sys.argv[1]):
    importlib.import_module(m)
    if attempts:
        found[m] = list(attempts)
        attempts.clear()
print(json.dumps(found))
"""


def _child(code: str, arg: object, cwd: Path):
    env = dict(os.environ, PYTHONPATH=str(REPO), WORKBENCH_CACHE=str(cwd / "cache"))
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(arg)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run(commands: list[list[str]], cwd: Path) -> tuple[list[dict], list[str]]:
    got = _child(CHILD, commands, cwd)
    return got["results"], got["modules"]


def test_browsing_reports_plots_compare_and_the_tui_need_no_torch(tmp_path):
    s, r = str(REPO / SESSION), str(REPO / REPLICATE)
    svg = tmp_path / "browse.svg"
    commands = [
        ["sessions", "list", "--root", str(REPO / "sessions")],
        ["sessions", "show", s],
        ["sessions", "compare", s, r],
        ["report", s, "--output", str(tmp_path / "report.md")],
        ["plot", s, "--out", str(tmp_path / "plots"), "--format", "png"],
        ["capacity"],
        ["tui", "--browse", "--sessions", str(REPO / "sessions"), "--screenshot", str(svg)],
    ]
    results, modules = _run(commands, tmp_path)
    for res in results:
        assert res["code"] == 0, (res["argv"], res["err"][-2000:])
        if res["argv"][0] != "tui":  # the TUI probes for a GPU and NVML at run time
            assert res["attempts"] == [], (res["argv"], "tried the GPU stack", res["attempts"])
    assert "workbench.tui.app" in modules and "workbench.report.markdown" in modules
    at_import = _child(IMPORT_CHILD, modules, tmp_path)
    assert at_import == {}, f"modules that import the GPU stack at import time: {at_import}"
    by = {" ".join(res["argv"][:2]): res for res in results}
    assert "20261129T140359Z_default" in by["sessions list"]["out"]
    assert "w13/hot" in by["sessions show"]["out"]
    assert "shift" in by["sessions compare"]["out"]
    assert (tmp_path / "report.md").read_text().count("|") > 20
    assert len(list((tmp_path / "plots").glob("*.png"))) >= 3
    assert svg.stat().st_size > 10_000 and "Sessions" in svg.read_text()


def test_a_command_that_needs_the_gpu_stack_names_the_extra(tmp_path):
    import ckpt_fixture

    folder, _ = ckpt_fixture.checkpoint(tmp_path / "ckpt", group=64)
    # `checkpoint show` reads safetensors through torch (issue 46: it said "not a readable
    # .safetensors file", exit 2)
    commands = [["check", "--kernel", "w2"], ["ab"], ["checkpoint", "show", str(folder)]]
    # the TUI's headless run: "runs are disabled" named no install command (issue 46)
    commands.append(["tui", "--screenshot", str(tmp_path / "s.svg"), "--run", "--size", "80x24"])
    results, _ = _run(commands, tmp_path)
    for res in results:
        assert res["code"] == EXIT_NO_GPU, (res["argv"], res["err"])
        line = res["err"].strip()
        assert len(line.splitlines()) == 1 and "Traceback" not in line
        assert line.startswith(f"workbench {res['argv'][0]}: ")
        assert "torch is not installed" in line
        # both commands that work: from the wheel, and in a checkout
        assert f"pip install '{DIST}[{GPU_EXTRA}]'" in line
        assert f'python3 -m pip install -e ".[{GPU_EXTRA}]"' in line
        assert "pytest" not in line  # the light install has no pytest (and no torch to test)


# sys.modules[name] = None makes `import name` fail as a missing package does (ModuleNotFoundError)
NO_PLATFORMDIRS = r"""
import sys
sys.modules["platformdirs"] = None
from workbench import cli
raise SystemExit(cli.main(sys.argv[1:]))
"""


def test_a_missing_dependency_is_named_with_its_install_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env |= {"PYTHONPATH": str(REPO), "WORKBENCH_SESSION_INDEX": str(tmp_path / "index.json")}

    def wb(*argv):
        return subprocess.run(
            [sys.executable, "-c", NO_PLATFORMDIRS, *argv],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    build = wb("build", "--kernel", "w2", "--no-calib")
    assert build.returncode == EXIT_NO_GPU, build.stderr
    (line,) = build.stderr.strip().splitlines()
    assert line.startswith("workbench build: platformdirs is not installed"), line
    assert line.endswith("python3 -m pip install platformdirs"), line
    # the session index is a cache: without the cache folder a listing is slower, never refused
    del env["WORKBENCH_SESSION_INDEX"]
    listing = wb("sessions", "list", "--root", str(REPO / "sessions"))
    assert listing.returncode == 0 and "20261129T140359Z_default" in listing.stdout, listing.stderr


# a dependency left out of a partial install: one line naming its install command, exit 3
NO_MODULE = r"""
import sys
sys.modules[sys.argv[1]] = None
from workbench import cli
raise SystemExit(cli.main(sys.argv[2:]))
"""


def test_any_missing_dependency_is_one_line_with_its_install_command(tmp_path):
    cases = [
        ("matplotlib", ["plot", str(REPO / SESSION), "--out", str(tmp_path / "p")], "matplotlib"),
        ("rich", ["capacity"], "rich"),
        ("textual", ["tui", "--browse", "--screenshot", str(tmp_path / "s.svg")], "textual"),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO), WORKBENCH_CACHE=str(tmp_path / "cache"))
    for module, argv, dist in cases:
        p = subprocess.run(
            [sys.executable, "-c", NO_MODULE, module, *argv],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        lines = p.stderr.strip().splitlines()
        assert p.returncode == EXIT_NO_GPU and len(lines) == 1, (module, p.stderr[-2000:])
        assert lines[0].startswith(f"workbench {argv[0]}: {dist} is not installed"), lines
        assert lines[0].endswith(f"python3 -m pip install {dist}"), lines


def test_every_install_hint_names_the_distribution_and_the_checkout_command():
    """PyPI's `workbench` is another project: the distribution is DIST, and every hint that
    installs an extra names DIST (from the wheel) or the checkout's `-e ".[extra]"`."""
    import re

    from workbench.kernels.specs import read_toml

    project = read_toml(REPO / "pyproject.toml")["project"]
    assert project["name"] == DIST and project["scripts"] == {"workbench": "workbench.cli:main"}
    files = [*(REPO / "workbench").rglob("*.py"), REPO / "README.md", *(REPO / "docs").glob("*.md")]
    bare = []
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            # an extra of a bare `workbench` (what pip would fetch from someone else's project)
            if re.search(r"(?<![-\w])workbench\[", line):
                bare.append(f"{f.relative_to(REPO)}:{n}: {line.strip()}")
    assert bare == [], bare
    from workbench.core.errors import extra_install

    hint = extra_install(GPU_EXTRA)
    assert f"pip install '{DIST}[{GPU_EXTRA}]'" in hint
    assert f'python3 -m pip install -e ".[{GPU_EXTRA}]"' in hint


def test_doctor_on_the_light_install_shows_the_whole_install_command(tmp_path):
    (res,), _ = _run([["doctor"]], tmp_path)
    out = " ".join(res["out"].split())  # rich wraps at 80 columns
    fix = out[out.index("torch is not installed") :]
    fix = fix[fix.index("fix:") :]
    # rich once read `[gpu]` as markup: the fix read `pip install -e "."`, what the user has
    assert fix.startswith(f"fix: pip install '{DIST}[{GPU_EXTRA}]' (in a checkout: "), fix
    assert f'python3 -m pip install -e ".[{GPU_EXTRA}]")' in fix, fix
    assert 'install -e "."' not in out
    # issue 46: a missing pynvml is a missing package, not a missing GPU
    assert "unknown: pynvml is not installed" in out and "none visible" not in out
    assert "runs need an NVIDIA GPU and its driver" not in out
