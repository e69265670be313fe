"""The kernel lab (benchmarks/lab) builds from csrc/ with nvcc alone and rejects a bad command
line before touching a GPU. Compile tier: needs nvcc, no GPU, no torch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.compile, pytest.mark.slow]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_lab_builds_from_csrc_and_rejects_unknown_options(tmp_path: Path) -> None:
    binary = tmp_path / "lab"
    build = subprocess.run(
        [
            "bash",
            str(ROOT / "benchmarks/lab/build.sh"),
            str(binary),
            f"ref={ROOT / 'csrc'}",
            f"u4={ROOT / 'csrc'}@-DWB_W13_UNROLL=4,-DWB_W2_UNROLL=3",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    assert binary.stat().st_size > 0
    run = subprocess.run([str(binary), "--rounds"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "option --rounds needs a value" in run.stderr
    run = subprocess.run([str(binary), "--bogus", "1"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "unknown option --bogus" in run.stderr
