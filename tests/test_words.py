"""Words from the method (docs/DESIGN.md §7.3, §7.4; workbench/analysis/words.py).

Every renderer describes the interval a session's verdicts actually used: the t-interval over
worker processes, over the blocks of one process, or the distribution-free CI over pairs. Each
committed session kind (tests/fixtures_sessions.representative_sessions) is rendered by the
report, `sessions show`, `sessions compare`, the plots' legend, the TUI's view and `export`, and
the text is checked against the verdicts' ``method``: it names every method used and none that
was not. The checker is shown to catch a report whose words come from a wrong method, and the
report of HEAD 9cc87b9, which told worker sessions they had no blocks (issue 45).
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures_sessions import representative_sessions

from workbench import cli
from workbench.analysis import analyse, compare_sessions, words
from workbench.analysis.recommend import reader_results
from workbench.core import stats
from workbench.report import decisions
from workbench.report.markdown import render_report
from workbench.store.session import load_session

# What a text says when it describes each method's interval (words.py's phrases, and the
# reason's "CI over workers" / "CI over blocks"; a pair interval's reason gives its exact coverage).
SAYS = {
    "workers": ("over worker processes", "CI over workers"),
    "blocks": ("t-interval over blocks", "CI over blocks"),
    "pairs": ("CI of the median", "median pair ratio", "has no blocks", "exact coverage"),
    "boards": ("t-interval over boards", "CI over boards"),  # a pool's, the GPU model's
}


def mislabels(text: str, methods: set[str]) -> list[str]:
    """What ``text`` gets wrong about verdicts whose methods are ``methods``: a method it never
    names, or one it names that no verdict used."""
    out = []
    for m, phrases in SAYS.items():
        found = [p for p in phrases if p in text]
        if m in methods and not found:
            out.append(f"never says how the {m} interval was made")
        if m not in methods and found:
            out.append(f"says {found[0]!r}, but no verdict used {m}")
    return out


def test_the_checker_finds_a_planted_mislabel():
    assert mislabels("95 % t-interval over worker processes", {"workers"}) == []
    # the report of 9cc87b9 on a worker session: the pairs' footnote under a worker table
    bug = (
        "median over pairs, distribution-free 95 % CI of the median ... This session has no "
        "blocks: its intervals cover one memory placement only"
    )
    assert mislabels(bug, {"workers"}) == [
        "never says how the workers interval was made",
        "says 'CI of the median', but no verdict used pairs",
    ]
    assert mislabels("t-interval over blocks", {"workers", "blocks"}) == [
        "never says how the workers interval was made"
    ]


KINDS = representative_sessions()
REPO_SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
if not KINDS:
    pytest.skip("no session committed under sessions/", allow_module_level=True)


@functools.cache
def _analysed(path):
    s = load_session(path, nvml=False)
    return s, analyse(s)


def _methods(an) -> set[str]:
    return {r.verdict.method for r in an.results if r.verdict.n}


@pytest.mark.slow  # 3 s of the fast lane on the 2-core machine
def test_the_committed_kinds_use_every_method():
    """Every method a session's verdict can have; "boards" is a pool's (analysis.fleet), whose
    words test_a_model_pool_and_its_export_word_the_interval_over_boards checks."""
    seen = {r.verdict.method for p in KINDS for r in _analysed(p)[1].results}
    assert seen | {"boards"} == set(SAYS) == set(words.ESTIMATE) == set(words.ORDER)


@pytest.mark.parametrize("path", KINDS, ids=lambda p: p.name)
@pytest.mark.slow  # 7 s of the fast lane on the 2-core machine
def test_every_renderer_words_the_method_the_session_used(path, capsys):
    s, an = _analysed(path)
    used = _methods(an)
    texts = {"report": render_report(s)}
    assert cli.main(["sessions", "show", str(path)]) == 0
    texts["show"] = capsys.readouterr().out
    texts["compare"] = compare_sessions(s, s).method
    texts["legend"] = " ".join(words.legend({r.verdict.method for r in an.results if r.verdict.n}))
    for name, text in texts.items():
        assert mislabels(text, used) == [], (name, path.name, used)
    if an.recommendations:  # export words the reader comparisons it exports
        doc, _ = decisions.build([s])
        read = {r.verdict.method for k in an.recommendations for r in reader_results(an.results, k)}
        assert mislabels(json.dumps(doc), read) == [], ("export", path.name, read)


@pytest.mark.parametrize("path", [p for p in KINDS if "default-r3" in p.name][:1])
def test_a_report_worded_from_a_wrong_method_is_caught(path, monkeypatch):
    """Plant: the report's verdicts say "blocks" where the session used workers; the words follow
    the planted method, and the check against the journal's method fails."""
    from workbench.report import markdown

    s, real = _analysed(path)
    assert _methods(real) == {"workers"}

    def planted(session, m=None, conf=stats.DEFAULT_CONF):
        an = analyse(session, m, conf)
        for r in an.results:
            r.verdict = replace(r.verdict, method="blocks", workers=0)
        return an

    monkeypatch.setattr(markdown, "analyse", planted)
    assert mislabels(render_report(s), _methods(real)) != []


@pytest.mark.slow  # 2 s of the fast lane on the 2-core machine
def test_the_tui_view_words_its_method():
    from workbench.tui.analysis import view_from_session

    for path in KINDS:
        s = load_session(path, nvml=False)
        v = view_from_session(s)
        used = {p.method for p in v.chart if p.method}
        text = v.rule + " ".join(e for r in v.recommendations for e in r.evidence)
        text += " ".join(words.legend(used))
        assert mislabels(text, used) == [], path.name


def test_an_interval_says_for_how_many_boards_it_holds():
    worker = next(p for p in KINDS if "default-r3" in p.name)
    s, an = _analysed(worker)
    text = words.methods_text([r.verdict for r in an.results], len(s.boards))
    assert len(s.boards) == 1 and "on 1 board: its intervals hold for this board" in text
    v = next(r.verdict for r in an.results if r.id == "w13/hot")
    assert "these 2 boards" in words.method_line(v, boards=2)
    one = next(
        r.verdict for p in KINDS for r in _analysed(p)[1].results if r.verdict.method == "blocks"
    )
    assert "ignores process-to-process variance" in words.method_line(one)


def test_verdicts_stored_with_their_reason_still_load_and_get_their_code():
    """Summaries written before the code hold the reason's text instead: they load, and the code
    derived from their label and interval is the one the recomputation gives."""
    s, an = _analysed(next(p for p in KINDS if "default-r3" in p.name))
    stored = {c["id"]: c["verdict"] for c in s.summary["comparisons"]}
    assert all("reason" in v and "code" not in v for v in stored.values())
    for r in an.results:
        old = stats.Verdict.from_dict(stored[r.id])
        assert (old.verdict, old.code) == (r.verdict.verdict, r.verdict.code), r.id
        said = words.reason(old)  # the same rule and numbers; the workers favouring B unknown
        assert "None" not in said and said.split(";")[0] == words.reason(r.verdict).split(";")[0]


@pytest.mark.slow  # 2 s of the fast lane on the 2-core machine
def test_pool_says_for_how_many_boards_its_interval_holds(capsys):
    runs = [
        REPO_SESSIONS / n for n in ("20261204T034541Z_default-r2", "20261204T034742Z_default-r3")
    ]
    if not all(p.is_dir() for p in runs):
        pytest.skip("committed sessions")
    assert cli.main(["sessions", "pool", *map(str, runs)]) == 0
    out = capsys.readouterr().out
    assert (
        "1 board (GPU-dbafddd4): the pooled interval is over sessions; it holds for this board"
        in out
    )


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_a_model_pool_and_its_export_word_the_interval_over_boards(tmp_path, capsys):
    """Sessions of two boards: `sessions pool` says for how many boards of which model its
    interval holds, and export words the model's verdicts by the interval over boards, and by no
    method they did not use; one board's pool says it holds for that board alone."""
    from fixtures_sessions import write_session

    paths = []
    for seed, uuid in ((1, "GPU-a"), (2, "GPU-b"), (3, "GPU-b")):
        p = write_session(tmp_path / f"s{seed}", seed=seed, slug=f"fx{seed}", pairs=8, nvml=False)
        meta = json.loads((p / "session.json").read_text())
        meta["environment"]["gpu"]["uuid"] = uuid
        (p / "session.json").write_text(json.dumps(meta))
        paths.append(p)
    assert cli.main(["sessions", "pool", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert "it holds for 2 boards of NVIDIA_H200 (the board the unit): the model's interval" in out
    doc, _ = decisions.build([load_session(p) for p in paths])
    (entry,) = doc["devices"]["NVIDIA_H200"]["shapes"].values()
    assert entry["scope"] == "model" and mislabels(json.dumps(entry), {"boards"}) == []
    assert cli.main(["sessions", "pool", *map(str, paths[1:])]) == 0
    out = capsys.readouterr().out
    assert "it holds for this board, not for the GPU model" in out and "for the model" not in out
    assert words.holds_for_boards(3, "NVIDIA_H100").startswith(
        "it holds for 3 boards of NVIDIA_H100"
    )
