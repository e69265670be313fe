"""`workbench report` as a pull request reads it (issue 57): the answer first, every table
well-formed, every link resolving from the report's folder, one word per cell everywhere, the
legends folded at the end, and the command that reproduces the session.

The Markdown is read by a real parser (markdown-it-py, installed with textual), over every
committed session (one of each kind in the fast lane: tests/fixtures_sessions.py). What the
answer must say is computed here from the analysis model, not from the report's own helpers.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from fixtures_sessions import real_sessions, representative_sessions, write_session
from markdown_it import MarkdownIt

from workbench.analysis import analyse
from workbench.analysis.recommend import reader_results
from workbench.cli import build_parser, main, parse
from workbench.core import defaults
from workbench.report.markdown import render_report
from workbench.report.rerun import rerun, session_rerun
from workbench.store.provenance import session_staleness
from workbench.store.session import load_session

REPO = Path(__file__).resolve().parent.parent
ANSWER_LINES = 15
TITLES = {"w13": "W13 + SwiGLU", "w2": "W2 + weighted sum"}
ONE_AA = "20261205T161449Z_aa-r1"


def _every(paths: list[Path]) -> list:
    """Every committed session; those beyond one of each kind run outside the fast lane."""
    fast = set(representative_sessions())
    return [pytest.param(p, id=p.name, marks=() if p in fast else pytest.mark.slow) for p in paths]


SESSIONS = _every(real_sessions())


@functools.cache
def _report(path: Path) -> tuple[str, Path, object]:
    """(Markdown, the folder it is written to, the analysis), the figures linked from the
    committed plots/ folder, as `workbench report S -o docs/report_h200_default.md --plots-dir plots` links them."""
    folder = REPO / "docs"  # a report's folder beside plots/: its links go up one level
    s = load_session(path)
    return render_report(s, plots_dir=REPO / "plots", link_base=folder), folder, analyse(s)


def _parse(text: str) -> list:
    return MarkdownIt("commonmark").enable("table").parse(text)


def _cells(line: str) -> list[str]:
    """A GFM table row's cells: split at every pipe no backslash escapes (a pipe in a code span
    splits too, as GitHub reads it)."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def _fmt(x: float) -> str:
    return f"{x:.4f}"


# ------------------------------------------------------------------------------ structure


@pytest.mark.parametrize("path", SESSIONS)
@pytest.mark.slow  # 5 s of the fast lane on the 2-core machine
def test_every_table_is_well_formed(path):
    text, _, _ = _report(path)
    lines = text.splitlines()
    tables = [t for t in _parse(text) if t.type == "table_open"]
    covered = set()
    for t in tables:
        start, end = t.map
        rows = [_cells(x) for x in lines[start:end]]
        widths = {len(r) for r in rows}
        assert len(widths) == 1, f"{path.name}: table at line {start + 1}: columns {widths}"
        assert all(re.fullmatch(r":?-{3,}:?", c) for c in rows[1]), lines[start + 1]
        covered |= set(range(start, end))
    # a line that looks like a row but is no table's (a table glued to a paragraph) is an error
    stray = [i + 1 for i, x in enumerate(lines) if x.startswith("|") and i not in covered]
    assert not stray, f"{path.name}: table-like lines outside any table: {stray}"
    assert tables, path.name


@pytest.mark.parametrize("path", SESSIONS)
def test_every_link_resolves_from_the_reports_folder(path):
    text, folder, _ = _report(path)
    targets = []
    for tok in _parse(text):
        for child in tok.children or []:
            if child.type == "image":
                targets.append(child.attrs["src"])
            elif child.type == "link_open":
                targets.append(child.attrs["href"])
    for t in targets:
        if re.match(r"[a-z]+:|#", t):
            continue
        assert (folder / t).resolve().is_file(), f"{path.name}: {t} does not resolve"


def test_plots_are_linked_where_they_exist():
    """The links test above reads links: a session with committed figures has some."""
    text, folder, _ = _report(REPO / "sessions/20261202T003535Z_default-r1")
    assert "![summary of 20261202T003535Z_default-r1](../plots/" in text


@pytest.mark.parametrize("path", SESSIONS)
def test_legends_are_folded_at_the_end(path):
    text, _, an = _report(path)
    head, sep, folded = text.partition("\n<details>\n<summary>Method and legends</summary>\n\n")
    assert sep and folded.rstrip().endswith("</details>"), path.name
    html = [t for t in _parse(text) if t.type == "html_block"]
    assert html and html[0].content.startswith("<details>")
    if an.recommendations:
        assert "Rule: Take the cooperative reader" in folded and "Rule:" not in head
    assert "Verdict words:" in folded and "Verdict words:" not in head
    # no paragraph of the unfolded report is a legend of 1,400 characters
    assert max(len(x) for x in head.splitlines()) < 1200, path.name


# ------------------------------------------------------------------------------ the answer


def _answer_says(path: Path) -> list[str]:
    """What the first ANSWER_LINES lines must hold, from the analysis model and the session."""
    _, _, an = _report(path)
    s = an.session
    needles = [s.gpu_name or "GPU not recorded", session_staleness(s).text()]
    needles += [b[:12] for b in s.boards]
    commit = (s.provenance.get("git") or {}).get("commit")
    needles += [commit[:12]] if commit else []
    needles.append(f"`{session_rerun(s).text()}`")
    return needles


def _answer_rows(path: Path) -> list[list[str]]:
    """The first ANSWER_LINES lines' table rows (cells)."""
    text, _, _ = _report(path)
    return [_cells(x) for x in text.splitlines()[:ANSWER_LINES] if x.startswith("|")]


def _said(v) -> str:
    return f"**{v.words}"  # the cell opens with the verdict's own word, in bold


@pytest.mark.parametrize("path", SESSIONS)
def test_the_answer_comes_first(path):
    text, _, an = _report(path)
    first = "\n".join(text.splitlines()[:ANSWER_LINES])
    for needle in _answer_says(path):
        assert needle in first, f"{path.name}: {needle!r} not in the first {ANSWER_LINES} lines"
    rows = _answer_rows(path)
    for kernel, rec in an.recommendations.items():
        row = next((r for r in rows if r[0] == TITLES[kernel]), None)
        assert row is not None, f"{path.name}: no answer row for {kernel}"
        assert rec.decision in row[1] and f"`{rec.arm}`" in row[1]
        for r in reader_results(an.results, kernel):
            v = r.verdict
            cell = row[next(i for i, h in enumerate(rows[0]) if h.startswith(f"{r.set}:"))]
            assert cell.startswith(_said(v)), (path.name, r.id, cell)
            assert _fmt(v.median) in cell and f"[{_fmt(v.ci_low)}, {_fmt(v.ci_high)}]" in cell
    if not an.recommendations and an.by_role("calibration"):
        for group in an.calibration()["groups"]:
            assert f"**{group}**" in first
    elif not an.recommendations:
        shown = next(an.by_role(x) for x in ("main", "aa", "tune", "screen") if an.by_role(x))
        r = shown[0]
        row = next(x for x in rows if x[0] == f"`{r.id}`")
        assert row[-1].startswith(_said(r.verdict)) and _fmt(r.verdict.median) in row[-1]


@pytest.mark.parametrize("path", SESSIONS)
def test_one_word_per_cell(path):
    """A set's word is the Verdict's own in the answer, the Recommendation's headline and its
    evidence line, and the Verdicts table: an estimate-rule session once read "hot SAME" in the
    headline and "hot: SLOWER<m" two lines below."""
    text, _, an = _report(path)
    section = text.split("## Recommendation\n", 1)[-1].split("\n## ", 1)[0]
    verdicts = text.split("## Verdicts\n", 1)[1].split("\n## ", 1)[0]
    for kernel in an.recommendations:
        head = next(x for x in section.splitlines() if x.startswith(f"- **{TITLES[kernel]}:"))
        sets = head.rsplit("(", 1)[1].rstrip(")")
        for r in reader_results(an.results, kernel):
            w = r.verdict.words
            assert f"{r.set} {w}" in sets.split(", "), f"{path.name}: {head}"
            assert f"  - {r.set}: {w} (" in section
            row = next(_cells(x) for x in verdicts.splitlines() if x.startswith(f"| `{r.id}` |"))
            assert row[-1].startswith(f"**{w}"), row[-1]


def test_the_r2_headline_reads_the_cells_word():
    path = REPO / "sessions/20261205T161120Z_default-r2"
    text, _, _ = _report(path)
    assert "(hot SLOWER<m, rotating FASTER)" in text and "hot SAME" not in text


def test_the_header_says_which_protocol_is_main_and_which_confirm():
    text, _, _ = _report(REPO / "sessions/20261205T161120Z_default-r2")
    first = "\n".join(text.splitlines()[:ANSWER_LINES])
    assert (
        "main: 24 ABBA pairs in 12 blocks of 6 worker processes; confirm: 12 ABBA pairs in 6 "
        "blocks of 3 worker processes" in first
    )
    assert "12/24 ABBA pairs" not in text


def test_an_interrupted_session_says_so_in_the_answer(tmp_path):
    p = write_session(tmp_path, seed=3, slug="killed", stop_after_samples=150)
    first = "\n".join(render_report(p).splitlines()[:ANSWER_LINES])
    assert "status **interrupted**" in first


# ------------------------------------------------------------------------ the command again


def _rebuilt(argv: tuple[str, ...]):
    """The RunConfig the command would run, through the CLI's own parser and config builders
    (torch-free, no GPU)."""
    from workbench.commands import ab, calibrate, tune

    args = parse(build_parser(), list(argv[1:]))
    build = {"ab": ab.config_from_args, "calibrate": calibrate.config_from_args,
             "tune": lambda a: tune.configs_from_args(a)[0]}  # fmt: skip
    return build[argv[1]](args)


CONFIG_KEYS = ("mode", "shape", "sets", "calls", "replays", "seed", "m", "comparisons",
               "kernels", "a", "b", "spins", "arm", "trials", "overlap")  # fmt: skip
PROTOCOL_KEYS = ("pairs", "blocks", "placement_seed", "adaptive", "budget_s", "warmup_blocks",
                 "retries", "keep_flagged")  # fmt: skip


@pytest.mark.parametrize("path", SESSIONS)
@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_the_command_reproduces_the_recorded_config(path, tmp_path, monkeypatch):
    """The rebuilt command, run through the CLI's parser, makes the session's configuration:
    its comparisons, shape, protocol and workers (a checkpoint's folder is not committed)."""
    s = load_session(path, nvml=False)
    again = session_rerun(s)
    if "--checkpoint" in again.argv:
        pytest.skip("the checkpoint folder it names is not committed")
    monkeypatch.chdir(REPO)  # a user's spec is named relative to the checkout
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    got, want = _rebuilt(again.argv).session_config(), s.config
    if not any(c.endswith(f"/{defaults.CHECK_TIMING}") for c in want.get("comparisons", ())):
        # a session from before the method check (docs/DESIGN.md §5.11): today's run adds
        # its comparisons, right after their main ones, and nothing else changes
        check = f"/{defaults.CHECK_TIMING}"
        got["comparisons"] = [c for c in got["comparisons"] if not c.endswith(check)]
    for key in CONFIG_KEYS:
        if key in want:
            assert got.get(key) == want[key], (path.name, key)
    assert got["workers"] == want.get("workers", 1), path.name  # before workers: one process
    for key in PROTOCOL_KEYS:
        if key in want["protocol"]:
            assert got["protocol"][key] == want["protocol"][key], (path.name, key)
    for name in again.unmatched:  # what no option sets is named, and really recorded
        key, _, value = name.partition("=")
        assert str(want["protocol"][key]) == value


def test_rerun_spells_what_differs_from_the_defaults():
    cfg = {"mode": "ab", "kernels": ["w13"], "sets": ["hot"], "a": "b4-scalar", "b": "b3-coop",
           "comparisons": ["w13/hot"], "workers": 3, "calls": 24, "m": 0.02,
           "shape": {"name": "qwen3-next-80b-a3b+custom", "hidden": 2048, "inter": 512,
                     "experts": 64, "top_k": 10, "layers": 48, "tp": 2, "group": 32},
           "protocol": {"pairs": 4, "blocks": 2, "warmup_blocks": 1, "placement_seed": 7,
                        "prime_placements": 2, "keep_flagged": True}}  # fmt: skip
    r = rerun(cfg)
    assert r.text() == (
        "workbench ab --kernel w13 --set hot --a b4-scalar --no-reference "
        "--preset qwen3-next-80b-a3b --experts 64 --tp 2 --workers 3 --calls 24 "
        "--min-effect 0.02 --pairs 4 --keep-flagged --placement-seed 7"
    )
    assert r.unmatched == ("prime_placements=2",)


# ---------------------------------------------------------------------------------- CLI


def test_cli_report_file_opens_with_the_answer(tmp_path):
    path = REPO / "sessions/20261205T161120Z_default-r2"
    out = tmp_path / "pr" / "r.md"
    assert main(["report", str(path), "-o", str(out), "--no-plots"]) == 0
    first = out.read_text().splitlines()[:ANSWER_LINES]
    assert any(x.startswith("| W13 + SwiGLU | **cooperative** `b3-coop` |") for x in first)
    assert f"- Reproduce: `{session_rerun(load_session(path)).text()}`" in first


def test_a_damaged_config_spells_no_command_and_the_report_says_so(tmp_path):
    """Fields the loader does not check (sets, trials, protocol values) never end the report."""
    import json
    import shutil

    copy = tmp_path / ONE_AA
    shutil.copytree(REPO / "sessions" / ONE_AA, copy)
    meta = json.loads((copy / "session.json").read_text())
    meta["config"]["sets"] = 7
    (copy / "session.json").write_text(json.dumps(meta))
    first = "\n".join(render_report(copy).splitlines()[:ANSWER_LINES])
    assert "- Reproduce: not rebuilt, the recorded config spells no command (TypeError" in first


def test_a_default_run_reproduces_as_the_plain_command(monkeypatch, tmp_path):
    """Today's default `workbench ab`, its config round-tripped through JSON as session.json
    holds it: the command is the plain one with its placement seed (not `--reference batch`
    for the method check's comparisons, nor `--warmup-sets ''` for a list read back)."""
    import json

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    argv = ("workbench", "ab", "--placement-seed", "7")
    cfg = json.loads(json.dumps(_rebuilt(argv).session_config()))
    assert any(c.endswith(f"/{defaults.CHECK_TIMING}") for c in cfg["comparisons"])
    assert rerun(cfg).text() == "workbench ab --placement-seed 7"
