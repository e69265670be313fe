"""One run from start to end: the runner that drives the engine, keeps the session and sums it up,
and the progress events the faces show."""
