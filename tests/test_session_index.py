"""The session index (workbench/store/index.py): `sessions list` validates only what changed,
and says the same as a full validation whatever happened to the files since."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_session_list import RECS, write

from workbench.cli import main
from workbench.kernels.build import source_hashes
from workbench.store import listing as session_mod
from workbench.store.listing import list_sessions


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "sessions"
    write(r, "one", source_hashes(), RECS)
    write(r, "two", None)
    return r


def _listing(root: Path) -> list[dict]:
    out = list_sessions(root)
    return [i.to_dict() for i in out] + [{"skipped": str(p), "error": e} for p, e in out.skipped]


def _no_loads(monkeypatch) -> list[Path]:
    calls: list[Path] = []
    real = session_mod.load_session

    def spy(path, *a, **k):
        calls.append(Path(path))
        return real(path, *a, **k)

    monkeypatch.setattr(session_mod, "load_session", spy)
    return calls


def test_second_listing_reads_the_index_and_says_the_same(root, monkeypatch, _session_index):
    first = _listing(root)
    assert _session_index.is_file()
    assert not any(p.name.startswith(".") or "index" in p.name for p in root.rglob("*"))
    calls = _no_loads(monkeypatch)
    assert _listing(root) == first
    assert calls == []  # nothing re-validated


def test_a_changed_journal_is_validated_again(root, monkeypatch):
    _listing(root)
    one = next(root.glob("*_one"))
    with open(one / "journal.jsonl", "a") as f:  # a new comparison, as a writer appends it
        f.write(json.dumps({"type": "comparison", "t": 1.8e9, "id": "w2/hot", "kernel": "w2",
                            "set": "hot", "role": "main", "a": "x", "b": "y", "calls": 1,
                            "replays": 1}) + "\n")  # fmt: skip
    calls = _no_loads(monkeypatch)
    info = next(i for i in list_sessions(root) if i.path == one)
    assert calls == [one]
    assert info.comparisons == 2 and info.kernels == ["w13", "w2"]


def test_a_session_corrupted_in_place_is_skipped(root):
    _listing(root)
    two = next(root.glob("*_two"))
    meta = two / "session.json"
    st = os.stat(meta)
    text = meta.read_text().replace('"complete"', '"finished"')  # same length: a bad status
    meta.write_text(text)
    os.utime(meta, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    out = list_sessions(root)
    assert [p for p, _ in out.skipped] == [two]
    assert "unknown status 'finished'" in out.skipped[0][1]


def test_a_bad_session_is_remembered_as_skipped(root, monkeypatch):
    bad = root / "20200101T000000Z_bad"
    bad.mkdir()
    (bad / "session.json").write_text('{"schema": "workbench.session/1", "status": [1]}')
    (bad / "journal.jsonl").write_text("")
    first = list_sessions(root).skipped
    calls = _no_loads(monkeypatch)
    assert list_sessions(root).skipped == first and calls == []


@pytest.mark.parametrize("garbage", ["", "{", "[]", '{"format": 1, "loader": "x", "entries": {}}'])
def test_a_malformed_index_is_ignored_and_rewritten(root, garbage, _session_index):
    want = _listing(root)
    _session_index.write_text(garbage)
    assert _listing(root) == want
    assert json.loads(_session_index.read_text())["format"] == 1


def test_an_index_entry_for_other_contents_is_not_used(root, _session_index):
    """An entry is used only when size, mtime and inode still match."""
    _listing(root)
    data = json.loads(_session_index.read_text())
    for e in data["entries"].values():
        if "info" in e:
            e["info"]["samples"] = 999_999
            e["sig"][1][0] += 1  # the journal's size no longer matches
    _session_index.write_text(json.dumps(data))
    assert all(i.samples != 999_999 for i in list_sessions(root))


def test_index_off_and_unwritable(root, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("WORKBENCH_SESSION_INDEX", "off")
    assert main(["sessions", "list", "--root", str(root)]) == 0
    blocker = tmp_path / "a-file"  # a folder that cannot be made, even by root
    blocker.write_text("x")
    monkeypatch.setenv("WORKBENCH_SESSION_INDEX", str(blocker / "sub" / "index.json"))
    assert main(["sessions", "list", "--root", str(root)]) == 0
    assert "one" in capsys.readouterr().out


def test_the_index_is_keyed_by_every_module_that_makes_a_listing():
    """A change to the code that builds a listing's facts invalidates the index: the modules
    defining the loader, the facts and their index are all hashed (store/listing.py was left out
    when it was split from store/session.py)."""
    import inspect

    from workbench.store import index, listing, session

    makers = (session.load_session, listing.session_info, listing.SessionInfo, index.SessionIndex)
    for obj in makers:
        assert Path(inspect.getfile(obj)).name in index.LOADER_MODULES, obj


def test_the_index_is_written_with_the_umask_mode(root, _session_index):
    import stat

    old = os.umask(0o022)
    try:
        _listing(root)
    finally:
        os.umask(old)
    assert stat.S_IMODE(_session_index.stat().st_mode) == 0o644  # not mkstemp's 0600


def test_entries_of_a_deleted_root_are_pruned_at_the_next_listing(root, tmp_path, _session_index):
    """Issue 46: the index kept 103 entries of roots deleted since (464 KB rewritten whole)."""
    import shutil

    other = tmp_path / "other"
    write(other, "three", None)
    list_sessions(other)
    list_sessions(root)
    entries = json.loads(_session_index.read_text())["entries"]
    assert sum(str(other) in k for k in entries) == 1 and len(entries) == 3
    shutil.rmtree(other)
    list_sessions(root)  # another root: the deleted one's entry goes anyway
    entries = json.loads(_session_index.read_text())["entries"]
    assert len(entries) == 2 and not any(str(other) in k for k in entries)
