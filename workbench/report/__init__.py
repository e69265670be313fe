"""The Markdown report of a session (markdown) and the names of the figures it links (plot_files).
The plots package draws those figures and reads this package's wording, never the reverse."""
