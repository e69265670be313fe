"""Exceptions and the exit codes of docs/DESIGN.md §9 (one place, so CLI and TUI agree)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_BAD_ARGS = 2
EXIT_NO_GPU = 3  # no usable GPU, or a package it or the command needs missing
EXIT_BUILD_FAILED = 4
EXIT_NUMERICS_DIFFER = 5
EXIT_GPU_FAULT = 6  # an arm's fault lost the CUDA context; what was measured before is kept
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout left (`| head`), as for cat


class WorkbenchError(Exception):
    """An error with a message meant for the user and the exit code of the CLI."""

    exit_code = 1


class BadArgument(WorkbenchError, ValueError):
    """Bad input: the message names the argument and its bad value."""

    exit_code = EXIT_BAD_ARGS


class NoGPUError(WorkbenchError):
    exit_code = EXIT_NO_GPU


# The distribution's name on PyPI (pyproject.toml's project name; PyPI's "workbench" is another
# project). The command and the import package stay `workbench`.
DIST = "awq-moe-workbench"
# The light install leaves out what runs need (pyproject.toml's extra of this name).
GPU_EXTRA = "gpu"
GPU_STACK = ("torch", "triton", "pynvml")  # the modules that extra brings


def extra_install(extra: str) -> str:
    """The commands that install pyproject.toml's ``extra``: from the wheel, and in a checkout."""
    return (
        f"pip install '{DIST}[{extra}]' (in a checkout: python3 -m pip install -e \".[{extra}]\")"
    )


def gpu_stack_hint(module: str) -> str:
    """What to install when ``module`` (one of GPU_STACK) is missing."""
    return (
        f"{module} is not installed (the light install has no GPU stack); install the "
        f"{GPU_EXTRA!r} extra: {extra_install(GPU_EXTRA)}"
    )


class MissingGPUStack(NoGPUError):
    """A command needs torch, triton or NVML and the install has none (exit 3, like no GPU)."""

    def __init__(self, module: str) -> None:
        super().__init__(f"needs the GPU stack: {gpu_stack_hint(module)}")
        self.module = module


# The light install's dependencies (pyproject.toml's), by import name: their distribution's name
BASE_DEPENDENCIES = {
    "numpy": "numpy", "scipy": "scipy", "matplotlib": "matplotlib", "safetensors": "safetensors",
    "rich": "rich", "textual": "textual", "markdown_it": "markdown-it-py", "filelock": "filelock",
    "platformdirs": "platformdirs", "tomli": "tomli",
}  # fmt: skip


def missing_package(e: ImportError) -> WorkbenchError | None:
    """The one-line error (exit 3, naming the install command) of an ImportError of a package
    the install should have: the GPU stack, ray (its extra), a light-install dependency. None
    for any other ImportError (a bug, not an install)."""
    name = (getattr(e, "name", None) or "").split(".")[0]
    if name in GPU_STACK:
        return MissingGPUStack(name)
    if name == "ray":
        return MissingExtra("ray", "ray")
    if name in BASE_DEPENDENCIES:
        return MissingDependency(BASE_DEPENDENCIES[name])
    return None


def gpu_stack_module(e: ImportError) -> str | None:
    """The GPU_STACK module an ImportError is about, or None for any other module."""
    name = (getattr(e, "name", None) or "").split(".")[0]
    return name if name in GPU_STACK else None


class MissingExtra(NoGPUError):
    """A package one of pyproject.toml's extras brings is missing (ray for ``--ray``): exit 3,
    as for the GPU stack, with the line that installs the extra."""

    def __init__(self, module: str, extra: str, where: str = "") -> None:
        head = f"{where}: " if where else ""
        super().__init__(
            f"{head}{module} is not installed; install the {extra!r} extra: {extra_install(extra)}"
        )
        self.module = module


class MissingDependency(WorkbenchError):
    """A dependency of even the light install is missing (a partial install): exit 3, as for
    the GPU stack, with the one line that installs it."""

    exit_code = EXIT_NO_GPU

    def __init__(self, module: str) -> None:
        super().__init__(
            f"{module} is not installed (even the light install needs it): "
            f"python3 -m pip install {module}"
        )
        self.module = module


class BuildError(WorkbenchError):
    """A variant failed to compile; ``log`` holds the compiler's output."""

    exit_code = EXIT_BUILD_FAILED

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class NumericsError(WorkbenchError):
    exit_code = EXIT_NUMERICS_DIFFER


class GPUFault(WorkbenchError):
    """A CUDA error that loses the process's context (an arm read past its buffer, a launch
    failed): nothing more can run on the GPU in that process (docs/DESIGN.md §9)."""

    exit_code = EXIT_GPU_FAULT

    def __init__(self, message: str, cmp: str | None = None, arm: str | None = None) -> None:
        super().__init__(message)
        self.cmp, self.arm = cmp, arm


# What CUDA says of the errors that leave its context unusable (sticky errors): every later call
# in the process fails with the same error, so a run stops at the first one.
STICKY_CUDA_ERRORS = (
    "illegal memory access",
    "unspecified launch failure",
    "illegal instruction",
    "misaligned address",
    "hardware stack error",
    "uncorrectable ecc",
    "device-side assert",
    "launch timed out",
    "an illegal",
)


def is_sticky_cuda_error(e: BaseException) -> bool:
    """True when ``e`` (or what it was raised from) says the CUDA context is lost."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, GPUFault):
            return True
        text = str(e).lower()
        if any(s in text for s in STICKY_CUDA_ERRORS):
            return True
        e, seen = (e.__cause__ or e.__context__), seen + 1
    return False


def fault_line(cmp: str | None, arm: str | None, error: str) -> str:
    """The one line a GPU fault is reported with (CLI, TUI, session error)."""
    where = f"arm {arm!r} of {cmp}" if arm and cmp else f"{cmp}" if cmp else "the GPU"
    return (
        f"GPU fault in {where}: {error.strip().splitlines()[0] if error.strip() else 'CUDA error'}"
        " (the CUDA context is lost; what was measured before is kept)"
    )


class SessionError(WorkbenchError):
    """A session folder or file that cannot be loaded (unknown schema, truncated, foreign)."""

    exit_code = EXIT_BAD_ARGS
