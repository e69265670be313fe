"""Bad command lines over every subcommand: exit 2, one line on stderr naming the bad argument,
nothing on stdout, and no GPU step reached (issue 15). Runs on a CPU machine; on a GPU machine the
GPU entry points are booby-trapped, so the order (arguments first) is checked there too."""

from __future__ import annotations

import pytest
from fixtures_sessions import REPO

from workbench import cli

SESSION = str(REPO / "sessions" / "20261129T141504Z_calibrate")
OTHER = str(REPO / "sessions" / "20261129T140359Z_default")
HUGE = "1000000000000"

# (argv, a text the one-line message must contain: the bad option and, where it helps, its value)
CASES: list[tuple[list[str], str]] = [
    # ab: the cases, then every bound
    (["ab", "--slug", "../escape"], "--slug '../escape'"),
    (["ab", "--slug", "a b"], "--slug 'a b'"),
    (["ab", "--slug", ".hidden"], "--slug '.hidden'"),
    (["ab", "--slug", "a/b"], "--slug 'a/b'"),
    (["ab", "--slug", ""], "--slug ''"),
    (["ab", "--slug", "x" * 65], "--slug 'xxxx"),
    (["ab", "--pairs", HUGE], f"--pairs {HUGE}"),
    (["ab", "--pairs", "0"], "--pairs 0"),
    (["ab", "--pairs", "x"], "--pairs"),
    (["ab", "--max-blocks", HUGE], "--max-blocks"),
    (["ab", "--blocks", HUGE], "--blocks"),
    (["ab", "--blocks", "0"], "--blocks"),
    (["ab", "--placement-seed", "-1"], "--placement-seed"),
    (["calibrate", "--trials", "0"], "--trials"),
    (["ab", "--calls", HUGE], "--calls"),
    (["ab", "--calls", "0"], "--calls 0"),
    (["ab", "--replays", HUGE], "--replays"),
    (["ab", "--retries", "1000"], "--retries 1000"),
    (["ab", "--budget", "1e12"], "--budget"),
    (["ab", "--budget", "nan"], "--budget nan"),
    (["ab", "--seed", str(2**40)], "--seed"),
    (["ab", "--seed", "-1"], "--seed -1"),
    (["ab", "--min-effect", "0.7"], "--min-effect 0.7"),
    (["ab", "--target", "inf", "--adaptive"], "--target inf"),
    # contradictory options (issue 33): refused before any work, the GPU check included
    (["ab", "--target", "0.01"], "--target 0.01 needs --adaptive"),
    (["calibrate", "--target", "0.01"], "--target 0.01 needs --adaptive"),
    (["ab", "--adaptive", "--blocks", "3", "--max-blocks", "2"], "--max-blocks 2 is below the 3"),
    (["report", SESSION, "--no-plots", "--plots-dir", "{tmp}/figs"], "contradicts --no-plots"),
    (["sessions", "compare", SESSION, SESSION], "compared with itself"),
    (["sessions", "compare", SESSION, SESSION + "/session.json"], "compared with itself"),
    (["ab", "--kernel", "nope"], "--kernel 'nope'"),
    (["ab", "--set", "cold"], "--set 'cold'"),
    (["ab", "--a", "b4-coop"], "--a 'b4-coop'"),
    (["ab", "--tp", "3"], "tp=3"),
    (["ab", "--hidden", HUGE], "hidden="),
    (["ab", "--experts", "0"], "experts=0"),
    (["ab", "--bogus"], "--bogus"),
    (["ab", "--sessions-dir", "{file}"], "--sessions-dir"),
    (["ab", "--plots-dir", "{file}"], "--plots-dir"),
    # calibrate
    (["calibrate", "--spins", f"0,{HUGE}"], "--spins"),
    (["calibrate", "--spins", "a,b"], "--spins 'a,b'"),
    (["calibrate", "--base-spin", HUGE], "--base-spin"),
    (["calibrate", "--base-spin", "-1"], "--base-spin -1"),
    (["calibrate", "--slug", "../up"], "--slug '../up'"),
    (["calibrate", "--pairs", HUGE], "--pairs"),
    (["calibrate", "--kernel", "step"], "--kernel step"),
    (["calibrate", "--arm", "nope"], "--arm 'nope'"),
    # check: validated before torch is asked about a GPU
    (["check", "--tp", "3"], "tp=3"),
    (["check", "--banks", "0"], "--banks 0"),
    (["check", "--banks", HUGE], "--banks"),
    (["check", "--kernel", "nope"], "--kernel 'nope'"),
    (["check", "--seed", "-1"], "--seed -1"),
    (["check", "--seed", str(2**40)], "--seed"),
    (["check", "--preset", "llama"], "preset='llama'"),
    (["check", "--top-k", "1000"], "top_k="),
    # checkpoint, and --checkpoint of ab and check (docs/DESIGN.md §3.8)
    (["ab", "--checkpoint", "/nonexistent/ckpt"], "checkpoint '/nonexistent/ckpt' does not exist"),
    (["ab", "--checkpoint", "{file}"], "is not a folder"),
    (["ab", "--rank", "1"], "--rank needs --checkpoint"),
    (["check", "--checkpoint", "/nonexistent/ckpt"], "checkpoint '/nonexistent/ckpt'"),
    (["checkpoint", "show", "/nonexistent/ckpt"], "checkpoint '/nonexistent/ckpt' does not exist"),
    (["checkpoint", "make", "{tmp}/c", "--group-size", "48"], "--group-size 48"),
    (
        ["checkpoint", "make", "{tmp}/c", "--layers", "48", "--experts", "512"],
        "would take 58.4 GiB",
    ),
    # the folder is checked before the size (issue 46)
    (["checkpoint", "make", "{file}/sub", "--layers", "48", "--experts", "512"], "is a file"),
    (["checkpoint", "make", "/proc/x", "--layers", "1", "--experts", "16"], "DIR '/proc/x'"),
    (["ab", "--sessions-dir", "/proc/x"], "--sessions-dir '/proc/x'"),
    (["ab", "--plots-dir", "/proc/x"], "--plots-dir '/proc/x'"),
    (["calibrate", "--sessions-dir", "{file}/sub"], "--sessions-dir"),
    (["capacity", "--bogus"], "workbench capacity: error: unrecognized arguments: --bogus"),
    (["sessions", "show", SESSION, "--bogus"], "workbench sessions show: error: unrecognized"),
    (["export", SESSION, "--format", "vllm", "--out", "-"], "--out - (stdout)"),
    (["export", SESSION, "--format", "per-shape", "--out", "-"], "--out - (stdout)"),
    (["plot", SESSION, "--out", "-"], "--out - (stdout)"),
    (["plot", SESSION, "--out", "/proc/x"], "--out '/proc/x'"),
    (["report", SESSION, "--plots-dir", "/proc/x"], "--plots-dir '/proc/x'"),
    (["tui", "--screenshot", "-"], "--screenshot - (stdout)"),
    (
        ["checkpoint", "make", "{file}", "--layers", "1", "--experts", "16"],
        "is a file, not a folder",
    ),
    (["checkpoint"], "ACTION"),
    # tune (docs/DESIGN.md §11; tests/test_tune.py has the rest of its bad arguments)
    (["tune", "--kernel", "w5"], "--kernel 'w5'"),
    (["tune", "--kernel", "w13", "--param", "unroll=7"], "'7' is not an allowed value of unroll"),
    (["tune", "--kernel", "w2", "--top", "-1"], "--top -1"),
    # build
    (["build", "--kernel", "w5"], "--kernel 'w5'"),
    (["build", "--kernel", ""], "--kernel ''"),
    (["build", "--jobs", "0"], "--jobs 0"),
    (["build", "--jobs", HUGE], "--jobs"),
    (["build", "--log", "w13:nope"], "--log 'w13:nope'"),
    # capacity: every dimension has an upper bound
    (["doctor", "--bogus"], "--bogus"),
    (["export", "--format", "yaml", "x"], "'yaml'"),
    (["export", "no-such-session"], "no-such-session"),
    (["capacity", "--hidden", HUGE], f"hidden={HUGE}"),
    (["capacity", "--inter", HUGE], "inter="),
    (["capacity", "--experts", HUGE], "experts="),
    (["capacity", "--layers", HUGE], "layers="),
    (["capacity", "--top-k", HUGE], "top_k="),
    (["capacity", "--tp", "128"], "tp=128"),
    (["capacity", "--kv-bytes-per-token", "0"], "--kv-bytes-per-token 0"),
    (["capacity", "--kv-bytes-per-token", HUGE], "--kv-bytes-per-token"),
    (["capacity", "--hidden", "100"], "hidden"),
    # sessions
    (
        ["sessions", "list", "--root", "/nonexistent/sessions"],
        "--sessions-dir '/nonexistent/sessions'",
    ),
    (["sessions", "list", "--sessions-dir", "{file}"], "--sessions-dir"),
    (["sessions", "show", "no-such-session"], "SESSION 'no-such-session'"),
    (["sessions", "show", SESSION, "--m", "-1"], "--m -1.0 must be a fraction in (0, 0.5)"),
    (["sessions", "show", SESSION, "--m", "nan"], "--m nan must be a fraction in (0, 0.5)"),
    (["sessions", "show", SESSION, "--m", "0"], "--m 0.0 must be a fraction in (0, 0.5)"),
    (["sessions", "compare", SESSION, "nope-nope"], "SESSION 'nope-nope'"),
    (["sessions", "pool", SESSION, SESSION], "its own replicate"),
    (["sessions", "pool", SESSION, OTHER + "/session.json", OTHER], "its own replicate"),
    (["sessions", "frob"], "ACTION"),
    (["sessions"], "ACTION"),
    # plot
    (["plot", SESSION, "--out", "{file}"], "--out"),
    (["plot", SESSION, "--format", "gif"], "--format 'gif'"),
    (["plot", "no-such-session"], "no-such-session"),
    # report
    (["report", SESSION, "--output", "{tmp}"], "--output"),
    (["report", SESSION, "--plots-dir", "{file}"], "--plots-dir"),
    (["report", "no-such-session"], "no-such-session"),
    # tui
    (["tui", "--nvml-interval", "0"], "--nvml-interval"),
    (["tui", "--run"], "--run"),
    (["tui", "--size", "100x40"], "--size '100x40'"),
    (["tui", "--screenshot", "{tmp}/s.svg", "--size", "10x5"], "--size '10x5'"),
    (["tui", "--screenshot", "{tmp}/s.svg", "--size", "wide"], "--size 'wide'"),
    (["tui", "--screenshot", "{tmp}"], "--screenshot"),
    (["tui", "--sessions", "{file}"], "--sessions"),
    (["plot", SESSION, "--floor-us", "w13/cold=1"], "--floor-us entry 'w13/cold=1'"),
    (["plot", SESSION, "--floor-us", "w13/hot=0"], "--floor-us entry 'w13/hot=0'"),
    (["plot", SESSION, "--floor-file", "/nonexistent/floor.txt"], "--floor-file"),
    (["plot", SESSION, "--floor-us", "w13/hot=2", "--floor-file", "{file}"], "--floor-file"),
    (["plot", SESSION, SESSION], "same session"),
    # the command itself
    (["nope"], "'nope'"),
]


@pytest.fixture
def no_gpu(monkeypatch):
    """Any GPU step reached before the arguments are rejected fails the test."""
    import torch

    from workbench.run import runner

    def boom(*a, **k):
        raise AssertionError("a GPU step was reached before the arguments were checked")

    monkeypatch.setattr(runner, "require_gpu", boom)
    monkeypatch.setattr(torch.cuda, "is_available", boom)


def _run(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as e:  # argparse's own errors
        return int(e.code)


def test_at_least_60_cases_over_every_subcommand():
    assert len(CASES) >= 60
    assert {a[0] for a, _ in CASES} >= set(cli.COMMANDS)


@pytest.mark.parametrize("argv, names", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_command_line_exits_2_with_one_line(no_gpu, capsys, tmp_path, argv, names):
    file = tmp_path / "a-file.txt"
    file.write_text("not a folder\n")
    argv = [a.replace("{file}", str(file)).replace("{tmp}", str(tmp_path)) for a in argv]
    code = _run(argv)
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2, (code, out.err)
    assert len(lines) == 1, out.err
    assert names in lines[0], lines[0]
    assert lines[0].startswith("workbench"), lines[0]
    assert "Traceback" not in out.err and out.out == ""
    assert [p.name for p in tmp_path.iterdir()] == ["a-file.txt"], "nothing may be written"
