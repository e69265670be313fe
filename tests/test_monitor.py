"""NVML monitor: a fake pynvml (injected through sys.modules, tests only) and the real
unavailable path of this GPU-less machine."""

from __future__ import annotations

import sys
import threading
import time
import types
from dataclasses import dataclass

import pytest

from workbench.measure import monitor as mon
from workbench.measure.monitor import (
    FLAG_MASK,
    Monitor,
    Reading,
    Window,
    others_changed,
    shared_reading,
    throttle_names,
)


@dataclass
class _Mem:
    total: int
    free: int
    used: int


class _NVMLError(Exception):
    pass


def make_fake_pynvml(rng_seed: int = 0, old_api: bool = False, no_power: bool = False):
    """A fake pynvml module whose answers come from a mutable ``state`` dict."""
    import random

    rnd = random.Random(rng_seed)
    state = {
        "used": rnd.randrange(1 << 30, 4 << 30),
        "total": 140 << 30,
        "sm": rnd.randrange(1500, 1980),
        "mem": 3201,
        "temp": rnd.randrange(30, 60),
        "power_mw": rnd.randrange(80_000, 300_000),
        "reasons": 0,
        "calls": 0,
        "shutdown": False,
    }
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = 1, 2, 0
    m.NVMLError = _NVMLError
    m.nvmlInit = lambda: None
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)

    def mem_info(h):
        state["calls"] += 1
        return _Mem(state["total"], state["total"] - state["used"], state["used"])

    m.nvmlDeviceGetMemoryInfo = mem_info
    m.nvmlDeviceGetClockInfo = lambda h, c: state["sm"] if c == 1 else state["mem"]
    m.nvmlDeviceGetMaxClockInfo = lambda h, c: 1980 if c == 1 else 3201
    m.nvmlDeviceGetTemperature = lambda h, s: state["temp"]

    def power(h):
        if no_power:
            raise _NVMLError("Not Supported")
        return state["power_mw"]

    m.nvmlDeviceGetPowerUsage = power
    if old_api:
        m.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: state["reasons"]
    else:
        m.nvmlDeviceGetCurrentClocksEventReasons = lambda h: state["reasons"]
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    m.nvmlDeviceGetUUID = lambda h: "GPU-1234"
    m.nvmlSystemGetDriverVersion = lambda: "580.00"
    m.nvmlSystemGetCudaDriverVersion = lambda: 13000
    m.nvmlDeviceGetPowerManagementLimit = lambda h: 700_000
    # the compute processes: (pid, device bytes or None) each, as NVML's list gives them
    state["procs"] = []
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in state["procs"]
    ]

    def shutdown():
        state["shutdown"] = True

    m.nvmlShutdown = shutdown
    return m, state


@pytest.fixture
def fake(monkeypatch):
    m, state = make_fake_pynvml(rng_seed=int(time.time()) & 0xFFFF)
    monkeypatch.setitem(sys.modules, "pynvml", m)
    return state


def test_reading_reports_every_field(fake):
    fake["reasons"] = mon.SW_POWER_CAP | mon.GPU_IDLE
    m = Monitor()
    assert m.available and m.reason == ""
    r = m.read()
    assert r.mem_used == fake["used"] and r.mem_total == fake["total"]
    assert r.mem_free == fake["total"] - fake["used"]
    assert r.sm_mhz == fake["sm"] and r.mem_mhz == 3201 and r.temp_c == fake["temp"]
    assert r.power_w == pytest.approx(fake["power_mw"] / 1000)
    assert r.throttle == mon.SW_POWER_CAP | mon.GPU_IDLE
    assert set(r.to_dict()) == {
        "t", "mem_used", "mem_free", "mem_total", "sm_mhz", "mem_mhz", "temp_c", "power_w", "throttle",
    }  # fmt: skip
    info = m.device_info()
    assert info["name"] == "NVIDIA H200" and info["uuid"] == "GPU-1234"
    assert info["cuda_driver"] == "13.0" and info["sm_mhz_max"] == 1980


def test_older_throttle_api_and_unsupported_power(monkeypatch):
    m, state = make_fake_pynvml(old_api=True, no_power=True)
    monkeypatch.setitem(sys.modules, "pynvml", m)
    state["reasons"] = mon.HW_SLOWDOWN
    r = Monitor().read()
    assert r.throttle == mon.HW_SLOWDOWN
    assert r.power_w is None  # one unsupported query does not lose the others
    assert r.sm_mhz == state["sm"]


def test_sampler_thread_fills_ring_and_sink_then_stops(fake):
    got: list[Reading] = []
    with Monitor(interval=0.005, sink=got.append) as m:
        deadline = time.time() + 5
        while len(got) < 5 and time.time() < deadline:
            time.sleep(0.005)
        assert len(m.readings()) >= 5
        assert m.latest() is not None
    n = len(got)
    assert n >= 5
    assert all(a.t <= b.t for a, b in zip(got, got[1:], strict=False))
    time.sleep(0.03)
    assert len(got) == n, "sampler kept running after stop()"
    assert fake["shutdown"] and not m.available


def test_failing_sink_is_dropped_not_fatal(fake):
    calls = []

    def sink(r):
        calls.append(r)
        raise OSError("disk full")

    with Monitor(interval=0.005, sink=sink) as m:
        deadline = time.time() + 5
        while len(m.readings()) < 3 and time.time() < deadline:
            time.sleep(0.005)
    assert len(calls) == 1
    assert "disk full" in m.sink_error
    assert len(m.readings()) >= 3


def _reading(t, sm, throttle):
    return Reading(t, 1, 2, 3, sm, 3201, 40, 100.0, throttle)


def test_window_uses_state_before_t0_and_readings_inside(fake):
    m = Monitor()
    m._ring.extend(
        [
            _reading(1.0, 1400, mon.SW_THERMAL),  # too early: superseded by the 2.0 reading
            _reading(2.0, 1980, mon.GPU_IDLE),  # state when the sample starts
            _reading(3.0, 1950, mon.APPLICATIONS_CLOCKS | mon.DISPLAY_CLOCKS),
            _reading(5.0, 1200, mon.HW_POWER_BRAKE),  # after t1: not counted
        ]
    )
    w = m.window(2.5, 4.0)
    assert w.readings == 2
    assert (w.sm_mhz_min, w.sm_mhz_max) == (1950, 1980)
    assert w.throttle == 0, "idle / app-clock / display bits must not flag a sample"
    w2 = m.window(4.5, 5.5)
    assert w2.throttle == mon.HW_POWER_BRAKE and w2.sm_mhz_min == 1200
    assert w2.clock_spread == pytest.approx((1950 - 1200) / 1950)


def test_flag_mask_documents_non_idle_bits():
    for bit in (mon.GPU_IDLE, mon.APPLICATIONS_CLOCKS, mon.DISPLAY_CLOCKS):
        assert not bit & FLAG_MASK
    for bit in (
        mon.SW_POWER_CAP,
        mon.HW_SLOWDOWN,
        mon.SW_THERMAL,
        mon.HW_THERMAL,
        mon.HW_POWER_BRAKE,
    ):
        assert bit & FLAG_MASK
    assert throttle_names(mon.SW_POWER_CAP | mon.HW_THERMAL) == ["sw-power-cap", "hw-thermal"]
    assert throttle_names(0) == []


def test_memory_used_reads_now(fake):
    m = Monitor()
    before = m.memory_used()
    fake["used"] += 123 << 20
    assert m.memory_used() - before == 123 << 20


def test_processes_and_who_else_changed_memory(fake):
    """Each way another process can change the device's used memory inside a bank window is
    counted, and this process's own change never is: listed under its pid, or (a container's
    PID namespace) under another, as the one change there is."""
    import random

    rnd = random.Random(int(time.time()))
    own, a, b, c = rnd.sample(range(100, 1 << 22), 4)
    gib = 1 << 30
    m = Monitor()
    assert m.processes() is None  # an empty list: NVML does not see this process, so none
    fake["procs"] = [(own, 2 * gib), (a, 5 * gib), (b, gib)]
    before = m.processes()
    assert before == {own: 2 * gib, a: 5 * gib, b: gib}
    grown = {**before, own: 3 * gib}  # only this process allocated
    assert others_changed(before, grown, own) == 0
    assert others_changed(before, {**grown, a: 6 * gib}, own) == 1  # another grew
    assert others_changed(before, {**grown, a: 4 * gib, b: 0}, own) == 2  # two freed
    assert others_changed(before, {**grown, c: gib}, own) == 1  # one came
    assert others_changed(before, {own: 3 * gib, a: 5 * gib}, own) == 1  # one went
    assert others_changed(before, before, own) == 0
    # not listed under its own pid: this process is the one change, the rest are others
    assert others_changed(before, grown, own + 1) == 0
    assert others_changed(before, {**grown, a: 6 * gib}, own + 1) == 1
    # NVML could not tell
    fake["procs"] = [(own, None), (a, 5 * gib)]
    assert m.processes() == {own: None, a: 5 * gib}
    assert others_changed(m.processes(), grown, own) is None
    assert others_changed(None, grown, own) is None and others_changed(before, None) is None
    # a record's reading: another's change makes it shared; none, or not known, leaves it its own
    assert shared_reading({"others": 1}) and shared_reading({"others": 3})
    assert not shared_reading({"others": 0}) and not shared_reading({"others": None})
    assert not shared_reading({})


def test_unavailable_on_this_machine(monkeypatch):
    # The real pynvml is installed here but there is no driver: NVML init fails.
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    m = Monitor()
    if m.available:  # pragma: no cover - only on a machine with a driver
        m.stop()
        pytest.skip("NVML is available here")
    assert m.reason.startswith("NVML unavailable: ")
    assert m.read() is None and m.memory_used() is None and m.latest() is None
    assert m.processes() is None
    w = m.window(0, time.time())
    assert w == Window(0, None, None, 0)
    with m:  # starting and stopping without NVML is a no-op, not an error
        assert threading.active_count() >= 1
    assert m.device_info() == {"nvml": m.reason}


def test_import_failure_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    m = Monitor()
    assert not m.available
    assert m.reason.startswith("NVML unavailable: pynvml (nvidia-ml-py) is not importable")


def test_bad_interval():
    with pytest.raises(ValueError, match="interval"):
        Monitor(interval=0)
