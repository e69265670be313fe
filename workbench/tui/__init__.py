"""Textual TUI (docs/DESIGN.md §9): build, run, watch and decide in one screen.

The app never touches CUDA, torch or the engine directly: it drives a `backend.Backend`
from thread workers. `engine.EngineBackend` adapts the engine modules; tests replay a session.
Nothing here is imported by `workbench --help`.
"""
