"""Defects a newcomer hit in the browsing commands (issue 25, "CLI"), each pinned by a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_sessions import REPO, write_session

from workbench.cli import main

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

REAL = REPO / "sessions"
BIG = "20261130T142955Z_calibrate-w13-trials"  # its `show` is far longer than a pipe's buffer


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    write_session(root, seed=3, slug="older")
    write_session(root, seed=4, slug="newer")
    return root


@pytest.mark.parametrize("command", ["report", "plot"])
def test_report_and_plot_take_the_bare_names_sessions_show_takes(
    sessions, tmp_path, capsys, command
):
    name = next(sessions.glob("*_newer")).name
    # plot draws one figure (the names are what is checked): every form, as for report
    extra = ["--no-plots"] if command == "report" else ["--out", str(tmp_path / "p")]
    extra += ["--figure", "ratios", "--format", "svg"] if command == "plot" else []
    forms = (name, "newer", name[:15] + "Z_new")
    for arg in forms:
        rc = main([command, arg, "--root", str(sessions), *extra])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert name in out
    rc = main([command, "nothing-like-it", "--root", str(sessions), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "'nothing-like-it' not found" in err and len(err.splitlines()) == 1
    rc = main([command, "_", "--root", str(sessions), *extra])
    assert rc == 2 and "ambiguous" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["sessions", "show", BIG, "--root", str(REAL)],
        ["sessions", "list", "--json", "--root", str(REAL)],
        ["sessions", "show", "--json", BIG, "--root", str(REAL)],
        ["capacity"],  # rich's Console: it exited 1 on its own
        ["capacity", "--json"],
        ["doctor"],
        ["doctor", "--json"],
    ],
)
def test_piping_into_head_gives_no_traceback(argv):
    """`| head -1` that has already left: every write to stdout meets a closed pipe."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first byte (deterministic, unlike a real head)
    p = subprocess.run(
        [sys.executable, "-m", "workbench", *argv], stdout=w, stderr=subprocess.PIPE, cwd=REPO
    )
    os.close(w)
    err = p.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert err == "" and p.returncode == 141


@pytest.mark.parametrize("value", ["0", "0.5", "0.7", "2", "-0.01", "nan", "inf"])
def test_min_effect_has_one_rule_everywhere(sessions, capsys, value):
    """ab, calibrate and tune --min-effect and sessions show/compare/pool --m: (0, 0.5)."""
    name = next(sessions.glob("*_newer")).name
    for argv, option in (
        (["ab", "--min-effect", value], "--min-effect"),
        (["calibrate", "--min-effect", value], "--min-effect"),
        (["sessions", "show", name, "--root", str(sessions), "--m", value], "--m"),
        (["sessions", "compare", name, name, "--root", str(sessions), "--m", value], "--m"),
    ):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        assert f"{option} {float(value)!r} must be a fraction in (0, 0.5)" in err, (argv, err)
        assert "above" not in err and len(err.splitlines()) == 1


def test_min_effect_inside_the_rule_is_taken(sessions, capsys):
    name = next(sessions.glob("*_newer")).name
    assert main(["sessions", "show", name, "--root", str(sessions), "--m", "0.49"]) == 0
    assert "m = 49 %" in capsys.readouterr().out


def _session_with(
    root: Path, slug: str, ids: list[str], files: dict | None = None, config: dict | None = None
) -> Path:
    """A small complete session whose comparisons are ``ids`` (B 8 % faster in each)."""
    from workbench.store.session import SessionWriter

    prov = {"files": files or {"csrc/w13.cu": "a" * 64}}
    cfg = {"m": 0.01, **(config or {})}
    w = SessionWriter(root, slug, cfg, prov, {"gpu": {"name": "NVIDIA H200"}})
    for cid in ids:
        kernel, set_ = cid.split("/")
        w.record("comparison", id=cid, kernel=kernel, set=set_, role="main", a="b3-scalar",
                 b="b3-coop", calls=48, replays=20)  # fmt: skip
        for p in range(8):
            for slot, arm in enumerate("ABBA" if p % 2 == 0 else "BAAB"):
                ms = (0.5 if arm == "A" else 0.46) * (1 + 0.001 * ((p * 7 + slot * 3) % 5))
                w.record("sample", cmp=cid, pair=p, slot=slot, arm=arm, ms=ms)
    w.finish()
    return w.path


def test_compare_and_pool_with_nothing_in_common_exit_2(tmp_path, capsys):
    a = _session_with(tmp_path, "a", ["w13/hot"])
    b = _session_with(tmp_path, "b", ["w2/hot"])
    c = _session_with(tmp_path, "c", ["w2/rotating"])
    rc = main(["sessions", "compare", str(a), str(b)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert "no comparison in common" in err and "A: w13/hot; B: w2/hot" in err
    rc = main(["sessions", "pool", str(a), str(b), str(c)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "no comparison in common" in err
    assert len(err.strip().splitlines()) == 1


def test_pool_refuses_sessions_of_different_kernel_sources(tmp_path, capsys):
    """One line, exit 2: the refusal export makes too (analysis.pool.check_poolable, both)."""
    ids = ["w13/hot"]
    one = _session_with(tmp_path, "one", ids, {"csrc/w13.cu": "a" * 64, "csrc/w2.cu": "c" * 64})
    two = _session_with(tmp_path, "two", ids, {"csrc/w13.cu": "b" * 64, "csrc/w2.cu": "c" * 64})
    rc = main(["sessions", "pool", str(one), str(two)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "measured different kernel sources (csrc/w13.cu)" in line, line


def test_pool_warnings_come_first_grouped_and_name_the_sessions(tmp_path, capsys):
    ids = ["w13/hot", "w13/rotating"]
    one = _session_with(tmp_path, "one", ids, config={"calls": 48, "replays": 20})
    others = [
        _session_with(tmp_path, f"r{i}", ids, config={"calls": 48, "replays": 30}) for i in range(3)
    ]
    rc = main(["sessions", "pool", str(one), *map(str, others)])
    out, err = capsys.readouterr()
    assert rc == 0
    warnings = [ln for ln in err.splitlines() if "WARNING" in ln]
    assert len(warnings) == 1, err  # one difference shared by three sessions: one line
    assert "PROTOCOL DIFFERS (config): replays 20 vs 30" in warnings[0], warnings[0]
    for i, p in enumerate(others, 2):
        assert f"{i} {p.name}" in warnings[0]
    assert f"against session 1 {one.name}" in warnings[0]


def test_pool_warnings_are_printed_before_the_table(tmp_path):
    ids = ["w13/hot"]
    one = _session_with(tmp_path, "one", ids, config={"replays": 20})
    two = _session_with(tmp_path, "two", ids, config={"replays": 30})
    p = subprocess.run(
        [sys.executable, "-m", "workbench", "sessions", "pool", str(one), str(two)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        text=True,
        check=True,
    )
    lines = p.stdout.splitlines()
    warn = next(i for i, ln in enumerate(lines) if "WARNING" in ln)
    table = next(i for i, ln in enumerate(lines) if ln.startswith("comparison"))
    assert warn < table


def test_compare_never_says_unchanged_beside_two_different_verdicts(tmp_path, capsys, monkeypatch):
    from workbench.analysis.compare import Shift

    a = _session_with(tmp_path, "a", ["w13/hot"])
    b = _session_with(tmp_path, "b", ["w13/hot"])
    # the same timings in both: the same verdict, and the JSON says so
    rc = main(["sessions", "compare", "--json", str(a), str(b)])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["shifts"][0]["verdict_changed"] is False
    monkeypatch.setattr(Shift, "verdict_changed", property(lambda self: True))
    rc = main(["sessions", "compare", str(a), str(b)])
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("w13/hot"))
    assert rc == 0 and row.rstrip().endswith("verdict only"), row


def test_a_complete_session_with_an_empty_journal_is_refused(tmp_path, capsys):
    s = _session_with(tmp_path, "empty", [])
    for argv in (["sessions", "show", str(s)], ["report", str(s), "--no-plots"]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and "journal.jsonl holds no records" in err and "'complete'" in err
        assert len(err.strip().splitlines()) == 1


def test_an_interrupted_session_with_an_empty_journal_still_loads(tmp_path):
    from workbench.store.session import SessionWriter, load_session

    w = SessionWriter(tmp_path, "killed", {}, {}, {})
    w.finish("interrupted")
    assert load_session(w.path).status == "interrupted"


def test_a_garbage_last_nvml_line_is_a_bad_reading_not_a_killed_writer(tmp_path):
    from workbench.store.session import load_session

    s = _session_with(tmp_path, "nv", ["w13/hot"])
    good = json.dumps({"t": 1.8e9, "sm_mhz": 1980.0})
    (s / "nvml.jsonl").write_text(f"{good}\n{good}\nthis is not json\n")
    w = load_session(s).warnings
    assert not any("killed" in x for x in w), w
    assert any("1 bad reading(s) skipped (first: line 3" in x for x in w), w
    (s / "nvml.jsonl").write_text(f"{good}\n{good[:-9]}")  # cut short, no newline: killed
    w = load_session(s).warnings
    assert any("truncated last NVML record" in x and "killed" in x for x in w), w


def test_session_json_is_written_with_the_umask_mode(tmp_path):
    import stat

    old = os.umask(0o022)
    try:
        s = _session_with(tmp_path, "modes", ["w13/hot"])
    finally:
        os.umask(old)
    for name in ("session.json", "journal.jsonl", "nvml.jsonl"):
        assert stat.S_IMODE((s / name).stat().st_mode) == 0o644, name


def test_report_numerics_gives_each_checked_comparison_once(capsys):
    """A session with 6 blocks checks each peer 6 times: one line per comparison, not six."""
    rc = main(["report", "20261130T201628Z_default-r1", "--root", str(REAL), "--no-plots"])
    out = capsys.readouterr().out
    assert rc == 0
    peers = [ln for ln in out.splitlines() if "(not bit-identical by design)" in ln]
    assert len(peers) == len(set(peers)) == 8, peers
    assert all("(6 checks, 6 within)" in ln for ln in peers)


def test_checkpoint_show_json_into_a_closed_pipe(tmp_path):
    ckpt = tmp_path / "ckpt"
    assert main(["checkpoint", "make", str(ckpt), "--layers", "1", "--experts", "16"]) == 0
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run(
        [sys.executable, "-m", "workbench", "checkpoint", "show", "--json", str(ckpt)],
        stdout=w,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    os.close(w)
    err = p.stderr.decode()
    assert "Traceback" not in err and err == "" and p.returncode == 141, err
