"""Modal screens: help, compiler log, session comparison."""
