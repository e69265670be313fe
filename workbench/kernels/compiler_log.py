"""What the compiler said: the ptxas resource report and the error lines of a failed build.

Plain text parsing, no torch: used by workbench.kernels.build (nvcc through torch's JIT) and
workbench.kernels.portable (NVRTC 12 + ptxas 12 for sm_70).
"""

from __future__ import annotations

import re

from workbench.kernels.variants import Variant

_PTXAS_FN = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_PTXAS_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per kernel entry point: registers, smem, stack frame and spill bytes from `ptxas -v`."""
    out: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        if m := _PTXAS_FN.search(line):
            current = out.setdefault(m.group(1), {"arch": m.group(2)})
        elif current is not None and (m := _PTXAS_FRAME.search(line)):
            current.update(
                stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3))
            )
        elif current is not None and (m := _PTXAS_USED.search(line)):
            current.update(registers=int(m.group(1)), smem=int(m.group(2) or 0))
    return out


def kernel_ptxas(v: Variant, report: dict[str, dict]) -> dict:
    for fn, info in report.items():
        if f"{v.kernel}_kernel" in fn:
            return {"function": fn, **info}
    return {}


def error_excerpt(log: str, limit: int = 25) -> str:
    """The compiler's error lines (with a line of context), not the whole traceback wall."""
    lines = log.splitlines()
    keep = [i for i, ln in enumerate(lines) if re.search(r"\berror\b|Error:|FAILED", ln)]
    picked: list[str] = []
    for i in keep:
        for ln in lines[i : i + 2]:
            if ln not in picked:
                picked.append(ln)
    return "\n".join(picked[:limit] or lines[-limit:])
