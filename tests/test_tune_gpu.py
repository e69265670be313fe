"""`workbench tune` on a real GPU (marker ``gpu``: skipped without a CUDA device).

A small shape and a two-value sweep keep it to a few builds (cached after the first run). The
two-worker test needs two GPUs and is skipped on one.
"""

from __future__ import annotations

import json

import pytest

from workbench import cli
from workbench.store.session import load_session

pytestmark = pytest.mark.gpu

SMALL = ["--hidden", "256", "--inter", "512", "--experts", "32", "--top-k", "4", "--tp", "2"]
FAST = ["--calls", "8", "--replays", "10", "--blocks", "3", "--pairs", "2", "--screen-pairs", "2"]
SWEEP = ["--param", "unroll=4,5,6", "--param", "max_warps=16", "--top", "2"]


def run(capsys, tmp_path, *extra):
    argv = ["tune", "--kernel", "w13", *SWEEP, *SMALL, *FAST, *extra,
            "--sessions-dir", str(tmp_path / "s"), "--plots-dir", str(tmp_path / "p"), "--json"]  # fmt: skip
    code = cli.main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_tune_on_the_gpu_screens_confirms_and_resumes(capsys, tmp_path):
    s = run(capsys, tmp_path, "--workers", "1")
    t = s["tune"]
    assert s["status"] == "complete"
    assert {c["candidate"] for c in t["screened"]} == {
        "unroll=4,max_warps=16", "unroll=6,max_warps=16"
    }  # fmt: skip
    # every candidate passed its gate: parameters must not change results beyond their promise
    assert all(c["status"] == "screened" for c in t["screened"]), t["screened"]
    assert len(t["confirmed"]) == 2 and t["best"] is not None
    assert t["reader"]["w13"]["decision"] in ("scalar", "cooperative", "inconclusive")
    sess = load_session(s["session"])
    assert not sess.warnings and {x.get("gpu") for x in sess.samples} == {0}
    builds = sess.environment["builds"]
    assert {"w13:b3-scalar", "w13:b3-scalar[unroll=4]", "w13:b3-scalar[unroll=6]"} <= set(builds)
    assert s["plots"] and s["plots"][0].endswith("_sweep.png")
    again = run(capsys, tmp_path, "--workers", "1")  # resumes: nothing screened anew
    assert {c["source"] for c in again["tune"]["screened"]} == {"cache"}


def test_two_gpus_share_the_screen(capsys, tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    s = run(capsys, tmp_path, "--workers", "2", "--no-resume")
    sess = load_session(s["session"])
    screen = [x for x in sess.samples if x["cmp"].startswith("screen/")]
    assert {x["gpu"] for x in screen} == {0, 1}
    # the confirmation's worker processes share the two GPUs too: worker i on lane i % 2
    assert all(x["gpu"] == x["worker"] % 2 for x in sess.samples
               if not x["cmp"].startswith("screen/"))  # fmt: skip
    assert s["tune"]["workers"] == 2
