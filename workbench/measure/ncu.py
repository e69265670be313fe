"""Nsight Compute (`ncu`) as a counter source: where it is, the command line, its CSV parsed.

Pure standard library: the command runs elsewhere (workbench/measure/counters.py); what comes
back is the text of `ncu --csv --page raw --print-units base`, one row per profiled launch after
a header row of metric names and a row of their units (ncu's own `==PROF==` lines and anything
the profiled program printed may come before them). tests/test_ncu.py holds the parser to
outputs recorded on an H200 (tests/data/ncu/).
"""

from __future__ import annotations

import csv
import glob
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from workbench.core.errors import EXIT_NO_GPU, WorkbenchError

# What ncu collects: these sections' metrics, plus the byte counts named below, on every launch.
SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "SchedulerStats", "WarpStateStats")
EXTRA_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum")

# our key -> the ncu metric (raw page) it is read from
METRICS = {
    "duration_s": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_bytes": "lts__t_bytes.sum",
    "l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "issue_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    "grid": "launch__grid_size",
    "block": "launch__block_size",
    "waves": "launch__waves_per_multiprocessor",
    "sm_hz": "gpc__cycles_elapsed.avg.per_second",  # SpeedOfLight's "SM Frequency"
}
# other names of the same quantity (ncu releases differ)
FALLBACK = {
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_hz": "sm__cycles_elapsed.avg.per_second",
}
# warp cycles per issued instruction spent in each stall reason (WarpStateStats)
STALL_RE = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
NOT_A_STALL = {"selected"}  # the warp that issued: ncu charts it beside the stalls

# the unit (lower case) ncu prints -> factor to seconds, bytes or hertz, per dimension
TIME = {
    "nsecond": 1e-9,
    "ns": 1e-9,
    "usecond": 1e-6,
    "us": 1e-6,
    "msecond": 1e-3,
    "ms": 1e-3,
    "second": 1.0,
    "s": 1.0,
}
BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9}
RATE = {
    "hz": 1.0,
    "khz": 1e3,
    "mhz": 1e6,
    "ghz": 1e9,
    "cycle/second": 1.0,
    "cycle/usecond": 1e6,
    "cycle/nsecond": 1e9,
}
DIMENSION = {"duration_s": TIME, "dram_read_bytes": BYTES, "dram_write_bytes": BYTES,
             "l2_bytes": BYTES, "sm_hz": RATE}  # fmt: skip

PERMISSION = "ERR_NVGPUCTRPERM"  # what ncu prints when the user may not read the counters
NOTHING = "No kernels were profiled"  # its warning when no launch matched --kernel-name
KERNEL_FILTER = "regex:^(w13|w2)_kernel"  # ncu matches the name before its parameter list


class CountersUnavailable(WorkbenchError):
    """ncu is missing or may not read this GPU's counters: exit 3, as for a missing GPU."""

    exit_code = EXIT_NO_GPU


class CountersFailed(WorkbenchError):
    """ncu ran but gave no usable profile (its error line, or no launch matched)."""

    exit_code = 1


@dataclass
class Launch:
    """One profiled launch: the kernel's name, ncu's block and grid text, metrics in base units
    (seconds, bytes, hertz, percent, counts; None where ncu printed n/a or lacked the metric)."""

    kernel_name: str
    block: str
    grid: str
    metrics: dict[str, float | None] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)  # reason -> cycles per issue

    def top_stalls(self, n: int = 3) -> list[tuple[str, float]]:
        return sorted(self.stalls.items(), key=lambda kv: -kv[1])[:n]


TOOLKITS = ("/usr/local/cuda*/bin/ncu",)  # where CUDA toolkits install it


def find_ncu(env: dict[str, str] | None = None, toolkits: tuple[str, ...] = TOOLKITS) -> str:
    """ncu's path: $WORKBENCH_NCU, the PATH, $CUDA_HOME/bin, beside nvcc, /usr/local/cuda*/bin."""
    env = os.environ if env is None else env
    given = env.get("WORKBENCH_NCU")
    if given:
        if Path(given).is_file() and os.access(given, os.X_OK):
            return given
        raise CountersUnavailable(f"WORKBENCH_NCU={given!r} is not an executable file")
    candidates = [shutil.which("ncu", path=env.get("PATH"))]
    if env.get("CUDA_HOME"):
        candidates.append(str(Path(env["CUDA_HOME"]) / "bin" / "ncu"))
    nvcc = shutil.which("nvcc", path=env.get("PATH"))
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent / "ncu"))
    candidates += [c for pattern in toolkits for c in sorted(glob.glob(pattern), reverse=True)]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise CountersUnavailable(
        "--counters needs Nsight Compute: ncu is not on the PATH, in $CUDA_HOME/bin, beside nvcc "
        "or in /usr/local/cuda*/bin (install it with the CUDA toolkit, or set WORKBENCH_NCU)"
    )


def command(ncu: str, log_file: str, warm_l2: bool, target: list[str]) -> list[str]:
    """The ncu command line profiling every w13/w2 kernel launch of ``target``.

    ``warm_l2``: leave the caches as the program left them (a hot set, which the program warms);
    else ncu flushes them before each launch (a rotating set, read from DRAM). Clocks stay as the
    GPU runs them (--clock-control none): the timed runs do not lock them either."""
    cmd = [ncu, "--csv", "--page", "raw", "--print-units", "base", "--log-file", log_file]
    cmd += ["--kernel-name", KERNEL_FILTER, "--clock-control", "none"]
    cmd += ["--cache-control", "none" if warm_l2 else "all"]
    for s in SECTIONS:
        cmd += ["--section", s]
    return [*cmd, "--metrics", ",".join(EXTRA_METRICS), *target]


def check_log(text: str, returncode: int) -> None:
    """Raise CountersUnavailable (no permission) or CountersFailed (an ncu error) from its log."""
    if PERMISSION in text:
        raise CountersUnavailable(
            f"ncu may not read this GPU's performance counters ({PERMISSION}): run as a user "
            "the driver allows (NVreg_RestrictProfilingToAdminUsers=0) or as root"
        )
    errors = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
    if errors:
        raise CountersFailed(f"ncu: {errors[0].removeprefix('==ERROR==').strip()}")
    if NOTHING in text:
        raise CountersFailed(f"ncu profiled no launch: none matched {KERNEL_FILTER}")
    if returncode != 0:
        raise CountersFailed(f"ncu exited with status {returncode} and no ==ERROR== line")


def number(text: str) -> float | None:
    """A CSV cell as a float: thousands separators dropped; n/a, empty or non-finite -> None."""
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "inf", "-inf"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_csv(text: str) -> list[Launch]:
    """The launches of a `--csv --page raw` output, in launch order. Raises CountersFailed when
    the text holds no header row or a row whose width differs from the header's."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID","Process ID"')), None)
    if start is None:
        raise CountersFailed("ncu printed no CSV header (no kernel launch was profiled)")
    rows = list(csv.reader(lines[start:]))
    header, body = rows[0], [r for r in rows[1:] if r]
    if body and body[0][0] == "":  # the units row
        units, body = body[0], body[1:]
    else:
        units = [""] * len(header)
    col = {name: i for i, name in enumerate(header)}
    for need in ("Kernel Name", "Block Size", "Grid Size"):
        if need not in col:
            raise CountersFailed(f"ncu's CSV has no {need!r} column")
    out = []
    for n, r in enumerate(body):
        if len(r) != len(header):
            raise CountersFailed(f"ncu's CSV row {n} has {len(r)} cells, its header {len(header)}")
        out.append(_launch(r, col, units))
    return out


def _value(r: list[str], col: dict[str, int], units: list[str], key: str, metric: str):
    """A metric in our unit; a unit this module does not know for its dimension is an error,
    never a number off by a power of ten."""
    i = col.get(metric)
    v = None if i is None else number(r[i])
    if v is None:
        return None
    table = DIMENSION.get(key)
    unit = units[i].strip().lower()
    if table is None:
        return v
    if unit not in table:
        raise CountersFailed(f"ncu printed {metric} in {units[i]!r}, a unit not known here")
    return v * table[unit]


def _launch(r: list[str], col: dict[str, int], units: list[str]) -> Launch:
    metrics = {}
    for key, metric in METRICS.items():
        v = _value(r, col, units, key, metric)
        if v is None and key in FALLBACK:
            v = _value(r, col, units, key, FALLBACK[key])
        metrics[key] = v
    stalls = {}
    for name, i in col.items():
        m = STALL_RE.match(name)
        v = number(r[i]) if m else None
        if m and v is not None and m.group(1) not in NOT_A_STALL:
            stalls[m.group(1)] = v
    return Launch(
        kernel_name=r[col["Kernel Name"]],
        block=r[col["Block Size"]],
        grid=r[col["Grid Size"]],
        metrics=metrics,
        stalls=stalls,
    )
