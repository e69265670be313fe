"""A simulated GPU for CPU tests of the measurement engine (tests only).

torch.cuda's few entry points the engine uses are replaced by CPU fakes whose kernels compute real
outputs on CPU tensors and advance a fake clock by a known cost per call, so the measured ratios
of a run are known in advance. A test module's fixture calls `install(monkeypatch)`.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import types
import weakref
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

from workbench.kernels import pyarm, tinygemm, triton_moe  # real: make_arm is the peers' path
from workbench.measure import bankstore, calls, engine, graphs


class Clock:
    t = 0.0  # ms


# µs per kernel call of each (kernel, layout, reader): B/A ratios known in advance
COST_US = {
    ("w13", "b3", "scalar"): 2.0,
    ("w13", "b3", "coop"): 1.9,  # 5 % faster
    ("w13", "b4", "scalar"): 1.96,
    ("w2", "b3", "scalar"): 1.5,
    ("w2", "b3", "coop"): 1.65,  # 10 % slower
    ("w2", "b4", "scalar"): 1.48,
}
# Tune candidates (a variant's non-default parameter values): a factor on the cost per (kernel,
# params), so a test knows which candidate must win; values not listed cost as the default.
PARAM_FACTOR: dict = {}
PEER_US = 12.0
FUSED_PEER_US = 3.0  # the triton-moe peer: a fused launch, slower than the kernels
PYTHON_US = 8.0  # every call of a user's Python arm (its torch ops run on the CPU, untimed)
SM_MHZ = 1980.0
# The noise model (tests/noise_model.py): the SDs of a comparison's log ratio B/A per level as
# REML fits them to the H200's default runs ("fitted"), or a named variant ("process", "board").
# Each level is drawn where it lives: the board and the process per (kernel, set, variant) (so
# they cancel in an A/A, whose arms are one variant), the block per captured arm (a block
# captures both arms anew on its placement), the pair per timed sample (each sample is one
# `torch.cuda._sleep` and its replays); each arm draws SD/sqrt(2), so the ratio's is the
# model's. The run level is 0 in every fit and not drawn.
MODEL: str | dict = "fitted"  # a name of noise_model.MODELS, or a test's own {comparison: Noise}
NOISE = 0.0002  # multiplicative, per call: the replays of one sample differ, far below the model
# Memory placement per bank (docs/DESIGN.md §5.5): each placement of a bank gives each reader its
# own speed factor, drawn once and fixed until the bank moves. Off: the model's block level is
# the placement; a test may set it (the same draw for both arms of one reader).
PLACEMENT_SD = 0.0
# First-block mechanisms (docs/investigations/2026-11-30-block-zero.md): each gives the scalar reader a speed factor tied
# to one way block 0 of a group differed from later blocks, so a test can show that the block
# protocol's switch for it makes every counted block the same kind of draw. Off unless a test
# sets one (name -> factor); 0.983 is the H200's size: b3-scalar W13 hot ran 3.74-3.75 us per
# call in block 0 and 3.80-3.83 in blocks 1-5 (sessions/20261130T195329Z_default-r1 and others).
#   "fresh-copy": a bank copy that lands in memory not used before (the bytes of live banks
#                 pass their high-water mark), as block 0's first copies did;
#   "no-neighbours": a bank placed while no peer of its kernel holds device memory;
#   "cold-op": the first COLD_CALLS calls of a kernel op (clocks, first replays, lazy loads);
#   "before-rotating": every call of a kernel while no call of that kernel has read another
#                 routing than the hot set's one (the H200: the hot set's block 0 was the only
#                 one timed before its group's rotating comparison ran, and only it was faster;
#                 groups without a rotating comparison showed no offset).
FIRST_BLOCK: dict[str, float] = {}
# The model's board and process draws of this process, per (kernel, set, variant): the board's
# seeded by its name ($CUDA_VISIBLE_DEVICES in a worker, GPU-sim-<name>), the process's from
# PROCESS_RNG (new_process() makes the next worker's, as a fresh process would)
FIXED: dict[tuple[str, str, str], float] = {}
PROCESS_RNG = np.random.default_rng()
SAMPLE = {"n": 0}  # timed samples so far (each begins with one torch.cuda._sleep)
# A sticky fault (docs/DESIGN.md §9): a variant named here raises CUDA's illegal-address error at
# its first call, and from then on every call into the simulated CUDA fails the same way, as a
# lost context does.
FAULTY: set[str] = set()
FAULTED = {"on": False}
FAULT_TEXT = "CUDA error: an illegal memory access was encountered"
ROUTINGS: dict[str, set] = {}  # kernel -> the expert-id routings its ops have read (this run)
COLD_CALLS = 0
LIVE_PEERS: weakref.WeakSet = weakref.WeakSet()  # peers not yet collected


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        self.t: float | None = None

    def record(self, stream=None) -> None:
        self.t = Clock.t

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.t - self.t


# A speed factor per captured graph (off unless a test sets it): the A/A test on the block path
# needs a factor that differs between the two arms of one block, as separately captured graphs
# could, and that an interval blind to the blocks would miss.
CAPTURE_SD = 0.0


class FakeGraph:
    def __init__(self, issue) -> None:
        self.issue = issue
        self.factor = (
            float(np.exp(CAPTURE_SD * PLACEMENT_RNG.standard_normal())) if CAPTURE_SD else 1.0
        )
        self.noise: ArmNoise | None = None  # the model's draws of its arm (Calls.arm)

    def replay(self) -> None:
        t0 = Clock.t
        self.issue()
        factor = self.factor * (1.0 if self.noise is None else self.noise.factor())
        Clock.t = t0 + (Clock.t - t0) * factor

    def reset(self) -> None:
        self.issue = None


@dataclass
class ArmNoise:
    """The model's draws for one captured arm of one comparison: its board and process factor
    (FIXED), its block's, and its current sample's (drawn at the sample's first replay)."""

    fixed: float
    block: float
    pair_sd: float
    sample: int = -1
    sample_factor: float = 1.0

    def factor(self) -> float:
        if self.sample != SAMPLE["n"]:
            self.sample = SAMPLE["n"]
            z = FakeKernelOp.rng.standard_normal()
            self.sample_factor = float(np.exp(self.pair_sd * z)) if self.pair_sd else 1.0
        return self.fixed * self.block * self.sample_factor


def _fixed(level: str, sd: float, key: tuple[str, str, str]) -> float:
    """The board's or this process's factor of one (kernel, set, variant) (SD ``sd``)."""
    if sd == 0.0:
        return 1.0
    if level == "board":
        board = os.environ.get("CUDA_VISIBLE_DEVICES", "0")
        rng = np.random.default_rng(zlib.crc32("/".join((board, *key)).encode()))
        return float(np.exp(sd * rng.standard_normal()))
    return float(np.exp(sd * PROCESS_RNG.standard_normal()))


def arm_noise(variant: str, kernel: str, set_: str) -> ArmNoise:
    """The draws of an arm of ``variant`` captured now for a ``kernel``/``set_`` comparison."""
    from noise_model import MODELS, noise_of

    n = noise_of(MODELS[MODEL] if isinstance(MODEL, str) else MODEL, kernel, set_)
    half = 1 / np.sqrt(2)  # each arm draws SD/sqrt(2): the ratio B/A has the model's SD
    key = (kernel, set_, variant)
    if key not in FIXED:
        FIXED[key] = _fixed("board", n.board * half, key) * _fixed("worker", n.worker * half, key)
    block = float(np.exp(n.block * half * PLACEMENT_RNG.standard_normal())) if n.block else 1.0
    return ArmNoise(FIXED[key], block, n.pair)  # a sample's SD: that of the pair ratio


def fake_capture(issue, warmup: int = 2):
    for _ in range(warmup):
        issue()
    return FakeGraph(issue)


@dataclass
class FakeBank:
    kernel: str
    layout: str
    K: int
    N: int
    experts: int
    weights: torch.Tensor  # float32 [E, K, N] (decoded; the same for b4 and b3)
    meta: torch.Tensor
    seed: int = 0
    effect: dict = field(default_factory=dict)  # reader -> speed factor of this placement

    @property
    def nbytes(self) -> int:
        return self.weights.numel() * 4 + self.meta.numel()

    def dequantized(self, experts):
        """What the float64 reference reads: the decoded weights rounded to fp16, as a real
        bank's dequantized weights are (~3e-4 from the fake kernels' fp32 sums)."""
        return self.weights[torch.tensor(experts)].half().numpy()

    def dequantize(self, ids):
        """The device-side twin of ``dequantized`` (ops.Bank.dequantize)."""
        return self.weights.index_select(0, ids.long()).half()


def fake_make_bank(shape, kernel, layout, seed, device="cuda"):
    K, N = shape.dims(kernel)
    return _fake_bank(kernel, layout, K, N, shape.experts, seed)


def _fake_bank(kernel, layout, K, N, E, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(E, K, N, generator=g) * 0.05
    r = 4 if layout == "b4" else 3
    meta = torch.randint(1, 255, (E, K // 32, N * r), generator=g, dtype=torch.uint8)
    return _track(FakeBank(kernel, layout, K, N, E, w, meta, seed, _placement_effect()))


DERIVED: list = []  # (kernel, layout, seed) of every bank derived from its b3 twin


def fake_derive_bank(bank, layout):
    """ops.derive_bank: the bank make_bank gives for ``bank``'s seed in ``layout``."""
    assert bank.layout == "b3"
    DERIVED.append((bank.kernel, layout, bank.seed))
    return _fake_bank(bank.kernel, layout, bank.K, bank.N, bank.experts, bank.seed)


UPLOADED: list = []  # every checkpoint bank the engine made: (seed = bank index, FakeBank)


def fake_upload_bank(kernel, layout, weights, meta, seed, device="cuda"):
    """A checkpoint's bank (workbench.measure.banks): its weights decoded through layouts' decoders, as
    the real kernels would read them."""
    from workbench.data.layouts import decode_metadata, dequantize_records, unpack_int4

    E, G, N, _ = weights.shape
    scales, biases = decode_metadata(meta, layout, N)
    w = dequantize_records(unpack_int4(weights), scales, biases).float()
    bank = _track(
        FakeBank(kernel, layout, G * 32, N, E, w, meta.clone(), seed, _placement_effect())
    )
    UPLOADED.append((seed, bank))
    return bank


# bytes of the banks alive and the most ever alive at once, per install (the epoch)
MEMORY = {"live": 0, "peak": 0, "epoch": 0}


def _free(nbytes: int, epoch: int) -> None:
    if epoch == MEMORY["epoch"]:  # a bank of an earlier test counts for nothing now
        MEMORY["live"] -= nbytes


def _track(bank):
    """Count ``bank`` as allocated until it is collected (the "fresh-copy" mechanism)."""
    MEMORY["live"] += bank.nbytes
    MEMORY["peak"] = max(MEMORY["peak"], MEMORY["live"])
    weakref.finalize(bank, _free, bank.nbytes, MEMORY["epoch"])
    return bank


def _placement_effect() -> dict:
    return {r: float(np.exp(PLACEMENT_SD * PLACEMENT_RNG.standard_normal())) for r in READERS}


READERS = ("scalar", "coop")
PLACEMENT_RNG = np.random.default_rng()
RELOCATED: list = []  # (kernel, layout) of every bank the engine moved


def fake_relocate_bank(bank):
    """The same bytes at a new placement: a new speed factor per reader (and the first-block
    mechanisms' factors where they apply)."""
    RELOCATED.append((bank.kernel, bank.layout))
    effect = _placement_effect()
    if "fresh-copy" in FIRST_BLOCK and MEMORY["live"] + bank.nbytes > MEMORY["peak"]:
        effect["scalar"] *= FIRST_BLOCK["fresh-copy"]
    if "no-neighbours" in FIRST_BLOCK and not any(p.kernel == bank.kernel for p in LIVE_PEERS):
        effect["scalar"] *= FIRST_BLOCK["no-neighbours"]
    return _track(dataclasses.replace(bank, effect=effect))


def reseed(seed: int) -> None:
    """Seed the simulated device's noise and placements (a test that counts outcomes), and
    count its memory afresh, as a new process would."""
    global PLACEMENT_RNG
    MEMORY.update(live=0, peak=0, epoch=MEMORY["epoch"] + 1)
    ROUTINGS.clear()
    FakeKernelOp.rng = np.random.default_rng([seed, 0])
    PLACEMENT_RNG = np.random.default_rng([seed, 1])
    new_process(np.random.default_rng([seed, 2]))


def new_process(rng: np.random.Generator | None = None) -> None:
    """The model's draws of a fresh process (a board keeps its own): each (kernel, set, variant)
    draws its process factor anew, from ``rng`` (else a fresh stream, as a new process would)."""
    global PROCESS_RNG
    FIXED.clear()
    PROCESS_RNG = (
        rng if rng is not None else np.random.default_rng(np.random.SeedSequence().entropy)
    )


_MEMO: dict = {}  # the simulated kernels compute each distinct call once (speed only)


def _compute(kernel, inp, weights, out, rw, dtype=torch.float32, key=None, keep=()):
    """Memoized on object ids: `keep` holds the keyed objects alive, so a freed tensor's id cannot
    be reused by a new one and hit a stale entry."""
    if key is not None and key in _MEMO:
        out.copy_(_MEMO[key][0])
        return
    _compute_now(kernel, inp, weights, out, rw, dtype)
    if key is not None:
        _MEMO[key] = (out.clone(), keep)


def _compute_now(kernel, inp, weights, out, rw, dtype):
    w = weights.to(dtype).float()
    if kernel == "w13":
        acc = torch.einsum("k,jkn->jn", inp[0].float(), w)
        n2 = acc.shape[1] // 2
        out.copy_((torch.nn.functional.silu(acc[:, :n2]) * acc[:, n2:]).half())
    else:
        acc = torch.einsum("jk,jkn->jn", inp.float(), w)
        out.copy_((acc * rw[:, None]).sum(0).half()[None])


class FakeKernelOp:
    broken: set[str] = set()  # variant names whose outputs get one flipped bit
    perturbed: dict[str, float] = {}  # variant name -> relative error of all its outputs
    rng = np.random.default_rng(0)
    calls = 0

    def __init__(self, variant, shape, device="cuda", spin_cycles=0) -> None:
        self.variant, self.shape, self.spin = variant, shape, spin_cycles
        self.made_calls = 0  # calls so far (the "cold-op" mechanism)
        factor = PARAM_FACTOR.get((variant.kernel, tuple(getattr(variant, "params", ()))), 1.0)
        self.cost_ms = (
            COST_US[(variant.kernel, variant.layout, variant.reader)] * factor
            + spin_cycles / SM_MHZ
        ) / 1000

    def __call__(self, inp, bank, ids, out, rw=None) -> None:
        if FAULTED["on"] or self.variant.name in FAULTY:
            FAULTED["on"] = True
            raise RuntimeError(FAULT_TEXT)
        assert bank.kernel == self.variant.kernel and bank.layout == self.variant.layout
        assert out.dtype == torch.float16 and ids.dtype == torch.int32
        key = (id(inp), id(bank.weights), tuple(ids.tolist()), "exact")
        _compute(
            self.variant.kernel,
            inp,
            bank.weights.index_select(0, ids.long()),
            out,
            rw,
            key=key,
            keep=(inp, bank.weights),
        )
        if self.variant.name in self.broken:
            out.view(torch.int16).view(-1)[3] ^= 1
        if self.variant.name in self.perturbed:  # a reordered (or wrong) sum: relative error
            out.mul_(1 + self.perturbed[self.variant.name])
        FakeKernelOp.calls += 1
        place = bank.effect.get(self.variant.reader, 1.0)
        self.made_calls += 1
        if "cold-op" in FIRST_BLOCK and self.variant.reader == "scalar":
            place *= FIRST_BLOCK["cold-op"] if self.made_calls <= COLD_CALLS else 1.0
        seen = ROUTINGS.setdefault(self.variant.kernel, set())
        seen.add(key[2])
        if "before-rotating" in FIRST_BLOCK and self.variant.reader == "scalar" and len(seen) == 1:
            place *= FIRST_BLOCK["before-rotating"]
        Clock.t += self.cost_ms * place * (1 + NOISE * self.rng.standard_normal() if NOISE else 1)


class FakePeer:
    made: list = []
    relocated = 0

    def __init__(self, kernel, shape, bank, experts) -> None:
        assert bank.layout == "b3"
        self.kernel, self.bank, self.experts = kernel, bank, list(experts)
        FakePeer.made.append((kernel, id(bank), tuple(experts)))
        LIVE_PEERS.add(self)

    @staticmethod
    def supported() -> bool:
        return True

    def relocate(self) -> None:
        FakePeer.relocated += 1

    def __call__(self, inp, bank, ids, out, rw=None) -> None:
        idx = torch.tensor(self.experts, dtype=torch.long)
        key = (id(inp), id(self.bank.weights), tuple(self.experts), "bf16")
        w = self.bank.weights.index_select(0, idx)
        _compute(
            self.kernel, inp, w, out, rw, torch.bfloat16, key=key, keep=(inp, self.bank.weights)
        )
        Clock.t += PEER_US / 1000


class FakeFusedPeer:
    """The triton-moe peer: one per bank, ids read from the (device) tensor at each call, fp16
    weights (so its outputs differ from the kernels' by rounding only)."""

    made: list = []
    relocated = 0
    broken = False  # scale the outputs by 1.01: a peer outside its tolerance

    def __init__(self, kernel, shape, bank) -> None:
        assert bank.layout == "b3"
        self.kernel, self.bank = kernel, bank
        self.config = "BLOCK_N=16 (simulated)"
        FakeFusedPeer.made.append((kernel, id(bank)))
        LIVE_PEERS.add(self)

    @staticmethod
    def supported() -> bool:
        return True

    def relocate(self) -> None:
        FakeFusedPeer.relocated += 1

    def __call__(self, inp, bank, ids, out, rw=None) -> None:
        key = (id(inp), id(self.bank.weights), tuple(ids.tolist()), "fp16")
        w = self.bank.weights.index_select(0, ids.long())
        keep = (inp, self.bank.weights)
        _compute(self.kernel, inp, w, out, rw, torch.float16, key=key, keep=keep)
        if FakeFusedPeer.broken:
            out.mul_(1.01)
        Clock.t += FUSED_PEER_US / 1000


@dataclass
class FakeBuild:
    variant: object
    lib_sha256: str = "ab" * 32
    cache_hit: bool = True
    log: str = ""
    extra: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return {"variant": self.variant.name, "cache_hit": True, "log": "", "ptxas": {}}


def seed_of_test() -> int | None:
    """The seed of the running test's draws: its pytest node id (less the phase that
    $PYTEST_CURRENT_TEST appends) with $WORKBENCH_SIM_SEED (default 0; set another to draw anew);
    None outside a test. A test reads the same noise in every run, alone or beside others."""
    test = os.environ.get("PYTEST_CURRENT_TEST")
    if not test:
        return None
    node = test.rsplit(" (", 1)[0]
    return zlib.crc32(f"{os.environ.get('WORKBENCH_SIM_SEED', '0')}:{node}".encode())


def install(monkeypatch, fresh: bool = False):
    """Put the simulated GPU in place (undone with `monkeypatch`); returns the list of variants
    that get built. Its noise and placements are drawn from the running test's seed
    (``seed_of_test``); ``fresh``: from fresh entropy, as a spawned worker's new process does."""
    from workbench.kernels import build
    from workbench.kernels.ops import make_inputs

    # The engine collects garbage before it places each block (measure/engine.py, bankstore.py) so
    # that no dropped bank is freed inside a timed window. In a test process that has run hundreds
    # of tests, a full collection walks every object they left alive: collect what is garbage now
    # and freeze the survivors, so the engine's collections walk only what this test made.
    gc.collect()
    gc.freeze()
    built: list = []

    def build_many(variants, max_jobs=None, load=True):
        built.extend(variants)
        return [FakeBuild(v) for v in variants]

    ops = types.ModuleType("workbench.kernels.ops")
    ops.make_bank, ops.make_inputs = fake_make_bank, make_inputs
    ops.relocate_bank = fake_relocate_bank
    ops.derive_bank = fake_derive_bank
    ops.upload_bank = fake_upload_bank
    ops.KernelOp = FakeKernelOp
    monkeypatch.setitem(sys.modules, "workbench.kernels.ops", ops)
    # the peers run through their real Python-arm entries (make_arm) on the simulated peers
    monkeypatch.setattr(tinygemm, "TinyGemmPeer", FakePeer)
    monkeypatch.setattr(triton_moe, "TritonMoePeer", FakeFusedPeer)
    real_launch = pyarm._Launcher.__call__

    def timed_launch(self):
        real_launch(self)
        if not self.spec.builtin:  # the peers' stand-ins advance the clock themselves
            Clock.t += PYTHON_US / 1000

    monkeypatch.setattr(pyarm._Launcher, "__call__", timed_launch)
    monkeypatch.setattr(build, "build_many", build_many)
    # runs on the simulated device measure in the test's own process (defaults.WORKERS = 1)
    # unless a test asks for workers and installs this device in each (install_in_worker)
    from workbench.core import defaults

    monkeypatch.setattr(defaults, "WORKERS", 1)
    props = types.SimpleNamespace(
        name="Simulated H200", major=9, minor=0, multi_processor_count=132,
        total_memory=140 << 30, L2_cache_size=40_000, clock_rate=1_980_000,
        uuid=f"GPU-sim-{os.environ.get('CUDA_VISIBLE_DEVICES', '0')}",  # one per board
    )  # fmt: skip
    cuda = torch.cuda

    def lost(*a):
        if FAULTED["on"]:
            raise RuntimeError(FAULT_TEXT)

    for name, value in {
        "is_available": lambda: True,
        "init": lambda: None,
        "synchronize": lost,
        "empty_cache": lost,
        "memory_allocated": lambda *a: 0,
        "mem_get_info": lambda *a: (100 << 30, 140 << 30),
        "current_device": lambda: 0,
        "device_count": lambda: 1,
        "get_device_properties": lambda *a: props,
        "Event": FakeEvent,
        "_sleep": _sleep,
    }.items():
        monkeypatch.setattr(cuda, name, value)
    monkeypatch.setattr(engine, "DEVICE", "cpu")
    monkeypatch.setattr(bankstore, "DEVICE", "cpu")
    monkeypatch.setattr(calls, "DEVICE", "cpu")
    monkeypatch.setattr(engine, "l2_bytes", lambda d=0: props.L2_cache_size)
    monkeypatch.setattr(graphs, "capture", fake_capture)
    monkeypatch.setattr(calls.Calls, "arm", _noisy_arm(calls.Calls.arm))
    FakeKernelOp.broken = set()
    FakeKernelOp.perturbed = {}
    FAULTY.clear()
    FAULTED["on"] = False
    new_process()
    SAMPLE["n"] = 0
    PARAM_FACTOR.clear()
    _MEMO.clear()
    FakeKernelOp.rng = np.random.default_rng(np.random.SeedSequence().entropy)
    FakePeer.made = []
    FakePeer.relocated = 0
    FakeFusedPeer.made = []
    FakeFusedPeer.relocated = 0
    FakeFusedPeer.broken = False
    RELOCATED.clear()
    UPLOADED.clear()
    DERIVED.clear()
    FIRST_BLOCK.clear()
    ROUTINGS.clear()
    LIVE_PEERS.clear()
    MEMORY.update(live=0, peak=0, epoch=MEMORY["epoch"] + 1)
    global PLACEMENT_RNG
    PLACEMENT_RNG = np.random.default_rng(np.random.SeedSequence().entropy)
    seed = None if fresh else seed_of_test()
    if seed is not None:
        reseed(seed)
    return built


def _sleep(cycles) -> None:
    """torch.cuda._sleep: the blocking kernel before each timed sample, so a new sample begins."""
    SAMPLE["n"] += 1


def _noisy_arm(real):
    """Calls.arm that gives each captured arm the model's draws (ArmNoise)."""

    def arm(self, spec, c, geom, cycle):
        graph_arm = real(self, spec, c, geom, cycle)
        noise = arm_noise(spec.name, c.kernel, c.set)
        for g in graph_arm.graphs:
            g.noise = noise
        return graph_arm

    return arm


def install_in_worker(
    param_factor: dict | None = None,
    broken: tuple = (),
    perturbed: dict | None = None,
    model: str = "fitted",
    faulty: tuple = (),
) -> None:
    """The simulated GPU inside a spawned worker (kept for the process's life), with the parent
    test's parameter costs, broken and faulting variants, and noise model (noise_model.MODELS)."""
    import pytest

    global MODEL
    MODEL = model
    install(pytest.MonkeyPatch(), fresh=True)  # its environment names the parent's test
    FAULTY.update(faulty)
    PARAM_FACTOR.clear()
    PARAM_FACTOR.update(param_factor or {})
    FakeKernelOp.broken = set(broken)
    FakeKernelOp.perturbed = dict(perturbed or {})
