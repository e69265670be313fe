"""ruff (lint and format, configured in pyproject.toml) is clean: CI runs this with the tests."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"]
)
def test_ruff_is_clean(args):
    pytest.importorskip("ruff", reason="ruff comes with the dev extra")
    r = subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
