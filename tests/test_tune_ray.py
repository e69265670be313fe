"""`workbench tune --ray`: screening on the pool's Ray back end (workbench/run/ray_workers.py: a
task of one GPU per GPU), on a local Ray instance with two fake GPUs (``ray.init(num_gpus=2)``)
and the simulated device in each task.

Ray gives each task one of the two GPU ids and sets CUDA_VISIBLE_DEVICES to it, exactly as on a
cluster; the simulated kernels cost a known factor per candidate (sim_device.PARAM_FACTOR), so
the test knows the winner. Skipped only where ray is not installed (it is in the dev extra).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

import sim_device  # noqa: E402
from test_tune import FASTEST, SLOW, SMALL, key, name, run_tune  # noqa: E402

from workbench import cli  # noqa: E402
from workbench.store.session import load_session  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def device(monkeypatch, tmp_path):
    """The simulated GPU in the driver, with test_tune's candidate costs (the actors get the
    same through run_tune's setup)."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    sim_device.install(monkeypatch)
    sim_device.PARAM_FACTOR.update({("w13", key(FASTEST)): 0.9, ("w13", key(SLOW)): 1.05})


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance with 2 CPUs and 2 fake GPUs; its workers import tests/ (sim_device)
    and this checkout of workbench."""
    path = os.pathsep.join([str(TESTS), str(TESTS.parent), *sys.path])
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})  # fmt: skip
    yield
    ray.shutdown()


def test_ray_actors_screen_on_every_gpu_and_the_session_names_host_and_gpu(
    local_ray, device, tmp_path
):
    res = run_tune(tmp_path, workers=None, ray="local")
    t = res.summary["tune"]
    assert res.status == "complete" and t["workers"] == 2 and t["ray"] == "local"
    assert t["ranked"][0] == name(FASTEST) and t["ranked"][-1] == name(SLOW)
    assert t["best"]["candidate"] == name(FASTEST)
    host = socket.gethostname()
    assert sorted((h["host"], h["gpu"]) for h in t["hosts"]) == [(host, 0), (host, 1)]
    assert sorted(h["cuda_visible_devices"] for h in t["hosts"]) == ["0", "1"]  # Ray set them
    sess = load_session(res.session_path)
    assert not sess.warnings
    screen = [s for s in sess.samples if s["cmp"].startswith("screen/")]
    assert {(s["host"], s["gpu"]) for s in screen} == {(host, 0), (host, 1)}
    assert all(s.get("host") == host for s in sess.samples)  # every sample names its host
    assert {c["candidate"] for c in sess.candidates} == set(t["ranked"])
    assert all(c["host"] == host and c["gpu"] in (0, 1) for c in sess.candidates)
    # the confirmation and the reader verdict stay in the driver, on its own GPU
    assert {s["gpu"] for s in sess.samples if not s["cmp"].startswith("screen/")} == {0}
    assert sum("screening actor on host" in n["text"] for n in sess.notes) == 2


def test_ctrl_c_on_ray_stops_after_the_samples_in_flight(local_ray, device, tmp_path):
    cancel = threading.Event()

    def events(kind, data):
        if kind == "candidate":
            cancel.set()  # as the first Ctrl-C does

    res = run_tune(tmp_path, workers=None, ray="local", cancel=cancel, events=events)
    assert res.status == "interrupted"
    statuses = [c["status"] for c in res.summary["tune"]["screened"]]
    assert "screened" in statuses and len(res.summary["tune"]["unscreened"]) >= 1
    assert load_session(res.session_path).status == "interrupted"


def test_the_ray_address_comes_from_the_option_or_the_environment(monkeypatch, tmp_path):
    from workbench.cli import build_parser
    from workbench.commands.tune import configs_from_args

    argv = ["tune", "--kernel", "w13", "--param", "unroll=4,5", *SMALL]
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert configs_from_args(build_parser().parse_args(argv))[1].ray is None  # local processes
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert configs_from_args(build_parser().parse_args(argv))[1].ray == "10.0.0.1:6379"
    args = build_parser().parse_args([*argv, "--ray", "auto"])
    assert configs_from_args(args)[1].ray == "auto"  # the option wins


def test_without_ray_installed_the_option_is_refused_in_one_line(monkeypatch, capsys):
    from workbench.run import runner

    monkeypatch.setitem(sys.modules, "ray", None)  # an import of ray now fails
    monkeypatch.setattr(runner, "require_gpu", lambda: pytest.fail("GPU work before the check"))
    code = cli.main(["tune", "--kernel", "w13", "--param", "unroll=4,5", "--ray", "auto"])
    err = capsys.readouterr().err.strip()
    # a missing package: exit 3 and the command that installs it (README's exit codes)
    assert code == 3 and "--ray: ray is not installed" in err and len(err.splitlines()) == 1
    assert "pip install 'awq-moe-workbench[ray]'" in err


def test_actors_on_another_gpu_model_are_not_used(local_ray, device, tmp_path, monkeypatch):
    """Screening ratios rank within one GPU model: an actor whose GPU is not the driver's
    model is dropped, with a note; with none left, the run fails in one line."""
    import types

    import torch

    from workbench.core.errors import WorkbenchError

    sim = torch.cuda.get_device_properties(0)  # the actors' simulated GPU
    assert sim.name == "Simulated H200"
    other = types.SimpleNamespace(**{**vars(sim), "name": "NVIDIA H200"})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: other)  # the driver's
    with pytest.raises(WorkbenchError, match="no Ray screening actor screened anything"):
        run_tune(tmp_path, workers=None, ray="local")
    (path,) = (tmp_path / "sessions").iterdir()
    notes = [n["text"] for n in load_session(path).notes]
    assert sum("is a Simulated H200, not the driver's NVIDIA H200" in n for n in notes) == 2
