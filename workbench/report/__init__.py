"""The Markdown report of a session (markdown) and the decision document (decisions). The
plots package draws the figures the report links (their names: workbench.store.plot_files); the
two read the analysis model and its words, never each other."""
