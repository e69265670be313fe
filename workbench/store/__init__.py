"""What a run leaves behind: the session folder and its schema, provenance, and the evidence
check of the docs' citations."""
