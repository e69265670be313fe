"""What a run sets up once and hands to its workers (workbench.run.setup): the triton-moe
peer's autotuned configuration and the gates' float64 references, keyed by value."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from workbench.kernels import triton_moe
from workbench.measure.gate import reference_key
from workbench.run import setup as run_setup

BANK = types.SimpleNamespace(weights=torch.zeros(1))  # where the peer asks for its GPU's name
KEY = ("NVIDIA H100 80GB HBM3", "w13", 2560, 320)
CFG = {"BLOCK_N": 8, "BLOCK_K": 512, "DOT": False, "num_warps": 8, "num_stages": 2,
       "SPLIT": False, "SLOTS": 1}  # fmt: skip


@pytest.fixture
def tuned(monkeypatch):
    monkeypatch.setattr(triton_moe, "_TUNED", {})
    return triton_moe._TUNED


def _peer_stub(monkeypatch, autotune):
    """Just what TritonMoePeer._pick_config reads, on a GPU the committed table does not know."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: KEY[0])
    monkeypatch.setattr(triton_moe, "table_config", lambda *a, **k: None)
    return types.SimpleNamespace(kernel="w13", K=KEY[2], N=KEY[3], autotune=autotune)


def test_a_configuration_handed_over_is_used_without_autotuning(tuned, monkeypatch):
    def autotune():
        raise AssertionError("autotuned although the run's first worker had")

    run_setup.install(
        {"triton": {KEY: CFG}, "references": {}}, types.SimpleNamespace(references={})
    )
    launch = triton_moe.TritonMoePeer._pick_config(_peer_stub(monkeypatch, autotune), bank=BANK)
    assert launch == triton_moe.Launch(**CFG, source=triton_moe.GIVEN)
    assert "first worker" in str(launch)


def test_the_first_worker_autotunes_and_its_choice_travels(tuned, monkeypatch):
    calls = []

    def autotune():
        calls.append(1)
        return triton_moe.Launch(**CFG, source="autotuned")

    stub = _peer_stub(monkeypatch, autotune)
    triton_moe.TritonMoePeer._pick_config(stub, bank=BANK)
    triton_moe.TritonMoePeer._pick_config(stub, bank=BANK)  # a second bank's peer: no retune
    assert calls == [1]
    engine = types.SimpleNamespace(references={("w13", "b3", 0, 7, "ab"): np.ones(3)})
    handed = run_setup.collect(engine)
    assert handed["triton"] == {KEY: CFG}
    # the parent keeps the first value of a key, whatever a later worker says
    kept = run_setup.merge({}, handed)
    later = {"triton": {KEY: {**CFG, "BLOCK_K": 64}}, "references": {}}
    assert run_setup.merge(kept, later)["triton"][KEY]["BLOCK_K"] == 512
    tuned.clear()
    fresh = types.SimpleNamespace(references={})
    given = run_setup.install(kept, fresh)
    assert given == {"triton_given": 1, "references_given": 1}
    assert np.array_equal(fresh.references[("w13", "b3", 0, 7, "ab")], np.ones(3))
    assert run_setup.counts(given, fresh)["references_computed"] == 0


def test_the_reference_key_is_the_inputs_value_not_their_identity():
    def inputs(seed):
        g = torch.Generator().manual_seed(seed)
        return {"x": torch.randn(1, 64, generator=g).half(),
                "ids": torch.tensor([3, 1], dtype=torch.int32)}  # fmt: skip

    a, b = inputs(1), inputs(1)
    assert a["x"] is not b["x"]
    assert reference_key("w13", "b3", 0, 5, a) == reference_key("w13", "b3", 0, 5, b)
    assert reference_key("w13", "b3", 0, 5, a) != reference_key("w13", "b3", 0, 5, inputs(2))
    other_ids = {**a, "ids": torch.tensor([1, 3], dtype=torch.int32)}
    assert reference_key("w13", "b3", 0, 5, a) != reference_key("w13", "b3", 0, 5, other_ids)
    assert reference_key("w13", "b3", 0, 5, a) != reference_key("w13", "b3", 1, 5, a)
    assert reference_key("w13", "b3", 0, 5, a) != reference_key("w13", "b3", 0, 6, a)
