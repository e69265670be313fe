"""The README's two commands work from a fresh virtual environment as from the system Python
(issue 34, item 5).

Most users run the README inside a venv. A venv made with ``--system-site-packages`` from inside
another venv sees the *base* interpreter's packages, not the outer venv's, which is how a test
that reused "this machine's torch" once failed there on ``No module named 'filelock'``. This test
makes a plain venv, lets it see the packages of the interpreter running the tests through a
``.pth`` file (so that torch and the CUDA wheels are not downloaded again: pip finds them
installed), runs the README's first command (install, then `workbench ab`) verbatim inside it on a copy of the checkout, then
the README's test command on the tests that depend on the environment: a kernel build through
the venv's torch and nvcc, the sm_70 compile with the dev extra's NVRTC 12 wheels (compile tier)
and the import rules. The wheel installed from another folder is tests/test_wheel_install.py's,
outside the venv (a target folder is the same from either); run inside too, this test took
48 s in a whole run, against 35 s now alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_toolchain import cuda_build_skip_reason
from fixtures_sessions import REPO

from workbench.core.errors import EXIT_NO_GPU

pytestmark = [pytest.mark.slow, pytest.mark.compile]

# what the README's test command runs inside the venv: the environment-dependent tests
SELECTION = [
    "tests/test_kernels_compile.py::test_failed_build_gives_the_compiler_error_not_a_traceback",
    "tests/test_kernels_compile.py::test_kernels_compile_for_sm70_with_nvrtc12",
    "tests/test_imports.py",
]


def readme_commands() -> tuple[str, str]:
    """The README's first two ```bash blocks: the set-up-and-run command and the test command."""
    blocks = re.findall(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    assert len(blocks) >= 2, "the README starts with the set-up command and the test command"
    setup, test = (b.strip() for b in blocks[:2])
    assert "pip install" in setup and setup.endswith("workbench ab"), setup
    assert test.endswith("python3 -m pytest"), test
    return setup, test


def test_readme_commands_are_read_from_its_first_two_bash_blocks():
    setup, test = readme_commands()
    assert setup.startswith("python3 -m pip install -e")
    assert test.startswith("python3 -m pip install -e") and " && " in test


def _copy_checkout(dst: Path) -> None:
    """The tracked files of the checkout (what a clone holds), without build leftovers."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / name.decode()
        if src.is_file():
            (dst / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / name.decode())


def _venv_seeing_this_python(venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    ours = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    # a .pth line adds the folder to sys.path but runs none of its own .pth files: the outer
    # interpreter's editable install of this checkout stays invisible to the venv
    (Path(purelib) / "outer_interpreter.pth").write_text("\n".join(ours) + "\n")
    return py


def test_the_readmes_two_commands_pass_from_a_fresh_venv(tmp_path):
    if reason := cuda_build_skip_reason():
        pytest.skip(reason)
    setup, test = readme_commands()
    repo = tmp_path / "clone"
    _copy_checkout(repo)
    venv = tmp_path / "venv"
    _venv_seeing_this_python(venv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_CACHE")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    env |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "XDG_CACHE_HOME": str(tmp_path / "xdg")}

    def sh(cmd: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            ["bash", "-c", cmd], cwd=repo, env=env, capture_output=True, text=True, timeout=1500
        )
        assert proc.returncode in ok, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    # the first command installs and runs the main job: without a GPU it says so in one line
    run = sh(setup, ok=(0, EXIT_NO_GPU))
    if run.returncode == EXIT_NO_GPU:
        assert "no usable GPU" in run.stderr and "Traceback" not in run.stderr, run.stderr
    where = sh("python3 -c 'import sys, workbench; print(sys.prefix); print(workbench.__file__)'")
    prefix, module = where.stdout.split()
    assert Path(prefix) == venv  # `python3` is the venv's
    assert Path(module).is_relative_to(repo)  # the venv's editable install, of the copy
    # in one process (-n 0): three files are not worth two xdist workers, each collecting
    # them (13.7 s -> 7.9 s alone, 15 -> 7 s of CPU)
    out = sh(f"{test} -q -p no:cacheprovider -n 0 {' '.join(SELECTION)}").stdout
    assert re.search(r"\b\d+ passed\b", out) and " failed" not in out and " skipped" not in out, out
