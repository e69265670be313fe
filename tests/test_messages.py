"""A worker's messages (workbench/run/messages.py): every kind round-trips through its encoder
and decoder and through a spawned worker process of the real pool, and every kind has its
decoder, its pool handler and a sample here; a planted kind without them fails the check."""

from __future__ import annotations

import inspect
import pickle
import threading
from dataclasses import dataclass

import pytest

from workbench.core.errors import WorkbenchError
from workbench.data.shapes import resolve_shape
from workbench.measure.abba import Progress, ProtocolConfig
from workbench.run import config, messages, pool, worker_proc
from workbench.run.gpus import GPU


def samples(worker: int) -> list[messages.Message]:
    """One message of every kind, as worker ``worker`` would send it (plain, picklable data);
    ``Exit`` last, as a worker sends it."""
    p = Progress("w13/hot", 1, 2, 1, 4, 0.97, 0.95, 0.99, 0.02, 0, 0, 1.5, "B", 0.0123, False, 3)
    sets = {"hot": {"cmp": "screen/x/hot", "ratio": 0.9, "ci": [0.88, 0.92], "pairs": 2}}
    return [
        messages.Record(worker, {"type": "sample", "t": 1.0, "cmp": "w13/hot", "pair": 0,
                                 "slot": 1, "arm": "B", "ms": 0.0123}),
        messages.Progress(worker, p),
        messages.Event(worker, "note", "a note from the engine"),
        messages.Nvml(worker, {"t": 2.0, "sm_mhz": 1980.0, "temp_c": 41.0}),
        messages.Numerics(worker, "w13/hot: B is not bit-identical to A"),
        messages.Hello(worker, {"pid": 4242, "nvml": "available", "clock_mhz": 1980.0,
                                "environment": {"gpu": {"name": "Simulated H200"}}}),
        messages.Group(worker, ["screen/x/hot"], "measured", sets, seconds=0.5),
        messages.Group(worker, ["screen/y/hot"], "excluded", {}, reason="numerics: differs"),
        messages.Excluded(worker, ["screen/y/hot"], "differs"),
        messages.Fault(worker, "w2/hot", "b3-coop", "GPU fault in arm 'b3-coop' of w2/hot"),
        messages.Failed(worker, "RuntimeError: something else"),
        messages.BuildFailed(worker, "BuildError: nvcc said no"),
        messages.Done(worker, "complete"),
        messages.Exit(worker, {"timing": 1.25}, import_s=2.0, wait_s=0.1, wall_s=4.0,
                      setup={"triton_given": 0}, overlap=None),
    ]  # fmt: skip


def message_classes() -> list[type[messages.Message]]:
    """Every kind of message workbench/run/messages.py declares (its Message subclasses)."""
    return [c for c in vars(messages).values()
            if inspect.isclass(c) and issubclass(c, messages.Message)
            and c is not messages.Message]  # fmt: skip


def gaps() -> list[str]:
    """What a kind of message lacks: its decoder (KINDS), its handler in the pool, a sample."""
    out = []
    have = {type(m) for m in samples(0)}
    for c in message_classes():
        if messages.KINDS.get(c.kind) is not c:
            out.append(f"{c.__name__} ({c.kind!r}) has no decoder in messages.KINDS")
        if c not in pool.Pool.HANDLERS:
            out.append(f"{c.__name__} ({c.kind!r}) has no handler in pool.Pool.HANDLERS")
        if c not in have:
            out.append(f"{c.__name__} ({c.kind!r}) has no sample in tests/test_messages.py")
    return out


def test_every_kind_has_its_decoder_its_handler_and_a_sample():
    assert gaps() == []
    assert len(message_classes()) == len(messages.KINDS) == 13


@pytest.mark.parametrize("m", samples(3), ids=lambda m: type(m).__name__)
def test_every_kind_round_trips_through_its_encoder_and_decoder(m):
    wire = messages.encode(m)
    kind, worker, fields = wire
    assert kind == m.kind and worker == 3 and isinstance(fields, dict) and "worker" not in fields
    assert messages.decode(wire) == m
    assert messages.decode(pickle.loads(pickle.dumps(wire))) == m  # as a queue carries it


class _Listener:
    """The pool's listener (pool.Listener), keeping what each call got."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.ended: list[pool.Outcome] = []

    def has_session(self) -> bool:
        return False

    def on_hello(self, job, data) -> None:
        self.calls.append(("hello", data))

    def on_nvml(self, data) -> None:
        self.calls.append(("nvml", data))

    def on_progress(self, p) -> None:
        self.calls.append(("progress", p))

    def on_event(self, kind, data) -> None:
        self.calls.append(("event", kind, data))

    def on_group(self, job, hello, group) -> None:
        self.calls.append(("group", group))

    def note(self, text) -> None:
        self.calls.append(("note", text))

    def on_ended(self, outcome) -> None:
        self.ended.append(outcome)


def speak(**sim) -> None:
    """A spawned worker's setup (``ProcessPool(setup=...)``): the simulated device, as every
    test's worker has it, and a job that sends one message of every kind (``samples``)."""
    import sim_device

    sim_device.install_in_worker(**sim)

    def run_job(job, out, stop, info, t0, early=None, hello_extra=None, inbox=None):
        for m in samples(job.index):
            messages.send(out, m)

    worker_proc.run_job = run_job


@pytest.mark.slow  # 7 s of the fast lane on the 2-core machine
def test_every_kind_crosses_a_spawned_worker_of_the_process_pool(tmp_path, monkeypatch):
    cfg = config.make_config(
        resolve_shape(hidden=64, inter=128, experts=8, top_k=2, tp=1), reference=False,
        calls=2, replays=3, protocol=ProtocolConfig(pairs=2, blocks=2, placement_seed=1),
        sessions_dir=str(tmp_path), workers=1,
    )  # fmt: skip
    got: list[messages.Message] = []
    real = pool.Pool._message

    def seen(self, w, m):
        got.append(m)
        real(self, w, m)

    monkeypatch.setattr(pool.Pool, "_message", seen)
    run = pool.ProcessPool(cfg, ("test_messages:speak", {}), threading.Event())
    run.start([GPU("0", 0, "Simulated H200")])
    lis = _Listener()
    try:
        (o,) = run.run_round("main", [], lis)
    finally:
        run.end()
    assert got == samples(0)  # each decoded as it was sent, in order, in the parent
    # and each handled: the listener's calls and the outcome carry what was sent
    assert [c[0] for c in lis.calls] == ["progress", "event", "nvml", "hello", "group", "group",
                                         "note", "note", "note", "note"]  # fmt: skip
    assert lis.calls[0][1] == samples(0)[1].progress
    assert lis.calls[4][1] == samples(0)[6]
    assert o.records == (samples(0)[0].record,) and o.hello == samples(0)[5].facts
    assert o.fault == {"cmp": "w2/hot", "arm": "b3-coop",
                       "error": "GPU fault in arm 'b3-coop' of w2/hot"}  # fmt: skip
    assert o.excluded == ((("screen/y/hot",), "differs"),) and o.error == "BuildError: nvcc said no"
    assert o.status == "complete" and o.exit == messages.fields(samples(0)[-1])
    assert run.numerics == "w13/hot: B is not bit-identical to A"
    assert {"screen/y/hot", "w2/hot"} <= run.excluded
    assert lis.ended == [o]


def test_a_kind_without_its_decoder_or_handler_fails(monkeypatch):
    @dataclass(frozen=True)
    class Planted(messages.Message):
        what: str
        kind = "planted"

    monkeypatch.setattr(messages, "Planted", Planted, raising=False)
    assert gaps() == [
        "Planted ('planted') has no decoder in messages.KINDS",
        "Planted ('planted') has no handler in pool.Pool.HANDLERS",
        "Planted ('planted') has no sample in tests/test_messages.py",
    ]
    with pytest.raises(WorkbenchError, match="worker 2 sent a message of unknown kind 'planted'"):
        messages.decode(messages.encode(Planted(2, "x")))
    monkeypatch.setitem(messages.KINDS, "planted", Planted)  # decoded, still not handled
    p = pool.Pool(None)
    with pytest.raises(WorkbenchError, match="no handler for a worker's 'planted' message"):
        pool._Handler(p, None).put(messages.encode(Planted(2, "x")))
    monkeypatch.delitem(messages.KINDS, "group")  # a known kind that loses its decoder
    monkeypatch.delitem(pool.Pool.HANDLERS, messages.Exit)  # and one that loses its handler
    assert "Group ('group') has no decoder in messages.KINDS" in gaps()
    assert "Exit ('exit') has no handler in pool.Pool.HANDLERS" in gaps()
