"""`workbench tune`: sweep a kernel's compile-time parameters, screen every candidate quickly
(one worker process per visible GPU), confirm the best few with the full block protocol, and
report the best configuration and the reader verdict there (docs/DESIGN.md §11).

* ``space``: the parameter space of a kernel and its candidates (the one adapter to the specs);
* ``cache``: screened results kept across runs, so a second run resumes;
* ``screen``: the screening phase (in process, or one spawned worker per GPU);
* ``tuner``: the tune run on top of the runner and engine (session, confirm, reader verdict).

torch is imported only inside the functions that run on the device.
"""
