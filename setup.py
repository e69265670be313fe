"""The wheel carries the kernel sources and the example: build_py copies csrc/ and examples/ into
the package as workbench/_data/ (found through importlib.resources, workbench/core/paths.py).
Everything else about the package is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("csrc", "examples")  # = workbench/core/paths.py DATA_FOLDERS
SUFFIXES = {".cu", ".cuh", ".h", ".cpp", ".toml", ".md", ".py"}  # .py: Python arms


class BuildPyWithKernels(build_py):
    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        for name in DATA:
            dest = Path(self.build_lib) / "workbench" / "_data" / name
            shutil.rmtree(dest, ignore_errors=True)
            for src in sorted((root / name).rglob("*")):
                if src.is_file() and src.suffix in SUFFIXES:
                    out = dest / src.relative_to(root / name)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, out)


setup(cmdclass={"build_py": BuildPyWithKernels})
