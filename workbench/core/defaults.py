"""Defaults of a run, in one place: the CLI (commands/), the TUI's run form, the runner and its
ProtocolConfig, the statistics and the benchmarks read them from here (torch-free, imports
nothing). Why each value is what it is: docs/DESIGN.md §5 (protocol) and §7 (statistics).
"""

from __future__ import annotations

from workbench.core import vocab
from workbench.core.arms import DEFAULT_REFERENCES

# What `workbench ab` compares
KERNELS = vocab.KERNELS  # the step kernel is opt-in (and confirms the recommended mix)
SETS = vocab.SETS
ARM_A = "b3-scalar"  # the status quo
ARM_B = "b3-coop"  # the candidate

# What `workbench calibrate` measures
CALIBRATE_KERNELS = ("w13",)
CALIBRATE_SETS = ("hot",)
CALIBRATE_ARM = ARM_A

# The timed unit (§5.1): one replay of a CUDA graph of CALLS kernel calls (48 = the layers of
# the default shape); a sample is the median of REPLAYS timed replays. One replay takes
# ~0.1-0.3 ms on an H200 (~1.5 ms for the tinygemm peer): 50 replays keep the default run well
# inside 90 s while each sample's median still rests on 50 values.
CALLS = 48
REPLAYS = 50
BENCH_REPLAYS = 200  # benchmarks/bench_kernels.py: one-off absolute timings, no ABBA pairs

# The method check (§5.11): each main comparison of a reader kernel on these sets is timed a
# second time, by this method of measure/graphs.TIMINGS, on the same captured graphs in the same
# blocks. On the hot sets independent timers read b3-coop/b3-scalar 1.5-2.5 % apart (issue 54),
# on the rotating sets within 0.15 %: only the hot cells pay for it.
CHECK_TIMING = "batch"
CHECK_SETS = ("hot",)

# Workers, blocks and pairs (§5.5, §5.10): 6 fresh worker processes x 2 blocks x 2 pairs. On the
# H200 a fresh process moves a reader ratio by an SD of 0.06-0.09 % and a placement inside one by
# ~0.10 %; blocks inside one process never sample the first, so its interval covered the other
# runs' pooled value 61-83 % of the time, and fewer the more blocks it ran. Simulated from the
# fitted variance components, six processes of two blocks with a t-interval over the processes
# (5 degrees of freedom, t = 2.57) cover 95 % at about the half-width of the old six blocks in one
# process; a seventh process buys less than its ~7 s start-up (docs/DESIGN.md §7.3).
WORKERS = 6
PAIRS = 2
BLOCKS = 2  # counted blocks per worker (per run with --workers 1)
MAX_BLOCKS = 40  # adaptive mode: the cap on blocks
# Before its first counted block a group runs WARMUP_BLOCKS whole blocks (placed, captured,
# timed, journaled, not counted) (§5.5). On the H200 the hot set's first block was the only one
# timed before its group's rotating comparison had ever run, and read ~2 % faster on b3-scalar
# W13 in every default and A/A session, while groups without a rotating comparison showed no
# block-0 offset (sessions of e414c6c, benchmarks/results/h200_e414c6c/README.md); a warm-up
# block runs every comparison of the group first, so every counted block follows the same
# history. Priming placements (untimed copies before block 0) changed nothing there (block 0
# moved by +1.97 % with none, +1.81..2.04 % with two), so they were removed.
WARMUP_BLOCKS = 1
# A warm-up block runs WARMUP_PAIRS ABBA pairs per comparison (after its warm-up samples), as
# many as a counted block. One pair was tried (9763616): on an H100 (GPU-a0105544) the first
# counted block then stood apart in three of five sessions (W13 hot +0.81 %, W2 hot -1.3 %, A/A W2
# +1.1/-0.8 %; benchmarks/results/h100_minute_9763616/README.md), so the warm-up went back to the
# size every committed worker session was measured with (tests/test_warmup.py).
WARMUP_PAIRS = 2
# `ab --settle` without a number: up to 4 looks of WORKERS workers each (24 on the defaults,
# four main rounds at most); each look's interval at 1 - 0.05 / 4 = 98.75 % (core/sequential.py)
SETTLE_LOOKS = 4
TARGET = 0.005  # adaptive mode stops when the CI half-width is at most 0.5 % of the estimate
RETRIES = 2  # re-measures of a flagged sample

# Statistics (§7.4)
M = 0.01  # minimum effect: 1 %
CONF = 0.95

SEED = 0  # weights, inputs and routing
# Reference arms timed against B by default (§5.2): the arm table's (core/arms.py; tinygemm only
# when `--reference` adds it)
REFERENCES = DEFAULT_REFERENCES
SESSIONS_DIR = "sessions"
PLOTS_DIR = "plots"
