"""Python arms (docs/DESIGN.md §4.8): a spec of ``kind = "python"`` names a callable that returns
a launcher captured into the same graphs as the kernels, gated by its promise, timed in the same
blocks and recorded with its file's hash. On the simulated device (tests/sim_device.py) through
`workbench ab`, plus the example's real torch path on CPU banks against the float64 reference;
every bad input is one clear error naming what is wrong."""

from __future__ import annotations

import hashlib
import json
import secrets
import textwrap
from pathlib import Path

import pytest
import sim_device
import torch

from workbench import cli
from workbench.core.errors import EXIT_BAD_ARGS, EXIT_NUMERICS_DIFFER, BadArgument
from workbench.kernels.specs import REPO, load_spec
from workbench.store.session import load_session

pytestmark = pytest.mark.slow  # end to end, seconds a test: the full suite's, not the fast lane

EXAMPLE = REPO / "examples" / "torch_arm" / "arm.toml"
SMALL = ["--hidden", "64", "--inter", "128", "--experts", "8", "--top-k", "2", "--tp", "1"]
FAST = ["--calls", "4", "--replays", "5", "--blocks", "2", "--pairs", "2"]

# w13 exactly as the simulated kernels compute it (fp32 sums of the fake's fp32 weights)
SIM_W13 = """
import torch

def make_arm(call):
    bank, out, inp = call.bank, call.out, call.inputs
    def launch():
        w = bank.weights.index_select(0, inp["ids"].long()).float()
        acc = torch.einsum("k,jkn->jn", inp["x"][0].float(), w)
        n2 = acc.shape[1] // 2
        out.copy_((torch.nn.functional.silu(acc[:, :n2]) * acc[:, n2:]).half()){tail}
    return launch
"""


@pytest.fixture
def device(monkeypatch):
    return sim_device.install(monkeypatch)


def _arm(folder: Path, code: str, promise: str = "tolerance = 2e-3", **fields: str) -> Path:
    """A Python arm's spec and file in ``folder``; ``fields`` override the spec's lines."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "arm.py").write_text(textwrap.dedent(code))
    lines = {"name": '"mine"', "kind": '"python"', "kernel": '"w13"', "entry": '"arm.py:make_arm"'}
    lines.update(fields)
    body = "".join(f"{k} = {v}\n" for k, v in lines.items() if v is not None)
    p = folder / "arm.toml"
    p.write_text(body + f"[promise]\n{promise}\n")
    return p


def _ab(capsys, tmp_path, b: str, a: str = "b3-scalar", kernel: str = "w13", *more: str):
    code = cli.main(
        ["ab", *SMALL, *FAST, "--kernel", kernel, "--set", "hot", "--a", a, "--b", b,
         "--no-confirm", "--sessions-dir", str(tmp_path / "s"), "--no-plots", "--json", *more]
    )  # fmt: skip
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def _journal(tmp_path: Path) -> list[dict]:
    (folder,) = (tmp_path / "s").iterdir()
    return [json.loads(x) for x in (folder / "journal.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------ the example, end to end


@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_the_torch_example_is_gated_timed_and_recorded(device, capsys, tmp_path, kernel):
    code, s, err = _ab(capsys, tmp_path, str(EXAMPLE), "b3-scalar", kernel)
    assert code == 0, err
    sess = load_session(s["session"])
    main = [g for g in sess.gates if g["cmp"] == f"{kernel}/hot"]
    assert len(main) == 2 and all(g["ok"] and g["gated"] for g in main)  # one per block
    assert all("float64 reference" in g["kind"] for g in main)
    assert 0 < main[0]["arms"]["torch-moe"]["rel_l2"] < 2e-3
    assert main[0]["arms"]["torch-moe"]["tolerance"] == 2e-3
    samples = [r for r in sess.samples if r["cmp"] == f"{kernel}/hot"]
    assert {r["arm"] for r in samples} == {"A", "B"} and {r["block"] for r in samples} == {0, 1}
    us = sim_device.COST_US[(kernel, "b3", "scalar")]  # A's simulated cost per call
    assert s["comparisons"][0]["verdict"]["median"] == pytest.approx(
        sim_device.PYTHON_US / us, rel=0.02
    )
    # references run against a Python arm B as against any candidate, the peers included, and
    # so does the method check (docs/DESIGN.md §5.11): a Python arm's graphs timed again
    ids = [c["id"] for c in sess.comparisons]
    refs = [f"{kernel}/hot/{r}" for r in ("batch", "b4-scalar", "triton-moe")]
    assert ids == [f"{kernel}/hot", *refs]
    check = next(c for c in s["comparisons"] if c["id"] == f"{kernel}/hot/batch")
    assert check["verdict"]["median"] == pytest.approx(sim_device.PYTHON_US / us, rel=0.02)
    rec = sess.provenance["specs"][f"{kernel}:torch-moe"]
    assert rec["kind"] == "python" and rec["entry"] == "torch_arm.py:make_arm"
    assert rec["promise"] == {"tolerance": 2e-3} and rec["origin"] == str(EXAMPLE.resolve())
    file = EXAMPLE.parent / "torch_arm.py"
    assert rec["sources"] == {
        "examples/torch_arm/torch_arm.py": hashlib.sha256(file.read_bytes()).hexdigest()
    }
    # the peers are recorded the same way, with their modules' hashes
    peer = sess.provenance["specs"][f"{kernel}:triton-moe"]
    assert (
        peer["origin"] == "built-in"
        and "workbench/kernels/triton_moe_kernels.py" in (peer["sources"])
    )
    assert not [v for v in device if "torch-moe" in v.name]  # nothing was built for it


def test_the_torch_example_computes_the_op_on_real_banks():
    """No simulation: the example's launcher on real CPU banks (the packed int4 format and b3
    records), against the float64 reference; and ``Bank.dequantize`` is bit-exact."""
    from workbench.data.reference import rel_l2
    from workbench.data.shapes import Shape
    from workbench.kernels.ops import make_bank, make_inputs
    from workbench.kernels.pyarm import PythonArms, load_python_spec
    from workbench.measure.check import reference_output

    shape = Shape(hidden=64, inter=128, experts=8, top_k=3, layers=1, tp=1)
    arms = PythonArms(note=print)
    spec = load_python_spec(EXAMPLE)
    for kernel in ("w13", "w2"):
        seed = secrets.randbits(20)
        bank = make_bank(shape, kernel, "b3", seed=seed, device="cpu")
        inp = make_inputs(shape, kernel, seed=seed + 1, device="cpu")
        ids = inp["ids"].tolist()
        assert torch.equal(
            bank.dequantize(inp["ids"]).view(torch.int16),
            torch.from_numpy(bank.dequantized(ids)).view(torch.int16),
        )
        act = "x" if kernel == "w13" else "inter"
        inputs = {k: inp[k] for k in (act, "ids", "rw") if k != "rw" or kernel == "w2"}
        out = inp["out"]  # NaN-poisoned
        launch = arms.launcher(spec, kernel, shape, bank, 0, ids, inputs, out)
        launch()
        assert not torch.isnan(out).any()
        want = reference_output(kernel, bank, inp)
        err = rel_l2(out.float().numpy().reshape(want.shape), want)
        assert 0 < err < 2e-3, (kernel, err)
        # and a wrong sum is far outside that promise (the check can fail)
        out.mul_(1.01)
        assert rel_l2(out.float().numpy().reshape(want.shape), want) > 2e-3


# ------------------------------------------------------------------ promises


def test_an_identity_promise_is_gated_bit_for_bit(device, capsys, tmp_path):
    spec = _arm(tmp_path / "v", SIM_W13.format(tail=""), 'identical_to = "b3-scalar"')
    code, s, err = _ab(capsys, tmp_path, str(spec), "b3-coop")
    assert code == 0, err
    gates = [g for g in load_session(s["session"]).gates if g["cmp"] == "w13/hot"]
    assert gates and all(g["kind"] == "bit-identical" and g["ok"] for g in gates)
    # one flipped bit breaks the promise: exit 5 before anything is timed
    flipped = SIM_W13.format(tail="\n        out.view(torch.int16).view(-1)[3] ^= 1")
    spec = _arm(tmp_path / "w", flipped, 'identical_to = "b3-scalar"')
    code, _, err = _ab(capsys, tmp_path / "again", str(spec), "b3-coop")
    assert code == EXIT_NUMERICS_DIFFER and "not bit-identical" in err
    assert not [r for r in _journal(tmp_path / "again") if r["type"] == "sample"]


@pytest.mark.parametrize(
    "tail, says",
    [
        ("\n        out.mul_(1.01)", "has relative L2"),  # wrong values
        ("\n        out[0, 0] = float('nan')", "left outputs unwritten (NaN)"),
    ],
)
def test_a_broken_tolerance_promise_exits_5_and_times_nothing(device, capsys, tmp_path, tail, says):
    spec = _arm(tmp_path / "v", SIM_W13.format(tail=tail))
    code, _, err = _ab(capsys, tmp_path, str(spec))
    assert code == EXIT_NUMERICS_DIFFER, err
    assert "mine misses its numerics promise" in err and says in err
    journal = _journal(tmp_path)
    assert not [r for r in journal if r["type"] == "sample"], "timed despite a failed gate"
    assert [r["ok"] for r in journal if r["type"] == "gate"] == [False]


def test_a_module_entry_and_its_supported_hook(device, capsys, tmp_path, monkeypatch):
    """``entry = "module:function"`` imports from sys.path and hashes the module's file; a
    ``supported()`` hook that says False skips the arm's comparisons with a note."""
    pkg = tmp_path / "pkgs"
    pkg.mkdir()
    name = f"wb_test_arm_{secrets.token_hex(4)}"
    (pkg / f"{name}.py").write_text(
        textwrap.dedent(SIM_W13.format(tail="")) + "\nmake_arm.supported = lambda: SUPPORTED\n"
        "SUPPORTED = True\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    spec = _arm(tmp_path / "v", "", entry=f'"{name}:make_arm"')
    code, s, err = _ab(capsys, tmp_path, str(spec), "b3-scalar", "w13", "--no-reference")
    assert code == 0, err
    rec = load_session(s["session"]).provenance["specs"]["w13:mine"]
    assert rec["entry"] == f"{name}:make_arm"
    assert list(rec["sources"].values()) == [
        hashlib.sha256((pkg / f"{name}.py").read_bytes()).hexdigest()
    ]
    import importlib

    monkeypatch.setattr(importlib.import_module(name), "SUPPORTED", False)
    code, _, err = _ab(capsys, tmp_path / "off", str(spec), "b3-scalar", "w13", "--no-reference")
    assert "mine is not supported on this GPU/torch: its comparisons are skipped" in err


# ------------------------------------------------------------------ bad input, named


@pytest.mark.parametrize(
    "code, fields, says",
    [
        ("", {"entry": '"gone.py:make_arm"'}, "entry: file 'gone.py' does not exist"),
        ("", {"entry": '"arm.py"'}, 'must be "path/to/file.py:function"'),
        ("", {"entry": '"arm.toml:make_arm"'}, "entry: 'arm.toml' is not a .py file"),
        ("", {"entry": '"no_such_module_xyz:make_arm"'}, "module 'no_such_module_xyz' cannot be"),
        ("", {"kernel": '"w5"'}, "kernel: must be an op contract or a list of them"),
        ("", {"kernel": '["w13", "w13"]'}, "kernel: must be an op contract"),
        ("", {"layout": '"b5"'}, "layout:"),
        ("", {"reader": '"coop"'}, "reader: unknown key for a Python arm"),
        ("", {"name": '"tinygemm"'}, "name: 'tinygemm' is a built-in arm's name"),
        ("", {"kind": '"rust"'}, 'kind: \'rust\' is not "cuda" or "python"'),
        ("", {"sources": '["gone.py"]'}, "sources: 'gone.py' does not exist"),
    ],
)
def test_bad_specs_are_refused_before_any_gpu_work(tmp_path, capsys, code, fields, says):
    spec = _arm(tmp_path / "v", "def make_arm(call):\n    pass\n", **fields)
    rc = cli.main(["ab", *SMALL, "--kernel", "w13", "--b", str(spec), "--sessions-dir",
                   str(tmp_path / "s"), "--no-plots"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == EXIT_BAD_ARGS, err
    assert "--b" in err and str(spec.resolve()) in err and says in err
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").iterdir())


def test_bad_promises_and_uses_are_named(tmp_path):
    from workbench.measure.plan import parse_arm_spec

    ok = _arm(tmp_path / "a", "def make_arm(call):\n    pass\n")
    with pytest.raises(BadArgument, match="implements w13, not w2"):
        parse_arm_spec("w2", str(ok), "--b")
    with pytest.raises(BadArgument, match="timed per kernel .* not in step"):
        parse_arm_spec("step", str(ok), "--b")
    with pytest.raises(BadArgument, match="a Python arm has nothing to build or check"):
        load_spec(ok)  # workbench build / check / tune take CUDA specs only
    bad = _arm(tmp_path / "b", "", "tolerance = 2e-3\ngated = 1")
    with pytest.raises(BadArgument, match="promise.gated: must be true or false"):
        parse_arm_spec("w13", str(bad), "--b")
    bad = _arm(tmp_path / "c", "", 'identical_to = "b3-fast"')
    with pytest.raises(BadArgument, match="promise.identical_to: 'b3-fast' is not a built-in"):
        parse_arm_spec("w13", str(bad), "--b")
    both = _arm(tmp_path / "d", "", kernel='["w13", "w2"]')
    assert parse_arm_spec("w2", str(both)).python.kernels == ("w13", "w2")


LAUNCH = "    def launch():\n        out.copy_(torch.zeros_like(out))\n"


@pytest.mark.parametrize(
    "body, says",
    [
        # the callable is missing, or not callable
        ("def other(call):\n    pass\n", "arm.py defines no 'make_arm' (its functions: other)"),
        ("make_arm = 3\n", "make_arm in {file} is a int, not a callable"),
        # importing the file fails
        ("def make_arm(call)\n", "importing {file} raised SyntaxError"),
        # the callable raises, or returns something that is not a launcher
        ("def make_arm(call):\n    return 1 / 0\n", "make_arm(call) raised ZeroDivisionError"),
        ("def make_arm(call):\n    return 42\n", "make_arm(call) returned int, not a launcher"),
        ("def make_arm(call):\n    return lambda out: None\n", "takes arguments (out)"),
        # the launcher returns its result instead of writing call.out (wrong shape and dtype)
        ("def make_arm(call):\n    return lambda: torch.zeros(3)\n",
         "launcher returned Tensor float32 [3]: a launcher writes its result into call.out "
         "(Tensor float16 [2, 128]) and returns None"),
        # the launcher writes a result of the wrong shape
        ("def make_arm(call):\n    return lambda: call.out.copy_(torch.zeros(5, 7))\n",
         "w13 launcher raised RuntimeError"),
        # the launcher raises
        ("def make_arm(call):\n    def launch():\n        raise KeyError('w')\n    return launch\n",
         "w13 launcher raised KeyError: 'w' (it writes call.out (Tensor float16 [2, 128]))"),
    ],
)  # fmt: skip
def test_a_faulty_callable_is_one_clear_error(device, capsys, tmp_path, body, says):
    spec = _arm(tmp_path / "v", "import torch\n\n" + body)
    code, _, err = _ab(capsys, tmp_path, str(spec))
    assert code == EXIT_BAD_ARGS, err
    file = (tmp_path / "v" / "arm.py").resolve()
    assert f"Python arm mine ({spec.resolve()}, entry arm.py:make_arm)" in err
    assert says.format(file=file) in err
    assert "Traceback" not in err
    assert not [r for r in _journal(tmp_path) if r["type"] == "sample"]


# ------------------------------------------------------------------ the state and its placement


def test_state_is_relocated_at_each_placement():
    from workbench.kernels.pyarm import _relocated

    class Holder:
        moved = 0

        def relocate(self):
            Holder.moved += 1

    t = torch.randn(4)
    h = Holder()
    state = {"t": t, "pair": (t, [t]), "h": h, "n": 3}
    moved = {k: _relocated(v) for k, v in state.items()}
    assert moved["t"] is not t and torch.equal(moved["t"], t)
    assert moved["t"].data_ptr() != t.data_ptr()
    assert moved["pair"][0].data_ptr() != t.data_ptr()
    assert moved["pair"][1][0].data_ptr() != t.data_ptr()
    assert moved["h"] is h and Holder.moved == 1 and moved["n"] == 3


# ------------------------------------------------------------------ on a real GPU


@pytest.mark.gpu
def test_gpu_the_torch_example_captures_and_is_timed(tmp_path, capsys):
    """On the GPU: the example's launcher replayed from a CUDA graph equals its eager call, and
    `workbench ab` gates it against float64 and times it against b3-scalar (no simulation)."""
    from workbench.data.shapes import PRESETS
    from workbench.kernels.ops import make_bank, make_inputs
    from workbench.kernels.pyarm import PythonArms, load_python_spec
    from workbench.measure.graphs import capture

    shape = next(iter(PRESETS.values()))
    spec = load_python_spec(EXAMPLE)
    for kernel in ("w13", "w2"):
        bank = make_bank(shape, kernel, "b3", seed=secrets.randbits(20))
        inp = make_inputs(shape, kernel, seed=secrets.randbits(20))
        act = "x" if kernel == "w13" else "inter"
        inputs = {k: inp[k] for k in (act, "ids", "rw") if k != "rw" or kernel == "w2"}
        eager = inp["out"].clone()
        PythonArms(note=print).launcher(spec, kernel, shape, bank, 0, [], inputs, eager)()
        out = inp["out"].clone()
        graph = capture(
            PythonArms(note=print).launcher(spec, kernel, shape, bank, 0, [], inputs, out)
        )
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out.view(torch.int16), eager.view(torch.int16)), kernel
    code = cli.main(
        ["ab", "--kernel", "w13", "--set", "hot", "--a", "b3-scalar", "--b", str(EXAMPLE),
         "--no-reference", "--no-confirm", "--blocks", "2", "--workers", "2", "--pairs", "2",
         "--calls", "8", "--replays", "10", "--sessions-dir", str(tmp_path), "--no-plots",
         "--json"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    s = load_session(json.loads(out.out)["session"])
    assert s.gates and all(g["ok"] and "float64" in g["kind"] for g in s.gates)
    assert len(s.samples_for("w13/hot")) > 0
