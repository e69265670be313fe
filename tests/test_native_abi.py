"""The Python side of the C ABI (workbench/kernels/native.py) and where builds and sources live
(workbench/core/paths.py), on the CPU: the compile tier calls real libraries through them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from workbench.core import paths
from workbench.kernels import native

ABI_H = Path(__file__).resolve().parents[1] / "csrc" / "abi.h"


def _desc(t) -> native.WbTensor:
    d = native.WbTensor()
    native.describe(t, "w13", "x", d)
    return d


def test_descriptor_carries_what_the_checks_read():
    t = torch.arange(24, dtype=torch.int32).reshape(2, 3, 4)[:, :, ::2]  # a strided view
    d = _desc(t)
    assert (d.dim, list(d.sizes[:3]), list(d.strides[:3])) == (3, [2, 3, 2], [12, 4, 2])
    assert d.contiguous == 0 and d.data == t.data_ptr()
    assert (d.dtype, d.dtype_name) == (2, b"Int")
    assert (d.device, d.device_type, d.device_index) == (1, b"cpu", -1)
    c = _desc(torch.zeros(5, dtype=torch.float16))
    assert (c.dtype, c.dtype_name, c.contiguous, c.dim) == (3, b"Half", 1, 1)
    # dtypes no op takes still name themselves as torch does
    assert _desc(torch.zeros(1, dtype=torch.int64)).dtype_name == b"Long"
    assert _desc(torch.zeros(1, dtype=torch.int64)).dtype == 0
    assert _desc(torch.zeros(1, dtype=torch.complex64)).dtype_name == b"complex64"


def test_bad_arguments_are_named_before_the_library_is_called():
    with pytest.raises(TypeError, match="w13: argument 'x' must be a torch.Tensor, got int"):
        _desc(3)
    with pytest.raises(ValueError, match="argument 'x' has 9 dimensions, more than the 8"):
        _desc(torch.zeros([1] * 9))


def test_python_and_c_declare_the_same_abi():
    text = ABI_H.read_text()
    assert f"#define WB_ABI_VERSION {native.ABI_VERSION}\n" in text
    assert f"#define WB_MAX_DIMS {native.MAX_DIMS} " in text
    body = re.search(r"typedef struct \{(.*?)\} wb_tensor;", text, re.S).group(1)
    c_fields = re.findall(r"\b(\w+)(?:\[WB_MAX_DIMS\])?;", body)
    assert c_fields == [name for name, _ in native.WbTensor._fields_]
    codes = dict(re.findall(r"WB_DTYPE_(\w+) = (\d+)", text))
    assert {k: int(v) for k, v in codes.items()} == {
        "OTHER": 0, "UINT8": 1, "INT32": 2, "FLOAT16": 3, "FLOAT32": 4
    }  # fmt: skip
    assert native._dtype(torch.uint8)[0] == 1 and native._dtype(torch.float32)[0] == 4


def test_cache_folder_is_the_users_or_the_override(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKBENCH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "xdg" / "workbench"
    from workbench.kernels.build import cache_root
    from workbench.tune.cache import cache_dir as tune_dir

    assert cache_root() == tmp_path / "xdg" / "workbench" / "build"
    assert tune_dir() == tmp_path / "xdg" / "workbench" / "tune"
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine" / "build" and tune_dir() == tmp_path / "mine" / "tune"


def test_sources_come_from_the_checkout_else_the_installed_package(monkeypatch, tmp_path):
    assert paths.data_folder("csrc") == paths.CHECKOUT / "csrc"
    assert (paths.data_folder("examples") / "w13_unroll4" / "variant.toml").is_file()
    with pytest.raises(ValueError, match="'sessions' is not one of csrc, examples"):
        paths.data_folder("sessions")
    # outside a checkout (an installed wheel), the package's own copy
    monkeypatch.setattr(paths, "CHECKOUT", tmp_path)
    got = paths.data_folder("csrc")
    assert got.parts[-3:] == ("workbench", "_data", "csrc")
