"""`workbench capacity` (not implemented yet)."""

from __future__ import annotations

import argparse

from workbench.commands._stub import not_implemented

HELP = "capacity (not implemented yet)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    return not_implemented("capacity", 2)
