"""`workbench ab --ray`: the worker processes as Ray tasks (workbench/run/ray_workers.py), on a
local Ray instance with two fake GPUs and the simulated device in each task.

Ray gives each task one of the two GPU ids and sets CUDA_VISIBLE_DEVICES to it, as on a cluster;
the simulated GPU's UUID names that board. Skipped only where ray is not installed.
"""

from __future__ import annotations

import socket
import sys

import pytest

ray = pytest.importorskip("ray")

import sim_device  # noqa: E402
from test_tune_ray import local_ray  # noqa: E402, F401  (the module's Ray instance)
from test_workers import in_workers, run_ab  # noqa: E402

from workbench import cli  # noqa: E402
from workbench.core.errors import EXIT_BAD_ARGS, EXIT_NO_GPU  # noqa: E402
from workbench.run import ray_workers  # noqa: E402
from workbench.store.session import load_session  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def device(monkeypatch):
    return sim_device.install(monkeypatch)


def test_ab_workers_run_as_ray_tasks_one_per_gpu_into_one_session(
    local_ray,  # noqa: F811
    device,
    monkeypatch,
    capsys,
    tmp_path,
):
    from workbench.core.errors import NoGPUError
    from workbench.run import runner

    def no_local_gpu() -> None:
        raise NoGPUError("no usable GPU here")

    # the workers run on the cluster's GPUs: this host needs none (issue 46: it said "no usable
    # GPU" and stopped)
    monkeypatch.setattr(runner, "require_gpu", no_local_gpu)
    in_workers(monkeypatch, model="board")
    code, s, err = run_ab(capsys, tmp_path, "--workers", "4", "--no-reference", "--kernel",
                          "w13", "--set", "hot", "--ray", "auto")  # fmt: skip
    assert code == 0, err
    sess = load_session(s["session"])
    assert sess.status == "complete" and sess.config["ray"] == "auto"
    assert len(sess.environment["workers"]["gpus"]) == 2  # the cluster's GPUs
    main = sorted(sess.workers, key=lambda w: w["worker"])
    assert [w["status"] for w in main] == ["complete"] * 4
    assert len({w["pid"] for w in main}) == 4  # a fresh process per task
    # each task on one GPU Ray gave it, recording that board's UUID; both boards sampled
    assert {(w["gpu"], w["uuid"]) for w in main} == {("0", "GPU-sim-0"), ("1", "GPU-sim-1")}
    assert {w["host"] for w in main} == {socket.gethostname()}
    # the two GPUs ran at once: some worker started before another one ended on the other GPU
    assert any(a["started"] < b["ended"] and b["started"] < a["ended"]
               for a in main for b in main if a["gpu"] != b["gpu"])  # fmt: skip
    # merged as the local workers are: pairs and blocks unique, the interval over workers
    samples = sess.samples_for("w13/hot")
    assert {x["worker"] for x in samples} == {0, 1, 2, 3}
    assert len({(x["pair"], x["slot"]) for x in samples}) == len(samples) == 4 * 2 * 2 * 4
    (c,) = [c for c in s["comparisons"] if c["id"] == "w13/hot"]
    assert c["verdict"]["method"] == "workers" and c["verdict"]["workers"] == 4


def test_a_mix_of_models_on_the_cluster_is_refused_before_anything_runs(
    local_ray,  # noqa: F811
    device,
    monkeypatch,
    capsys,
    tmp_path,
):
    nodes = [{"Alive": True, "NodeManagerHostname": h,
              "Resources": {"GPU": 1.0, f"accelerator_type:{kind}": 1.0}}
             for h, kind in (("a", "H200"), ("b", "H100"))]  # fmt: skip
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    in_workers(monkeypatch)
    code, s, err = run_ab(capsys, tmp_path, "--workers", "2", "--ray", "auto")
    assert code == EXIT_BAD_ARGS and s is None
    assert "2 models" in err and "ray:a:0: H200" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # no session was begun


def test_cluster_gpus_name_each_gpu_by_its_node_model():
    nodes = [
        {"Alive": True, "NodeManagerHostname": "a",
         "Resources": {"GPU": 2.0, "accelerator_type:H200": 1.0}},
        {"Alive": False, "NodeManagerHostname": "gone", "Resources": {"GPU": 8.0}},
        {"Alive": True, "NodeManagerHostname": "c", "Resources": {"CPU": 4.0}},
    ]  # fmt: skip
    gpus = ray_workers.cluster_gpus(nodes)
    assert [(g.visible, g.name) for g in gpus] == [("ray:a:0", "H200"), ("ray:a:1", "H200")]


@pytest.mark.parametrize("argv, where", [(["--ray", "auto"], "--ray"), ([], "RAY_ADDRESS")])
def test_without_ray_installed_ab_refuses_in_one_line(monkeypatch, capsys, argv, where):
    from workbench.run import runner

    monkeypatch.setitem(sys.modules, "ray", None)  # an import of ray now fails
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setattr(runner, "require_gpu", lambda: pytest.fail("GPU work before the check"))
    assert cli.main(["ab", *argv]) == EXIT_NO_GPU  # a missing package (README's exit codes)
    err = capsys.readouterr().err.strip()
    assert f"{where}: ray is not installed" in err and len(err.splitlines()) == 1, err
    assert "pip install 'awq-moe-workbench[ray]'" in err, err


def test_single_process_ignores_the_ray_address_and_refuses_the_option(monkeypatch):
    from workbench.cli import build_parser
    from workbench.commands.ab import config_from_args
    from workbench.core.errors import BadArgument

    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert config_from_args(build_parser().parse_args(["ab", "--single-process"])).ray is None
    assert config_from_args(build_parser().parse_args(["ab"])).ray == "10.0.0.1:6379"
    with pytest.raises(BadArgument, match="--single-process cannot be combined with --ray"):
        config_from_args(build_parser().parse_args(["ab", "--single-process", "--ray", "x"]))
