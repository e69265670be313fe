"""`workbench plot` (not implemented yet)."""

from __future__ import annotations

import argparse

from workbench.commands._stub import not_implemented

HELP = "plot (not implemented yet)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    return not_implemented("plot", 5)
