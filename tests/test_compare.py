"""Verdicts recomputed from journals, and the comparison of two sessions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.analysis import compare_sessions, comparison_results, recommendations
from workbench.analysis.model import session_rule
from workbench.core.stats import LEGACY_RULE, compare, pair_ratios
from workbench.store.session import SessionWriter, load_session

SRC = {"csrc/w13.cu": "a" * 64, "csrc/w2.cu": "b" * 64}


def write_session(
    root,
    slug,
    effects,
    *,
    seed=0,
    pairs=12,
    noise=0.01,
    gpu="NVIDIA H200",
    files=SRC,
    calls=48,
    replays=20,
    config=None,
    arms=("b3-scalar", "b3-coop"),
    finish=True,
    summary=None,
):
    """A session with one "main" comparison per id in ``effects`` (id -> true ratio B/A)."""
    rng = np.random.default_rng(seed)
    cfg = {
        "preset": "qwen3.8-flash-next",
        "calls": calls,
        "replays": replays,
        "pairs": pairs,
        "m": 0.01,
        **(config or {}),
    }
    prov = {
        "version": "0.1.0",
        "git": {"commit": "c0ffee" * 6, "dirty": False},
        "files": dict(files),
    }
    w = SessionWriter(root, slug, cfg, prov, {"gpu": {"name": gpu}})
    for cid, ratio in effects.items():
        kernel, xset = cid.split("/")
        w.record(
            "comparison",
            id=cid,
            kernel=kernel,
            set=xset,
            role="main",
            a=arms[0],
            b=arms[1],
            calls=calls,
            replays=replays,
            working_set_bytes=600 << 20,
            l2_bytes=60 << 20,
            graphs=2,
        )
        w.record("gate", cmp=cid, ok=True)
        for p in range(pairs):
            for slot, arm in enumerate("ABBA" if p % 2 == 0 else "BAAB"):
                ms = 0.6 * (ratio if arm == "B" else 1.0) * math.exp(rng.normal(0, noise))
                w.record(
                    "sample",
                    cmp=cid,
                    pair=p,
                    slot=slot,
                    arm=arm,
                    variant=arms[arm == "B"],
                    ms=ms,
                    flagged=False,
                    excluded=False,
                )
    if finish:
        w.finish(summary=summary)
    return w.path


def test_analyse_recomputes_from_the_journal(tmp_path):
    lie = {"verdicts": {"w13/hot": "SLOWER"}, "w13": "scalar"}
    path = write_session(
        tmp_path,
        "s",
        {"w13/hot": 0.93, "w13/rotating": 0.92, "w2/hot": 1.1, "w2/rotating": 1.0},
        summary=lie,
    )
    s = load_session(path)
    assert s.summary == lie  # a stored summary claiming the opposite must not matter
    res = comparison_results(s)
    assert [r.id for r in res] == ["w13/hot", "w13/rotating", "w2/hot", "w2/rotating"]
    # a session whose config names no rule was recorded before the interval rule: its own
    assert session_rule(s) == LEGACY_RULE
    for r in res:
        direct = compare(pair_ratios(s.samples_for(r.id)), m=0.01, rule=LEGACY_RULE)
        assert r.verdict == direct
        a = [x["ms"] for x in s.samples_for(r.id) if x["arm"] == "A"]
        assert r.a_ms == pytest.approx(np.median(a))
        assert r.us_per_call(r.a_ms) == pytest.approx(r.a_ms * 1000 / 48)
        assert r.gate is True and r.flagged == 0
    assert [r.verdict.verdict for r in res] == ["FASTER", "FASTER", "SLOWER", "SAME"]
    recs = recommendations(res)
    assert recs["w13"].decision == "cooperative" and recs["w13"].arm == "b3-coop"
    assert recs["w2"].decision == "scalar" and recs["w2"].arm == "b3-scalar"


def test_analyse_uses_session_m_and_flags(tmp_path):
    path = write_session(tmp_path, "m", {"w13/hot": 0.985}, noise=0.001, config={"m": 0.02})
    s = load_session(path)
    assert comparison_results(s)[0].verdict.verdict == "SAME"  # 1.5 % < m = 2 %
    assert comparison_results(s, m=0.01)[0].verdict.verdict == "FASTER"


def test_same_gpu_same_code_shift(tmp_path):
    a = load_session(write_session(tmp_path, "a", {"w13/hot": 0.93, "w2/hot": 1.10}, seed=1))
    b = load_session(
        write_session(tmp_path, "b", {"w13/hot": 0.93, "w2/hot": 1.02, "w2/rotating": 1.0}, seed=2)
    )
    d = compare_sessions(a, b)
    assert d.warnings == [] and d.notes == []
    by = {s.id: s for s in d.shifts}
    assert set(by) == {"w13/hot", "w2/hot"} and d.only_b == ["w2/rotating"] and d.only_a == []
    assert not by["w13/hot"].changed and by["w13/hot"].low < 0 < by["w13/hot"].high
    assert by["w2/hot"].changed and by["w2/hot"].high < 0
    assert by["w2/hot"].shift == pytest.approx(
        by["w2/hot"].b.verdict.median - by["w2/hot"].a.verdict.median
    )
    assert "sqrt(0.95)" in d.method and "conservative" in d.method
    js = d.to_dict()
    assert js["shifts"][0]["id"] == "w13/hot" and isinstance(js["shifts"][0]["changed"], bool)


def test_loud_warnings_for_sources_shapes_protocol_arms(tmp_path):
    a = load_session(write_session(tmp_path, "a", {"w13/hot": 0.93}))
    other_src = {**SRC, "csrc/w13.cu": "f" * 64}
    b = load_session(
        write_session(
            tmp_path,
            "b",
            {"w13/hot": 0.95},
            files=other_src,
            calls=64,
            replays=10,
            pairs=10,
            config={"preset": "qwen3-next-80b-a3b"},
            gpu="Tesla V100",
            arms=("b4-scalar", "b3-coop"),
            finish=False,
        )
    )
    d = compare_sessions(a, b)
    text = "\n".join(d.warnings)
    assert "KERNEL SOURCES DIFFER: csrc/w13.cu" in text and "csrc/w2.cu" not in text
    assert "SHAPES DIFFER: preset 'qwen3.8-flash-next' vs 'qwen3-next-80b-a3b'" in text
    assert (
        "PROTOCOL DIFFERS (config)" in text
        and "calls 48 vs 64" in text
        and "pairs 12 vs 10" in text
    )
    assert "ARMS DIFFER for w13/hot: a 'b3-scalar' vs 'b4-scalar'" in text
    assert "SESSION B IS INTERRUPTED" in text
    assert any("different GPUs: NVIDIA H200 vs Tesla V100" in n for n in d.notes)


def test_unknown_source_hashes_warn(tmp_path):
    a = load_session(write_session(tmp_path, "a", {"w13/hot": 0.93}, files={}))
    b = load_session(write_session(tmp_path, "b", {"w13/hot": 0.93}))
    assert any("HASHES UNKNOWN for session A" in w for w in compare_sessions(a, b).warnings)


def test_shift_interval_coverage(tmp_path):
    # The conservative interval must cover the true shift at least ~95 % of the time.
    from workbench.store.session import Session

    def mem_session(true_ratio, rng, pairs=12):
        samples = []
        for p in range(pairs):
            for slot, arm in enumerate("ABBA" if p % 2 == 0 else "BAAB"):
                ms = 0.6 * (true_ratio if arm == "B" else 1.0) * math.exp(rng.normal(0, 0.02))
                samples.append(
                    {
                        "type": "sample",
                        "t": 0.0,
                        "cmp": "w13/hot",
                        "pair": p,
                        "slot": slot,
                        "arm": arm,
                        "ms": ms,
                    }
                )
        cmp = {
            "type": "comparison",
            "t": 0.0,
            "id": "w13/hot",
            "kernel": "w13",
            "set": "hot",
            "role": "main",
            "a": "x",
            "b": "y",
            "calls": 48,
            "replays": 20,
        }
        meta = {"config": {}, "provenance": {"files": SRC}, "environment": {}}
        return Session(
            path=tmp_path, meta=meta, status="complete", comparisons=[cmp], samples=samples
        )

    trials, covered = 250, 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        sh = compare_sessions(mem_session(0.95, rng), mem_session(0.97, rng)).shifts[0]
        covered += sh.low <= 0.02 <= sh.high
    assert covered / trials >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / trials)
