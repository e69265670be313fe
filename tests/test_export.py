"""`workbench export` and the engine-side reader `workbench.core.decision` (docs/EXPORT.md).

The choices must be the analysis model's (one session: `analyse`; several: `pool_sessions`),
sessions of several GPUs of one model merge into one entry, and `resolve` follows the seed's
rules: evidence decides the default, no evidence falls back to b4-scalar with a message, an
explicit request that cannot be served fails closed, an explicit off is honoured.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_sessions import write_session

from workbench import cli
from workbench.analysis import analyse, pool_sessions
from workbench.analysis.fleet import fleet
from workbench.core import decision
from workbench.core.errors import BadArgument
from workbench.report import decisions
from workbench.store.session import load_session

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO / "sessions"
# Ten-run replicate set on one H200 plus r11 on another H200, all on one source tree.
SAME_TREE = ["20261130T142829Z_default-r1", "20261130T143109Z_default-r2",
             "20261130T152501Z_default-r11"]  # fmt: skip
QWEN = "E=512,N=160,K=2560,group=32,tp=4"  # qwen3.8-flash-next at tp 4: inter 640 / 4


def real(*names):
    return [load_session(SESSIONS / n) for n in names]


def synthetic(tmp_path, seed, uuid=None, name=None, files=None):
    """A fixture session (w13: coop 7.5 % faster; w2: coop 12 % slower) on a chosen GPU."""
    path = write_session(tmp_path / f"s{seed}", seed=seed, slug=f"fx{seed}", pairs=8, nvml=False)
    meta = json.loads((path / "session.json").read_text())
    if uuid:
        meta["environment"]["gpu"]["uuid"] = uuid
    if name:
        meta["environment"]["gpu"]["name"] = name
    if files:
        meta["provenance"]["files"].update(files)
    (path / "session.json").write_text(json.dumps(meta))
    return path


# ------------------------------------------------------------------------ the light module


def test_importing_the_engine_module_pulls_in_nothing_heavy():
    code = "import sys, workbench.core.decision; print('\\n'.join(sorted(sys.modules)))"
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, cwd=REPO).stdout.split())  # fmt: skip
    heavy = {"numpy", "torch", "scipy", "matplotlib", "textual", "rich", "triton"}
    assert not heavy & mods
    assert {m for m in mods if m.startswith("workbench")} == {
        "workbench", "workbench.core", "workbench.core.decision"
    }  # fmt: skip


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H200", "NVIDIA_H200"),
        ("NVIDIA H200 NVL", "NVIDIA_H200"),  # one family, one file
        ("NVIDIA_H200", "NVIDIA_H200"),  # already a key
        ("NVIDIA H100 80GB HBM3", "NVIDIA_H100_80GB_HBM3"),
        ("NVIDIA H20", "NVIDIA_H20"),  # not the H200 family
        ("Tesla V100-PCIE-32GB", "Tesla_V100-PCIE-32GB"),
    ],
)
def test_device_names_are_keyed_as_vllm_keys_them(name, key):
    assert decision.device_key(name) == key
    assert decision.device_key(key) == key


def test_shape_keys_and_file_names():
    shape = {"hidden": 2560, "inter": 640, "experts": 512, "top_k": 10, "tp": 4, "group": 32}
    s = decision.ShapeKey.of(shape)
    assert s.key() == QWEN and decision.ShapeKey.of(QWEN) == s
    assert decision.file_name("NVIDIA H200", s) == "E=512,N=160,device_name=NVIDIA_H200.json"
    for bad, names in [("E=512,N=160", "K=None"), ({**s.__dict__, "tp": 0}, "tp=0"),
                       ({**s.__dict__, "E": 51.5}, "E=51.5"), ("E512", "E512")]:  # fmt: skip
        with pytest.raises(decision.DecisionError, match=names):
            decision.ShapeKey.of(bad)


# ------------------------------------------------------------------------ export


def test_one_session_gives_the_analysis_models_choice_and_numbers():
    (s,) = real("20261130T195329Z_default-r1")
    doc, notes = decisions.build([s])
    # one board's decision, written as that board's, said on stderr (--model refuses it)
    assert notes == [
        f"NVIDIA_H200 {QWEN} rests on one board (GPU-815b9d32, 1 session(s)): a decision for "
        "the GPU model needs sessions of two or more boards, pooled with the board as the unit: "
        "written as that board's (scope 'board')"
    ]
    e = doc["devices"]["NVIDIA_H200"]["shapes"][QWEN]
    a = analyse(s)
    for kernel in ("w13", "w2"):
        got, rec = e["layouts"]["b3"][kernel], a.recommendations[kernel]
        assert (got["arm"], got["decision"], got["evidence"]) == (
            rec.arm,
            rec.decision,
            rec.evidence,
        )
        for r in a.results:
            if r.id in (f"{kernel}/hot", f"{kernel}/rotating"):
                row = got["sets"][r.set]
                assert row["verdict"] == r.verdict.verdict and row["ratio"] == r.verdict.median
                assert row["ci"] == [r.verdict.ci_low, r.verdict.ci_high]
                assert row["blocks"] == r.verdict.blocks == 6 and row["pairs"] == r.verdict.n
    assert e["layouts"]["b3"]["w13"]["reader"] == "coop"  # README: coop wins W13 on the H200
    assert e["layouts"]["b3"]["w2"]["reader"] == "scalar"
    assert e["layouts"]["b4"]["w13"]["arm"] == "b4-scalar"
    assert e["sessions"][0]["id"] == s.name
    assert e["sources"]["files"] == s.provenance["files"]
    assert e["sources"]["builds"][s.name]["w13:b3-coop"] == s.provenance["builds"]["w13:b3-coop"]


def test_sessions_of_two_gpus_merge_into_one_pooled_entry():
    ss = real(*SAME_TREE)
    assert len({s.environment["gpu"]["uuid"] for s in ss}) == 2  # two H200s
    doc, notes = decisions.build(ss, model=True)  # two boards: the model's decision
    assert list(doc["devices"]) == ["NVIDIA_H200"] and notes == []
    (e,) = doc["devices"]["NVIDIA_H200"]["shapes"].values()
    assert [x["id"] for x in e["sessions"]] == SAME_TREE
    assert e["scope"] == "model" and [b["sessions"] for b in e["boards"]] == [SAME_TREE[:2],
                                                                             SAME_TREE[2:]]  # fmt: skip
    pool = pool_sessions(ss)
    model = fleet(pool)
    rows, levels = {r.id: r for r in pool.rows}, {r.id: r for r in model.results}
    for rec in model.recommendations:  # the rule on the intervals over boards decides
        got = e["layouts"]["b3"][rec.kernel]
        assert got["pooled"] == 3 and (got["arm"], got["evidence"]) == (rec.arm, rec.evidence)
        assert got["scope"] == "model"
        hot = got["sets"]["hot"]
        row, b = rows[f"{rec.kernel}/hot"], levels[f"{rec.kernel}/hot"]
        assert hot["ratio"] == row.estimate == b.verdict.median
        assert (hot["verdict"], hot["runs_verdict"]) == (b.verdict.verdict, row.verdict)
        assert hot["session_verdicts"] == row.words  # pool's words
        assert hot["blocks"] == [6, 6, 6] and hot["method"] == "boards"
        assert hot["covered"] == row.covered == model.checks[b.id].held
        # two boards, the board the unit: the interval is over the boards' estimates, and a
        # run is judged against the others of its board (two and one: none has three)
        assert len(row.board_groups()) == 2 and hot["ci"] == list(row.interval)
        assert row.coverage() is None and hot["coverage"] is None
        assert "over 2 boards (3 runs)" in hot["interval"] and "(1 df)" in hot["interval"]
    # a wider minimum effect: each run's interval lies inside the 5 % band (SAME), but the
    # interval over two boards (t with 1 df) does not: the model's verdict is not resolved
    wide, _ = decisions.build(ss, m=0.05)
    w13 = wide["devices"]["NVIDIA_H200"]["shapes"][QWEN]["layouts"]["b3"]["w13"]
    hot, rot = w13["sets"]["hot"], w13["sets"]["rotating"]
    assert (hot["verdict"], hot["words"], hot["runs_verdict"]) == ("AMBIGUOUS", "FASTER~m", "SAME")
    assert rot["verdict"] == "FASTER" and w13["decision"] == "cooperative"
    # each session's words: SAME, its interval below 1 inside the m band
    assert hot["session_verdicts"] == ["FASTER<m"] * 3


def test_synthetic_sessions_merge_per_device_and_split_by_device(tmp_path):
    paths = [synthetic(tmp_path, 1, uuid="GPU-a"), synthetic(tmp_path, 2, uuid="GPU-b"),
             synthetic(tmp_path, 3, name="NVIDIA H100 80GB HBM3")]  # fmt: skip
    doc, _ = decisions.build([load_session(p) for p in paths])
    assert sorted(doc["devices"]) == ["NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"]
    h200 = doc["devices"]["NVIDIA_H200"]["shapes"][QWEN]
    assert [x["gpu_uuid"] for x in h200["sessions"]] == ["GPU-a", "GPU-b"]
    # the fixture's known effects: coop 7.5 % faster on w13, 12 % slower on w2
    assert h200["layouts"]["b3"]["w13"]["arm"] == "b3-coop"
    assert h200["layouts"]["b3"]["w2"]["arm"] == "b3-scalar"
    assert h200["layouts"]["b3"]["w2"]["sets"]["hot"]["verdict"] == "SLOWER"
    h100 = doc["devices"]["NVIDIA_H100_80GB_HBM3"]["shapes"][QWEN]
    assert h100["layouts"]["b3"]["w13"]["pooled"] == 1


def test_an_entry_says_whose_decision_it_is_and_model_refuses_one_boards(tmp_path):
    """Two boards: the model's (scope "model", the boards named, the engine's message says so).
    Two runs of one board: written as that board's with a note, and refused by --model in one
    line naming the board; runs without a recorded board are no model's either."""
    two = [load_session(synthetic(tmp_path, s, uuid=u)) for s, u in ((1, "GPU-a"), (2, "GPU-b"))]
    doc, notes = decisions.build(two, model=True)
    e = doc["devices"]["NVIDIA_H200"]["shapes"][QWEN]
    assert notes == [] and e["scope"] == "model"
    assert e["boards"] == [{"board": "GPU-a", "sessions": [two[0].name]},
                           {"board": "GPU-b", "sessions": [two[1].name]}]  # fmt: skip
    assert decision.resolve(doc, "NVIDIA H200", QWEN).message.endswith(
        f"(evidence: {two[0].name}, {two[1].name}; the model's, over 2 boards)"
    )
    one = [load_session(synthetic(tmp_path, s, uuid="GPU-c")) for s in (3, 4)]
    doc, notes = decisions.build(one)
    e = doc["devices"]["NVIDIA_H200"]["shapes"][QWEN]
    assert e["scope"] == "board" and e["layouts"]["b3"]["w13"]["scope"] == "board"
    assert notes == [
        f"NVIDIA_H200 {QWEN} rests on one board (GPU-c, 2 session(s)): a decision for the GPU "
        "model needs sessions of two or more boards, pooled with the board as the unit: written "
        "as that board's (scope 'board')"
    ]
    assert f"(evidence: {one[0].name}, {one[1].name}; GPU-c's, not the model's)" in (
        decision.resolve(doc, "NVIDIA H200", QWEN).message
    )
    with pytest.raises(BadArgument, match=r"^--model: NVIDIA_H200 E=512.* rests on one board "
                       r"\(GPU-c, 2 session\(s\)\).*export without --model$"):  # fmt: skip
        decisions.build(one, model=True)
    for s in one:  # no board recorded
        meta = json.loads((s.path / "session.json").read_text())
        meta["environment"]["gpu"]["uuid"] = None
        (s.path / "session.json").write_text(json.dumps(meta))
    with pytest.raises(BadArgument, match=r"its 2 session\(s\) record no board \(GPU UUID\)"):
        decisions.build([load_session(s.path) for s in one], model=True)


def test_sessions_of_different_sources_are_refused(tmp_path):
    a = synthetic(tmp_path, 1)
    b = synthetic(tmp_path, 2, files={"csrc/kernels/w13.cuh": "0" * 64})
    sessions = [load_session(a), load_session(b)]
    with pytest.raises(BadArgument, match=r"different kernel sources \(csrc/kernels/w13.cuh\)"):
        decisions.build(sessions)
    # pooling refuses them by the same rule (analysis.pool.check_poolable), not with a warning
    with pytest.raises(BadArgument, match=r"different kernel sources \(csrc/kernels/w13.cuh\)"):
        pool_sessions(sessions)


def test_pool_and_export_refuse_the_same_mix_with_the_same_line(capsys):
    """`sessions pool` and `export` of two committed sessions of different source trees: exit 2
    and one line each, the same line but for the command's name."""
    names = ["20261130T195329Z_default-r1", "20261130T142829Z_default-r1"]
    lines = {}
    for cmd in (["export"], ["sessions", "pool"]):
        assert cli.main([*cmd, "--root", str(SESSIONS), *names]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "different kernel sources" in err, err
        lines[cmd[-1]] = err.split(": ", 1)[1]
    assert lines["export"] == lines["pool"]


def test_cli_json_and_per_shape_formats_hold_the_same_decisions(tmp_path, capsys):
    argv = [str(SESSIONS / n) for n in (*SAME_TREE, "20261130T142943Z_aa-r1",
                                        "20261130T171943Z_checkpoint")]  # fmt: skip
    assert cli.main(["export", *argv, "--out", str(tmp_path / "d.json")]) == 0
    err = capsys.readouterr().err
    assert "skipped 20261130T142943Z_aa-r1" in err  # an A/A control has no reader verdict
    # the checkpoint session measured other sources than the replicates; alone it is fine
    out = ["--out", str(tmp_path / "v")]
    assert cli.main(["export", *argv[:3], "--format", "per-shape", *out]) == 0
    names = sorted(p.name for p in (tmp_path / "v").iterdir())
    assert names == ["E=512,N=160,device_name=NVIDIA_H200.json"]
    # named like vLLM's tuned MoE configs, but vLLM cannot load them: the output says who reads
    err = capsys.readouterr().err
    assert "workbench/core/decision.py" in err and "not a vLLM config folder" in err, err
    assert "deprecated" not in err
    from_json = decision.load(tmp_path / "d.json")
    from_dir = decision.load(tmp_path / "v")
    assert (
        from_json["devices"]["NVIDIA_H200"]["shapes"][QWEN]
        == (from_dir["devices"]["NVIDIA_H200"]["shapes"][QWEN])
    )
    assert "E=64,N=160,K=2560,group=32,tp=4" in from_json["devices"]["NVIDIA_H200"]["shapes"]


@pytest.mark.parametrize(
    "argv, names",
    [
        (["20261130T142943Z_aa-r1"], "nothing to export"),
        (["20261130T195329Z_default-r1", "--format", "yaml"], "--format 'yaml'"),
        (["20261130T195329Z_default-r1", "--m", "0.7"], "--m 0.7"),
        (["20261130T195329Z_default-r1", "20261130T195329Z_default-r1"], "again"),
        (
            ["20261130T195329Z_default-r1", "20261130T142829Z_default-r1"],
            "different kernel sources",
        ),
        (["no-such-session"], "SESSION 'no-such-session'"),
        (["20261130T195329Z_default-r1", "--model"], "rests on one board (GPU-815b9d32, 1 "),
    ],
)
def test_bad_exports_exit_2_with_one_line(capsys, argv, names):
    assert cli.main(["export", "--root", str(SESSIONS), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert names in err and len(err.splitlines()) == 1, err


# ------------------------------------------------------------------------ resolve


@pytest.fixture(scope="module")
def doc():
    d, _ = decisions.build(real("20261130T195329Z_default-r1", "20261130T195910Z_default-r2"))
    return d


EVIDENCE = {"w13": "b3-coop", "w2": "b3-scalar"}
SAFE = {"w13": "b4-scalar", "w2": "b4-scalar"}


@pytest.mark.parametrize("requested", [None, "", "auto", " AUTO "])
def test_the_default_comes_from_the_evidence(doc, requested):
    r = decision.resolve(doc, "NVIDIA H200", QWEN, requested)
    assert (r.layout, r.arms, r.source) == ("b3", EVIDENCE, "evidence")
    assert r.compact and r.reader("w13") == "coop" and r.reader("w2") == "scalar"
    assert "20261130T195329Z_default-r1" in r.message and r.entry is not None


@pytest.mark.parametrize(
    "decisions_, device, shape, why",
    [
        (None, "NVIDIA H200", QWEN, "no decision file"),
        ("doc", "NVIDIA A100-SXM4-80GB", QWEN, "no evidence for this device"),
        ("doc", "NVIDIA H200", "E=512,N=128,K=2048,group=32,tp=4", "no evidence for this shape"),
    ],
)
def test_without_evidence_the_safe_layout_with_a_message(doc, decisions_, device, shape, why):
    d = doc if decisions_ == "doc" else decisions_
    r = decision.resolve(d, device, shape)
    assert (r.layout, r.arms, r.source) == ("b4", SAFE, "fallback")
    assert why in r.message and "4-byte layout (safe default)" in r.message
    with pytest.raises(decision.DecisionError, match=f"cannot be served: {why}"):
        decision.resolve(d, device, shape, "1")  # explicit: fails closed, same reason


@pytest.mark.parametrize("requested", ["1", "on", True, "b3"])
def test_an_explicit_request_is_served_from_the_evidence(doc, requested):
    r = decision.resolve(doc, "NVIDIA H200 NVL", QWEN, requested)
    assert (r.layout, r.arms, r.source) == ("b3", EVIDENCE, "explicit-on")


@pytest.mark.parametrize("requested", ["0", "off", False, "b4"])
def test_an_explicit_off_is_honoured_even_with_evidence(doc, requested):
    r = decision.resolve(doc, "NVIDIA H200", QWEN, requested)
    assert (r.layout, r.arms, r.source) == ("b4", SAFE, "explicit-off")


def test_a_build_without_the_chosen_reader(doc):
    have = {"b4-scalar", "b3-scalar"}  # no cooperative reader in this build
    r = decision.resolve(doc, "NVIDIA H200", QWEN, None, available=have)
    assert r.source == "fallback" and "this build lacks b3-coop" in r.message
    with pytest.raises(decision.DecisionError, match="NVIDIA_H200 E=512.*lacks b3-coop"):
        decision.resolve(doc, "NVIDIA H200", QWEN, "1", available=have)
    assert decision.resolve(doc, "NVIDIA H200", QWEN, None, available={*have, "b3-coop"}).compact


def test_inconclusive_or_missing_reader_evidence(doc):
    d = copy.deepcopy(doc)
    e = d["devices"]["NVIDIA_H200"]["shapes"][QWEN]["layouts"]["b3"]
    e["w2"] = {**e["w2"], "decision": "inconclusive"}  # as the rule leaves it: scalar arm
    r = decision.resolve(d, "NVIDIA H200", QWEN)
    assert r.source == "fallback" and "for w2 is inconclusive" in r.message
    assert decision.resolve(d, "NVIDIA H200", QWEN, "1").arms == EVIDENCE  # explicit: served
    del e["w2"]  # e.g. a tune session of w13 alone
    assert "no reader evidence for w2" in decision.resolve(d, "NVIDIA H200", QWEN).message
    with pytest.raises(decision.DecisionError, match="no reader evidence for w2"):
        decision.resolve(d, "NVIDIA H200", QWEN, "on")


@pytest.mark.parametrize(
    "mutate, names",
    [
        (lambda d: d.update(schema="workbench.decisions/9"), "not a workbench decision file"),
        (lambda d: d.update(devices=[]), "'devices' must be an object"),
        (lambda d: d["devices"]["NVIDIA_H200"]["shapes"][QWEN]["layouts"]["b3"]["w13"].pop("arm"),
         "layouts.b3.w13 lacks an arm"),
    ],
)  # fmt: skip
def test_a_broken_file_or_request_fails_with_one_line(doc, mutate, names):
    d = copy.deepcopy(doc)
    mutate(d)
    with pytest.raises(decision.DecisionError, match=names):
        decision.resolve(d, "NVIDIA H200", QWEN)
    with pytest.raises(decision.DecisionError, match="requested 'maybe' is not a layout request"):
        decision.resolve(doc, "NVIDIA H200", QWEN, "maybe")


def test_load_refuses_what_is_not_a_decision_file(tmp_path):
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(decision.DecisionError, match="not JSON"):
        decision.load(tmp_path / "x.json")
    with pytest.raises(decision.DecisionError, match="no E=...,N=...,device_name"):
        decision.load(tmp_path)
    with pytest.raises(decision.DecisionError, match="cannot read"):
        decision.load(tmp_path / "missing.json")


def test_vllm_is_the_per_shape_formats_old_name_with_one_deprecation_line(tmp_path, capsys):
    """`--format vllm` (issue 57) writes what per-shape writes and says once that it is going."""
    argv = ["export", *(str(SESSIONS / n) for n in SAME_TREE)]
    assert cli.main([*argv, "--format", "per-shape", "--out", str(tmp_path / "new")]) == 0
    capsys.readouterr()
    assert cli.main([*argv, "--format", "vllm", "--out", str(tmp_path / "old")]) == 0
    said = [x for x in capsys.readouterr().err.splitlines() if "deprecated" in x]
    assert said == [
        "workbench export: --format vllm is deprecated, its files are no vLLM configs: use "
        "--format per-shape (the same files; 'vllm' goes in the next release)"
    ]
    for f in (tmp_path / "new").iterdir():  # the same entries (the time written apart)
        new, old = (json.loads(p.read_text()) for p in (f, tmp_path / "old" / f.name))
        assert new["devices"] == old["devices"]
    assert cli.main([*argv, "--format", "vllm-folder"]) == 2
    assert "use one of json, per-shape" in capsys.readouterr().err


def test_vllm_format_help_and_docs_say_what_reads_the_files():
    import argparse

    from workbench.commands import export

    p = argparse.ArgumentParser()
    export.add_arguments(p)
    assert "workbench/core/decision.py" in " ".join(p.format_help().split())
    doc = " ".join((REPO / "docs" / "EXPORT.md").read_text().split())
    assert "vLLM's loader would fail on them" in doc and "decision.load(folder)" in doc
