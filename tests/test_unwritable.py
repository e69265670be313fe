"""Output folders that cannot be written (issue 33): `plot --out`, `export --out`, `report -o`
and `build` with an unwritable WORKBENCH_CACHE say so in one line naming the path, exit 2, and
leave no temporary file behind.

Tests may run as root, where chmod does not stop a write: a read-only folder is simulated by
refusing, as a read-only file system does (EROFS), the rename into it and the removal of anything
in it; where not root, the folder is made read-only (0500) as well."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from fixtures_sessions import write_session

from workbench import cli


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("sessions")
    return str(write_session(root, seed=5, slug="ro", pairs=8, nvml=False))


def _erofs(path) -> OSError:
    return OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))


@pytest.fixture
def read_only(tmp_path, monkeypatch):
    """A folder nothing can be renamed into or removed from (what the old code tripped on twice:
    the write, then the temporary file's removal in its `finally`)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    real_replace, real_unlink = os.replace, Path.unlink

    def inside(p) -> bool:
        return Path(p).resolve().parent == folder.resolve()

    def replace(src, dst, *a, **k):
        if inside(dst):
            raise _erofs(dst)
        return real_replace(src, dst, *a, **k)

    def unlink(self, missing_ok=False):
        if inside(self):
            real_unlink(self, missing_ok=True)  # the fake leaves no file of its own behind...
            raise _erofs(self)  # ...and answers as a read-only file system does
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)
    if os.geteuid() != 0:
        folder.chmod(0o500)
    yield folder
    folder.chmod(0o700)


def _one_line(capsys, code: int, path) -> str:
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2, out.err
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    assert str(path) in lines[0] and lines[0].startswith("workbench "), lines[0]
    return lines[0]


def test_write_whole_names_the_path_and_leaves_nothing(read_only):
    from workbench.core.errors import BadArgument
    from workbench.core.files import write_whole

    with pytest.raises(BadArgument, match=r"--out '.*x\.json': cannot write it \(Read-only"):
        write_whole(read_only / "x.json", lambda tmp: tmp.write_text("{}"), "--out")
    assert list(read_only.iterdir()) == []


@pytest.mark.slow  # 1 s of the fast lane on the 2-core machine
def test_plot_into_a_read_only_folder(read_only, capsys, session):
    code = cli.main(["plot", session, "--out", str(read_only), "--format", "png"])
    _one_line(capsys, code, read_only)
    assert list(read_only.iterdir()) == []


def test_report_into_a_read_only_folder(read_only, capsys, session):
    out = read_only / "r.md"
    code = cli.main(["report", session, "--no-plots", "-o", str(out)])
    assert "--output" in _one_line(capsys, code, out)
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("fmt", ["json", "per-shape", "vllm"])
def test_export_into_a_read_only_folder(read_only, capsys, session, fmt):
    out = read_only / "x.json" if fmt == "json" else read_only
    code = cli.main(["export", session, "--format", fmt, "--out", str(out)])
    out_err = _one_line(capsys, code, read_only)
    assert "--out" in out_err
    assert list(read_only.iterdir()) == []


def test_build_with_a_cache_under_a_file(tmp_path, monkeypatch, capsys):
    file = tmp_path / "file"
    file.write_text("not a folder\n")
    monkeypatch.setenv("WORKBENCH_CACHE", str(file / "sub"))
    code = cli.main(["build", "--kernel", "w2", "--no-calib", "--json"])
    assert "WORKBENCH_CACHE" in _one_line(capsys, code, file / "sub")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_build_with_a_read_only_cache(tmp_path, monkeypatch, capsys):
    from workbench.kernels import build

    cache = tmp_path / "cache"
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache))
    (cache / "build" / ".locks").mkdir(parents=True)
    real_access = os.access
    # as root, os.access says yes to a chmod-ed folder: answer as a read-only mount does
    monkeypatch.setattr(
        build.os, "access", lambda p, m: False if Path(p) == cache / "build" else real_access(p, m)
    )
    monkeypatch.setattr(build, "_build_in_child", lambda *a: pytest.fail("compiled anyway"))
    code = cli.main(["build", "--kernel", "w2", "--no-calib", "--json"])
    _one_line(capsys, code, cache / "build")
    assert list((cache / "build").iterdir()) == [cache / "build" / ".locks"]
