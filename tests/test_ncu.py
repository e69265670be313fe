"""Nsight Compute's output read by workbench/measure/ncu.py, on outputs recorded on an H200
(tests/data/ncu/, ncu 2025.3.1: `workbench ab --counters` on the default shape at f46892d, hot
set; a run whose kernel filter matched nothing; one asking for a metric that does not exist)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.measure import ncu

DATA = Path(__file__).parent / "data" / "ncu"
HOT = (DATA / "h200_default_hot.csv").read_text()


def test_recorded_hot_set_parses_into_four_launches_in_order():
    got = ncu.parse_csv(HOT)
    assert [x.kernel_name for x in got] == ["w13_kernel(W13Params)"] * 2 + [
        "w2_kernel(W2Params)"
    ] * 2
    assert [x.grid for x in got] == ["(10, 10, 1)"] * 2 + ["(80, 1, 1)"] * 2
    m = [x.metrics for x in got]
    assert [x["registers"] for x in m] == [80, 83, 57, 58]
    assert [x["grid"] for x in m] == [100, 100, 80, 80]
    assert [x["block"] for x in m] == [512, 512, 800, 800]
    # "5,728" in ns, "3,122,688" in bytes: separators dropped, units to seconds and bytes
    assert m[0]["duration_s"] == pytest.approx(5.728e-6)
    assert m[0]["dram_read_bytes"] == 3_122_688 and m[0]["dram_write_bytes"] == 4_608
    assert m[0]["l2_bytes"] == 6_123_584
    assert m[0]["sm_hz"] == pytest.approx(1.839036e9)
    assert (m[0]["occupancy_pct"], m[0]["issue_pct"], m[0]["waves"]) == (23.2, 46.02, 0.76)
    assert m[0]["dram_pct"] == 11.42 and m[0]["l2_pct"] == 9.56
    assert all(v is not None for x in m for v in x.values())


def test_stalls_are_the_reasons_without_the_issuing_warp():
    first = ncu.parse_csv(HOT)[0]
    assert "selected" not in first.stalls and "not_selected" in first.stalls
    assert len(first.stalls) == 18
    assert first.top_stalls(3) == [
        ("long_scoreboard", 1.53),
        ("not_selected", 1.38),
        ("math_pipe_throttle", 1.32),
    ]


def _units_row_with(metric: str, unit: str) -> str:
    lines = HOT.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID"'))
    col = lines[start].split('","').index(metric)
    cells = lines[start + 1].split('","')
    cells[col] = unit
    lines[start + 1] = '","'.join(cells)
    return "\n".join(lines)


def test_a_unit_not_known_for_its_dimension_is_an_error_not_a_wrong_number():
    text = _units_row_with("gpu__time_duration.sum", "furlong")
    with pytest.raises(ncu.CountersFailed, match="gpu__time_duration.sum in 'furlong'"):
        ncu.parse_csv(text)
    usecond = ncu.parse_csv(_units_row_with("gpu__time_duration.sum", "usecond"))
    assert usecond[0].metrics["duration_s"] == pytest.approx(5728.0 * 1e-6)


def test_a_row_cut_short_is_refused():
    lines = HOT.rstrip("\n").splitlines()
    lines[-1] = lines[-1].rsplit(",", 3)[0]
    with pytest.raises(ncu.CountersFailed, match="row 3 has"):
        ncu.parse_csv("\n".join(lines))


def test_no_kernel_matched_is_one_line_naming_the_filter():
    text = (DATA / "h200_no_kernel_matched.txt").read_text()
    with pytest.raises(ncu.CountersFailed, match=r"none matched regex:\^\(w13\|w2\)_kernel"):
        ncu.check_log(text, 0)
    with pytest.raises(ncu.CountersFailed, match="no CSV header"):
        ncu.parse_csv(text)


def test_metrics_ncu_did_not_collect_read_as_none():
    got = ncu.parse_csv((DATA / "h200_unknown_metric.txt").read_text())
    assert [x.metrics["registers"] for x in got] == [80, 83]
    assert all(x.metrics["duration_s"] is None and not x.stalls for x in got)


def test_permission_and_other_errors():
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU"
    with pytest.raises(ncu.CountersUnavailable, match="ERR_NVGPUCTRPERM") as e:
        ncu.check_log(perm, 1)
    assert e.value.exit_code == 3
    with pytest.raises(ncu.CountersFailed, match="ncu: Failed to connect"):
        ncu.check_log("==PROF== x\n==ERROR== Failed to connect to process\n", 1)
    with pytest.raises(ncu.CountersFailed, match="status 7"):
        ncu.check_log(HOT, 7)
    ncu.check_log(HOT, 0)  # the recorded run: no error


def test_numbers():
    assert ncu.number("1,980,000") == 1_980_000 and ncu.number(" 0.76 ") == 0.76
    assert [ncu.number(t) for t in ("n/a", "", "inf", "x")] == [None] * 4


def _exe(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_find_ncu(tmp_path):
    with pytest.raises(ncu.CountersUnavailable, match="WORKBENCH_NCU='/nope'"):
        ncu.find_ncu({"WORKBENCH_NCU": "/nope"})
    with pytest.raises(ncu.CountersUnavailable, match="needs Nsight Compute"):
        ncu.find_ncu({"PATH": str(tmp_path)}, toolkits=())
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    found = _exe(tmp_path / "cuda" / "bin" / "ncu")
    assert ncu.find_ncu({"PATH": "", "CUDA_HOME": str(tmp_path / "cuda")}, ()) == str(found)
    assert ncu.find_ncu({"PATH": ""}, (str(tmp_path / "cu*" / "bin" / "ncu"),)) == str(found)
    assert ncu.find_ncu({"PATH": str(found.parent)}, ()) == os.path.join(found.parent, "ncu")


def test_command_profiles_only_the_kernels_and_keeps_clocks():
    hot = ncu.command("ncu", "log.csv", True, ["python3", "-m", "x"])
    rot = ncu.command("ncu", "log.csv", False, ["python3", "-m", "x"])
    assert hot[hot.index("--cache-control") + 1] == "none"
    assert rot[rot.index("--cache-control") + 1] == "all"
    assert hot[hot.index("--clock-control") + 1] == "none"
    assert hot[hot.index("--kernel-name") + 1] == ncu.KERNEL_FILTER
    assert hot[-3:] == ["python3", "-m", "x"] and "--page" in hot and "raw" in hot
