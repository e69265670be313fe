"""Can the blocks of one comparison be trusted as exchangeable draws? (docs/DESIGN.md §7.8)

The block-level interval (``stats.block_ci``, §7.3) treats the blocks as i.i.d. placements. This
module tests that assumption on the block summaries themselves (the log of each block's median
pair ratio, ``y_b``), and asks how much the verdict depends on any one block:

* **heterogeneity**: is the between-block spread larger than the within-block (pair) noise
  predicts? A one-way ANOVA F test of the pair log-ratios by block (as ``scipy.stats.f_oneway``; the F tail of core/distributions).
  Placement is expected to add spread (that is why the block is the unit), so this is reported,
  not flagged: it says how much of the interval is placement.
* **outlier block**: does one block stand apart from the others? Each block's externally
  studentised residual, ``(y_j - mean_{-j}) / (s_{-j} sqrt(1 + 1/(B-1)))``, is Student t with
  B-2 degrees of freedom when the blocks are i.i.d. normal; two-sided p, Bonferroni over the B
  blocks, tested at ``alpha / 2``.
* **drift**: a linear trend of ``y_b`` over the block index (least squares, as ``scipy.stats.linregress``; its
  slope's t test has B-2 degrees of freedom), tested at ``alpha / 2``.
* **leave one block out**: the verdict recomputed without each block in turn. If the decision
  (FASTER, SLOWER, SAME, AMBIGUOUS: what the recommendation reads) differs without any one block,
  the verdict **rests on one block**, and the blocks that move it are named with the words
  (``Verdict.words``) the comparison would read without them.

``flagged`` is "outlier or drift": under exchangeable normal blocks it fires in at most
``alpha`` (4 %) of runs (Bonferroni over the two tests); ``tests/test_block_diagnostic.py`` checks
that rate and the power against the first-block offset and the drift measured in the committed
sessions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from workbench.core import stats
from workbench.core.distributions import f_sf, t_sf
from workbench.core.fmt import p_value

# The flag's false-alarm rate for exchangeable normal blocks, both tests together (each at 2 %):
# at most 4 %, under the 5 % the flag may cost an honest run (simulated: 4.1 %, §7.8).
ALPHA = 0.04
MIN_BLOCKS = 3  # outlier, drift and leave-one-out need a mean and a spread of the other blocks


@dataclass
class BlockDiagnostic:
    """The diagnosis of one comparison's blocks; ``None`` p-values where a test cannot run."""

    blocks: list[int]  # block ids, ascending
    block_ratios: list[float]  # each block's median pair ratio, in ``blocks`` order
    pairs: list[int]  # complete pairs per block
    heterogeneity_p: float | None  # ANOVA F across blocks (needs 2+ pairs in some block)
    spread_ratio: float | None  # between-block SD / the SD the within-block noise predicts
    outlier: int | None  # the block that stands out most (its id), whether significant or not
    outlier_p: float | None  # its Bonferroni-adjusted two-sided p
    drift_pct: float | None  # fitted change of the ratio per block, in %
    drift_p: float | None
    verdict: str  # the decision with every block (FASTER, SLOWER, SAME, AMBIGUOUS)
    words: str  # its words (Verdict.words)
    without: dict[int, str] = field(default_factory=dict)  # block id -> decision without it
    without_words: dict[int, str] = field(default_factory=dict)  # block id -> words without it
    alpha: float = ALPHA

    @property
    def rests_on(self) -> list[int]:
        """Blocks without which the decision changes (empty: no single block decides it)."""
        return [b for b, w in self.without.items() if w != self.verdict]

    @property
    def outlier_flag(self) -> bool:
        return self.outlier_p is not None and self.outlier_p < self.alpha / 2

    @property
    def drift_flag(self) -> bool:
        return self.drift_p is not None and self.drift_p < self.alpha / 2

    @property
    def flagged(self) -> bool:
        """The blocks do not look exchangeable: one stands out, or they drift."""
        return self.outlier_flag or self.drift_flag

    def flags(self) -> list[str]:
        """Short phrases for a table cell (empty: nothing to say)."""
        out = []
        if self.rests_on:
            out.append(rests_text(self.rests_on))
        if self.outlier_flag:
            out.append(f"block {self.outlier} stands out")
        if self.drift_flag:
            out.append(f"drift {self.drift_pct:+.2f} %/block")
        return out

    def cell(self) -> str:
        """One table cell: the flags, or "ok"."""
        return "; ".join(self.flags()) or "ok"

    def summary(self) -> str:
        """One line with every number behind the diagnosis."""
        parts = []
        if self.rests_on:
            alt = ", ".join(f"without block {b}: {self.without_words[b]}" for b in self.rests_on)
            parts.append(f"the verdict {self.words} rests on one block ({alt})")
            if not self.flagged:  # the note a remaining flag needs (docs/DESIGN.md §7.8)
                parts.append(
                    "no block stands out or drifts: the interval lies at a verdict boundary "
                    "(1 or 1 ± m), so one block less moves its word"
                )
        else:
            parts.append(f"no single block changes the verdict {self.words}")
        if self.outlier is not None:
            parts.append(
                f"block {self.outlier} {'stands out' if self.outlier_flag else 'is the most apart'}"
                f" (ratio {self.block_ratios[self.blocks.index(self.outlier)]:.4f}, "
                f"Bonferroni p = {p_value(self.outlier_p)})"
            )
        if self.drift_pct is not None:
            parts.append(
                f"{'drift' if self.drift_flag else 'trend'} {self.drift_pct:+.3f} % per block "
                f"(p = {p_value(self.drift_p)})"
            )
        if self.spread_ratio is not None:
            parts.append(
                f"between-block spread {self.spread_ratio:.1f}x what the pairs predict "
                f"(F test p = {p_value(self.heterogeneity_p)})"
            )
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["without"] = {str(k): v for k, v in self.without.items()}
        d["without_words"] = {str(k): v for k, v in self.without_words.items()}
        d.update(rests_on=self.rests_on, flagged=self.flagged, flags=self.flags())
        for k in ("heterogeneity_p", "spread_ratio", "outlier_p", "drift_pct", "drift_p"):
            if d[k] is not None and not math.isfinite(d[k]):
                d[k] = None
        return d


def rests_text(blocks: Sequence[int]) -> str:
    """ "rests on block 0", or "rests on any of blocks 0, 3" (each alone changes the verdict);
    empty for none."""
    if not blocks:
        return ""
    if len(blocks) == 1:
        return f"rests on block {blocks[0]}"
    return f"rests on any of blocks {', '.join(map(str, blocks))}"


def _by_block(ratios: Sequence[stats.PairRatio]) -> dict[int, np.ndarray]:
    by: dict[int, list[float]] = {}
    for r in ratios:
        if r.block is not None:
            by.setdefault(int(r.block), []).append(math.log(r.ratio))
    return {b: np.asarray(by[b]) for b in sorted(by)}


def outlier_test(y: np.ndarray) -> tuple[int, float] | None:
    """(index, Bonferroni two-sided p) of the block summary farthest from the others' mean in
    units of the others' spread; None with fewer than MIN_BLOCKS values."""
    nb = int(y.size)
    if nb < MIN_BLOCKS:
        return None
    best: tuple[int, float] | None = None
    for j in range(nb):
        rest = np.delete(y, j)
        sd = float(np.std(rest, ddof=1))
        if sd == 0.0:
            t = 0.0 if y[j] == rest[0] else math.inf
        else:
            t = abs(float(y[j] - rest.mean())) / (sd * math.sqrt(1.0 + 1.0 / rest.size))
        p = min(1.0, nb * 2.0 * t_sf(t, nb - 2))
        if best is None or p < best[1]:
            best = (j, p)
    return best


def drift_test(y: np.ndarray) -> tuple[float, float] | None:
    """(slope of y over the block index, two-sided p of its t test); None below MIN_BLOCKS."""
    if y.size < MIN_BLOCKS:
        return None
    if float(np.ptp(y)) == 0.0:
        return 0.0, 1.0
    # least squares of y on the block index, and the t test of its slope (n - 2 dof)
    x = np.arange(y.size, dtype=np.float64)
    xc, yc = x - x.mean(), y - y.mean()
    sxx = float(np.sum(xc * xc))
    slope = float(np.sum(xc * yc)) / sxx
    resid = yc - slope * xc
    dof = y.size - 2
    se = math.sqrt(float(np.sum(resid * resid)) / dof / sxx)
    if se == 0.0:
        return slope, 0.0
    return slope, min(1.0, 2.0 * t_sf(abs(slope) / se, dof))


def heterogeneity(by: dict[int, np.ndarray]) -> tuple[float | None, float | None]:
    """(ANOVA F p, between-block SD / SD predicted by the within-block noise).

    The prediction: with P_b pairs in block b and within-block SD s_w, the block mean's SD is
    s_w / sqrt(P_b); the ratio compares the observed SD of the block means with the root mean
    of those predicted variances. None where no block has two pairs."""
    groups = list(by.values())
    dof = sum(g.size - 1 for g in groups)
    if len(groups) < 2 or dof <= 0:
        return None, None
    within = math.sqrt(sum(float(np.sum((g - g.mean()) ** 2)) for g in groups) / dof)
    means = np.array([g.mean() for g in groups])
    predicted = within * math.sqrt(float(np.mean([1.0 / g.size for g in groups])))
    observed = float(np.std(means, ddof=1))
    ratio = math.inf if predicted == 0.0 else observed / predicted
    # one-way ANOVA F of the pair log-ratios by block
    k, n = len(groups), sum(g.size for g in groups)
    grand = float(np.mean(np.concatenate(groups)))
    ss_between = sum(g.size * (float(g.mean()) - grand) ** 2 for g in groups)
    ss_within = within * within * dof
    if not all(g.size for g in groups) or n - k <= 0 or ss_within == 0.0:
        p = math.nan  # constant blocks: no F to speak of (scipy reads NaN there too)
    else:
        p = f_sf((ss_between / (k - 1)) / (ss_within / (n - k)), k - 1, n - k)
    return (None if not math.isfinite(p) else p), ratio


def diagnose(
    ratios: Sequence[stats.PairRatio],
    m: float = stats.DEFAULT_M,
    conf: float = stats.DEFAULT_CONF,
    alpha: float = ALPHA,
    verdict: stats.Verdict | None = None,
    rule: str = stats.RULE,
) -> BlockDiagnostic | None:
    """The block diagnostic of one comparison's pair ratios; None with fewer than MIN_BLOCKS
    blocks (a legacy session, or a run too short to say which block is unusual).

    ``verdict``: ``stats.compare(ratios, m, conf)`` where the caller has it already (it is not
    computed again, and its rule is the one used); the verdicts without each block come from
    ``stats.decide``, the same rule without the Verdict's other fields."""
    by = _by_block(ratios)
    if len(by) < MIN_BLOCKS:
        return None
    ids = list(by)
    y = np.array([stats.median_of(v.tolist()) for v in by.values()])  # np.median's floats
    out = outlier_test(y)
    dr = drift_test(y)
    het_p, spread = heterogeneity(by)
    v = stats.compare(ratios, m, conf, rule=rule) if verdict is None else verdict
    without, without_words = {}, {}
    for b in ids:
        rest = [r for r in ratios if r.block != b]
        without[b], without_words[b] = stats.decide(rest, m, conf, v.rule)
    return BlockDiagnostic(
        blocks=ids,
        block_ratios=[math.exp(v) for v in y],
        pairs=[int(v.size) for v in by.values()],
        heterogeneity_p=het_p,
        spread_ratio=spread,
        outlier=None if out is None else ids[out[0]],
        outlier_p=None if out is None else out[1],
        drift_pct=None if dr is None else math.expm1(dr[0]) * 100,
        drift_p=None if dr is None else dr[1],
        verdict=v.verdict,
        words=v.words,
        without=without,
        without_words=without_words,
        alpha=alpha,
    )
