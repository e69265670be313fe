"""`workbench doctor` (docs/DESIGN.md §4.3.1): the GPU, torch and nvcc checked against each other,
each mismatch named with what to install. The GPUs are simulated through their facts."""

from __future__ import annotations

import json
import os
import stat

import pytest

from workbench import cli
from workbench.kernels import toolchain as tc
from workbench.kernels.toolchain import Facts, Gpu, diagnose, torch_runs_on

CU130_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # torch 2.14.1+cu130
CU128_ARCHS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
NVCC13 = ["compute_75", "compute_80", "compute_86", "compute_90", "compute_100", "compute_120"]
NVCC12 = ["compute_50", "compute_60", "compute_70", "compute_75", "compute_80", "compute_90"]


def facts(gpu: Gpu | None, torch_cuda="13.0", archs=CU130_ARCHS, nvcc="13.0", nvcc_archs=NVCC13,
          driver_cuda="13.0") -> Facts:  # fmt: skip
    return Facts(
        gpus=[gpu] if gpu else [], driver="580.1" if gpu else None,
        driver_cuda=driver_cuda if gpu else None, nvml_error=None if gpu else "no driver",
        torch_version="2.14.1", torch_cuda=torch_cuda, torch_arch_list=archs,
        nvcc="/opt/cuda/bin/nvcc", nvcc_version=nvcc, nvcc_archs=nvcc_archs,
        cuda_home="/opt/cuda", build_cache="/tmp/c", build_cache_entries=0,
    )  # fmt: skip


V100 = Gpu(0, "Tesla V100-SXM2-32GB", (7, 0), 6 << 20, "spec")
H200 = Gpu(0, "NVIDIA H200", (9, 0), 60 << 20, "torch")


def test_a_v100_with_todays_cuda13_stack_is_told_what_to_install():
    found = diagnose(facts(V100))
    errors = [f for f in found if f.level == "error"]
    assert len(errors) == 2, found
    torch_f, nvcc_f = errors
    assert "sm_70" in torch_f.what and "sm_75, sm_80" in torch_f.what
    assert tc.VOLTA_TORCH in torch_f.fix
    assert "cannot target GPU 0" in nvcc_f.what and "compute_75" in nvcc_f.what
    assert "CUDA 12" in nvcc_f.fix


def test_a_v100_with_a_cuda12_stack_that_serves_it_has_no_error():
    ok = facts(V100, torch_cuda="12.8", archs=CU128_ARCHS, nvcc="12.8", nvcc_archs=NVCC12)
    assert [f for f in diagnose(ok) if f.level == "error"] == []


def test_an_h200_with_todays_stack_agrees():
    assert diagnose(facts(H200)) == []


def test_no_gpu_is_an_error_that_still_says_what_works():
    (f,) = diagnose(facts(None))
    assert f.level == "error" and "no NVIDIA GPU" in f.what and "browsing" in f.fix


def test_cpu_torch_missing_torch_missing_nvcc_old_driver_and_major_mismatch():
    f = facts(H200, torch_cuda=None)
    assert any("CPU build" in x.what and "[gpu]" in x.fix for x in diagnose(f))
    f = facts(H200)
    f.torch_version, f.torch_error = None, "ModuleNotFoundError: No module named 'torch'"
    assert any("not installed" in x.what and "[gpu]" in x.fix for x in diagnose(f))
    f = facts(H200)
    f.nvcc, f.nvcc_error = None, "nvcc not found (set CUDA_HOME or put nvcc on the PATH)"
    assert any(x.what.startswith("nvcc not found") and "CUDA_HOME" in x.fix for x in diagnose(f))
    old = diagnose(facts(H200, driver_cuda="12.4"))
    assert any(x.level == "error" and "older than nvcc 13.0" in x.what for x in old)
    mixed = diagnose(facts(H200, torch_cuda="12.8"))
    assert [x.level for x in mixed] == ["warning"] and "major" in mixed[0].what


def test_unknown_l2_is_a_warning():
    g = Gpu(0, "NVIDIA Unknown", (9, 0))
    assert [x.level for x in diagnose(facts(g))] == ["warning"]


@pytest.mark.parametrize(
    ("archs", "cc", "runs"),
    [
        (["sm_80"], (8, 6), True),  # a cubin runs on a later minor of its major
        (["sm_86"], (8, 0), False),
        (["sm_80"], (9, 0), False),  # not across majors
        (["compute_80"], (9, 0), True),  # PTX is JIT-compiled for a newer GPU
        (["compute_90"], (8, 0), False),
        (["sm_120"], (12, 1), True),
        (["sm_75", "sm_80"], (7, 0), False),
    ],
)
def test_torch_runs_on(archs, cc, runs):
    assert torch_runs_on(archs, cc) is runs


class FakeNvml:
    def __init__(self, devices, cuda=13000, fail=None):
        self.devices, self.cuda, self.fail = devices, cuda, fail

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError(self.fail)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"580.65.06"

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.devices[i]

    def nvmlDeviceGetName(self, h):
        return h[0]

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return h[1]


def test_gather_nvml_reads_names_capabilities_and_the_spec_l2():
    f = Facts()
    tc.gather_nvml(
        f, FakeNvml([(b"Tesla V100-PCIE-16GB", (7, 0)), ("NVIDIA A100-SXM4-80GB", (8, 0))], 12080)
    )
    assert (f.driver, f.driver_cuda, f.nvml_error) == ("580.65.06", "12.8", None)
    assert [(g.name, g.sm, g.l2_bytes, g.l2_source) for g in f.gpus] == [
        ("Tesla V100-PCIE-16GB", "sm_70", 6 << 20, "spec"),
        ("NVIDIA A100-SXM4-80GB", "sm_80", 40 << 20, "spec"),
    ]
    f = Facts()
    tc.gather_nvml(f, FakeNvml([], fail="NVML Shared Library Not Found"))
    assert f.gpus == [] and "Library Not Found" in f.nvml_error


def test_gather_nvcc_parses_version_and_targets(tmp_path, monkeypatch):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 12.6, V12.6.85";\n'
        "else printf 'compute_50\\ncompute_70\\ncompute_90\\n'; fi\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    f = Facts()
    tc.gather_nvcc(f, str(nvcc))
    assert (f.nvcc_version, f.nvcc_archs, f.nvcc_error) == (
        "12.6",
        ["compute_50", "compute_70", "compute_90"],
        None,
    )
    f = Facts()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    monkeypatch.setattr(tc.shutil, "which", lambda name: None)
    import workbench.kernels.build as build

    monkeypatch.setattr(build, "cuda_home", lambda: None)
    tc.gather_nvcc(f, None)
    assert f.nvcc is None and "nvcc not found" in f.nvcc_error


def test_doctor_and_the_build_names_ask_nvcc_once(tmp_path):
    """doctor's facts and the build names read one answer of `nvcc --version`."""
    (tmp_path / "bin").mkdir()
    nvcc, asked = tmp_path / "bin" / "nvcc", tmp_path / "asked"
    nvcc.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo x >> {asked}; '
        'echo "Cuda compilation tools, release 12.8, V12.8.93"; fi\n'
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    from workbench.kernels import build

    f = Facts()
    tc.gather_nvcc(f, str(nvcc))
    assert f.nvcc_version == "12.8"
    assert build.nvcc_version(str(tmp_path)) == "release 12.8, V12.8.93"
    assert asked.read_text().split() == ["x"]  # one run of nvcc --version


def test_doctor_command_on_a_simulated_v100(monkeypatch, capsys):
    monkeypatch.setattr(tc, "gather", lambda nvml=None: facts(V100))
    assert cli.main(["doctor"]) == 3
    out = capsys.readouterr().out
    assert "Tesla V100-SXM2-32GB, sm_70" in out and "L2 6 MiB (spec)" in out
    assert tc.VOLTA_TORCH in out and "CUDA 12" in out
    assert "w13 hot (0.81× L2, may not stay resident)" in out
    assert "step hot (1.22× L2, partly resident)" in out
    monkeypatch.setattr(tc, "gather", lambda nvml=None: facts(H200))
    assert cli.main(["doctor", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["findings"] == [] and d["exit"] == 0
    assert d["facts"]["gpus"][0]["sm"] == "sm_90"
    assert d["default_shape_hot_sets"]["0"] == {"w13": "hot", "w2": "hot", "step": "hot"}


def test_doctor_on_this_machine_reports_the_real_toolchain(capsys):
    """No GPU here: exit 3, with torch's real arch list and the real nvcc named."""
    code = cli.main(["doctor", "--json"])
    d = json.loads(capsys.readouterr().out)
    f = d["facts"]
    if f["gpus"]:
        pytest.skip("a GPU is visible: this test describes a machine without one")
    assert code == 3 and any("no NVIDIA GPU" in x["what"] for x in d["findings"])
    try:
        import torch
    except ImportError:
        assert f["torch_version"] is None and "torch" in f["torch_error"]
    else:
        assert f["torch_version"] == torch.__version__
        assert f["torch_arch_list"] == list(torch.cuda.get_arch_list())
    from workbench.kernels.build import cache_root, cuda_home

    assert f["cuda_home"] == cuda_home() and f["build_cache"] == str(cache_root())
    if f["cuda_home"]:
        assert f["nvcc_version"] and f["nvcc_archs"], f
        assert os.path.exists(f["nvcc"])


# ------------------------------------------------------------ issue 46: doctor guides all the way


def test_a_missing_pynvml_is_a_missing_package_not_a_missing_gpu(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` fails as if not installed
    f = Facts()
    tc.gather_nvml(f)
    assert f.nvml_missing and f.gpus == []
    (finding,) = [x for x in diagnose(f) if "NVML" in x.what or "GPU" in x.what]
    assert "pynvml" in finding.what and "not installed" in finding.what
    assert "[gpu]" in finding.fix and "driver" not in finding.fix
    monkeypatch.setattr(tc, "gather", lambda nvml=None: f)
    assert cli.main(["doctor"]) == 3
    out = capsys.readouterr().out
    assert "unknown: pynvml is not installed" in out and "none visible" not in out


def test_a_bad_workbench_cache_and_cuda_home_are_reported(monkeypatch, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.setenv("WORKBENCH_CACHE", str(a_file / "sub"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nonexistent"))
    monkeypatch.setattr(tc, "gather_nvml", lambda facts, nvml=None: None)
    monkeypatch.setattr(tc, "gather_torch", lambda facts: None)
    code = cli.main(["doctor", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 3 and d["exit"] == 3
    whats = [x["what"] for x in d["findings"]]
    assert any("build cache" in w and "cannot be written" in w for w in whats), whats
    assert any(w.startswith(f"CUDA_HOME={tmp_path / 'nonexistent'} is not a CUDA toolkit")
               for w in whats), whats  # fmt: skip
    assert d["facts"]["cuda_env_bad"] == {"CUDA_HOME": str(tmp_path / "nonexistent")}


def test_the_cache_counts_builds_not_its_locks(monkeypatch, tmp_path, capsys):
    """A cache holding only `.locks` has no build (issue 57: doctor said "(1 build(s))"); nor do
    a build in flight, a killed one or tune's screened results count."""
    from workbench.kernels.build import BUILD_META, cache_root

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    root = cache_root()
    f = Facts()
    tc.gather_cache(f)  # makes the cache and its .locks, as a build does first
    assert (root / ".locks").is_dir() and f.build_cache_entries == 0
    for name, status in (("w13-b3-coop-1234", "ok"), ("w2-b3-scalar-5678", "building")):
        (root / name).mkdir()
        (root / name / BUILD_META).write_text(json.dumps({"status": status}))
    (root / ".building-w13-x").mkdir()
    (root / "tune").mkdir()
    tc.gather_cache(f)
    assert f.build_cache_entries == 1
    monkeypatch.setattr(tc, "gather_nvml", lambda facts, nvml=None: None)
    monkeypatch.setattr(tc, "gather_torch", lambda facts: None)
    cli.main(["doctor", "--json"])
    assert json.loads(capsys.readouterr().out)["facts"]["build_cache_entries"] == 1
