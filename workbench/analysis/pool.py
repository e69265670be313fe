"""Verdicts over several sessions of the same run: the between-run uncertainty one session lacks.

One session's confidence interval covers the noise between its ABBA pairs, not what changes from
one process to the next (where the banks land in memory, for one). On the H200 three default runs
of the same sources gave w13/hot ratios of 1.031, 1.070 and 0.998 while each CI was about ±0.02 %.
So a claim for a pull request should hold in every replicate session.

Rule (conservative, torch-free): per comparison id present in every session, the pooled verdict is
FASTER, SLOWER or SAME only when every session reached that same verdict; otherwise VARIES, which
counts as AMBIGUOUS for the recommendation. The reported range is the min and max of the session
medians. Read "all agree" as a sign test on the session medians: with no true effect, all n
medians fall on one side of 1 by chance with probability 2^(1-n) (3 sessions: 25 %, 6: 3 %), so
a pooled verdict from few sessions is a consistency check, and six or more make it a claim.

Beside the verdicts, each comparison gets the pooled estimate (the geometric mean of the session
estimates: with equal block counts, the geometric mean of every block median of every session),
a t-interval over sessions (the session as the unit), and how many of the sessions' own
intervals contain the pooled estimate: the check that one run's interval is honest about
run-to-run variation (docs/DESIGN.md §7.3, §7.6). Sessions from several boards (their GPUs'
UUIDs) are pooled with the board as the unit: a run samples its own board only, and boards of one
model differ by more than one run's interval (0.13 % on W13 rotating between two H200s, 0.66 % on
W13 hot), so the estimate is the mean of the boards' and the interval a t-interval over boards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from workbench.analysis.compare import compare_sessions
from workbench.analysis.components import Fit, fit_components
from workbench.analysis.model import ComparisonResult, comparison_results
from workbench.analysis.recommend import Recommendation, recommendations
from workbench.core.distributions import binom_tail, f_sf, t_quantile
from workbench.core.errors import BadArgument
from workbench.core.stats import DEFAULT_CONF, decision_of, t_interval
from workbench.store.session import Session

VARIES = "VARIES"
BOARDS_DIFFER_P = 0.01  # the boards' F test below this: "the boards differ" (pool and fleet)


@dataclass
class PooledComparison:
    id: str
    kernel: str
    set: str
    role: str
    medians: list[float]  # one per session, in session order
    verdicts: list[str]
    verdict: str  # the sessions' label (Verdict.label) when every session's is it, else VARIES
    cis: list[tuple[float, float]] = field(default_factory=list)  # each session's interval
    pairs: list[int] = field(default_factory=list)  # each session's complete pairs
    words: list[str] = field(default_factory=list)  # each session's verdict words
    rests_on: list[list[int]] = field(default_factory=list)  # each session's deciding blocks
    block_ratios: list[list[float]] = field(default_factory=list)  # each session's, by block
    boards: list[str] = field(default_factory=list)  # each session's board(s) (session_board)
    ratios: list[Any] = field(default_factory=list, repr=False)  # each session's PairRatios
    units: list[int] = field(default_factory=list)  # each interval's units (workers, blocks...)
    _coverage: tuple | None = field(default=None, repr=False, compare=False)

    def components(self, intervals: bool = True) -> Fit | None:
        """Where the noise is: the REML variance components of the pairs' log ratio per level
        (board, run, worker, block, pair; workbench.analysis.components), over every session's
        pairs; None without two sessions of pairs."""
        runs = [(i, r) for i, r in enumerate(self.ratios) if len(r)]
        if len(runs) < 2:
            return None
        keys = self.boards if len(self.boards) == len(self.medians) else ["?"] * len(self.medians)
        y, levels = [], {"board": [], "run": [], "worker": [], "block": []}
        for i, prs in runs:
            for p in prs:
                y.append(math.log(p.ratio))
                for level, label in zip(levels, (keys[i], i, p.worker, p.block), strict=True):
                    levels[level].append(label)
        return fit_components(y, levels, DEFAULT_CONF, intervals)

    def same_block_extreme(self) -> tuple[str, int, int, float] | None:
        """("highest" or "lowest", block index, sessions where it is, p): the block that is most
        often the highest (or lowest) of its session, with the chance of that count or more
        if the blocks were exchangeable (binomial 1/B per session, Bonferroni over the B blocks
        and both ends). None without two sessions of three or more equal-sized block lists."""
        runs = [b for b in self.block_ratios if len(b) >= 3]
        if len(runs) < 2 or len({len(b) for b in runs}) != 1:
            return None
        nb, n = len(runs[0]), len(runs)
        best = None
        for end, pick in (("highest", np.argmax), ("lowest", np.argmin)):
            counts = np.bincount([int(pick(b)) for b in runs], minlength=nb)
            j = int(np.argmax(counts))
            # the binomial tail in exact integers (scipy.stats.binom.sf's number to ~1e-14
            # without the 0.9 s of importing scipy.stats)
            p = min(1.0, 2 * nb * binom_tail(int(counts[j]), n, nb))
            if best is None or p < best[3]:
                best = (end, j, int(counts[j]), p)
        return best

    def board_groups(self) -> dict[str, list[int]]:
        """Session indices by board, in first-seen order (one group where boards are unknown)."""
        keys = self.boards if len(self.boards) == len(self.medians) else ["?"] * len(self.medians)
        groups: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            groups.setdefault(k, []).append(i)
        return groups

    def board_logs(self) -> list[float]:
        """Each board's mean log estimate over its sessions, in ``board_groups`` order."""
        logs = np.log(self.medians)
        return [float(np.mean(logs[idx])) for idx in self.board_groups().values()]

    def _units(self) -> list[float]:
        """The log estimates the pool averages: one per session, or per board's mean of them
        where the sessions come from several boards."""
        if len(self.board_groups()) < 2:
            return [float(x) for x in np.log(self.medians)]
        return self.board_logs()

    @property
    def estimate(self) -> float:
        """The pooled estimate: geometric mean of the session estimates (of the boards' where
        the sessions come from several)."""
        return float(np.exp(np.mean(self._units())))

    @property
    def interval(self) -> tuple[float, float]:
        """95 % t-interval of the pooled estimate over sessions (the session as the unit), or
        over boards where the sessions come from several (the board as the unit)."""
        units = self._units()
        if len(units) < 2:
            return (-math.inf, math.inf)
        mean, half = t_interval(units, DEFAULT_CONF)
        return (float(np.exp(mean - half)), float(np.exp(mean + half)))

    def board_spread(self) -> tuple[list[tuple[str, float, int]], float] | None:
        """([(board, estimate, sessions)], p) where two or more boards are pooled and some board
        has two sessions: p of the one-way F test that the boards' session estimates share one
        mean (sessions of one board as the replicates)."""
        groups = self.board_groups()
        logs = np.log(self.medians)
        dfw = len(logs) - len(groups)
        if len(groups) < 2 or dfw < 1:
            return None
        means = {k: float(np.mean(logs[idx])) for k, idx in groups.items()}
        grand = float(np.mean(logs))
        ssb = sum(len(idx) * (means[k] - grand) ** 2 for k, idx in groups.items())
        ssw = sum(float(np.sum((logs[idx] - means[k]) ** 2)) for k, idx in groups.items())
        dfb = len(groups) - 1
        p = 0.0 if ssw == 0 else f_sf((ssb / dfb) / (ssw / dfw), dfb, dfw)
        rows = [(k, math.exp(means[k]), len(idx)) for k, idx in groups.items()]
        return rows, p

    def board_note(self, alpha: float = BOARDS_DIFFER_P) -> str | None:
        """The line `sessions pool` prints where a main or confirm row's boards differ (F test
        p below ``alpha``): one run's interval holds for its board, not for the GPU model."""
        b = self.board_spread()
        if self.role not in ("main", "confirm") or b is None or b[1] >= alpha:
            return None
        rows, p = b
        each = ", ".join(f"{k[:12]} {est:.4f} ({n})" for k, est, n in rows)
        return (
            f"{self.id}: the boards differ ({each}; F test p = {p:.2g}): one run's interval "
            f"holds for its board; the pooled interval is over the {len(rows)} boards"
        )

    @property
    def covered(self) -> int:
        """Sessions whose own interval contains the pooled estimate."""
        e = self.estimate
        return sum(lo <= e <= hi for lo, hi in self.cis)

    def coverage(self) -> tuple[int, int, float] | None:
        """(agreeing, n, p): is one run's interval honest about the spread between processes?

        Over the n sessions with a finite interval, session i agrees when its log estimate lies
        within sqrt(h_i^2 + h_o^2) of the mean log estimate of the other n-1 (the others of its
        board, where the sessions come from several: a session judged needs two), h_i being its own
        interval's half-width (log scale, the wider side) and h_o = sqrt(sum of the others'
        h_j^2) / (n-1) the half-width of their mean: each difference is judged by both
        uncertainties, so a session of a wide interval neither fails nor makes the others fail.
        p = P(agreeing or fewer) if every run's interval were honest: calibrated by simulating
        this pool (each session a t-interval over its own units with the spread its half-width
        implies, the same judging), so neither the ~97 % that honest t-intervals agree nor the
        overlap of the leave-one-out checks (they share sessions) is taken for 95 % and
        independence (tests/test_pool_agreement.py). None below three sessions judged."""
        return self.agreement()[0]

    def agreement(self) -> tuple[tuple[int, int, float] | None, np.ndarray | None]:
        """(``coverage()``, the agreeing counts of the simulated honest pools behind its p)."""
        if self._coverage is not None:
            return self._coverage
        board = {i: k for k, idx in self.board_groups().items() for i in idx}
        units = self.units if len(self.units) == len(self.medians) else [6] * len(self.medians)
        runs = [
            (math.log(x), max(math.log(x) - math.log(lo), math.log(hi) - math.log(x)), board[i],
             max(int(units[i]), 2))
            for i, (x, (lo, hi)) in enumerate(zip(self.medians, self.cis, strict=False))
            if x > 0 and lo > 0 and math.isfinite(x) and math.isfinite(lo) and math.isfinite(hi)
        ]  # fmt: skip
        out, sim = None, None
        if runs:
            y, h = np.array([[r[0] for r in runs]]), np.array([[r[1] for r in runs]])
            keys = [r[2] for r in runs]
            agreeing, judged = _agreement(y, h, keys)
            if judged >= 3:
                sim, _ = _agreement(
                    *_honest_pools([r[1] for r in runs], [r[3] for r in runs]), keys
                )
                # the Monte Carlo p of Davison and Hinkley: never 0
                p = (1 + int(np.sum(sim <= agreeing[0]))) / (1 + sim.size)
                out = (int(agreeing[0]), judged, p)
        self._coverage = (out, sim)
        return self._coverage

    def coverage_note(self, alpha: float = 0.01) -> str | None:
        """The line `sessions pool` prints where a main or confirm row's coverage p is below
        ``alpha``: one run's interval is too narrow for a claim across runs."""
        c = self.coverage()
        if self.role not in ("main", "confirm") or c is None or c[2] >= alpha:
            return None
        agreeing, n, p = c
        return (
            f"{self.id}: only {agreeing} of {n} sessions agree with the others' pooled estimate "
            f"within their combined intervals (p = {p:.2g} if each run's interval held the spread "
            "between processes): one run's interval is too narrow here; quote the pooled interval"
        )

    @property
    def low(self) -> float:
        return float(min(self.medians))

    @property
    def high(self) -> float:
        return float(max(self.medians))

    @property
    def median(self) -> float:
        return float(np.median(self.medians))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "kernel": self.kernel, "set": self.set, "role": self.role,
            "medians": self.medians, "verdicts": self.verdicts, "verdict": self.verdict,
            "low": self.low, "high": self.high, "median": self.median,
            "estimate": self.estimate, "interval": list(self.interval),
            "session_cis": [list(c) for c in self.cis], "covered": self.covered,
            "words": self.words, "rests_on": self.rests_on, "block_ratios": self.block_ratios,
            "same_block_extreme": self.same_block_extreme(), "coverage": self.coverage(),
            "boards": self.boards, "board_spread": self.board_spread(),
        }  # fmt: skip


AGREEMENT_SIMULATIONS = 4000  # honest pools behind a coverage p (resolution 1/4000)


def _units(v: Any) -> int:
    """How many units a verdict's interval runs over: workers, blocks, or pairs."""
    return {"workers": v.workers, "blocks": v.blocks}.get(v.method, v.n)


def _agreement(y: np.ndarray, h: np.ndarray, boards: list[str]) -> tuple[np.ndarray, int]:
    """(agreeing per pool, sessions judged) of pools ``y``, ``h`` (log estimates and half-widths,
    shape (pools, sessions)): each session against the mean of the others of its board."""
    agreeing = np.zeros(y.shape[0], dtype=np.int64)
    judged = 0
    for i, b in enumerate(boards):
        others = [j for j, k in enumerate(boards) if j != i and k == b]
        if len(others) < 2:
            continue
        mean = y[:, others].mean(axis=1)
        h_o = np.sqrt((h[:, others] ** 2).sum(axis=1)) / len(others)
        agreeing += np.abs(y[:, i] - mean) <= np.sqrt(h[:, i] ** 2 + h_o**2)
        judged += 1
    return agreeing, judged


def _honest_pools(halves: list[float], units: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """AGREEMENT_SIMULATIONS pools like the observed one with honest intervals: session i a
    t-interval over ``units[i]`` normal draws around one true value, of the SD its observed
    half-width implies (seeded: a pool's p is reproducible)."""
    rng = np.random.default_rng(45_005)
    ys, hs = [], []
    for h, w in zip(halves, units, strict=True):
        t = t_quantile(0.5 + DEFAULT_CONF / 2, w - 1)
        draws = rng.standard_normal((AGREEMENT_SIMULATIONS, w)) * (h * math.sqrt(w) / t)
        ys.append(draws.mean(axis=1))
        hs.append(t * draws.std(axis=1, ddof=1) / math.sqrt(w))
    return np.stack(ys, axis=1), np.stack(hs, axis=1)


@dataclass
class Pool:
    sessions: list[Session]
    rows: list[PooledComparison]
    recommendations: list[Recommendation]
    warnings: list[str] = field(default_factory=list)
    method: str = __doc__.split("\n\n")[2].replace("\n", " ")
    # the first session's results by id: the records a pooled verdict stands in for
    first: dict[str, ComparisonResult] = field(default_factory=dict, repr=False)


ARM_KEYS = ("kernel", "set", "a", "b")


def check_poolable(sessions: list[Session], results: list[list[ComparisonResult]]) -> None:
    """Refuse (BadArgument, exit 2) sessions that may not be pooled, the one check `sessions
    pool` and `export` both make (docs/DESIGN.md §7.6): sessions of different kernel sources
    (their recorded csrc/ hashes), or a comparison id that two sessions share but measured with
    different arms (an A/B run beside an A/A control), would pool verdicts of different builds
    into one."""
    files = sessions[0].provenance.get("files") or {}
    for s in sessions[1:]:
        other = s.provenance.get("files") or {}
        if other != files:
            diff = sorted(k for k in set(files) | set(other) if files.get(k) != other.get(k))
            raise BadArgument(
                f"sessions {sessions[0].path.name} and {s.path.name} measured different kernel "
                f"sources ({', '.join(diff[:3]) or 'hashes unknown'}): pool or export only sessions of "
                "one source tree"
            )
    first = {r.id: r for r in results[0]}
    for s, rs in zip(sessions[1:], results[1:], strict=True):
        for r in rs:
            f = first.get(r.id)
            if f is None:
                continue
            diffs = [
                f"{k} {f.cmp.get(k)!r} vs {r.cmp.get(k)!r}"
                for k in ARM_KEYS
                if f.cmp.get(k) != r.cmp.get(k)
            ]
            if diffs:
                raise BadArgument(
                    f"sessions {sessions[0].path.name} and {s.path.name} judged different builds "
                    f"in {r.id} ({'; '.join(diffs)}): pool only sessions of the same arms"
                )


def session_board(s: Session) -> str:
    """The pool's board key of a session: its boards joined by "+", "?" where unknown."""
    return "+".join(s.boards) or "?"


def pool_sessions(sessions: list[Session], m: float | None = None) -> Pool:
    """Pooled verdicts and recommendations of `sessions` (two or more, same comparisons)."""
    if len(sessions) < 2:
        raise BadArgument(f"pool needs at least 2 sessions, got {len(sessions)}")
    # each session analysed once; no detectable effect (pool shows none: the costliest part)
    results = [comparison_results(s, m, detectable=False) for s in sessions]
    check_poolable(sessions, results)
    warnings = _grouped_warnings(sessions, m, results)
    per = [{r.id: r for r in rs} for rs in results]
    boards = [session_board(s) for s in sessions]
    rows = []
    for cid, first in per[0].items():
        if not all(cid in p for p in per):
            continue
        results = [p[cid] for p in per]
        # each session's one word (Verdict.label: its verdict, in a session before the
        # interval rule, so such a pool reads as it did; since, its words): the pool's only
        # where every session reads the same one, AMBIGUOUS apart
        verdicts = [r.verdict.label for r in results]
        same = verdicts[0] if len(set(verdicts)) == 1 and verdicts[0] != "AMBIGUOUS" else VARIES
        rows.append(
            PooledComparison(
                cid,
                first.cmp["kernel"],
                first.cmp["set"],
                first.cmp["role"],
                [r.verdict.median for r in results],
                verdicts,
                same,
                [(r.verdict.ci_low, r.verdict.ci_high) for r in results],
                [r.verdict.n for r in results],
                [r.verdict.words for r in results],
                [r.rests_on for r in results],
                [[] if r.diagnostic is None else r.diagnostic.block_ratios for r in results],
                boards,
                [r.ratios for r in results],
                [_units(r.verdict) for r in results],
            )  # fmt: skip
        )
    return Pool(sessions, rows, _recommend(rows, per[0]), warnings, first=per[0])


def _grouped_warnings(
    sessions: list[Session], m: float | None, results: list[list[ComparisonResult]]
) -> list[str]:
    """What makes the sessions not like for like (the checks of `compare`, each session against
    the first): one line per kind of difference and group of sessions that share it, naming them,
    instead of one line per file per session."""
    first = sessions[0]
    by_kind: dict[tuple[str, str], list[int]] = {}
    for i, other in enumerate(sessions[1:], 2):
        kinds: dict[str, list[str]] = {}
        pair = (results[0], results[i - 1])
        for w in compare_sessions(first, other, m, results=pair, shifts=False).warnings:
            kind, _, detail = w.partition(": ")
            kinds.setdefault(kind, []).append(detail)
        for kind, details in kinds.items():
            by_kind.setdefault((kind, "; ".join(details)), []).append(i)
    out = []
    for (kind, details), idx in by_kind.items():
        kind = kind.replace("SESSION B IS", "SESSION IS")  # pool has no A and B
        names = ", ".join(f"{i} {sessions[i - 1].path.name}" for i in idx)
        out.append(
            f"{kind}: {details} (session{'s' if len(idx) > 1 else ''} {names}; "
            f"against session 1 {first.path.name})"
        )
    return out


def _recommend(
    rows: list[PooledComparison], first: dict[str, ComparisonResult]
) -> list[Recommendation]:
    """The reader rule (workbench.analysis.recommend) on the pooled verdicts: each pooled row
    stands in for its comparison with the pooled label (VARIES counts as AMBIGUOUS, whatever
    the first session's interval said: its words are AMBIGUOUS too), the median of the session
    estimates, and the sessions' verdict words as its reason ("VARIES over 3 sessions: SLOWER,
    SLOWER, FASTER<m; ..."), the words the table and export's session_verdicts give."""
    pooled, reasons = [], {}
    for r in rows:
        v0 = first[r.id].verdict
        label = "AMBIGUOUS" if r.verdict == VARIES else decision_of(r.verdict)
        known = [x for x in r.medians if math.isfinite(x)]  # NaN: a session without pairs
        span = f"{min(known):.4f}..{max(known):.4f}" if known else "n/a"
        # the sessions' verdict words, as the table and export's session_verdicts give them
        each = f"{len(r.medians)} sessions: " + ", ".join(r.words)
        reasons[r.id] = ("VARIES over " if r.verdict == VARIES else "") + each
        reasons[r.id] += f"; session medians {span}"
        # a row counts as evidence when any session had complete pairs (n: their most)
        n = max(r.pairs, default=0)
        verdict = replace(v0, verdict=label, median=r.median, n=n)
        if r.verdict == VARIES:  # no one session's interval speaks for the pool: the words
            verdict = replace(verdict, ci_low=-math.inf, ci_high=math.inf)  # read AMBIGUOUS
        pooled.append(replace(first[r.id], verdict=verdict))
    return list(recommendations(pooled, reasons).values())
