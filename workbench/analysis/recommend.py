"""The reader recommendation: the one place that decides which reader a kernel should use
(docs/DESIGN.md §7.5). The runner (to plan the step confirmation and to record it), the report,
the plots, `sessions show`, `sessions pool` and the TUI all call ``recommendations`` here.

Which comparisons count: a main comparison of a reader kernel (w13, w2) whose arms differ only in
the reader, the scalar reader in A and the cooperative one in B over the same layout (b3-scalar vs
b3-coop). Any other pair of arms changes more than the reader: ``--a b4-scalar --b b3-coop``
moves the layout (4-byte to 3-byte records) and the reader at once, so its verdict cannot say
which reader is better and it yields no recommendation (``not_counted`` says why, for the report).
A comparison with no complete pair carries no evidence and does not count either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import workbench.analysis.words as words
from workbench.analysis.method_check import timer_evidence
from workbench.core.errors import BadArgument
from workbench.core.stats import DEFAULT_CONF, DEFAULT_M, LEGACY_RULE, RULE, Verdict
from workbench.core.vocab import KERNELS
from workbench.measure.plan import is_reader_comparison, parse_arm_spec

READER_KERNELS = KERNELS  # kernels with a reader choice; "step" is the confirmation
DECISIONS = ("cooperative", "scalar", "inconclusive")


class Judged(Protocol):
    """What the rule reads of a comparison: its record (kernel, set, role, a, b) and verdict."""

    cmp: Mapping[str, Any]
    verdict: Verdict


@dataclass(frozen=True)
class SetEvidence:
    """One expert set's part in a recommendation, as data: its verdict (the word, the ratio, the
    interval and the branch of the rule that decided, ``code``), the words given for it where
    they are not one verdict's (a pool's, the fleet's), and whether it decided the direction (a
    slower set where B is slower, a faster one where B is faster). Worded by
    ``words.set_evidence_text``; a face lays its fields out (the TUI's evidence panel)."""

    set: str
    verdict: Verdict
    given: str | None = None
    decides: bool = False

    @property
    def word(self) -> str:
        return self.verdict.words

    @property
    def ratio(self) -> float:
        return self.verdict.median

    @property
    def interval(self) -> tuple[float, float]:
        return (self.verdict.ci_low, self.verdict.ci_high)

    @property
    def code(self) -> str:
        return self.verdict.code

    @property
    def open(self) -> bool:
        """Unresolved: AMBIGUOUS, FASTER~m or SLOWER~m (the verdict's class AMBIGUOUS)."""
        return self.verdict.verdict == "AMBIGUOUS"

    def to_dict(self) -> dict[str, Any]:
        d = {"set": self.set, "verdict": self.verdict.to_dict(), "decides": self.decides}
        return d | ({"given": self.given} if self.given is not None else {})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SetEvidence:
        try:
            return cls(d["set"], Verdict.from_dict(d["verdict"]), d.get("given"), d["decides"])
        except KeyError as e:
            raise BadArgument(f"set evidence dict lacks {e.args[0]!r}") from None


@dataclass
class Recommendation:
    """Per-kernel choice of reader. ``arm`` is the variant to use: B for "cooperative", A for
    "scalar", and A for "inconclusive" too (the status quo stays until measured better).
    ``sets``: the evidence per expert set, as data; ``evidence``: it in sentences
    (``words.evidence_lines``), what the report, the CLI and `export` print, followed by
    ``timers``: the method check's line of each reader cell whose timing methods disagree
    beyond their intervals (docs/DESIGN.md §5.11; worded by ``words.method_check_text``)."""

    kernel: str
    decision: str
    arm: str
    rule: str
    sets: tuple[SetEvidence, ...] = ()
    verdicts: dict[str, str] = field(default_factory=dict)
    timers: tuple[str, ...] = ()

    @property
    def caution(self) -> tuple[SetEvidence, ...]:
        """The unresolved sets, named beside a cooperative decision where a set's CI contains 1
        (they never count as evidence for it); () otherwise."""
        if self.decision == "cooperative" and any(e.word == "AMBIGUOUS" for e in self.sets):
            return tuple(e for e in self.sets if e.open)
        return ()

    @property
    def evidence(self) -> list[str]:
        return [*words.evidence_lines(self), *self.timers]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "decision": self.decision,
            "arm": self.arm,
            "rule": self.rule,
            "evidence": self.evidence,  # the sentences, for a reader of the JSON
            "verdicts": dict(self.verdicts),
            "sets": [e.to_dict() for e in self.sets],
            **({"timers": list(self.timers)} if self.timers else {}),  # absent before §5.11
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Recommendation:
        """The inverse of ``to_dict`` ("evidence" is worded from "sets" again)."""
        try:
            sets = tuple(SetEvidence.from_dict(e) for e in d["sets"])
            return cls(d["kernel"], d["decision"], d["arm"], d["rule"], sets, dict(d["verdicts"]),
                       tuple(d.get("timers", ())))  # fmt: skip
        except KeyError as e:
            raise BadArgument(f"recommendation dict lacks {e.args[0]!r}") from None


def rule_text(
    m: float = DEFAULT_M,
    conf: float = DEFAULT_CONF,
    methods: Iterable[str] = ("workers",),
    rule: str = RULE,
) -> str:
    """The reader rule in words, its interval named by the ``methods`` the verdicts used, the
    words by the ``rule`` that made them (stats.RULES: a session before the interval rule keeps
    the text it was read with)."""
    estimate, interval = words.legend(methods, conf)
    if rule == RULE:
        return (
            "Take the cooperative reader (B) if it is faster in at least one expert set (FASTER "
            "or FASTER~m: the CI lies below 1 and reaches past 1 - m) and slower in none; keep the "
            "scalar reader (A) if it is slower in any set (SLOWER or SLOWER~m) or SAME in every "
            "set (SAME, FASTER<m or SLOWER<m: the CI inside 1 ± m); otherwise inconclusive "
            "(scalar stays; measure more workers, or `ab --settle`). Per set, on the ratio B/A "
            f"with m = {m * 100:g} %, each interval reads one word, by where it lies against "
            f"{1 - m:.4f}, 1 and {1 + m:.4f} and nothing else (docs/DESIGN.md §7.4): FASTER = the "
            f"{conf * 100:.4g} % CI lies entirely below {1 - m:.4f}; SLOWER = entirely above "
            f"{1 + m:.4f}; FASTER<m / SLOWER<m = inside the band and below / above 1; SAME = "
            "inside the band and containing 1; FASTER~m / SLOWER~m = on one side of 1 and across "
            "1 - m / 1 + m; AMBIGUOUS = containing 1 and reaching past the band. The CI is the "
            f"{interval} (estimate: the {estimate}). Only comparisons whose arms differ in the "
            "reader alone (A scalar, B cooperative, one layout) count."
        )
    return (
        "Take the cooperative reader (B) if it is faster in at least one expert set (FASTER or "
        "FASTER~m: the CI lies below 1 and reaches past 1 - m) and slower in none; keep the "
        "scalar reader (A) if it is slower in any set (SLOWER or SLOWER~m: the CI lies above 1 "
        "and reaches past 1 + m) or SAME in every set; otherwise inconclusive (scalar stays; "
        "measure more workers). The decision reads where the interval lies against 1 and the "
        "band 1 ± m, never the estimate alone, so a run whose interval straddles 1 ± m decides "
        "the same way whichever side its estimate falls (docs/DESIGN.md §7.5). Per set, on the "
        f"ratio B/A with m = {m * 100:g} %: FASTER = the {conf * 100:g} % CI lies entirely "
        f"below 1 and the estimate is <= {1 - m:.4f}; SLOWER = the CI lies entirely above 1 and "
        f"the estimate is >= {1 + m:.4f}; SAME = the CI lies inside [{1 - m:.4f}, {1 + m:.4f}]; "
        "AMBIGUOUS otherwise. The words printed keep a resolved small effect apart from cannot "
        "tell: SAME with the CI on one side of 1 reads FASTER<m or SLOWER<m (B is faster / "
        "slower, by less than m; it counts as SAME), AMBIGUOUS with the CI on one side of 1 reads "
        "FASTER~m or SLOWER~m (the direction is resolved, whether by m or more is not), and "
        f"AMBIGUOUS is left for a CI that contains 1. The CI is the {interval} (estimate: the "
        f"{estimate}). Only comparisons whose arms differ in the reader alone (A scalar, B "
        "cooperative, one layout) count."
    )


# The verdict words that decide (rule_text): a resolved direction whose interval reaches m
SLOWER_WORDS = ("SLOWER", "SLOWER~m")
FASTER_WORDS = ("FASTER", "FASTER~m")


def reader_results(results: Iterable[Any], kernel: str) -> list[Any]:
    """The measured reader comparisons of ``kernel`` among ``results`` (anything with ``.kernel``,
    ``.cmp`` and ``.verdict``): the rows the rule weighs, for renderers that show them."""
    return [
        r for r in results if r.kernel == kernel and reader_comparison(r.cmp) and r.verdict.n > 0
    ]


def reader_comparison(cmp: Mapping[str, Any]) -> bool:
    """True when the journaled comparison ``cmp`` is a main comparison of a reader kernel whose
    arms are the scalar (A) and the cooperative (B) reader of one layout."""
    kernel = cmp.get("kernel")
    if cmp.get("role") != "main" or kernel not in READER_KERNELS:
        return False
    # `workbench tune` names an arm at non-default parameters "ARM@name=value,..." (docs/DESIGN.md
    # §11): both arms at the same parameters still differ in the reader alone.
    a_name, _, a_params = str(cmp.get("a")).partition("@")
    b_name, _, b_params = str(cmp.get("b")).partition("@")
    if a_params != b_params:
        return False
    try:
        a = parse_arm_spec(kernel, a_name, "A")
        b = parse_arm_spec(kernel, b_name, "B")
    except BadArgument:  # an arm this build does not know: it cannot be judged a reader pair
        return False
    return is_reader_comparison(a, b)


def not_counted(results: Iterable[Judged]) -> list[str]:
    """Why each main comparison of a reader kernel whose arms are not a reader pair yields no
    recommendation (for the report and the TUI; one without pairs shows as not measured)."""
    out = []
    for r in results:
        c = r.cmp
        if c.get("role") != "main" or c.get("kernel") not in READER_KERNELS:
            continue
        if not reader_comparison(c):
            out.append(
                f"`{c['id']}`: `{c['a']}` vs `{c['b']}` is not the scalar (A) against the "
                "cooperative (B) reader of one layout: its verdict stands, but it says nothing "
                "about which reader to use"
            )
    return out


def recommendations(
    results: Iterable[Judged], reasons: Mapping[str, str] | None = None
) -> dict[str, Recommendation]:
    """{kernel: Recommendation} from the reader comparisons among ``results`` (see the module
    docstring); a kernel without one is absent. ``reasons``: the evidence's words per comparison
    id where they are not one verdict's (a pool's), else ``words.reason`` of its verdict."""
    results = list(results)
    out: dict[str, Recommendation] = {}
    for kernel in READER_KERNELS:
        mains = [
            r
            for r in results
            if r.cmp.get("kernel") == kernel and reader_comparison(r.cmp) and r.verdict.n > 0
        ]
        if mains:
            verdicts = {str(r.cmp["set"]): r.verdict for r in mains}
            why = {str(r.cmp["set"]): (reasons or {}).get(r.cmp["id"]) for r in mains}
            a, b = str(mains[0].cmp["a"]), str(mains[0].cmp["b"])
            rec = combine(kernel, verdicts, a, b, why)
            if reasons is None:  # one session's verdicts: do its timers disagree (§5.11)?
                rec.timers = tuple(timer_evidence(results, mains))
            out[kernel] = rec
    return out


def overall(verdicts: Mapping[str, Verdict]) -> str:
    """B against A over the expert sets, by the rule of ``rule_text`` (docs/DESIGN.md §7.5):
    "SLOWER" if any set is slower (SLOWER or SLOWER~m), else "FASTER" if any is faster (FASTER or
    FASTER~m), else "SAME" if every set is SAME, else "AMBIGUOUS". The reader recommendation
    (``combine``) and the tuner's verdict on a candidate both read it."""
    said = {v.words for v in verdicts.values()}
    if said & set(SLOWER_WORDS):
        return "SLOWER"
    if said & set(FASTER_WORDS):
        return "FASTER"
    if verdicts and all(v.verdict == "SAME" for v in verdicts.values()):
        return "SAME"
    return "AMBIGUOUS"


def combine(
    kernel: str,
    verdicts: Mapping[str, Verdict],
    a: str = "b3-scalar",
    b: str = "b3-coop",
    reasons: Mapping[str, str | None] | None = None,
) -> Recommendation:
    """Combine one kernel's verdicts per expert set (e.g. {"hot": v, "rotating": v}) into a
    decision and its evidence per set (``SetEvidence``, data: ``words.evidence_lines`` words it,
    each set by ``reasons[set]`` where given, else by ``words.reason`` of its verdict).

    Conservative by construction: one slower set (SLOWER or SLOWER~m) vetoes the cooperative
    reader, and sets whose CI contains 1 never count as evidence for it (they are named as a
    caution when B wins elsewhere). The classes read the interval, not the estimate: where an
    interval straddles 1 ± m, the verdict may read SLOWER in one run and SLOWER~m in the next,
    and both decide alike.
    """
    if not verdicts:
        raise BadArgument(f"verdicts for kernel {kernel!r} are empty: nothing to recommend from")
    # the set's word as every cell prints it (Verdict.words): a session of the estimate rule
    # reads SLOWER<m here too, never the SAME its verdict class decides as (issue 57)
    vs = {name: v.words for name, v in verdicts.items()}
    ms = sorted({v.m for v in verdicts.values()})
    confs = sorted({v.conf for v in verdicts.values()})
    rules = {v.rule for v in verdicts.values()}
    made = RULE if rules == {RULE} else LEGACY_RULE
    rule = rule_text(ms[0], confs[0], {v.method for v in verdicts.values()}, made)
    if len(ms) > 1 or len(confs) > 1:
        rule += f" (the sets used different thresholds: m in {ms}, conf in {confs})"
    given = reasons or {}
    direction = overall(verdicts)
    decisive = {"SLOWER": SLOWER_WORDS, "FASTER": FASTER_WORDS}.get(direction, ())
    sets = tuple(
        SetEvidence(k, v, given.get(k) or None, v.words in decisive) for k, v in verdicts.items()
    )
    if direction == "FASTER":
        decision = "cooperative"
    elif direction in ("SLOWER", "SAME"):
        decision = "scalar"
    else:
        decision = "inconclusive"
    return Recommendation(kernel, decision, b if decision == "cooperative" else a, rule, sets, vs)
