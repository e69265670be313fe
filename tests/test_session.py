"""Session folders: the writer, the validated loader, listings and killed writers (docs/DESIGN.md §8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from workbench.core.errors import BadArgument, SessionError
from workbench.store.listing import list_sessions
from workbench.store.session import SCHEMA, SessionWriter, load_session

CMP = dict(kernel="w13", set="hot", role="main", a="b3-scalar", b="b3-coop", calls=48, replays=20)


def write_comparison(w: SessionWriter, rng, cmp_id="w13/hot", pairs=3, **over):
    fields = {**CMP, **over}
    w.record(
        "comparison", id=cmp_id, working_set_bytes=1 << 20, l2_bytes=60 << 20, graphs=1, **fields
    )
    w.record("gate", cmp=cmp_id, ok=True, max_abs_diff=0.0)
    written = []
    for p in range(pairs):
        for slot, arm in enumerate("ABBA" if p % 2 == 0 else "BAAB"):
            ms = float(rng.uniform(0.4, 0.7))
            written.append(
                w.record(
                    "sample",
                    cmp=cmp_id,
                    pair=p,
                    slot=slot,
                    arm=arm,
                    variant=fields[arm.lower()],
                    ms=ms,
                    replay_ms=list(rng.uniform(0.4, 0.7, 5)),
                    sm_mhz_min=1980,
                    sm_mhz_max=1980,
                    throttle=0,
                    flagged=False,
                    excluded=False,
                )
            )
    return written


def test_roundtrip(tmp_path):
    rng = np.random.default_rng(1)
    cfg = {"pairs": 3, "calls": 48, "m": 0.01, "shape": {"hidden": 2560}}
    env = {"gpu": {"name": "NVIDIA H200", "uuid": "GPU-x"}}
    with SessionWriter(tmp_path, "w13-ab", cfg, {"version": "0.1.0"}, env) as w:
        s1 = write_comparison(w, rng, "w13/hot")
        s2 = write_comparison(w, rng, "w13/rotating", set="rotating")
        w.record("memory", layout="b3", used_before=1, used_after=2, computed=1)
        w.record("note", text="hello")
        w.nvml({"mem_used": 10, "sm_mhz": 1980, "throttle": np.int64(0)})
        w.update(summary={"x": 1})
        assert load_session(w.path).status == "interrupted"  # still open: looks killed
    assert w.path.parent == tmp_path and w.path.name.endswith("_w13-ab")
    s = load_session(w.path)
    assert s.status == "complete" and s.warnings == []
    assert s.config == cfg and s.environment == env and s.provenance == {"version": "0.1.0"}
    assert s.gpu_name == "NVIDIA H200" and s.slug == "w13-ab" and s.finished
    assert [c["id"] for c in s.comparisons] == ["w13/hot", "w13/rotating"]
    assert s.samples_for("w13/hot") == s1 and s.samples_for("w13/rotating") == s2
    assert s.samples == s1 + s2
    assert s.comparison("w13/rotating")["set"] == "rotating" and s.comparison("nope") is None
    assert len(s.gates) == 2 and s.memory[0]["layout"] == "b3" and s.notes[0]["text"] == "hello"
    assert s.nvml[0]["mem_used"] == 10 and s.nvml[0]["throttle"] == 0 and "t" in s.nvml[0]
    assert s.summary == {"x": 1}
    assert load_session(w.path / "session.json").samples == s.samples
    assert not list(w.path.glob("*.tmp")), "temporary session.json left behind"
    meta = json.loads((w.path / "session.json").read_text())
    assert meta["schema"] == SCHEMA and meta["finished"] is not None


def test_unique_folders_and_bad_slug(tmp_path):
    paths = {SessionWriter(tmp_path, "same").path for _ in range(3)}
    assert len(paths) == 3
    for bad in ("", "../x", "a b", "x/y", "-x"):
        with pytest.raises(BadArgument, match="slug"):
            SessionWriter(tmp_path, bad)


def test_record_validation(tmp_path):
    w = SessionWriter(tmp_path, "v")
    with pytest.raises(BadArgument, match="'slot'"):
        w.record("sample", cmp="c", pair=0, arm="A", ms=1.0)
    with pytest.raises(BadArgument, match="unknown record type 'bogus'"):
        w.record("bogus", x=1)
    with pytest.raises(BadArgument, match="arm"):
        w.record("sample", cmp="c", pair=0, slot=0, arm="C", ms=1.0)
    with pytest.raises(BadArgument, match="'ok'"):
        w.record("gate", cmp="c")
    w.finish()
    with pytest.raises(SessionError, match="finished"):
        w.record("note", text="late")
    with pytest.raises(SessionError, match="already finished"):
        w.finish()
    with pytest.raises(SessionError, match="holds no records"):  # complete, yet nothing kept
        load_session(w.path)


def test_threads_append_whole_lines(tmp_path):
    w = SessionWriter(tmp_path, "threads")
    w.record("comparison", id="c", **CMP)

    def worker(k):
        for i in range(100):
            w.record("sample", cmp="c", pair=k * 100 + i, slot=0, arm="A", ms=1.0 + k)
            w.nvml({"k": k, "i": i})

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.finish()
    s = load_session(w.path)
    assert sorted(x["pair"] for x in s.samples) == list(range(600))
    assert len(s.nvml) == 600 and s.warnings == []


def test_context_manager_statuses(tmp_path):
    with pytest.raises(RuntimeError), SessionWriter(tmp_path, "boom") as w1:
        w1.record("note", text="before")
        raise RuntimeError("kernel exploded")
    s = load_session(w1.path)
    assert s.status == "failed" and "kernel exploded" in s.meta["error"] and s.notes
    with pytest.raises(KeyboardInterrupt), SessionWriter(tmp_path, "ctrlc") as w2:
        raise KeyboardInterrupt
    assert load_session(w2.path).status == "interrupted"
    with SessionWriter(tmp_path, "early") as w3:
        w3.record("note", text="one record: a complete session journals something")
        w3.finish("complete", summary={"done": True})
    assert load_session(w3.path).summary == {"done": True}


# ------------------------------------------------------------------------------ bad inputs


def _session(tmp_path, pairs=2) -> Path:
    with SessionWriter(tmp_path, "ok") as w:
        write_comparison(w, np.random.default_rng(2), pairs=pairs)
    return w.path


def test_foreign_and_missing(tmp_path):
    with pytest.raises(SessionError, match="no such session"):
        load_session(tmp_path / "nothing")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("a,b\n")
    with pytest.raises(
        SessionError, match=r"not a workbench session: .*foreign has no session\.json"
    ):
        load_session(foreign)
    with pytest.raises(SessionError, match="data.csv"):
        load_session(foreign / "data.csv")
    (foreign / "session.json").write_text(json.dumps({"name": "some other tool"}))
    with pytest.raises(SessionError, match="foreign file: .*session.json"):
        load_session(foreign)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda t: t.replace(SCHEMA, "workbench.session/9"),
            "unknown schema 'workbench.session/9'",
        ),
        (lambda t: t[: len(t) // 2], r"session\.json is truncated or not JSON \(line"),
        (lambda t: "", r"session\.json is empty"),
        (lambda t: "not json at all", "not JSON"),
        (lambda t: t.replace('"complete"', '"exploded"'), "unknown status 'exploded'"),
        (lambda t: t.replace('"slug"', '"slag"'), "lacks 'slug'"),
    ],
)
def test_bad_session_json(tmp_path, mutate, message):
    path = _session(tmp_path)
    meta = path / "session.json"
    meta.write_text(mutate(meta.read_text()))
    with pytest.raises(SessionError, match=message) as e:
        load_session(path)
    assert "session.json" in str(e.value)


def test_bad_journal_line_in_the_middle(tmp_path):
    path = _session(tmp_path)
    journal = path / "journal.jsonl"
    lines = journal.read_text().splitlines()
    lines[3] = lines[3][:20]  # a cut line that is not the last one: corruption, not a kill
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionError, match=r"journal\.jsonl line 4 is not JSON"):
        load_session(path)


def test_record_missing_fields_in_journal(tmp_path):
    path = _session(tmp_path)
    journal = path / "journal.jsonl"
    lines = journal.read_text().splitlines()
    rec = json.loads(lines[5])
    del rec["arm"]
    lines[5] = json.dumps(rec)
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionError, match=r"journal\.jsonl line 6: sample record lacks 'arm'"):
        load_session(path)


def test_truncated_last_line_is_tolerated(tmp_path):
    path = _session(tmp_path, pairs=2)
    full = load_session(path).samples
    with open(path / "journal.jsonl", "a") as f:
        f.write('{"type": "sample", "t": 1.0, "cmp": "w13/h')  # killed mid-write
    with open(path / "nvml.jsonl", "a") as f:
        f.write('{"t": 1.0, "mem_u')
    s = load_session(path)
    assert s.samples == full and len(full) == 8
    assert any("journal.jsonl line" in w and "truncated" in w for w in s.warnings)
    assert any("nvml.jsonl" in w for w in s.warnings)


def test_missing_journal_is_an_error(tmp_path):
    path = _session(tmp_path)
    (path / "journal.jsonl").unlink()
    with pytest.raises(SessionError, match="no journal.jsonl"):
        load_session(path)


def test_unknown_record_type_kept_with_warning(tmp_path):
    path = _session(tmp_path)
    with open(path / "journal.jsonl", "a") as f:
        f.write(json.dumps({"type": "future", "t": 2.0, "x": 1}) + "\n")
    s = load_session(path)
    assert s.other == [{"type": "future", "t": 2.0, "x": 1}]
    assert any("'future'" in w for w in s.warnings)


# ------------------------------------------------------------------------------ killed writers

CHILD = textwrap.dedent(
    """
    import sys, threading, time
    from workbench.store.session import SessionWriter
    root, n = sys.argv[1], int(sys.argv[2])
    with SessionWriter(root, "child", {"pairs": n}) as w:
        stop = threading.Event()
        def sampler():  # the 20 Hz NVML sampler of a real run
            while not stop.is_set():
                w.nvml({"mem_used": 1, "sm_mhz": 1980})
                time.sleep(0.05)
        threading.Thread(target=sampler, daemon=True).start()
        w.record("comparison", id="w13/hot", kernel="w13", set="hot", role="main", a="b3-scalar",
                 b="b3-coop", calls=48, replays=20)
        for i in range(n):
            w.record("sample", cmp="w13/hot", pair=i // 4, slot=i % 4, arm="ABBA"[i % 4], ms=0.5 + i)
        print(w.path, flush=True)
        while True:  # a long measurement in flight: the parent kills us here
            time.sleep(0.01)
    """
)


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGKILL, "interrupted"), (signal.SIGINT, "interrupted")]
)
def test_killed_writer_keeps_every_finished_sample(tmp_path, sig, status):
    n = 11  # two full pairs and three samples of a third
    # started as from a shell, Ctrl-C at its default: a pytest-xdist worker runs with SIGINT
    # ignored, which a child inherits (and Python then installs no KeyboardInterrupt handler),
    # so this case hung whenever no earlier test of that worker had restored the default
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), str(n)], stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )  # fmt: skip
    try:
        path = Path(proc.stdout.readline().strip())
        assert path.is_dir(), path
        time.sleep(0.3)  # let the sampler write a few NVML lines
        os.kill(proc.pid, sig)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    s = load_session(path)
    assert s.status == status
    assert [x["ms"] for x in s.samples] == [0.5 + i for i in range(n)]
    assert len(s.nvml) >= 2
    if sig == signal.SIGKILL:
        assert s.meta["status"] == "running" and any("killed" in w for w in s.warnings)
    else:  # Ctrl-C reaches the context manager, which records it
        assert s.meta["status"] == "interrupted" and "KeyboardInterrupt" in s.meta["error"]
        assert proc.returncode != 0


# ------------------------------------------------------------------------------ listing


def test_list_sessions(tmp_path):
    a = SessionWriter(tmp_path, "first", environment={"gpu": {"name": "Tesla V100"}})
    write_comparison(a, np.random.default_rng(3), pairs=2)
    a.finish()
    b = SessionWriter(tmp_path, "second")  # left running: listed as interrupted
    b.record("comparison", id="w2/hot", **{**CMP, "kernel": "w2"})
    broken = SessionWriter(tmp_path, "broken")
    broken.finish()
    (broken.path / "session.json").write_text('{"schema": "other/1"}')
    (tmp_path / "not-a-session").mkdir()
    (tmp_path / "README.txt").write_text("x")
    infos = list_sessions(tmp_path)
    assert [i.slug for i in infos] == ["second", "first"]  # newest first
    assert infos[1].status == "complete" and infos[1].gpu == "Tesla V100"
    assert (infos[1].comparisons, infos[1].samples) == (1, 8)
    assert infos[0].status == "interrupted" and infos[0].samples == 0
    assert [p for p, _ in infos.skipped] == [broken.path]
    assert "unknown schema" in infos.skipped[0][1]
    with pytest.raises(BadArgument, match="--sessions-dir .*absent.* does not exist"):
        list_sessions(tmp_path / "absent")
    with pytest.raises(BadArgument, match="--sessions-dir"):
        list_sessions(tmp_path / "README.txt")


# ------------------------------------------------------------------------------ provenance


def test_provenance_hashes_and_git(tmp_path):
    import hashlib

    from workbench import __version__
    from workbench.store.provenance import collect, git_info, sha256_file

    rng = np.random.default_rng(9)
    blob = rng.integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()  # spans several read chunks
    src = tmp_path / "repo" / "csrc" / "k.cu"
    src.parent.mkdir(parents=True)
    src.write_bytes(blob)
    assert sha256_file(src) == hashlib.sha256(blob).hexdigest()
    with pytest.raises(BadArgument, match="nope.cu"):
        sha256_file(tmp_path / "nope.cu")

    repo = tmp_path / "repo"
    assert git_info(repo) == {"commit": None, "dirty": None, "branch": None}  # not a repository
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "x"], check=True)
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    info = git_info(repo)
    assert info["commit"] == head.strip() and info["dirty"] is False
    (repo / "untracked.json").write_text("{}")
    assert git_info(repo)["dirty"] is False  # new session folders do not make a checkout dirty
    src.write_bytes(blob[::-1])
    assert git_info(repo)["dirty"] is True

    prov = collect([src], repo=repo)
    assert prov["version"] == __version__ and prov["git"]["commit"] == head.strip()
    assert prov["files"] == {"csrc/k.cu": hashlib.sha256(blob[::-1]).hexdigest()}
    assert prov["python"].count(".") == 2 and prov["numpy"] == np.__version__
    json.dumps(prov)  # goes straight into session.json


def test_provenance_and_session_import_no_torch():
    code = (
        "import sys, workbench.store.provenance, workbench.store.session, workbench.analysis\n"
        "print([m for m in ('torch', 'textual', 'matplotlib') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_workbench_commit_overrides_a_stale_checkout(tmp_path, monkeypatch):
    import subprocess

    from workbench.store.provenance import git_info

    repo = tmp_path / "r"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (repo / "f.txt").write_text("x")
    run("add", "f.txt")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    head = git_info(repo)["commit"]
    monkeypatch.setenv("WORKBENCH_COMMIT", "a" * 40)
    info = git_info(repo)
    assert info["commit"] == "a" * 40 and info["checkout_commit"] == head
    monkeypatch.setenv("WORKBENCH_COMMIT", head)
    assert git_info(repo)["commit"] == head and "checkout_commit" not in git_info(repo)


def test_a_packed_session_loads_as_it_did(tmp_path, capsys):
    from workbench import cli
    from workbench.store.session import pack_session

    path = _session(tmp_path, pairs=6)
    with open(path / "nvml.jsonl", "a") as f:
        f.write(json.dumps({"t": 1.0, "sm_mhz": 1980}) + "\n")
    before = load_session(path)
    assert cli.main(["sessions", "pack", str(path)]) == 0
    assert "packed" in capsys.readouterr().out
    assert sorted(p.name for p in path.iterdir()) == [
        "journal.jsonl.gz", "nvml.jsonl.gz", "session.json"
    ]  # fmt: skip
    after = load_session(path)
    assert after.samples == before.samples and after.comparisons == before.comparisons
    assert after.nvml == before.nvml and after.status == "complete"
    assert pack_session(path) == 0  # packing twice changes nothing
    # a damaged packed journal is one clear error, as a damaged plain one is
    (path / "journal.jsonl.gz").write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(SessionError, match="journal.jsonl.gz"):
        load_session(path)


def test_a_running_session_is_not_packed(tmp_path):
    from workbench.store.session import pack_session

    w = SessionWriter(tmp_path, "live")
    try:
        with pytest.raises(BadArgument, match="still running"):
            pack_session(w.path)
        assert (w.path / "journal.jsonl").is_file()
    finally:
        w.finish("complete", {})
