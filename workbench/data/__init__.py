"""Weights and their metadata on the host: shapes, the AWQ record layouts, checkpoints, seeded
synthetic data, the float64 reference and memory arithmetic. No device code, no timing."""
