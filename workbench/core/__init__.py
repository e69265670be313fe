"""The floor every layer stands on: errors and exit codes, run defaults, command-line bounds, and
the statistics (intervals, verdicts, the stopping rule). Imports nothing else of workbench."""
