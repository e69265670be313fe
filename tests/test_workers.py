"""Worker processes on the simulated device (docs/DESIGN.md §5.10): a run's blocks measured in
fresh spawned processes, merged into one session, the interval taken over workers; a fault in
one worker's arm ends that worker alone; several GPUs of one model run at once, a mix of models
is refused before anything runs."""

from __future__ import annotations

import json
import time

import pytest
import sim_device

from workbench import cli
from workbench.analysis.words import SINGLE_PROCESS, reason
from workbench.core import stats
from workbench.core.errors import EXIT_BAD_ARGS, EXIT_GPU_FAULT
from workbench.run import pool, runner, worker_proc
from workbench.run.phases import phase_lines, phase_table
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
FAST = ["--calls", "4", "--replays", "5", "--blocks", "2", "--pairs", "2"]


@pytest.fixture
def device(monkeypatch):
    return sim_device.install(monkeypatch)


def in_workers(monkeypatch, **kw):
    """Every worker of the runs that follow installs the simulated device with ``kw``."""
    monkeypatch.setattr(
        runner.Runner, "worker_setup", ("sim_device:install_in_worker", kw), raising=False
    )


def run_ab(capsys, tmp_path, *argv):
    code = cli.main(["ab", *SMALL, *FAST, "--sessions-dir", str(tmp_path), "--no-plots",
                     "--json", *argv])  # fmt: skip
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def test_workers_merge_into_one_session_with_an_interval_over_workers(
    device, monkeypatch, capsys, tmp_path
):
    in_workers(monkeypatch, model="process")
    code, s, err = run_ab(capsys, tmp_path, "--workers", "3", "--no-reference")
    assert code == 0, err
    sess = load_session(s["session"])
    assert sess.status == "complete"
    assert sess.config["workers"] == 3 and s["workers"] == 3
    assert sess.environment["workers"]["planned"] == 3
    # one worker record per worker and round (the confirmation, which decides nothing, runs on
    # half of them, at least two), each with its process and its phases
    recs = sess.workers
    assert sorted((w["round"], w["worker"]) for w in recs) == [
        ("confirm", 0), ("confirm", 1), ("main", 0), ("main", 1), ("main", 2)
    ]  # fmt: skip
    assert len({w["pid"] for w in recs}) == 5  # a fresh process each
    for w in recs:
        assert w["status"] == "complete" and "overlap" not in w  # off by default
        assert {"startup", "describe", "banks", "capture", "gate", "timing"} <= set(w["phases"])
        assert all(v >= 0 for v in w["phases"].values())
    # the parent's steps (the phase table's spans, workbench.run.phases): in order, and each
    # round's span holds its workers' turns
    tl = sess.meta["summary"]["timeline"]
    assert list(tl) == ["start", "built", "main", "analysed", "confirm", "end"]
    assert list(tl.values()) == sorted(tl.values())
    for w in recs:
        lo, hi = (
            (tl["built"], tl["main"]) if w["round"] == "main" else (tl["analysed"], tl["confirm"])
        )
        # (a worker's instants are monotonic ones made wall-clock: allow a clock's slew)
        assert lo - 0.05 <= w["started"] <= w["ended"] <= hi + 0.05
    assert list(phase_table(sess).spans) == [
        "build", "main round", "analysis", "confirm round", "finish"
    ]  # fmt: skip
    for cmp_id, n in (("w13/hot", 3), ("w2/rotating", 3), ("step/hot/confirm", 2)):
        samples = sess.samples_for(cmp_id)
        assert {x["worker"] for x in samples} == set(range(n))
        # pairs and blocks are unique across the workers: n workers x 2 blocks x 2 pairs
        pairs = {(x["pair"], x["slot"]) for x in samples}
        assert len(pairs) == len(samples) == n * 2 * 2 * 4
        by_worker = {}
        for x in samples:
            by_worker.setdefault(x["worker"], set()).add(x["block"])
        assert sorted(len(b) for b in by_worker.values()) == [2] * n
        assert len(set().union(*by_worker.values())) == 2 * n
        v = stats.compare(stats.pair_ratios(samples))
        assert v.method == "workers" and v.workers == n and v.blocks == 2 * n
        assert "process-to-process" not in reason(v)  # the single-process caveat is absent
        assert sess.comparison(cmp_id)["workers"] == n
    cmps = {c["id"]: c for c in s["comparisons"]}
    assert cmps["w13/hot"]["verdict"]["median"] == pytest.approx(0.95, abs=0.01)
    assert cmps["w2/hot"]["verdict"]["verdict"] == "SLOWER"
    assert s["recommendations"]["w13"]["decision"] == "cooperative"
    assert s["recommendations"]["w2"]["decision"] == "scalar"
    # the phases add up over the processes, in the summary as in the session
    assert s["phases"]["timing"] == pytest.approx(sum(w["phases"]["timing"] for w in recs))


def test_single_process_mode_says_it_ignores_process_variance(device, capsys, tmp_path):
    code, s, err = run_ab(capsys, tmp_path, "--single-process", "--kernel", "w13",
                          "--set", "hot", "--no-reference", "--blocks", "3")  # fmt: skip
    assert code == 0, err
    assert s["workers"] == 1 and load_session(s["session"]).config["workers"] == 1
    c, check = s["comparisons"]  # w13/hot and its method check (docs/DESIGN.md §5.11)
    assert check["role"] == "method" and check["verdict"]["method"] == "blocks"
    assert c["verdict"]["method"] == "blocks"
    assert SINGLE_PROCESS in reason(stats.Verdict.from_dict(c["verdict"]))


def test_a_fault_ends_one_worker_and_the_run_keeps_the_rest(device, monkeypatch, capsys, tmp_path):
    # W2's cooperative arm reads past its buffer in every process that runs it
    in_workers(monkeypatch, faulty=("w2:b3-coop",))
    code, s, err = run_ab(capsys, tmp_path, "--workers", "3", "--no-reference")
    assert code == EXIT_GPU_FAULT
    # the notes name each worker's fault as it comes; the run ends on one line that says it all
    lines = [ln for ln in err.splitlines() if "GPU fault" in ln and not ln.startswith("note:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert "arm 'b3-coop' of w2/" in lines[0] and "context is lost" in lines[0]
    sess = load_session(s["session"])
    assert sess.status == "failed" and "GPU fault" in sess.meta["error"]
    assert s["fault"]["arm"] == "b3-coop" and s["fault"]["cmp"].startswith("w2/")
    # W13 was measured by every worker and is kept; the comparison that faulted runs no more
    assert {x["worker"] for x in sess.samples_for("w13/hot")} == {0, 1, 2}
    faulted = [w for w in sess.workers if w["status"] == "fault"]
    assert faulted and all(w["fault_arm"] == "b3-coop" for w in faulted)
    assert s["recommendations"]["w13"]["decision"] == "cooperative"
    assert "w2" not in s["recommendations"]


def test_a_fault_in_one_process_keeps_what_it_measured(device, capsys, tmp_path):
    sim_device.FAULTY.add("w2:b3-coop")
    code, s, err = run_ab(capsys, tmp_path, "--single-process", "--no-reference")
    assert code == EXIT_GPU_FAULT and "Traceback" not in err
    assert "GPU fault in arm 'b3-coop' of w2/" in err
    sess = load_session(s["session"])
    assert sess.status == "failed"
    assert len(sess.samples_for("w13/hot")) > 0 and len(sess.samples_for("w13/rotating")) > 0


def two_boards(monkeypatch, names=("Simulated H200", "Simulated H200")):
    gpus = [pool.GPU(str(i), i, n, f"GPU-sim-{i}") for i, n in enumerate(names)]
    monkeypatch.setattr(pool, "visible_gpus", lambda: gpus)
    return gpus


def test_workers_run_one_per_gpu_and_record_each_board(device, monkeypatch, capsys, tmp_path):
    two_boards(monkeypatch)
    in_workers(monkeypatch, model="board")
    code, s, err = run_ab(capsys, tmp_path, "--workers", "4", "--no-reference",
                          "--kernel", "w13")  # fmt: skip
    assert code == 0, err
    sess = load_session(s["session"])
    main = sorted((w for w in sess.workers if w["round"] == "main"), key=lambda w: w["worker"])
    assert [w["uuid"] for w in main] == ["GPU-sim-0", "GPU-sim-1", "GPU-sim-0", "GPU-sim-1"]
    assert len(sess.environment["workers"]["gpus"]) == 2
    # the two lanes ran at once: each board's second worker started before the other's ended
    starts = {w["worker"]: w["started"] for w in main}
    ends = {w["worker"]: w["ended"] for w in main}
    assert starts[1] < ends[0] and starts[0] < ends[1]


def test_a_mix_of_gpu_models_is_refused_before_anything_runs(device, monkeypatch, capsys, tmp_path):
    two_boards(monkeypatch, ("NVIDIA H200", "NVIDIA H100 80GB HBM3"))
    in_workers(monkeypatch)
    code, s, err = run_ab(capsys, tmp_path, "--workers", "2")
    assert code == EXIT_BAD_ARGS and s is None
    assert "2 models" in err and "CUDA_VISIBLE_DEVICES" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # no session was begun


def test_the_gates_references_are_computed_once_per_run_and_handed_over(
    device, monkeypatch, capsys, tmp_path
):
    # W13 hot with its reference arms (b4-scalar, triton-moe): tolerance gates, float64 references
    in_workers(monkeypatch)
    code, s, err = run_ab(capsys, tmp_path, "--workers", "3", "--kernel", "w13", "--set", "hot",
                          "--no-confirm")  # fmt: skip
    assert code == 0, err
    sess = load_session(s["session"])
    setup = {w["worker"]: w["setup"] for w in sess.workers if w["round"] == "main"}
    first = setup[0]["references_computed"]
    assert first > 0 and setup[0]["references_given"] == 0
    for w in (1, 2):  # the later workers compute none: the first one's serve them
        assert setup[w] == {"triton_given": 0, "references_given": first, "references_computed": 0}
    # and their gates still run on every block, and pass
    gated = [g for g in sess.gates if "arms" in g]
    assert {g["worker"] for g in gated} == {0, 1, 2} and all(g["ok"] for g in gated)


def test_overlap_makes_each_workers_context_before_its_turn(device, monkeypatch):
    """The mechanism of --overlap in a worker's own code (run here, in the main thread, as a
    spare the run did not need): with it, the context is made after the imports and before the
    go; without it, none is made before the go."""
    import queue
    import signal
    import threading

    seen = []
    monkeypatch.setattr(worker_proc, "early_context", lambda: seen.append(go.is_set()) or 0.01)
    handler = signal.getsignal(signal.SIGINT)  # a worker ignores Ctrl-C: restored below
    try:
        for overlap in (True, False):
            go, stop, jobs, out = threading.Event(), threading.Event(), queue.Queue(), queue.Queue()

            def parent(overlap=overlap, go=go, jobs=jobs):
                time.sleep(0.3)  # the worker has imported and waits (with overlap: made it)
                jobs.put(worker_proc.WorkerJob(-1, "none", None, pool.GPU("0", 0)))
                go.set()

            threading.Thread(target=parent).start()
            worker_proc.worker_main(None, out, go, stop, jobs, overlap)
    finally:
        signal.signal(signal.SIGINT, handler)
    assert seen == [False]  # once, with overlap, and before its go


def test_overlap_run_records_each_workers_early_context(device, monkeypatch, capsys, tmp_path):
    in_workers(monkeypatch)
    code, s, err = run_ab(capsys, tmp_path, "--workers", "2", "--no-reference", "--kernel",
                          "w13", "--set", "hot", "--no-confirm", "--overlap")  # fmt: skip
    assert code == 0, err
    sess = load_session(s["session"])
    assert sess.config["overlap"] is True and sess.status == "complete"
    for w in sess.workers:
        assert w["overlap"]["context_s"] >= 0 and isinstance(w["overlap"]["before_go"], bool)
    assert any(line.startswith("  overlap 2 workers") for line in phase_lines(phase_table(sess)))
    code = cli.main(["ab", *SMALL, *FAST, "--single-process", "--overlap", "--no-plots"])
    assert code == EXIT_BAD_ARGS
    assert "--overlap needs local worker processes" in capsys.readouterr().err


def _slow_setup() -> None:
    """A worker's setup (``call_setup``) that takes a minute, as a spare's imports in progress."""
    time.sleep(60)


def test_a_spare_the_run_did_not_need_is_ended_at_once_not_waited_for():
    """ProcessPool.end ends a spare that got no job (here one still in its imports, which take
    60 s) instead of giving it a job to refuse once they are done: the end comes in seconds and
    the spare dies by the parent's SIGTERM, having touched nothing of the run's."""
    import signal
    import types

    cfg = types.SimpleNamespace(workers=2)  # start() reads the workers alone
    p = pool.ProcessPool(cfg, setup=("test_workers:_slow_setup", {}))
    p.start([pool.GPU("0", 0, "Simulated GPU")])
    (spare,) = p.spares.values()
    t0 = time.monotonic()
    p.end()
    assert time.monotonic() - t0 < 20  # the spare's imports would have taken 60 s
    assert spare.proc.exitcode == -signal.SIGTERM
