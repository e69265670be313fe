"""Pooling replicate sessions: a verdict only where every session agrees (workbench/analysis/pool.py)."""

import json
from pathlib import Path

import pytest
from fixtures_sessions import write_session

from workbench import cli
from workbench.analysis import VARIES, comparison_results, pool_sessions
from workbench.core.errors import BadArgument
from workbench.store.session import load_session

REPO = Path(__file__).resolve().parent.parent
# Three default runs on the H200 from the same sources (README, "How much to trust one session").
H200_RUNS = ["20261129T110348Z_default", "20261129T110916Z_default", "20261129T111117Z_ab"]


def _real():
    paths = [REPO / "sessions" / n for n in H200_RUNS]
    if not all(p.exists() for p in paths):
        pytest.skip("the committed H200 sessions are not here")
    return [load_session(p) for p in paths]


def test_real_h200_runs_disagree_on_w13_hot_only():
    pool = pool_sessions(_real())
    rows = {r.id: r for r in pool.rows}
    assert pool.warnings == []  # same sources, shapes and protocol
    assert rows["w13/hot"].verdicts == ["SLOWER", "SLOWER", "SAME"]
    assert rows["w13/hot"].verdict == VARIES
    assert rows["w13/hot"].low == pytest.approx(0.9977, abs=2e-4)
    assert rows["w13/hot"].high == pytest.approx(1.0698, abs=2e-4)
    for cid in ("w13/rotating", "w2/hot", "w2/rotating"):
        assert rows[cid].verdict == "SLOWER", rows[cid]
    recs = {r.kernel: r for r in pool.recommendations}
    assert recs["w13"].decision == "scalar" and recs["w2"].decision == "scalar"
    # the pooled word and the sessions' words, as the table and export give them (#33 item 8)
    assert rows["w13/hot"].words == ["SLOWER", "SLOWER", "FASTER<m"]
    hot = next(e for e in recs["w13"].evidence if e.startswith("hot:"))
    assert hot.startswith("hot: AMBIGUOUS (VARIES over 3 sessions: SLOWER, SLOWER, FASTER<m;"), hot


def test_agreeing_sessions_keep_their_verdict(tmp_path):
    a = load_session(write_session(tmp_path, slug="a", seed=1))
    b = load_session(write_session(tmp_path, slug="b", seed=2))
    pool = pool_sessions([a, b])
    single = {r.id: r.verdict.verdict for r in comparison_results(a)}
    for r in pool.rows:
        if len(set(r.verdicts)) == 1 and r.verdicts[0] != "AMBIGUOUS":
            assert r.verdict == r.verdicts[0] == single[r.id]
        else:
            assert r.verdict == VARIES
    assert len(pool.rows) == len(single)


def test_pool_needs_two_sessions(tmp_path):
    a = load_session(write_session(tmp_path, slug="a", seed=1))
    with pytest.raises(BadArgument, match="at least 2 sessions"):
        pool_sessions([a])


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_cli_pool_json(capsys):
    _real()
    code = cli.main(["sessions", "pool", *H200_RUNS, "--root", str(REPO / "sessions"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {c["id"]: c["verdict"] for c in out["comparisons"]}["w13/hot"] == VARIES
    assert [r["decision"] for r in out["recommendations"]] == ["scalar", "scalar"]


def test_pool_and_export_refuse_an_ab_session_beside_an_aa_session_alike(tmp_path, capsys):
    """#33 item 8: one check (analysis.pool.check_poolable) for both commands: a comparison id
    measured with other arms in one session (an A/A control beside an A/B run) is refused by
    `sessions pool` and by `export` with the same line, exit 2."""
    from workbench.report import decisions

    ab = write_session(tmp_path, slug="ab", seed=1, pairs=6)
    aa = write_session(tmp_path, slug="aa", seed=2, pairs=6)
    journal = aa / "journal.jsonl"
    lines = journal.read_text().splitlines()
    import json as _json

    for i, ln in enumerate(lines):  # w13/hot of the second session: B is A (an A/A control)
        rec = _json.loads(ln)
        if rec.get("type") == "comparison" and rec.get("id") == "w13/hot":
            rec["b"] = rec["a"]
            lines[i] = _json.dumps(rec)
    journal.write_text("\n".join(lines) + "\n")
    sessions = [load_session(ab), load_session(aa)]
    with pytest.raises(BadArgument) as pooled:
        pool_sessions(sessions)
    with pytest.raises(BadArgument) as exported:
        decisions.build(sessions)
    assert str(pooled.value) == str(exported.value)
    assert "judged different builds in w13/hot (b 'b3-coop' vs 'b3-scalar')" in str(pooled.value)
    errs = []
    for argv in (["sessions", "pool", str(ab), str(aa)], ["export", str(ab), str(aa)]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        errs.append(err.partition(": ")[2])
    assert errs[0] == errs[1] == str(pooled.value)


def test_export_records_the_words_pool_prints(tmp_path):
    """#33 item 8: where a pooled verdict is VARIES, export's session_verdicts are the sessions'
    verdict words, the words of pool's table (not the bare labels)."""
    from workbench.report import decisions

    sessions = _real()
    pool = pool_sessions(sessions)
    rows = {r.id: r for r in pool.rows}
    doc, _ = decisions.build(sessions)
    (shape,) = doc["devices"]["NVIDIA_H200"]["shapes"].values()
    hot = shape["layouts"]["b3"]["w13"]["sets"]["hot"]
    # two boards (110348Z on one, the others on another): the model's verdict decides, and the
    # runs' verdict stays beside it
    assert shape["scope"] == "model" and hot["runs_verdict"] == VARIES
    assert hot["session_verdicts"] == rows["w13/hot"].words == ["SLOWER", "SLOWER", "FASTER<m"]
