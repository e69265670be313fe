"""A recommendation's evidence is data (``recommend.SetEvidence`` per expert set: its verdict's
word, ratio and interval, the rule's branch, whether it decided), worded by analysis/words.py
(issue 55): the TUI lays its panel out from the data, never by taking the sentences apart, so a
reworded sentence leaves the panel as it is; the sentences of committed sessions read as before.

``data/evidence/recommendations.json`` holds, for four committed sessions, the evidence lines and
the TUI panel as the code before this change made them (the CLI prints those lines under
"recommendation", the report under its decision)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.analysis import analyse, words
from workbench.analysis.recommend import Recommendation, SetEvidence, combine
from workbench.core.stats import RULE, compare
from workbench.store.session import load_session
from workbench.tui.analysis import view_from_session

TESTS = Path(__file__).resolve().parent
GOLDEN = json.loads((TESTS / "data" / "evidence" / "recommendations.json").read_text())


def _session(name: str):
    return load_session(TESTS.parent / "sessions" / name)


def panel(view) -> dict[str, list]:
    return {r.kernel: [r.choice, r.reason, list(r.evidence)] for r in view.recommendations
            if r.kernel != "step"}  # fmt: skip


def _verdict(ratio: float, spread: float = 0.002, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return compare(list(ratio * np.exp(rng.normal(0, spread, 24))), m=0.01, rule=RULE)


def test_the_evidence_is_data():
    rec = combine("w13", {"hot": _verdict(0.999, 0.02), "rotating": _verdict(0.95)})
    assert rec.decision == "cooperative"
    hot, rot = rec.sets
    assert isinstance(hot, SetEvidence) and (hot.set, rot.set) == ("hot", "rotating")
    assert (hot.word, rot.word) == ("AMBIGUOUS", "FASTER")
    assert (hot.decides, rot.decides) == (False, True)  # the faster set decided
    assert rot.ratio == rot.verdict.median and rot.interval[0] < rot.ratio < rot.interval[1]
    assert rot.code == "faster" and hot.open and not rot.open
    assert rec.caution == (hot,)
    assert rec.evidence == [
        words.set_evidence_text(hot),
        words.set_evidence_text(rot),
        "cooperative: B is faster in rotating (FASTER) and SLOWER nowhere",
        "caution: hot AMBIGUOUS: the CI contains 1",
    ]
    # the JSON form carries the sentences and the data; the data comes back whole
    d = json.loads(json.dumps(rec.to_dict()))
    assert d["evidence"] == rec.evidence and d["sets"][1]["decides"] is True
    assert Recommendation.from_dict(d) == rec


def test_given_words_replace_a_verdicts_own():
    rec = combine("w2", {"hot": _verdict(1.05)}, reasons={"hot": "SLOWER in 3 of 3 sessions"})
    assert rec.sets[0].given == "SLOWER in 3 of 3 sessions"
    assert rec.evidence[0] == "hot: SLOWER (SLOWER in 3 of 3 sessions)"
    assert words.set_figures(rec.sets[0]) == "SLOWER in 3 of 3 sessions"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_committed_sessions_read_as_before(name):
    """The sentences (the CLI's and the report's evidence) and the TUI's panel of committed
    sessions are what the code that wrote sentences and split them made."""
    s = _session(name)
    an = analyse(s)
    assert {k: r.evidence for k, r in an.recommendations.items()} == GOLDEN[name]["evidence"]
    assert panel(view_from_session(s)) == GOLDEN[name]["panel"]


def test_a_reworded_sentence_leaves_the_tui_panel_unchanged(monkeypatch, capsys):
    name = "20261202T003535Z_default-r1"  # a caution (w13) and a decision by two sets (w2)
    s = _session(name)
    before = panel(view_from_session(s))
    monkeypatch.setattr(words, "set_evidence_text", lambda e: f"{e.set} said otherwise")
    # the sentences changed: the CLI prints the new words ...
    from workbench.cli import main

    assert main(["sessions", "show", name, "--root", str(TESTS.parent / "sessions")]) == 0
    out = capsys.readouterr().out
    assert "  hot said otherwise" in out and "  rotating said otherwise" in out
    assert analyse(s).recommendations["w13"].evidence[0] == "hot said otherwise"
    # ... and the panel, laid out from the data, reads as it did
    assert panel(view_from_session(s)) == before == GOLDEN[name]["panel"]
