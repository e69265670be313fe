"""workbench: profile and tune the metadata readers of AWQ int4 MoE decode kernels."""

__version__ = "0.1.0"
