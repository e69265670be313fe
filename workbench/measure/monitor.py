"""NVML monitor (docs/DESIGN.md §6): a sampler thread that watches the GPU while samples are timed.

Every ``interval`` seconds (default 0.05 s = 20 Hz) the thread reads memory used/free/total,
SM and memory clocks, temperature, power and the clock-event ("throttle") reason bits, keeps
the most recent readings in a ring buffer and hands each one to ``sink`` (the session's
``nvml.jsonl``). ``window(t0, t1)`` summarises the readings that cover a timed sample.

Which clock-event bits flag a sample (``FLAG_MASK``): software power cap, hardware slowdown,
sync boost, software/hardware thermal slowdown, hardware power brake, board limit and
reliability. Not flagged: GPU idle (the GPU is idle between samples, that is no throttle),
application/user-defined clocks (a setting, constant over a run) and display clock setting.

Without NVML (no library, no driver, no permission) the monitor still works as an object:
``available`` is False, ``reason`` says "NVML unavailable: ...", and every query returns None.
pynvml is imported inside ``Monitor.__init__`` so tests can inject a fake module.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

# NVML clock-event reason bits (nvml.h, nvmlClocksEventReason*), spelled out so that the mask
# does not depend on which pynvml version is installed.
GPU_IDLE = 0x1
APPLICATIONS_CLOCKS = 0x2  # also "user defined clocks"
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
DISPLAY_CLOCKS = 0x100
BOARD_LIMIT = 0x200
RELIABILITY = 0x400

FLAG_MASK = (
    SW_POWER_CAP
    | HW_SLOWDOWN
    | SYNC_BOOST
    | SW_THERMAL
    | HW_THERMAL
    | HW_POWER_BRAKE
    | BOARD_LIMIT
    | RELIABILITY
)
THROTTLE_NAMES = {
    GPU_IDLE: "idle",
    APPLICATIONS_CLOCKS: "app-clocks",
    SW_POWER_CAP: "sw-power-cap",
    HW_SLOWDOWN: "hw-slowdown",
    SYNC_BOOST: "sync-boost",
    SW_THERMAL: "sw-thermal",
    HW_THERMAL: "hw-thermal",
    HW_POWER_BRAKE: "hw-power-brake",
    DISPLAY_CLOCKS: "display-clocks",
    BOARD_LIMIT: "board-limit",
    RELIABILITY: "reliability",
}
RING = 4096  # readings kept in memory: ~3.4 minutes at 20 Hz, enough for any one comparison


def throttle_names(bits: int | None) -> list[str]:
    """Readable names of the set clock-event bits, e.g. ``["sw-power-cap"]``."""
    if not bits:
        return []
    return [name for bit, name in THROTTLE_NAMES.items() if bits & bit] + (
        [f"0x{bits & ~0x7FF:x}"] if bits & ~0x7FF else []
    )


def _bytes(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def others_changed(
    before: Mapping[int, int | None] | None,
    after: Mapping[int, int | None] | None,
    own: int | None = None,
) -> int | None:
    """How many other processes' device memory changed between two ``Monitor.processes``
    readings around this process's allocations (docs/DESIGN.md §6, "Memory"): each process that came,
    went or changed, this one (``own``, its pid) left out; where NVML lists this process under
    another PID (a container's), less one for it. 0: a change of the device's used memory is
    this process's alone. None: NVML could not tell (no list, or a process's memory not
    reported)."""
    if before is None or after is None:
        return None
    pids = set(before) | set(after)
    if any(before.get(p, 0) is None or after.get(p, 0) is None for p in pids):
        return None
    changed = {p for p in pids if p not in before or p not in after or before[p] != after[p]}
    if own in pids:
        return len(changed - {own})
    return max(len(changed) - 1, 0)


def shared_reading(record: Mapping[str, Any]) -> bool:
    """Whether a bank memory record's NVML change is not its banks' alone: other processes'
    GPU memory changed in its window (its ``others``, ``others_changed``). A record without it
    (sessions before it was kept) or where NVML could not tell is read as before, as its own."""
    return bool(record.get("others"))


@dataclass(frozen=True)
class Reading:
    """One NVML reading (the ``nvml.jsonl`` line). Fields NVML could not answer are None."""

    t: float  # unix seconds
    mem_used: int | None  # bytes
    mem_free: int | None
    mem_total: int | None
    sm_mhz: int | None
    mem_mhz: int | None
    temp_c: int | None
    power_w: float | None
    throttle: int | None  # clock-event reason bits

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Window:
    """What the monitor saw during ``[t0, t1]``: SM clock range and non-idle throttle bits.

    ``readings`` counts the readings used: those inside the window plus the last one before
    ``t0`` (the GPU's state when the sample started; a 10 ms sample often falls between ticks).
    With no reading at all (NVML unavailable) the clocks are None and ``throttle`` is 0.
    """

    readings: int
    sm_mhz_min: int | None
    sm_mhz_max: int | None
    throttle: int  # OR of FLAG_MASK bits seen

    @property
    def clock_spread(self) -> float:
        """(max - min) / max of the SM clock, 0.0 when unknown."""
        if not self.sm_mhz_max or self.sm_mhz_min is None:
            return 0.0
        return (self.sm_mhz_max - self.sm_mhz_min) / self.sm_mhz_max


class Monitor:
    """NVML sampler thread. Use as a context manager or call ``start()``/``stop()``.

    ``interval``: seconds between readings; ``device_index``: NVML index of the GPU;
    ``sink``: called with each ``Reading`` from the sampler thread (exceptions in it are caught
    once, reported in ``sink_error`` and the sink is dropped, so a full disk never kills timing).
    """

    def __init__(
        self,
        interval: float = 0.05,
        device_index: int = 0,
        sink: Callable[[Reading], Any] | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval={interval!r} must be > 0 seconds")
        self.interval = interval
        self.device_index = device_index
        self.sink = sink
        self.sink_error: str | None = None
        self.available = False
        self.reason = ""
        self._nvml: Any = None
        self._handle: Any = None
        self._ring: deque[Reading] = deque(maxlen=RING)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._init_nvml()

    # ------------------------------------------------------------------ NVML access

    def _init_nvml(self) -> None:
        try:
            import pynvml
        except ImportError as e:
            self.reason = f"NVML unavailable: pynvml (nvidia-ml-py) is not importable ({e})"
            return
        try:
            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.device_index)
        except Exception as e:  # NVMLError_* (no library, driver, permission): no NVML here
            self.reason = f"NVML unavailable: {type(e).__name__}: {e}".rstrip(": ")
            return
        self._nvml = pynvml
        self.available = True

    def _try(self, fn: Callable[[], Any]) -> Any:
        # One unsupported query (e.g. power on some boards) must not lose the others.
        try:
            return fn()
        except Exception:
            return None

    def _throttle_bits(self) -> int | None:
        nv, h = self._nvml, self._handle
        getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if getter is None:  # drivers/bindings before the rename
            getter = getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        return None if getter is None else self._try(lambda: int(getter(h)))

    def read(self) -> Reading | None:
        """Take one reading now (from any thread); None without NVML."""
        if not self.available:
            return None
        nv, h = self._nvml, self._handle
        mem = self._try(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        power_mw = self._try(lambda: nv.nvmlDeviceGetPowerUsage(h))
        return Reading(
            t=time.time(),
            mem_used=None if mem is None else int(mem.used),
            mem_free=None if mem is None else int(mem.free),
            mem_total=None if mem is None else int(mem.total),
            sm_mhz=self._try(lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))),
            mem_mhz=self._try(lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))),
            temp_c=self._try(lambda: int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))),
            power_w=None if power_mw is None else power_mw / 1000.0,
            throttle=self._throttle_bits(),
        )

    def memory_used(self) -> int | None:
        """Device memory used now (bytes, all processes), read directly; None without NVML."""
        if not self.available:
            return None
        mem = self._try(lambda: self._nvml.nvmlDeviceGetMemoryInfo(self._handle))
        return None if mem is None else int(mem.used)

    def processes(self) -> dict[int, int | None] | None:
        """Every process with a compute context on the device now, by NVML: pid -> its device
        memory in bytes (None where NVML does not say); None without NVML, or where the list is
        empty (this process holds a context, so NVML cannot see the processes here)."""
        if not self.available:
            return None
        procs = self._try(lambda: self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle))
        if not procs:
            return None
        return {int(p.pid): _bytes(getattr(p, "usedGpuMemory", None)) for p in procs}

    def device_info(self) -> dict[str, Any]:
        """Static facts for provenance: name, UUID, driver, NVML's CUDA version, max clocks."""
        if not self.available:
            return {"nvml": self.reason}
        nv, h = self._nvml, self._handle

        def text(v: Any) -> Any:
            return v.decode() if isinstance(v, bytes) else v

        cuda = self._try(lambda: nv.nvmlSystemGetCudaDriverVersion())
        return {
            "name": text(self._try(lambda: nv.nvmlDeviceGetName(h))),
            "uuid": text(self._try(lambda: nv.nvmlDeviceGetUUID(h))),
            "driver": text(self._try(lambda: nv.nvmlSystemGetDriverVersion())),
            "cuda_driver": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
            "sm_mhz_max": self._try(lambda: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))),
            "power_limit_w": self._try(lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000.0),
        }

    # ------------------------------------------------------------------ sampler thread

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            r = self.read()
            if r is not None:
                with self._lock:
                    self._ring.append(r)
                self._deliver(r)
            next_t += self.interval
            # Sleep to the next tick; if a reading overran it, start again from now.
            delay = next_t - time.monotonic()
            if delay < 0:
                next_t, delay = time.monotonic(), 0.0
            self._stop.wait(delay)

    def _deliver(self, r: Reading) -> None:
        if self.sink is None:
            return
        try:
            self.sink(r)
        except Exception as e:
            self.sink_error = f"{type(e).__name__}: {e}"
            self.sink = None

    def start(self) -> Monitor:
        """Start the sampler (a no-op without NVML or when already running)."""
        if self.available and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="nvml-monitor", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the sampler and shut NVML down. Safe to call twice."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(1.0, 4 * self.interval))
            self._thread = None
        if self.available:
            self._try(self._nvml.nvmlShutdown)
            self.available = False
            self.reason = "NVML unavailable: monitor stopped"

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ queries

    def readings(self, since: float | None = None) -> list[Reading]:
        """Readings still in the ring buffer, oldest first (those with ``t >= since`` if given)."""
        with self._lock:
            out = list(self._ring)
        return out if since is None else [r for r in out if r.t >= since]

    def latest(self) -> Reading | None:
        with self._lock:
            return self._ring[-1] if self._ring else None

    def window(self, t0: float, t1: float) -> Window:
        """Summary of the readings covering ``[t0, t1]`` (unix s): see ``Window``."""
        with self._lock:
            ring = list(self._ring)
        before = [r for r in ring if r.t < t0]
        inside = [r for r in ring if t0 <= r.t <= t1]
        used = ([before[-1]] if before else []) + inside
        clocks = [r.sm_mhz for r in used if r.sm_mhz is not None]
        bits = 0
        for r in used:
            bits |= (r.throttle or 0) & FLAG_MASK
        return Window(
            readings=len(used),
            sm_mhz_min=min(clocks) if clocks else None,
            sm_mhz_max=max(clocks) if clocks else None,
            throttle=bits,
        )
