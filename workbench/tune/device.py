"""The engine of a tune run (imports torch): the engine of `workbench ab`, whose protocol changes
between screening and confirmation.

Every comparison of a tune (``space.TuneComparison``) is gated by the candidate's own promise
(docs/DESIGN.md §11.1), which workbench.measure.gate reads from the comparison: bit-identity with
the default where the parameters keep the default's summation order, else a bound on the
relative L2 of the candidate's outputs against the default's. A failure raises NumericsError,
which excludes the candidate.
"""

from __future__ import annotations

import dataclasses

from workbench.measure.abba import ProtocolConfig
from workbench.measure.engine import Engine


class TuneEngine(Engine):
    def use_protocol(self, protocol: ProtocolConfig) -> None:
        """Screening and confirmation run under different protocols on the same banks."""
        self.cfg = dataclasses.replace(self.cfg, protocol=protocol)
