"""Helper for commands that are not implemented yet: say so plainly and exit non-zero."""

from __future__ import annotations

import sys

from workbench.core.errors import EXIT_NOT_IMPLEMENTED


def not_implemented(name: str, issue: int) -> int:
    print(f"workbench {name}: not implemented yet (tracked in issue {issue})", file=sys.stderr)
    return EXIT_NOT_IMPLEMENTED
