"""`workbench sessions list | show | compare` on sessions written here with SessionWriter."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from workbench.analysis import comparison_results
from workbench.analysis.table import headers
from workbench.cli import main
from workbench.commands._tables import RESULT_COLUMNS
from workbench.store.session import SessionWriter, load_session


def write_session(
    root, slug, effects, *, seed=0, pairs=12, gpu="NVIDIA H200", src="a" * 64, finish=True
):
    rng = np.random.default_rng(seed)
    w = SessionWriter(
        root,
        slug,
        {"preset": "qwen3.8-flash-next", "calls": 48, "pairs": pairs, "m": 0.01},
        {
            "version": "0.1.0",
            "git": {"commit": "1234567890ab", "dirty": True},
            "files": {"csrc/w13.cu": src},
        },
        {"gpu": {"name": gpu, "driver": "570.1", "cuda": "12.8"}},
    )
    for cid, ratio in effects.items():
        kernel, xset = cid.split("/")
        w.record(
            "comparison",
            id=cid,
            kernel=kernel,
            set=xset,
            role="main",
            a="b3-scalar",
            b="b3-coop",
            calls=48,
            replays=20,
        )
        w.record("gate", cmp=cid, ok=True)
        for p in range(pairs):
            for slot, arm in enumerate("ABBA" if p % 2 == 0 else "BAAB"):
                ms = 0.6 * (ratio if arm == "B" else 1.0) * math.exp(rng.normal(0, 0.01))
                w.record(
                    "sample",
                    cmp=cid,
                    pair=p,
                    slot=slot,
                    arm=arm,
                    ms=ms,
                    flagged=(p == 3 and slot == 0),
                )
    if finish:
        w.finish()
    return w.path


@pytest.fixture
def root(tmp_path):
    write_session(
        tmp_path, "h200-ab", {"w13/hot": 0.93, "w13/rotating": 0.92, "w2/hot": 1.1}, seed=1
    )
    write_session(
        tmp_path,
        "v100-ab",
        {"w13/hot": 0.95, "w2/hot": 1.12},
        seed=2,
        gpu="Tesla V100",
        src="b" * 64,
        finish=False,
    )
    return tmp_path


def test_list_text_and_json(root, capsys):
    assert main(["sessions", "list", "--root", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    cells = [re.split(r"\s{2,}", line) for line in out]
    assert cells[0] == [
        "session",
        "when (UTC)",
        "status",
        "GPU",
        "commit",
        "sources",
        "recommendation",
    ]
    # newest first; the unfinished V100 run was written last
    assert cells[1][0].endswith("_v100-ab") and cells[1][2:4] == ["interrupted", "Tesla V100"]
    assert cells[2][0].endswith("_h200-ab")
    assert cells[2][2:5] == ["complete", "NVIDIA H200", "1234567890+"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", cells[2][1])
    # both recorded made-up csrc/ hashes: stale against the working tree
    assert cells[2][5].endswith(" STALE") and cells[1][5] != cells[2][5]
    assert cells[2][6] == "-"  # no summary stored by these writers: no recommendation
    assert "STALE: kernel sources (csrc/) differ" in out[-1]
    assert main(["sessions", "list", "--root", str(root), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert [s["slug"] for s in js["sessions"]] == ["v100-ab", "h200-ab"]
    assert js["sessions"][0]["status"] == "interrupted" and js["skipped"] == []
    assert "csrc/w13.cu" in js["sessions"][1]["stale"]
    assert js["sessions"][1]["commit"] == "1234567890"


def test_list_reports_unreadable_and_missing_root(root, tmp_path, capsys):
    bad = root / "20200101T000000Z_bad"
    bad.mkdir()
    (bad / "session.json").write_text("{trunc")
    assert main(["sessions", "list", "--root", str(root)]) == 0
    cap = capsys.readouterr()
    assert "20200101T000000Z_bad" not in cap.out and "skipped 20200101T000000Z_bad" in cap.err
    assert "h200-ab" in cap.out and "v100-ab" in cap.out
    assert main(["sessions", "list", "--root", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("does not exist") and "none" in err and len(err.splitlines()) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["sessions", "list", "--root", str(empty)]) == 0
    assert "no sessions under" in capsys.readouterr().out


def test_show_text(root, capsys):
    assert main(["sessions", "show", "h200", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "(complete)" in out and "NVIDIA H200 (driver 570.1, cuda 12.8)" in out
    assert "1234567890 (dirty)" in out and 'preset="qwen3.8-flash-next"' in out
    s = load_session(next(root.glob("*_h200-ab")))
    # the one comparison table's columns (workbench.analysis.table), as `workbench ab` prints them
    header = next(ln for ln in out.splitlines() if ln.startswith("comparison "))
    assert header.split() == " ".join(headers(RESULT_COLUMNS)).split()
    for r in comparison_results(s):
        row = next(ln for ln in out.splitlines() if ln.startswith(r.id + " "))
        assert (
            f"{r.verdict.median:.4f}" in row
            and f"[{r.verdict.ci_low:.4f}, {r.verdict.ci_high:.4f}]" in row
        )
        assert row.split()[-1] == r.verdict.verdict and f"{r.a_ms:.4f}" in row
    assert "recommendation w13: cooperative (b3-coop)" in out
    assert "recommendation w2: scalar (b3-scalar)" in out and "rule: Take the cooperative" in out


def test_show_json_by_path_and_latest(root, capsys):
    path = next(root.glob("*_h200-ab"))
    assert main(["sessions", "show", str(path), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["status"] == "complete" and js["m"] == 0.01
    ids = [c["id"] for c in js["comparisons"]]
    assert ids == ["w13/hot", "w13/rotating", "w2/hot"]
    assert (
        js["comparisons"][0]["flagged"] == 1
        and js["comparisons"][0]["verdict"]["verdict"] == "FASTER"
    )
    assert [r["decision"] for r in js["recommendations"]] == ["cooperative", "scalar"]
    assert main(["sessions", "show", "latest", "--root", str(root), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["status"] == "interrupted" and any("running" in w for w in js["warnings"])


def test_show_with_m_override(root, capsys):
    assert main(["sessions", "show", "h200-ab", "--root", str(root), "--m", "0.2", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["m"] == 0.2 and {c["verdict"]["verdict"] for c in js["comparisons"]} == {"SAME"}


def test_compare_text_and_json(root, capsys):
    assert main(["sessions", "compare", "h200", "v100", "--root", str(root)]) == 0
    cap = capsys.readouterr()
    assert "!! WARNING: KERNEL SOURCES DIFFER: csrc/w13.cu" in cap.out
    assert "!! WARNING: SESSION B IS INTERRUPTED" in cap.out
    assert "different GPUs: NVIDIA H200 vs Tesla V100" in cap.out
    assert "only in A: w13/rotating" in cap.out and "WARNING(S)" in cap.err
    row = next(ln for ln in cap.out.splitlines() if ln.startswith("w2/hot "))
    assert "SLOWER/SLOWER" in row
    assert main(["sessions", "compare", "h200", "v100", "--root", str(root), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in js["shifts"]] == ["w13/hot", "w2/hot"]
    s = js["shifts"][0]
    assert s["shift"] == pytest.approx(s["b"]["verdict"]["median"] - s["a"]["verdict"]["median"])
    assert s["shift_low"] <= s["shift"] <= s["shift_high"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sessions", "show", "nothing-like-this"], "SESSION 'nothing-like-this' not found"),
        (["sessions", "show", "ab"], "SESSION 'ab' is ambiguous"),
        (["sessions", "compare", "h200", "missing"], "SESSION 'missing' not found"),
        (
            ["sessions", "show", "h200", "--m", "-1"],
            "--m -1.0 must be a fraction in (0, 0.5)",
        ),
    ],
)
def test_bad_arguments_exit_2(root, capsys, argv, message):
    assert main([*argv, "--root", str(root)]) == 2
    assert message in capsys.readouterr().err


def test_broken_session_exit_2_naming_the_file(root, capsys):
    path = next(root.glob("*_h200-ab"))
    (path / "session.json").write_text('{"schema": "workbench.session/7"}')
    assert main(["sessions", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown schema 'workbench.session/7'" in err and "session.json" in err


def test_action_is_required(capsys):
    with pytest.raises(SystemExit) as e:
        main(["sessions"])
    assert e.value.code == 2
