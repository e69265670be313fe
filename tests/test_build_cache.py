"""The build cache under concurrency (issue 15): a lock per variant, builds renamed into place
whole, progress events per variant.

CPU tests replace only the compiler child (`_build_in_child`) by a fake that writes what a real
build writes; the compile-tier test runs two real processes building one variant with nvcc.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cuda_toolchain import cuda_build_skip_reason

from workbench.core.errors import BuildError
from workbench.kernels import build
from workbench.kernels.variants import parse_arm

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

V = parse_arm("w2", "b3-scalar")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "target_arch", lambda: "9.0")
    return tmp_path / "cache" / "build"


class FakeChild:
    """Writes a build's files into the folder it is given, slowly, and counts its calls."""

    def __init__(self, hold: threading.Event | None = None, fail: BaseException | None = None):
        self.calls = 0
        self.hold, self.fail = hold, fail
        self.lock = threading.Lock()

    def __call__(self, v, arch, max_jobs, out: Path) -> str:
        with self.lock:
            self.calls += 1
        name = build.build_name(v, arch)
        (out / "build.log").write_text("ptxas info : Used 40 registers\n")
        if self.hold is not None:
            assert self.hold.wait(20), "the second build never waited for the first"
        if self.fail is not None:
            raise self.fail
        (out / f"{name}.so").write_bytes(b"\x7fELF fake library")
        meta = {"status": "ok", "variant": v.name, "arch": arch, "seconds": 1.5}
        meta |= {"lib_sha256": "cd" * 32, "ptxas": {"registers": 40}, "log": "ptxas info"}
        (out / build.BUILD_META).write_text(json.dumps(meta))
        return name


def _leftovers(cache: Path) -> list[str]:
    return [p.name for p in cache.iterdir() if p.name.startswith(".building-")]


def test_two_concurrent_builds_of_one_variant_compile_once(cache, monkeypatch):
    waiting = threading.Event()
    child = FakeChild(hold=waiting)
    monkeypatch.setattr(build, "_build_in_child", child)
    events: list[build.BuildEvent] = []

    def progress(e: build.BuildEvent) -> None:
        events.append(e)
        if e.state == "waiting":
            waiting.set()  # the first build finishes only once the second is seen waiting

    results: list = [None, None]

    def run(i: int) -> None:
        results[i] = build.build_variant(V, load=False, progress=progress)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert child.calls == 1
    assert sorted(r.cache_hit for r in results) == [False, True]
    assert results[0].lib_path == results[1].lib_path and Path(results[0].lib_path).is_file()
    states = sorted(e.state for e in events)
    assert states == ["built", "cached", "started", "waiting"], states
    assert all(e.variant == "w2:b3-scalar" and e.seconds >= 0 for e in events)
    bdir = Path(results[0].build_dir)
    assert bdir.parent == cache and (bdir / "build.log").read_text().startswith("ptxas info")
    assert _leftovers(cache) == []


@pytest.mark.parametrize("error", [KeyboardInterrupt(), BuildError("build of w2 failed", "log")])
def test_an_interrupted_or_failed_build_leaves_nothing_half_written(cache, monkeypatch, error):
    monkeypatch.setattr(build, "_build_in_child", FakeChild(fail=error))
    events: list = []
    with pytest.raises(type(error)):
        build.build_variant(V, load=False, progress=events.append)
    assert _leftovers(cache) == [] and not list(cache.glob("wb_*"))
    if isinstance(error, BuildError):
        assert [e.state for e in events] == ["started", "failed"]
        assert events[-1].message == "build of w2 failed"
    # the lock was released: the next build goes ahead
    child = FakeChild()
    monkeypatch.setattr(build, "_build_in_child", child)
    assert build.build_variant(V, load=False).cache_hit is False and child.calls == 1


def test_an_incomplete_folder_in_the_cache_is_rebuilt(cache, monkeypatch):
    name = build.build_name(V, "9.0")
    stale = cache / name
    stale.mkdir(parents=True)
    (stale / "build.log").write_text("half a log")
    (stale / build.BUILD_META).write_text("{trunc")  # a build killed before the cache had locks
    child = FakeChild()
    monkeypatch.setattr(build, "_build_in_child", child)
    r = build.build_variant(V, load=False)
    assert child.calls == 1 and not r.cache_hit
    assert (stale / "build.log").read_text().startswith("ptxas info")
    assert build.build_variant(V, load=False).cache_hit  # and now it is a hit


def test_build_many_reports_every_variant(cache, monkeypatch):
    monkeypatch.setattr(build, "_build_in_child", FakeChild())
    vs = [parse_arm("w2", "b3-scalar"), parse_arm("w2", "b3-coop"), parse_arm("w13", "b4-scalar")]
    events: list = []
    build.build_many(vs[:1], load=False)  # one of them cached beforehand
    build.build_many(vs, max_jobs=2, load=False, progress=events.append)
    by = {}
    for e in events:
        by.setdefault(e.variant, []).append(e.state)
    assert by == {
        "w2:b3-scalar": ["cached"],
        "w2:b3-coop": ["started", "built"],
        "w13:b4-scalar": ["started", "built"],
    }


def test_cli_prints_one_line_per_step_when_not_a_terminal(cache, monkeypatch, capsys):
    from workbench import cli

    monkeypatch.setattr(build, "_build_in_child", FakeChild())
    assert cli.main(["build", "--kernel", "w2", "--no-calib", "--json"]) == 0
    out = capsys.readouterr()
    assert [r["variant"] for r in json.loads(out.out)] == [
        "w2:b4-scalar",
        "w2:b3-scalar",
        "w2:b3-coop",
    ]
    lines = out.err.splitlines()
    assert lines[0].startswith("building 3 variants for sm_90")
    for v in ("w2:b4-scalar", "w2:b3-scalar", "w2:b3-coop"):
        assert f"  {v}: compiling" in lines
        assert any(ln.startswith(f"  {v}: built in ") and ln.endswith(" s") for ln in lines)


# ------------------------------------------------------------------------------ compile tier

_CHILD = """
import json, sys
from workbench.kernels.build import build_variant
from workbench.kernels.variants import parse_arm
states = []
r = build_variant(parse_arm("w2", "b3-scalar"), progress=lambda e: states.append(e.state))
print(json.dumps({"hit": r.cache_hit, "sha": r.lib_sha256, "dir": r.build_dir,
                  "kernel": r.module.kernel, "states": states}))
"""


@pytest.mark.compile
def test_two_processes_build_into_one_cache(tmp_path):
    if reason := cuda_build_skip_reason():
        pytest.skip(reason)
    env = dict(os.environ, WORKBENCH_CACHE=str(tmp_path / "cache"), TORCH_CUDA_ARCH_LIST="9.0")
    repo = Path(__file__).resolve().parents[1]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    res = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    print(f"two concurrent builds: {time.perf_counter() - t0:.1f} s, {[r['states'] for r in res]}")
    assert sorted(r["hit"] for r in res) == [False, True]  # one compiled, the other waited
    assert res[0]["sha"] == res[1]["sha"] and res[0]["dir"] == res[1]["dir"]
    assert all(r["kernel"] == "w2" for r in res)
    log = (Path(res[0]["dir"]) / "build.log").read_text()
    assert "Used" in log and "registers" in log  # the whole ptxas report, never truncated
    assert "$ " in log and "nvcc" in log  # every command, as run
    cache = tmp_path / "cache" / "build"
    assert not [p for p in cache.iterdir() if p.name.startswith(".building-")]
