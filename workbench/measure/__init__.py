"""Measuring on the device: the plan of a run, the banks, the correctness gate, CUDA Graph arms,
the ABBA protocol, the engine that times comparisons, their results, and the NVML monitor."""
