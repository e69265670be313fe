"""`workbench ab --counters` on the CPU: the counters file (workbench/store/counters.py), the
tables A beside B (workbench/analysis/counters.py), and the command after a timed run with a
stand-in ncu that replays the output recorded on an H200 (tests/data/ncu/), so the real
collection, parsing, session file, `sessions show` and report run; the real ncu runs in
tests/test_counters_gpu.py."""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path

import pytest

from workbench import cli
from workbench.analysis.counters import markdown_lines, tables, text_lines
from workbench.commands import ab
from workbench.core.errors import BadArgument, SessionError
from workbench.measure import counters
from workbench.report.markdown import render_report
from workbench.run.runner import RunResult
from workbench.store import counters as stored
from workbench.store.session import load_session

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "benchmarks" / "results" / "h200_counters" / "counters_default_f46892d.json"
HOT_CSV = Path(__file__).parent / "data" / "ncu" / "h200_default_hot.csv"
SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
SESSION = REPO / "sessions" / "20261130T171904Z_user-variant"  # any finished real session


def _doc() -> dict:
    return json.loads(RECORDED.read_text())


def test_recorded_counters_load_and_side_by_side():
    doc = stored.problem_of(_doc())
    assert doc is None
    got = tables(_doc())
    assert [t.cmp for t in got] == ["w13/hot", "w2/hot", "w13/rotating", "w2/rotating"]
    w13 = {r[0]: r[1:] for r in got[0].rows}
    assert (got[0].a, got[0].b) == ("b3-scalar", "b3-coop")
    assert w13["duration (us)"] == ("5.73", "5.22", "0.911")
    assert w13["grid (CTAs)"] == ("100", "100", "1.000")
    assert w13["stall long_scoreboard (cycles/issue)"] == ("1.53", "0.63", "0.412")
    assert w13["SM clock (MHz)"] == (
        "n/a",
        "n/a",
        "",
    )  # recorded before its metric's name was right
    # DRAM GB/s from the bytes over the duration: (3,122,688 + 4,608) B / 5.728 us
    assert w13["DRAM (GB/s)"][0] == f"{(3_122_688 + 4_608) / 5.728e-6 / 1e9:.0f}"
    rot = {r[0]: r[1:] for r in got[2].rows}
    assert rot["DRAM read+write (MB)"] == ("4.888", "4.893", "1.001")
    lines = text_lines(_doc())
    assert got[0].title in lines and any("5.73" in ln and "0.911" in ln for ln in lines)
    md = markdown_lines(_doc())
    assert "| duration (us) | 5.73 | 5.22 | 0.911 |" in md


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d.update(schema="workbench.counters/9"), "'schema'"),
        (lambda d: d["launches"][0].update(side="C"), "'side'"),
        (lambda d: d["launches"][1]["metrics"].update(duration_s="fast"), "'duration_s'"),
        (lambda d: d["launches"][2]["stalls"].update(wait=-1.0), "'wait'"),
        (lambda d: d["launches"].append(copy.deepcopy(d["launches"][0])), "appears twice"),
        (lambda d: d.pop("launches"), "'launches'"),
    ],
)
def test_a_bad_counters_file_is_one_line_naming_the_field(tmp_path, edit, field):
    doc = _doc()
    edit(doc)
    (tmp_path / stored.FILE).write_text(json.dumps(doc))
    with pytest.raises(SessionError, match=field) as e:
        stored.load(tmp_path)
    assert str(tmp_path / stored.FILE) in str(e.value) and "\n" not in str(e.value)


def test_no_counters_file_is_none_and_renders_nothing(tmp_path):
    assert stored.load(tmp_path) is None
    assert tables(None) == [] and text_lines(None) == [] and markdown_lines(None) == []
    (tmp_path / stored.FILE).write_text("{")
    with pytest.raises(SessionError, match="unreadable"):
        stored.load(tmp_path)


def test_missing_ncu_exits_3_in_one_line_before_any_timing(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("WORKBENCH_NCU", str(tmp_path / "ncu"))
    assert cli.main(["ab", "--counters", *SMALL, "--sessions-dir", str(tmp_path)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("workbench ab: WORKBENCH_NCU=") and "\n" not in err
    assert not any(tmp_path.iterdir()), "nothing was timed"


FAKE_NCU = """\
import shutil, sys
a = sys.argv[1:]
log = a[a.index("--log-file") + 1]
if {deny!r}:
    open(log, "w").write("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\\n")
    sys.exit(1)
if {crash!r}:
    open(log, "w").write("==ERROR== The application returned an error code (1).\\n")
    sys.stderr.write("Traceback (most recent call last):\\nRuntimeError: CUDA out of memory\\n")
    sys.exit(1)
shutil.copy({csv!r}, log)
open(log + ".args", "w").write(" ".join(a))
"""


def _fake_ncu(tmp_path: Path, deny: bool = False, crash: bool = False) -> Path:
    path = tmp_path / "ncu"
    text = FAKE_NCU.format(deny=deny, crash=crash, csv=str(HOT_CSV))
    path.write_text(f"#!{sys.executable}\n" + text)
    path.chmod(0o755)
    return path


def _timed_run(monkeypatch, tmp_path, order: list, exit_code: int = 0) -> Path:
    """`ab`'s timing stood in by a finished real session (copied): what --counters does after it
    runs for real; the timing itself is tests/test_ab_cli.py's."""
    folder = tmp_path / "sessions" / SESSION.name
    shutil.copytree(SESSION, folder)

    def drive(cfg, args):
        order.append("timed")
        return RunResult("complete", folder, {}), exit_code

    def finish_output(result, args, render):
        order.append("tables")
        return 0

    monkeypatch.setattr(ab, "drive", drive)
    monkeypatch.setattr(ab, "finish_output", finish_output)
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_ab_counters_after_the_timed_run(monkeypatch, capsys, tmp_path):
    order: list[str] = []
    folder = _timed_run(monkeypatch, tmp_path, order)
    before = _files(folder)
    monkeypatch.setenv("WORKBENCH_NCU", str(_fake_ncu(tmp_path)))
    assert cli.main(["ab", "--counters", "--kernel", "w13,w2", "--json"]) == 0
    out = capsys.readouterr()
    assert order == ["timed", "tables"]
    after = _files(folder)
    assert set(after) == {*before, stored.FILE}
    assert all(after[name] == data for name, data in before.items()), "the timed files moved"
    doc = stored.load(folder)
    assert [(x["cmp"], x["side"], x["arm"]) for x in doc["launches"]] == [
        (f"{k}/{s}", side, arm)
        for s in ("hot", "rotating")
        for k in ("w13", "w2")
        for side, arm in (("A", "b3-scalar"), ("B", "b3-coop"))
    ]
    args = {s: (folder / "counters" / f"{s}.csv.args").read_text() for s in ("hot", "rotating")}
    assert "--cache-control none" in args["hot"] and "--cache-control all" in args["rotating"]
    assert "workbench.measure.counters" in args["hot"]
    manifest = json.loads((folder / "counters" / "hot.json").read_text())
    assert manifest["shape"]["hidden"] == 2560 and manifest["items"] == [
        ["w13", "b3-scalar"], ["w13", "b3-coop"], ["w2", "b3-scalar"], ["w2", "b3-coop"]
    ]  # fmt: skip
    assert out.out == "" and "w13/hot: A b3-scalar, B b3-coop" in out.err  # --json: on stderr
    # sessions show and the report carry them
    assert cli.main(["sessions", "show", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert (
        "w2/rotating: A b3-scalar, B b3-coop" in shown and "scheduler issued (% of cycles)" in shown
    )
    report = render_report(folder)
    assert (
        "## Hardware counters" in report and "| registers per thread | 80 | 83 | 1.038 |" in report
    )


def test_ab_counters_without_permission_exits_3_and_keeps_the_session(
    monkeypatch, capsys, tmp_path
):
    order: list[str] = []
    folder = _timed_run(monkeypatch, tmp_path, order)
    monkeypatch.setenv("WORKBENCH_NCU", str(_fake_ncu(tmp_path, deny=True)))
    assert cli.main(["ab", "--counters", "--kernel", "w13"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("workbench ab: ncu may not read this GPU's performance counters")
    assert order == ["timed", "tables"] and stored.load(folder) is None
    assert load_session(folder).status == "complete"


def test_python_arms_and_step_get_no_counters():
    from workbench.cli import build_parser
    from workbench.commands.ab import config_from_args

    def plan(*argv):
        args = build_parser().parse_args(["ab", "--no-reference", *argv])
        return counters.plan(config_from_args(args).comparisons, args.a, args.b)

    items, notes = plan("--kernel", "w13", "--b", "triton-moe")
    assert items == [] and notes == [
        f"w13/{s}: no counters for a Python arm (b3-scalar vs triton-moe)"
        for s in ("hot", "rotating")
    ]
    assert plan("--kernel", "step") == ([], [])
    items, _ = plan("--kernel", "w2", "--set", "rotating", "--a", "b4-scalar")
    assert [(i.cmp, i.side, i.arm) for i in items] == [
        ("w2/rotating", "A", "b4-scalar"), ("w2/rotating", "B", "b3-coop")
    ]  # fmt: skip


def test_a_run_that_did_not_finish_gets_no_counters(monkeypatch, capsys, tmp_path):
    folder = _timed_run(monkeypatch, tmp_path, [], exit_code=130)
    monkeypatch.setenv("WORKBENCH_NCU", str(_fake_ncu(tmp_path)))
    assert cli.main(["ab", "--counters", "--kernel", "w13"]) == 130
    assert "counters: not recorded (the run ended with exit 130)" in capsys.readouterr().err
    assert stored.load(folder) is None


def test_a_crash_of_the_profiled_program_names_its_last_line(tmp_path):
    from workbench.data.shapes import PRESETS

    items = [counters.Item("w13/hot", "w13", "hot", "A", "b3-scalar", "b3-scalar")]
    fake = str(_fake_ncu(tmp_path, crash=True))
    with pytest.raises(counters.ncu.CountersFailed) as e:
        counters.collect(tmp_path, PRESETS["qwen3.8-flash-next"], 0, items, fake, say=print)
    assert str(e.value) == (
        "ncu: The application returned an error code (1) on the hot set "
        "(the program said: RuntimeError: CUDA out of memory)"
    )


def test_counters_is_a_run_setting_the_tui_entry_honours(monkeypatch, tmp_path):
    """RunSettings.counters reaches the runner's config, and run_session looks for ncu before it
    times anything (the CLI's order)."""
    from workbench.run.config import config_from_settings
    from workbench.run.runner import run_session
    from workbench.run.settings import RunSettings

    small = dict(hidden=64, inter=128, experts=8, top_k=2, tp=1)
    assert config_from_settings(RunSettings(**small, counters=True), tmp_path).counters
    assert not config_from_settings(RunSettings(**small), tmp_path).counters
    with pytest.raises(BadArgument, match="counters='yes' must be true or false"):
        RunSettings(**small, counters="yes").validate()
    monkeypatch.setenv("WORKBENCH_NCU", str(tmp_path / "ncu"))
    with pytest.raises(counters.ncu.CountersUnavailable, match="WORKBENCH_NCU="):
        run_session({**small, "counters": True}, tmp_path / "sessions")
    assert not (tmp_path / "sessions").exists(), "nothing was timed"
