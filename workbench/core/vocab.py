"""The names a run is made of, the one home of them (docs/DESIGN.md §4.1, §5.2): the kernel
contracts, what a comparison may time, and the expert sets. Every module imports them from here;
`tests/test_one_home.py` fails on a second tuple of them."""

from __future__ import annotations

KERNELS = ("w13", "w2")  # the two ops of one MoE layer that read the metadata (kernel contracts)
KERNEL_CHOICES = (*KERNELS, "step")  # what a comparison times: one op, or a decode step of both
SETS = ("hot", "rotating")  # the expert sets: one routing replayed, or a new one per call
