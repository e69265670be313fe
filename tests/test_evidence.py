"""Evidence is never stale (issue 11, item 4): the sessions README.md and docs/*.md cite.

Convention (docs/EVIDENCE.md, tests/evidence_scan.py): a session folder name cited in README.md
or docs/*.md (``<YYYYmmddTHHMMSSZ>_<slug>``, bare, after ``sessions/``, or as the stem of a file
named after the session such as ``<name>_summary.png``) is CURRENT evidence: the session must
exist under sessions/ and its recorded kernel-source hashes (provenance.files, csrc/ entries)
must equal the working tree's (workbench.kernels.build.source_hashes()). A citation under a Markdown
heading whose text contains "History" (any level; until the next heading of the same or a
higher level) is HISTORICAL: the session must exist, but may be stale. So a kernel change needs
fresh evidence (or an honest move of the old citation under a History heading) before it lands.

The first tests check the scanner on small Markdown files; the last one checks this repository.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from evidence_scan import check, citations, doc_files

from workbench.kernels.build import source_hashes
from workbench.store.provenance import source_digest, stale_sources, staleness_text
from workbench.store.session import SessionWriter

REPO = Path(__file__).resolve().parent.parent
NOW = {"csrc/w13.cu": "1" * 64, "csrc/w2.cu": "2" * 64}
OLD = {"csrc/w13.cu": "1" * 64, "csrc/w2.cu": "0" * 64}


def md(text: str) -> str:
    return textwrap.dedent(text).lstrip()


# ------------------------------------------------------------------------------ staleness


def test_stale_sources_compares_csrc_entries_only():
    assert stale_sources(NOW, NOW) == []
    assert stale_sources(OLD, NOW) == ["csrc/w2.cu"]
    # a file on one side only differs; non-csrc entries are not kernel sources
    assert stale_sources({"csrc/w13.cu": "1" * 64}, NOW) == ["csrc/w2.cu"]
    assert stale_sources({**NOW, "csrc/new.cuh": "3" * 64}, NOW) == ["csrc/new.cuh"]
    assert stale_sources({**NOW, "tools/x.py": "9" * 64}, NOW) == []
    # unknown: nothing recorded, or nothing to compare with
    assert stale_sources({}, NOW) is None and stale_sources(None, NOW) is None
    assert stale_sources({"tools/x.py": "9" * 64}, NOW) is None
    assert stale_sources(NOW, {}) is None


def test_stale_sources_defaults_to_the_working_tree():
    tree = source_hashes()
    assert tree and all(k.startswith("csrc/") for k in tree)
    assert stale_sources(tree) == []
    first = sorted(tree)[0]
    assert stale_sources({**tree, first: "f" * 64}) == [first]


def test_source_digest_and_text():
    assert source_digest(NOW) == source_digest(dict(reversed(list(NOW.items()))))
    assert source_digest(NOW) != source_digest(OLD) and len(source_digest(NOW)) == 8
    assert source_digest({}) is None and source_digest({"README.md": "1" * 64}) is None
    assert staleness_text([]) == "kernel sources match the working tree"
    assert staleness_text(["csrc/w2.cu"]) == (
        "STALE: kernel sources differ from the working tree: csrc/w2.cu"
    )
    many = [f"csrc/f{i}.cu" for i in range(9)]
    assert staleness_text(many).endswith("csrc/f5.cu and 3 more")
    assert "unknown" in staleness_text(None)


# ------------------------------------------------------------------------------ the scanner


def test_citations_forms_lines_and_sections():
    text = md(
        """
        # Title
        Default run: sessions/20261129T140359Z_default/ (see below).
        ![summary](plots/20261129T141409Z_default-r2_summary.png)

        ## Results history
        Old: 20261129T110348Z_default.
        ### Details
        Still old: `20261129T110916Z_default`
        ## Now
        Fresh: 20261201T000000Z_ab-1.2, twice: 20261201T000000Z_ab-1.2_samples_w13-hot.svg
        ```
        # not a heading: History
        20261201T000001Z_code
        ```
        """
    )
    got = [(c.line, c.name, c.historical, c.heading) for c in citations(text, "X.md")]
    assert got == [
        (2, "20261129T140359Z_default", False, "Title"),
        (3, "20261129T141409Z_default-r2", False, "Title"),
        (6, "20261129T110348Z_default", True, "Results history"),
        (8, "20261129T110916Z_default", True, "Details"),
        (10, "20261201T000000Z_ab-1.2", False, "Now"),
        (10, "20261201T000000Z_ab-1.2", False, "Now"),
        (13, "20261201T000001Z_code", False, "Now"),
    ]


def test_history_section_ends_at_a_heading_of_the_same_or_higher_level():
    text = md(
        """
        ## History
        20260101T000000Z_a
        #### deep
        20260101T000000Z_b
        ### still inside
        20260101T000000Z_c
        ## Next
        20260101T000000Z_d
        # HISTORY of things
        20260101T000000Z_e

        Setext current
        ==============
        20260101T000000Z_f
        """
    )
    flags = {c.name[-1]: c.historical for c in citations(text)}
    assert flags == {"a": True, "b": True, "c": True, "d": False, "e": True, "f": False}


def _session(root: Path, slug: str, files: dict[str, str] | None) -> str:
    with SessionWriter(root, slug, {"m": 0.01}, {"files": files} if files is not None else {}) as w:
        w.record("note", text="a finished run journals at least one record")
    return w.path.name


@pytest.fixture
def evidence(tmp_path):
    sessions = tmp_path / "sessions"
    fresh = _session(sessions, "fresh", NOW)
    stale = _session(sessions, "stale", OLD)
    unknown = _session(sessions, "unhashed", None)
    return tmp_path, sessions, fresh, stale, unknown


def _check(tmp_path, sessions, text):
    doc = tmp_path / "README.md"
    doc.write_text(md(text))
    return check([doc], sessions, current=NOW, base=tmp_path)


def test_a_current_stale_citation_fails(evidence):
    tmp, sessions, fresh, stale, _ = evidence
    problems = _check(tmp, sessions, f"# Results\nW2 is slower: sessions/{stale}.\n")
    assert problems == [
        f"README.md:2: cites {stale} as current evidence, but its kernel sources differ from the "
        "working tree: csrc/w2.cu (re-measure, or move the citation under a 'History' heading)"
    ]


def test_a_history_citation_may_be_stale(evidence):
    tmp, sessions, fresh, stale, _ = evidence
    text = f"# Results\nNow: {fresh}.\n\n## History\nBefore the fix: {stale}_summary.png\n"
    assert _check(tmp, sessions, text) == []


def test_a_missing_session_fails_even_in_history(evidence):
    tmp, sessions, *_ = evidence
    text = "# Results\n20261129T000000Z_gone\n## History\nsessions/20261128T000000Z_lost/\n"
    assert _check(tmp, sessions, text) == [
        "README.md:2: cites 20261129T000000Z_gone, which is not in sessions/",
        "README.md:4: cites 20261128T000000Z_lost, which is not in sessions/",
    ]


def test_an_investigation_may_cite_stale_sessions_but_not_missing_ones(evidence):
    tmp, sessions, fresh, stale, _ = evidence
    (tmp / "docs" / "investigations").mkdir(parents=True)
    doc = tmp / "docs" / "investigations" / "2026-11-30-x.md"
    doc.write_text(md(f"# X\nThen: {stale}.\nAnd sessions/20261128T000000Z_lost/\n"))
    assert doc in doc_files(tmp)
    rel = doc.relative_to(tmp).as_posix()
    assert check([doc], sessions, current=NOW, base=tmp) == [
        f"{rel}:3: cites 20261128T000000Z_lost, which is not in sessions/"
    ]


def test_a_current_session_without_hashes_or_unreadable_fails(evidence):
    tmp, sessions, fresh, _, unknown = evidence
    (sessions / fresh / "journal.jsonl").write_text('{"type": "note"}\n{"t": 1}\n')
    problems = _check(tmp, sessions, f"{unknown}\n{fresh}\n")
    assert problems[0] == f"README.md:1: cites {unknown} as current, but it records no csrc/ hashes"
    assert problems[1].startswith(f"README.md:2: cites {fresh}, which cannot be loaded:")
    assert len(problems) == 2


def test_a_current_fresh_citation_passes_and_figures_resolve(evidence):
    tmp, sessions, fresh, *_ = evidence
    text = f"![x](plots/{fresh}_distributions.png) and {fresh}_samples_w2-rotating.svg\n"
    assert _check(tmp, sessions, text) == []


# ------------------------------------------------------------------------------ this repo


def test_cited_sessions_exist_and_current_ones_match_the_kernels():
    """Every session README.md and docs/*.md cite exists; those cited as current were measured
    on the kernel sources in csrc/ now. Fails when a kernel changed after its evidence."""
    problems = check(doc_files(REPO), REPO / "sessions", base=REPO)
    assert problems == [], "stale or missing evidence:\n" + "\n".join(problems)


# ------------------------------------------------------------------------ same device code


def _eq_record(frm, to, arch="compute_90", identical=True, also=()):
    olds = [{"commit": f"c{i}", "sources": dict(s)} for i, s in enumerate([frm, *also])]
    return {"schema": "workbench.device-code-equivalence/2", "from": olds,
            "to_sources": dict(to), "arch": arch, "identical": identical}  # fmt: skip


def test_same_device_code_needs_both_trees_the_arch_and_identity():
    from evidence_scan import same_device_code

    rec = _eq_record(OLD, NOW)
    assert same_device_code("compute_90", OLD, NOW, rec)
    assert not same_device_code("compute_80", OLD, NOW, rec)  # another GPU: not shown
    assert not same_device_code(None, OLD, NOW, rec)
    assert not same_device_code(
        "compute_90", OLD, {**NOW, "csrc/x.h": "4" * 64}, rec
    )  # tree moved on
    assert not same_device_code("compute_90", {"csrc/w13.cu": "5" * 64}, NOW, rec)
    assert not same_device_code("compute_90", OLD, NOW, _eq_record(OLD, NOW, identical=False))
    assert not same_device_code("compute_90", OLD, NOW, None)
    # a record of several old trees covers a session of any of them, and no other
    other = {**OLD, "csrc/w13.cu": "6" * 64}
    assert same_device_code("compute_90", other, NOW, _eq_record(OLD, NOW, also=[other]))
    assert not same_device_code("compute_90", other, NOW, rec)


def test_a_stale_session_counts_as_current_only_with_a_matching_record(tmp_path):
    root = tmp_path / "sessions"
    env = {"gpu": {"name": "NVIDIA H200", "sm": "9.0"}}
    with SessionWriter(root, "old", {"m": 0.01}, {"files": OLD}, env) as w:
        w.record("note", text="a finished run journals at least one record")
        name = w.path.name
    doc = tmp_path / "README.md"
    doc.write_text(f"Measured: sessions/{name}.\n")
    kw = {"current": NOW, "base": tmp_path}
    assert len(check([doc], root, equivalence=None, **kw)) == 1
    assert check([doc], root, equivalence=_eq_record(OLD, NOW), **kw) == []
    assert len(check([doc], root, equivalence=_eq_record(OLD, NOW, arch="compute_80"), **kw)) == 1
    assert len(check([doc], root, equivalence=_eq_record(OLD, OLD), **kw)) == 1


@pytest.mark.compile
def test_the_committed_equivalence_record_holds(tmp_path):
    """benchmarks/device_code.py's record holds: today's tree compiles to the recorded device
    code and launches, the old trees' sources are the recorded ones, and a planted change of the
    device code or of a launch shape is seen."""
    import shutil
    import sys

    from evidence_scan import load_equivalence

    from workbench.kernels.portable import find_toolchain12

    if find_toolchain12() is None and os.environ.get("CI") != "true":
        pytest.skip("NVRTC 12 wheels (dev extra) not installed")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import device_code

    rec = load_equivalence()
    assert rec is not None and rec["identical"], "no equivalence record, or one that differs"
    arch = rec["arch"].removeprefix("compute_")
    froms = " ".join(f"--from {old['commit']}" for old in rec["from"])
    assert device_code.tree_hashes(REPO / "csrc") == rec["to_sources"], (
        "csrc/ changed since benchmarks/results/device_code/equivalence.json was made: run "
        f"benchmarks/device_code.py {froms} --write"
    )
    now = device_code.fingerprint(REPO / "csrc", arch)
    assert now == {n: v["to"] for n, v in rec["variants"].items()}
    # The old trees: their sources are the recorded ones, and the record holds their device code
    # equal to today's. Their fingerprints are not compiled again: a fingerprint is a function of
    # the sources (checked here by hash) and of the toolchain, and a toolchain that changed the
    # device code would already fail the line above on today's tree.
    for i, entry in enumerate(rec["from"]):
        old = device_code.tree_at(entry["commit"], tmp_path / f"old{i}")
        assert device_code.tree_hashes(old) == entry["sources"], entry["commit"]
        assert all(v["from"][entry["commit"]] == now[n] for n, v in rec["variants"].items())
    # controls, on one variant of each kernel: one changed instruction, and one changed launch,
    # are both seen, and only in the kernel changed
    w2v, w13v = "w2:b3-coop", "w13:b3-coop"
    assert {w2v, w13v} <= set(now)
    bad = tmp_path / "bad" / "csrc"
    shutil.copytree(REPO / "csrc", bad)
    w2 = bad / "kernels" / "w2.cuh"
    text = w2.read_text()
    assert "__float2half_rn(" in text
    w2.write_text(text.replace("__float2half_rn(", "__float2half_rz(", 1))
    moved = device_code.fingerprint(bad, arch, {w2v, w13v})
    assert moved[w2v]["ptx_sha256"] != now[w2v]["ptx_sha256"]
    assert moved[w13v] == now[w13v]
    shutil.copy(REPO / "csrc" / "kernels" / "w2.cuh", w2)
    w13 = bad / "kernels" / "w13.cuh"
    text = w13.read_text()
    assert "(K / 8 + 4) * 16" in text
    w13.write_text(text.replace("(K / 8 + 4) * 16", "(K / 8 + 5) * 16"))
    moved = device_code.fingerprint(bad, arch, {w13v})
    assert moved[w13v]["launch_sha256"] != now[w13v]["launch_sha256"]
    assert moved[w13v]["ptx_sha256"] == now[w13v]["ptx_sha256"]
