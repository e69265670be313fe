"""The test command's own schedule (tests/conftest.py): the files slow or compile as a whole are
collected first, and pytest-xdist hands the files out in that order, not by their number of tests
(a 62-second file of two tests was handed out last: benchmarks/results/test_suite.md)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import pytest_collection_modifyitems


def test_the_files_slow_as_a_whole_are_collected_first_each_file_whole():
    marks = {"a": [], "b": pytest.mark.slow, "c": [pytest.mark.compile], "d": [pytest.mark.gpu]}
    modules = {name: SimpleNamespace(pytestmark=m) for name, m in marks.items()}
    items = [
        SimpleNamespace(module=modules[f], keywords={}, name=f"{f}{i}")
        for f in "abcd"
        for i in range(3)
    ]
    pytest_collection_modifyitems(None, items)
    assert [it.name for it in items] == [f"{f}{i}" for f in "bcad" for i in range(3)]


def test_xdist_hands_out_files_in_the_collection_order(request):
    xdist = pytest.importorskip("xdist")
    if not hasattr(request.config.option, "loadscopereorder"):
        pytest.skip(f"pytest-xdist {xdist.__version__} orders files itself (3.8 has the switch)")
    assert request.config.option.loadscopereorder is False
