"""The one table of comparisons (docs/DESIGN.md §7.7): its columns and the text of every cell,
computed here once from the analysis model (``ComparisonResult``).

The front ends only lay the cells out: `workbench ab` and `sessions show` through rich
(workbench/commands/_tables.py), the report as Markdown, the summary figure with matplotlib, the
TUI in a DataTable. Each picks the columns it has room for, by key; none formats a cell of its own
(`tests/test_one_table.py` fails on a second builder of comparison rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from workbench.analysis.model import ComparisonResult
from workbench.analysis.words import ORDER, UNIT
from workbench.core import stats
from workbench.core.block_diagnostic import rests_text
from workbench.core.fmt import NA, change_pct, interval, num, p_value

# ------------------------------------------------------------------------------ numbers


def _pct(x: float | None, sign: str = "") -> str:
    """A fraction as a percentage cell: 0.0012 -> "0.12 %" (core.fmt's number, times 100)."""
    return NA if x is None else f"{sign}{num(x * 100, '.2f')} %"


# ------------------------------------------------------------------------------ cells


def _label(r: ComparisonResult) -> str:
    # the comparison and, where it is not a main one, its role (for faces without a role column)
    return r.id if r.role == "main" else f"{r.id} ({r.role})"


def _name(r: ComparisonResult) -> str:
    # the comparison, its role named where neither the role nor the id says it: a main one
    # untagged, a reference's id ends in its arm ("w13/hot/tinygemm"), "step/hot/confirm" says it
    plain = r.role in ("main", "reference") or r.id.endswith(r.role)
    return r.id if plain else f"{r.id} ({r.role})"


def _rests_on(r: ComparisonResult) -> str:
    # the blocks the verdict rests on, beside the verdict's word ("block 0"); "–" for none
    return rests_text(r.rests_on).removeprefix("rests on ") or "–"


def _pairs(r: ComparisonResult) -> str:
    v = r.verdict
    return f"{v.n}" + (f" (-{v.dropped})" if v.dropped else "")


def _blocks(r: ComparisonResult) -> str:
    v = r.verdict
    return f"{v.k_blocks}/{v.blocks}" if v.k_blocks is not None else "1"


def _flagged(r: ComparisonResult) -> str:
    return f"{r.flagged} ({r.excluded} excluded)" if r.flagged else "0"


def _ws_l2(r: ComparisonResult) -> str:
    ws = num(r.cmp.get("working_set_l2_ratio"), ".1f")
    return ws if ws == NA else f"{ws} ({r.cmp.get('graphs')}g)"


@dataclass(frozen=True)
class Column:
    """One column: ``key`` names it for the faces, ``header`` is its title ("{conf}" becomes the
    verdicts' confidence, "95 %"), ``align`` "l" or "r"; ``name``: the cells are identifiers
    (comparison ids, arms), set as code where the medium has it."""

    key: str
    header: str
    align: str
    cell: Callable[[ComparisonResult], str]
    name: bool = False


COLUMNS: dict[str, Column] = {
    c.key: c
    for c in (
        Column("comparison", "comparison", "l", lambda r: r.id, name=True),
        Column("label", "comparison", "l", _label, name=True),
        Column("name", "comparison", "l", _name, name=True),
        Column("role", "role", "l", lambda r: r.role),
        Column("a", "A", "l", lambda r: str(r.cmp["a"]), name=True),
        Column("b", "B", "l", lambda r: str(r.cmp["b"]), name=True),
        Column("pairs", "pairs", "r", _pairs),
        Column("a_ms", "A ms", "r", lambda r: num(r.a_ms)),
        Column("b_ms", "B ms", "r", lambda r: num(r.b_ms)),
        Column(
            "us",
            "µs/call A→B",
            "r",
            lambda r: f"{num(r.a_us_per_call, '.2f')}→{num(r.b_us_per_call, '.2f')}",
        ),
        Column("ratio", "ratio B/A", "r", lambda r: num(r.verdict.median)),
        Column("change", "change", "r", lambda r: change_pct(r.verdict.median)),
        Column("ci", "{conf} CI", "r", lambda r: interval(r.verdict.ci_low, r.verdict.ci_high)),
        Column("p", "p", "r", lambda r: p_value(r.verdict.wilcoxon_p)),
        Column("k/n", "k/n", "r", lambda r: f"{r.verdict.k_faster}/{r.verdict.n}"),
        Column("blocks", "blocks", "r", _blocks),
        Column("between_sd", "between-{unit} SD", "r", lambda r: _pct(r.verdict.between_sd)),
        Column("resolves", "resolves", "r", lambda r: _pct(r.verdict.resolution, "±")),
        Column("detects", "detects", "r", lambda r: _pct(r.verdict.detectable)),
        Column(
            "blocks_check",
            "blocks check",
            "l",
            lambda r: "n/a" if r.diagnostic is None else r.diagnostic.cell(),
        ),
        Column("flagged", "flagged", "r", _flagged),
        Column("gate", "gate", "l", lambda r: {True: "ok", False: "FAIL", None: "n/a"}[r.gate]),
        Column("ws_l2", "WS/L2", "r", _ws_l2),
        Column("verdict", "verdict", "l", lambda r: r.verdict_words),
        # the verdict split in two, for a face with no room for "(rests on …)" in one column
        Column("verdict_word", "verdict", "l", lambda r: r.verdict.words),
        Column("rests_on", "rests on", "l", _rests_on),
    )
}

# the block-level columns, for faces that show them where a session has blocks
BLOCK_COLUMNS = ("blocks", "between_sd", "resolves", "detects", "blocks_check")


@dataclass(frozen=True)
class Row:
    """One comparison's cells, in the table's column order."""

    result: ComparisonResult
    cells: tuple[str, ...]

    @property
    def verdict(self) -> str:
        """The verdict's class (FASTER, SLOWER, SAME, AMBIGUOUS), for a face's colours."""
        return self.result.verdict.verdict


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    headers: tuple[str, ...]
    rows: tuple[Row, ...]

    @property
    def aligns(self) -> str:
        return "".join(c.align for c in self.columns)

    def index(self, key: str) -> int:
        return [c.key for c in self.columns].index(key)


def headers(
    keys: Sequence[str], conf: float = stats.DEFAULT_CONF, methods: Iterable[str] = ("blocks",)
) -> tuple[str, ...]:
    """The titles of the columns ``keys`` (KeyError on an unknown key); ``methods``: the
    verdicts' methods, which name the unit of the spread column ("between-worker SD")."""
    units = "/".join(UNIT[m] for m in ORDER if m in set(methods) and m != "pairs") or "block"
    return tuple(COLUMNS[k].header.format(conf=f"{conf * 100:g} %", unit=units) for k in keys)


def comparison_table(results: Iterable[ComparisonResult], keys: Sequence[str]) -> Table:
    """The rows of ``results`` with the columns ``keys``: the one builder of comparison rows."""
    results = list(results)
    cols = tuple(COLUMNS[k] for k in keys)
    conf = results[0].verdict.conf if results else stats.DEFAULT_CONF
    rows = tuple(Row(r, tuple(c.cell(r) for c in cols)) for r in results)
    methods = {r.verdict.method for r in results}
    return Table(cols, headers(keys, conf, methods), rows)
