"""`workbench check --checkpoint` and a tiny `workbench ab --checkpoint` on a GPU (marker gpu).

The checkpoint is written by `workbench checkpoint make` (random AWQ experts, two shards) into a
temporary folder; the runs read it at tp 2, rank 1.
"""

from __future__ import annotations

import json

import pytest

from workbench import cli
from workbench.store.session import load_session

pytestmark = pytest.mark.gpu

DIMS = ["--hidden", "512", "--inter", "512", "--experts", "16", "--top-k", "4", "--layers", "2"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "c"
    argv = ["checkpoint", "make", str(folder), *DIMS, "--shards", "2", "--seed", "3"]
    assert cli.main(argv) == 0
    return folder


def test_check_on_a_checkpoint(checkpoint, capsys):
    argv = ["check", "--checkpoint", str(checkpoint), "--tp", "2", "--rank", "1", "--banks", "3",
            "--no-args", "--json"]  # fmt: skip
    code = cli.main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    res = json.loads(out.out)
    rows = res["numerics"]
    assert len(rows) == 2 * 3 * 3 and all(r["ok"] for r in rows), rows  # kernels x banks x arms
    assert all(0 < r["rel_l2"] <= 2e-3 for r in rows)
    assert res["banks"]["repeats"] == {"w13": 1, "w2": 1}  # 3 banks from 2 layers
    assert "each layer's experts are used up to 2 times" in out.err


def test_ab_on_a_checkpoint(checkpoint, capsys, tmp_path):
    argv = ["ab", "--checkpoint", str(checkpoint), "--tp", "2", "--rank", "1", "--calls", "8",
            "--replays", "5", "--blocks", "2", "--pairs", "2", "--no-plots", "--json",
            "--sessions-dir", str(tmp_path)]  # fmt: skip
    code = cli.main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    sess = load_session(json.loads(out.out)["session"])
    assert sess.status == "complete"
    assert sess.gates and all(g["ok"] for g in sess.gates)
    banks = sess.provenance["banks"]
    assert banks["source"] == "checkpoint" and banks["checkpoint"]["layers"] == [0, 1]
    # the rotating set spans 5x the L2: far more banks than the checkpoint's two layers
    assert banks["repeats"]["w13"] >= 1 and banks["repeats"]["w2"] >= 1
    assert any("banks from 2 checkpoint layers" in n["text"] for n in sess.notes)
    mem = [m for m in sess.memory if m["kernel"] == "w13" and m["layout"] == "b3"]
    assert mem and mem[0]["source"] == "checkpoint" and set(mem[0]["layers"]) == {0, 1}
