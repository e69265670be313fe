"""`--checkpoint DIR` on the command line, and `workbench checkpoint make | show` (CPU).

A whole `workbench ab --checkpoint` run goes through the simulated device of tests/sim_device.py:
the engine, its bank source and the session are real, the kernels are CPU fakes that compute on
the banks' decoded weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import ckpt_fixture
import pytest
import sim_device
import torch
from safetensors.torch import load_file

from workbench import cli
from workbench.core.errors import BadArgument
from workbench.data.awq import TensorSource, load_awq_expert
from workbench.data.checkpoint import Checkpoint
from workbench.data.layouts import dequantize
from workbench.run import runner
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

FAST = ["--calls", "4", "--replays", "5", "--blocks", "2", "--pairs", "2", "--no-plots"]


def run(capsys, argv):
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as e:  # argparse's own errors
        code = int(e.code)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def no_gpu(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a GPU step was reached before the arguments were checked")

    monkeypatch.setattr(runner, "require_gpu", boom)
    monkeypatch.setattr(torch.cuda, "is_available", boom)


def _corrupt(tmp_path: Path) -> Path:
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "corrupt", group=64)
    f = folder / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # cut short, as by a failed copy
    return folder


def _no_config(tmp_path: Path) -> Path:
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "noconfig", group=64)
    (folder / "config.json").unlink()
    return folder


@pytest.mark.parametrize("command", [["ab"], ["check"], ["calibrate"], ["checkpoint", "show"]])
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda t: t / "absent", "checkpoint '{dir}' does not exist"),
        (_no_config, "checkpoint '{dir}': no config.json in it"),
        (_corrupt, "{dir}/model.safetensors: not a readable .safetensors file"),
    ],
    ids=["absent", "no-config", "corrupt"],
)
def test_bad_checkpoint_is_one_line_exit_2(no_gpu, capsys, tmp_path, command, make, message):
    folder = make(tmp_path)
    argv = [*command, folder] if command[0] == "checkpoint" else [*command, "--checkpoint", folder]
    code, out, err = run(capsys, argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert message.format(dir=folder) in lines[0]
    assert lines[0].startswith(f"workbench {command[0]}: ")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ab", "--checkpoint", "{dir}", "--hidden", "64"], "--hidden cannot be combined with --checkpoint"),
        (["check", "--checkpoint", "{dir}", "--preset", "qwen3-next-80b-a3b"], "--preset cannot be combined"),
        (["check", "--checkpoint", "{dir}", "--all-presets", "--tp", "2"], "--all-presets cannot be combined"),
        (["ab", "--checkpoint", "{dir}", "--tp", "2", "--rank", "2"], "--rank 2 must be in 0..1 for tp=2"),
        (["ab", "--checkpoint", "{dir}", "--tp", "8"], "W13 N/2 (inter/tp, gate and up halves)=16"),
        (["check", "--rank", "1"], "--rank needs --checkpoint"),
        (["calibrate", "--checkpoint", "{dir}", "--top-k", "2"], "--top-k cannot be combined with --checkpoint"),
        (["calibrate", "--checkpoint", "{dir}", "--tp", "2", "--rank", "5"], "--rank 5 must be in 0..1 for tp=2"),
        (["calibrate", "--rank", "0"], "--rank needs --checkpoint"),
    ],
)  # fmt: skip
def test_checkpoint_options(no_gpu, capsys, tmp_path, argv, message):
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", group=64)
    code, out, err = run(capsys, [a.replace("{dir}", str(folder)) for a in argv])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert message in err


# ------------------------------------------------------------------ checkpoint make / show


def test_the_docs_checkpoint_make_example_works_as_written(capsys, tmp_path):
    """Issue 46: README's `workbench checkpoint make DIR` asked for 58.4 GiB and exited 2."""
    import re

    from fixtures_sessions import REPO

    docs = [REPO / "README.md", *(REPO / "docs").glob("*.md")]
    examples = {m for f in docs for m in re.findall(r"`workbench (checkpoint make DIR[^`]*)`",
                                                    f.read_text())}  # fmt: skip
    assert examples, "the docs name no `workbench checkpoint make DIR` example"
    for i, example in enumerate(sorted(examples)):
        folder = tmp_path / f"c{i}"
        argv = [str(folder) if a == "DIR" else a for a in example.split()]
        code, out, err = run(capsys, argv)
        assert code == 0, (example, err)
        assert "config.json" in out and "model.safetensors" in out
        shown = run(capsys, ["checkpoint", "show", folder, "--json"])
        assert shown[0] == 0 and json.loads(shown[1])["shape"]["hidden"] == 2560


def test_make_writes_what_autoawq_would_and_show_reads_it(capsys, tmp_path):
    common = [
        "--hidden",
        "256",
        "--inter",
        "512",
        "--experts",
        "4",
        "--top-k",
        "2",
        "--layers",
        "3",
    ]
    code, out, err = run(capsys, ["checkpoint", "make", tmp_path / "one", *common, "--seed", "5"])
    assert code == 0, err
    assert out.split() == [str(tmp_path / "one" / f) for f in ("config.json", "model.safetensors")]
    code, _, err = run(
        capsys, ["checkpoint", "make", tmp_path / "two", *common, "--seed", "5", "--shards", "2"]
    )
    assert code == 0, err
    one = load_file(str(tmp_path / "one" / "model.safetensors"))
    two = {}
    for f in sorted((tmp_path / "two").glob("model-*.safetensors")):
        two.update(load_file(str(f)))
    assert one.keys() == two.keys() and len(one) == 3 * 4 * 3 * 3
    assert all(torch.equal(one[k], two[k]) for k in one)
    # our reader, then AutoAWQ's packing restated by the tests: the words written come back, so
    # writer and reader do not share a wrong nibble order
    prefix = "model.layers.2.mlp.experts.3.down_proj"
    m = load_awq_expert(TensorSource(tmp_path / "one"), "model.layers.2.mlp.experts.3", "w2", 1, 0)
    assert torch.equal(ckpt_fixture.autoawq_pack(m.q.numpy()), one[f"{prefix}.qweight"])
    assert torch.equal(ckpt_fixture.autoawq_pack(m.zeros[::4].numpy()), one[f"{prefix}.qzeros"])
    assert torch.equal(m.scales[::4], one[f"{prefix}.scales"])
    assert len(m.q.unique()) == 16 and m.scales.min() >= 1e-3 * 0.999
    # another seed, other weights; the config says what it is
    run(capsys, ["checkpoint", "make", tmp_path / "three", *common, "--seed", "6"])
    three = load_file(str(tmp_path / "three" / "model.safetensors"))
    assert not torch.equal(three[f"{prefix}.qweight"], one[f"{prefix}.qweight"])
    cfg = json.loads((tmp_path / "one" / "config.json").read_text())
    assert cfg["workbench_test_checkpoint"]["seed"] == 5
    assert cfg["quantization_config"]["group_size"] == 128
    code, out, err = run(capsys, ["checkpoint", "show", tmp_path / "two", "--tp", "2", "--json"])
    assert code == 0, err
    rec = json.loads(out)
    assert rec["shape"]["inter"] == 512 and rec["shape"]["tp"] == 2 and rec["layers"] == [0, 1, 2]
    assert {f["name"] for f in rec["files"]} >= {"model.safetensors.index.json"}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--group-size", "48"], "--group-size 48 must be a positive multiple of 32"),
        (["--shards", "4"], "--shards 4 exceeds --layers 3"),
        (["--layers", "48", "--experts", "512"], "would take 58.4 GiB (limit 16 GiB)"),
        (["--seed", "-1"], "--seed -1"),
    ],
)
def test_make_bad_arguments_write_nothing(capsys, tmp_path, extra, message):
    argv = ["checkpoint", "make", tmp_path / "c", "--layers", "3", "--experts", "16", *extra]
    code, out, err = run(capsys, argv)
    assert code == 2 and out == "" and message in err, err
    assert not (tmp_path / "c").exists()


def test_make_refuses_a_folder_with_files(capsys, tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "keep.txt").write_text("mine\n")
    code, _, err = run(capsys, ["checkpoint", "make", tmp_path / "c", "--layers", "1", "--experts", "16"])  # fmt: skip
    assert code == 2 and "is a folder that is not empty" in err
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["keep.txt"]


def test_make_given_a_file_says_it_is_a_file(capsys, tmp_path):
    (tmp_path / "c").write_text("mine\n")
    code, _, err = run(capsys, ["checkpoint", "make", tmp_path / "c", "--layers", "1", "--experts", "16"])  # fmt: skip
    assert code == 2 and "is a file, not a folder" in err and "empty" not in err.split("folder:")[0]
    assert (tmp_path / "c").read_text() == "mine\n"


def test_checkpoint_files_are_written_with_the_umask_mode(capsys, tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        code, _, err = run(capsys, ["checkpoint", "make", tmp_path / "c", "--layers", "2", "--experts", "16", "--shards", "2"])  # fmt: skip
    finally:
        os.umask(old)
    assert code == 0, err
    files = sorted((tmp_path / "c").iterdir())
    assert any(f.suffix == ".safetensors" for f in files)
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


# ------------------------------------------------------------------ ab --checkpoint, simulated


@pytest.fixture
def device(monkeypatch):
    return sim_device.install(monkeypatch)


def test_ab_on_a_checkpoint_end_to_end(device, capsys, tmp_path):
    folder, orig = ckpt_fixture.checkpoint(tmp_path / "c", 64, 128, 8, 2, 3, group=64, seed=7)
    argv = ["ab", "--checkpoint", folder, "--tp", "2", "--rank", "1", *FAST,
            "--sessions-dir", tmp_path / "s", "--json"]  # fmt: skip
    code, out, err = run(capsys, argv)
    assert code == 0, err
    s = json.loads(out)
    # the simulated L2 (40,000 B) asks for 8 W13 and 12 W2 banks: 3 layers, repeated
    assert "w13: 8 banks from 3 checkpoint layers" in err
    assert "w2: 12 banks from 3 checkpoint layers" in err
    sess = load_session(s["session"])
    assert sess.status == "complete" and all(g["ok"] for g in sess.gates)
    assert any("8 banks from 3 checkpoint layers" in n["text"] for n in sess.notes)
    assert sess.config["checkpoint"] == {"path": str(folder.resolve()), "tp": 2, "rank": 1}
    assert sess.config["shape"]["hidden"] == 64 and sess.config["preset"] == "checkpoint:c"
    banks = sess.provenance["banks"]
    assert banks["source"] == "checkpoint" and banks["banks"] == {"w13": 8, "w2": 12}
    assert banks["repeats"] == {"w13": 2, "w2": 3}
    assert banks["checkpoint"]["layers"] == [0, 1, 2] and banks["checkpoint"]["rank"] == 1
    assert all(len(f["sha256"]) == 64 for f in banks["checkpoint"]["files"])
    mem = {(m["kernel"], m["layout"]): m for m in s["memory"]}
    assert mem[("w13", "b3")]["source"] == "checkpoint"
    assert mem[("w13", "b3")]["layers"] == [0, 1, 2, 0, 1, 2, 0, 1]
    # the session reads back like any other
    code, shown, err = run(capsys, ["sessions", "show", s["session"]])
    assert code == 0 and "checkpoint:c" in shown, err
    # every bank the engine made holds its layer's experts at rank 1, decoded bit for bit
    made = sim_device.UPLOADED
    assert {b.kernel for _, b in made} == {"w13", "w2"} and len(made) >= 2 * (8 + 12)
    for index, bank in made[:: max(1, len(made) // 12)]:
        for e in (0, 5):
            q, sc, z = ckpt_fixture.expected(orig, index % 3, e, bank.kernel, 2, 1, 64)
            assert torch.equal(bank.weights[e], dequantize(q, sc, z).float())


def test_calibrate_on_a_checkpoint_end_to_end(device, capsys, tmp_path):
    """`calibrate --checkpoint`: the ladder runs on the checkpoint's experts, as `ab` does."""
    folder, orig = ckpt_fixture.checkpoint(tmp_path / "c", 64, 128, 8, 2, 3, group=64, seed=11)
    argv = ["calibrate", "--checkpoint", folder, "--tp", "2", "--kernel", "w13", "--set", "hot",
            "--spins", "0,80", *FAST, "--sessions-dir", tmp_path / "s", "--json"]  # fmt: skip
    code, out, err = run(capsys, argv)
    assert code == 0, err
    s = json.loads(out)
    assert {r["spin_cycles"] for r in s["calibration"]["rungs"]} == {0, 80}
    sess = load_session(s["session"])
    assert sess.status == "complete" and {c["role"] for c in sess.comparisons} == {"calibration"}
    assert sess.config["checkpoint"] == {"path": str(folder.resolve()), "tp": 2, "rank": 0}
    assert sess.config["preset"] == "checkpoint:c" and sess.config["spins"] == [0, 80]
    banks = sess.provenance["banks"]
    assert banks["source"] == "checkpoint" and banks["checkpoint"]["layers"] == [0, 1, 2]
    # the banks the engine made hold the checkpoint's experts (rank 0), decoded bit for bit
    made = [(i, b) for i, b in sim_device.UPLOADED if b.kernel == "w13"]
    assert made
    for index, bank in made[:4]:
        q, sc, z = ckpt_fixture.expected(orig, index % 3, 3, "w13", 2, 0, 64)
        assert torch.equal(bank.weights[3], dequantize(q, sc, z).float())


def test_check_options_reach_the_bank_source(monkeypatch, capsys, tmp_path):
    """`check --checkpoint` hands check_kernel the checkpoint's banks (the GPU part is tested in
    test_checkpoint_gpu.py): here check_kernel is replaced by a recorder of what it was given."""
    from workbench.measure import check

    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", group=64)
    seen = []

    def fake_check_kernel(shape, kernel, seed=0, banks=2, source=None, **kw):
        seen.append((shape, kernel, banks, source))
        return []

    monkeypatch.setattr(check, "check_kernel", fake_check_kernel)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    argv = ["check", "--checkpoint", folder, "--tp", "2", "--banks", "5", "--no-args", "--json"]
    code, out, err = run(capsys, argv)
    assert code == 0, err
    assert "each layer's experts are used up to 2 times" in err
    assert [k for _, k, _, _ in seen] == ["w13", "w2"]
    shape, _, banks, source = seen[0]
    assert (shape.hidden, shape.tp, banks, source.kind) == (64, 2, 5, "checkpoint")
    assert json.loads(out)["banks"]["repeats"] == {"w13": 1, "w2": 1}
    assert isinstance(source.ckpt, Checkpoint) and source.ckpt.rank == 0


# ------------------------------------------------------------------ the TUI's run form


def test_tui_run_config_takes_a_checkpoint(tmp_path):
    """The run form's record (workbench/tui/backend.py): a checkpoint folder gives the shape;
    shape fields beside it, a bad folder, or a rank without one are named."""
    from workbench.tui.backend import RunConfig

    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", group=64)
    cfg = RunConfig(checkpoint=str(folder), tp=2, rank=1).validate()
    shape = cfg.shape()
    assert (shape.hidden, shape.inter, shape.tp, shape.name) == (64, 128, 2, "checkpoint:c")
    assert cfg.open_checkpoint().rank == 1 and cfg.to_dict()["checkpoint"] == str(folder)
    bad = [
        (RunConfig(checkpoint=str(folder), tp=2, hidden=64), "hidden=64 cannot be combined with a checkpoint"),
        (RunConfig(checkpoint=str(tmp_path / "absent"), tp=2), "does not exist"),
        (RunConfig(checkpoint=str(folder), tp=2, rank=2), "rank=2 must be in 0..1 for tp=2"),
        (RunConfig(rank=1), "rank=1 needs a checkpoint"),
    ]  # fmt: skip
    for config, message in bad:
        with pytest.raises(BadArgument, match=message):
            config.validate()
    # the form validates on every keystroke: the opened checkpoint is kept until its files change
    first = cfg.open_checkpoint()
    assert RunConfig(checkpoint=str(folder), tp=2, rank=1).open_checkpoint() is first
    config_json = folder / "config.json"
    config_json.write_text(config_json.read_text() + "\n")
    assert RunConfig(checkpoint=str(folder), tp=2, rank=1).open_checkpoint() is not first


def test_tui_run_entry_names_what_clashes_with_a_checkpoint(device, tmp_path):
    folder, _ = ckpt_fixture.checkpoint(tmp_path / "c", group=64)
    with pytest.raises(BadArgument, match="hidden=64 cannot be combined with a checkpoint"):
        runner.run_session({"checkpoint": str(folder), "tp": 2, "hidden": 64}, root=tmp_path / "s")
    with pytest.raises(BadArgument, match="rank=1 needs a checkpoint"):
        runner.run_session({"tp": 2, "rank": 1}, root=tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_tui_run_on_a_checkpoint_end_to_end(device, tmp_path):
    """The TUI's run entry (runner.run_session, what its engine backend calls) on a checkpoint."""
    folder, orig = ckpt_fixture.checkpoint(tmp_path / "c", 64, 128, 8, 2, 3, group=64, seed=5)
    config = {"checkpoint": str(folder), "tp": 2, "rank": 1, "kernels": ["w13"], "sets": ["hot"],
              "pairs": 2, "blocks": 2, "calls": 4, "replays": 5}  # fmt: skip
    path = runner.run_session(config, root=tmp_path / "s")
    sess = load_session(path)
    assert sess.status == "complete" and all(g["ok"] for g in sess.gates)
    assert sess.config["checkpoint"] == {"path": str(folder.resolve()), "tp": 2, "rank": 1}
    assert sess.config["source"] == "tui" and sess.config["preset"] == "checkpoint:c"
    assert sess.provenance["banks"]["source"] == "checkpoint"
    made = [(i, b) for i, b in sim_device.UPLOADED if b.kernel == "w13"]
    assert made
    for index, bank in made[:4]:
        q, sc, z = ckpt_fixture.expected(orig, index % 3, 6, "w13", 2, 1, 64)
        assert torch.equal(bank.weights[6], dequantize(q, sc, z).float())
