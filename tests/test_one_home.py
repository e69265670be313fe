"""Each rule of the workbench has one home (docs/CONTRIBUTING.md; STYLE practice 12): a second copy
anywhere else in workbench/ (for the slow lane: in tests/) fails here. Every checker is shown to
find a planted copy (the code the rule's old second home had), so a checker that cannot fail
fails too.

The reader recommendation's own guard is tests/test_analysis.py (`rule_copies`); the defaults'
is tests/test_defaults.py.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from one_home_planted import PLANTED

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def trees() -> dict[str, ast.Module]:
    return {
        p.relative_to(REPO).as_posix(): ast.parse(p.read_text())
        for p in sorted((REPO / "workbench").rglob("*.py"))
    }


def _name(f: ast.expr) -> str | None:
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)


def _calls(tree: ast.Module, names: set[str]) -> list[tuple[int, str]]:
    return [
        (n.lineno, _name(n.func))
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and _name(n.func) in names
    ]


# ------------------------------------------------------------------ the checkers


def stopping_rule_copies(ts: dict[str, ast.Module]) -> list[str]:
    """The stopping rule is `abba.stop_reason`: nowhere else asks `should_stop` or reads the
    time budget or the adaptive minimum."""
    out = []
    for path, tree in ts.items():
        if path == "workbench/measure/abba.py":
            continue
        out += [f"{path}:{ln} calls {n}" for ln, n in _calls(tree, {"should_stop"})]
        out += [
            f"{path}:{n.lineno} reads .{n.attr}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load)
            and n.attr in ("budget_s", "min_blocks")
        ]
    return out


VERDICTS = {"FASTER", "SLOWER", "SAME", "AMBIGUOUS"}
VERDICT_HOMES = {"workbench/core/stats.py", "workbench/analysis/recommend.py"}


def verdict_combiners(ts: dict[str, ast.Module]) -> list[str]:
    """Per-set verdicts are judged in core/stats.py and combined in analysis/recommend.py: no
    other function returns verdict labels of its own making."""
    out = []
    for path, tree in ts.items():
        if path in VERDICT_HOMES:
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            made = set()
            for r in ast.walk(fn):
                if isinstance(r, ast.Return) and r.value is not None:
                    v = r.value
                    if isinstance(v, ast.Tuple):
                        v = v.elts[0] if v.elts else None
                    if isinstance(v, ast.Constant) and v.value in VERDICTS:
                        made.add(v.value)
            if len(made) >= 2:
                out.append(f"{path}:{fn.name} returns {sorted(made)}")
    return out


def gate_copies(ts: dict[str, ast.Module]) -> list[str]:
    """Outputs are compared (bit identity, relative L2 against A) in measure/gate.py only."""
    return [
        f"{path}:{ln} calls {n}"
        for path, tree in ts.items()
        if path != "workbench/measure/gate.py"
        for ln, n in _calls(tree, {"first_difference", "loose_difference"})
    ]


SETTINGS = {
    "preset",
    "kernels",
    "sets",
    "a",
    "b",
    "pairs",
    "blocks",
    "adaptive",
    "target_pct",
    "calls",
    "replays",
    "seed",
    "checkpoint",
    "rank",
    "counters",
}  # fmt: skip  (RunSettings' fields less the shape's, which data/shapes.py's Shape holds)
SETTINGS_HOME = "workbench/run/settings.py"
# the runner's resolved form (its shape, comparisons and protocol), made from the settings by
# config.config_from_settings / make_config
DERIVED = {"workbench/run/config.py:RunConfig"}


def run_config_forms(ts: dict[str, ast.Module]) -> list[str]:
    """A run's settings have one form, run/settings.py's RunSettings: no other class declares
    five or more of its fields, and no function reads five or more of them out of a mapping
    (`.get("pairs")`, ...), but the runner's resolved RunConfig (DERIVED)."""
    out = []
    for path, tree in ts.items():
        if path == SETTINGS_HOME:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                declared = {
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                } & SETTINGS
                if len(declared) >= 5 and f"{path}:{node.name}" not in DERIVED:
                    out.append(f"{path}:{node.name} declares {sorted(declared)}")
            if isinstance(node, ast.FunctionDef):
                read = {
                    c.args[0].value
                    for c in ast.walk(node)
                    if isinstance(c, ast.Call)
                    and _name(c.func) == "get"
                    and c.args
                    and isinstance(c.args[0], ast.Constant)
                } & SETTINGS
                if len(read) >= 5:
                    out.append(f"{path}:{node.name} reads {sorted(read)} from a mapping")
    return out


def nvcc_readers(ts: dict[str, ast.Module]) -> list[str]:
    """`nvcc --version` is read by kernels/build.py's NVCC_RELEASE alone."""
    out = []
    for path, tree in ts.items():
        if path == "workbench/kernels/build.py":
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
                pat = n.args[0]
                if (
                    _name(n.func.value) == "re"
                    and isinstance(pat, ast.Constant)
                    and isinstance(pat.value, str)
                    and "release" in pat.value
                ):
                    out.append(f"{path}:{n.lineno} reads nvcc's release with {pat.value!r}")
    return out


NAME_GROUPS = ({"w13", "w2", "step"}, {"hot", "rotating"})
# an inference engine copies this module alone (standard library only, docs/EXPORT.md): it spells
# its KERNELS, which test_the_vocabulary_is_what_the_modules_use holds equal to vocab's
VENDORABLE = "workbench/core/decision.py"


def name_tuples(ts: dict[str, ast.Module]) -> list[str]:
    """The kernel and set names are core/vocab.py's KERNELS, KERNEL_CHOICES and SETS: no other
    tuple, list or set literal of two or more distinct ones (`kernels_of` says which ops a
    kernel choice runs)."""
    out = []
    for path, tree in ts.items():
        if path in ("workbench/core/vocab.py", VENDORABLE):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Tuple | ast.List | ast.Set) and len(n.elts) >= 2:
                vals = [e.value if isinstance(e, ast.Constant) else None for e in n.elts]
                distinct = len(set(vals)) == len(vals)
                if distinct and any(set(vals) <= g for g in NAME_GROUPS):
                    out.append(f"{path}:{n.lineno} spells {tuple(vals)}")
    return out


PLACEHOLDERS = {"n/a", "-", "–", "—"}
# Two TUI widgets keep one of their own until they move to workbench/core/fmt.py; this list
# only shrinks (test_the_formatter_debt_is_real fails on an entry that no longer exists).
FORMATTER_DEBT = {
    "workbench/tui/widgets/nvml_panel.py:_fmt",
    "workbench/tui/widgets/variant_matrix.py:_num",
}


def formatter_copies(ts: dict[str, ast.Module]) -> list[str]:
    """The small "number or placeholder" formatters are core/fmt.py's: a short function that
    checks for None (or a finite number) and returns a placeholder else a formatted number is a
    second copy."""
    out = []
    for path, tree in ts.items():
        if path == "workbench/core/fmt.py":
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            nodes = list(ast.walk(fn))
            body = [s for s in nodes if isinstance(s, ast.stmt) and not isinstance(s, ast.Expr)]
            placeholder = any(
                isinstance(c, ast.Constant) and c.value in PLACEHOLDERS for c in nodes
            )
            checks = any(
                isinstance(c, ast.Compare)
                and any(isinstance(x, ast.Constant) and x.value is None for x in c.comparators)
                for c in nodes
            ) or any(isinstance(c, ast.Call) and _name(c.func) == "isfinite" for c in nodes)
            formats = any(
                isinstance(c, ast.JoinedStr)
                or (isinstance(c, ast.Call) and _name(c.func) == "format")
                for c in nodes
            )
            returns = any(isinstance(c, ast.Return) for c in nodes)
            if len(body) <= 4 and placeholder and checks and formats and returns:
                name = f"{path}:{fn.name}"
                if name not in FORMATTER_DEBT:
                    out.append(name)
    return out


POOL_HOMES = {"workbench/run/pool.py", "workbench/run/ray_workers.py"}


def pool_copies(ts: dict[str, ast.Module]) -> list[str]:
    """Workers are started by the one pool (run/pool.py; its Ray back end, run/ray_workers.py):
    nothing else makes a process (`.Process(...)`) or a Ray task or actor of a GPU
    (`ray.remote(num_gpus=...)`)."""
    out = []
    for path, tree in ts.items():
        if path in POOL_HOMES:
            continue
        for n in ast.walk(tree):
            if not isinstance(n, ast.Call):
                continue
            if _name(n.func) == "Process":
                out.append(f"{path}:{n.lineno} starts a process")
            elif _name(n.func) == "remote" and any(k.arg == "num_gpus" for k in n.keywords):
                out.append(f"{path}:{n.lineno} starts a Ray worker of a GPU")
    return out


ARM_NAMES = {"b4-scalar", "b3-scalar", "b3-coop", "tinygemm", "triton-moe"}
ARM_HOME = "workbench/core/arms.py"


def arm_lists(ts: dict[str, ast.Module]) -> list[str]:
    """The built-in arms, their labels and colours are core/arms.py's table: no other tuple,
    list or set literal of two or more of their names, and no dict literal that maps two or
    more of them to plain values (a spec registry keyed by arm, whose values are specs, is the
    spec's: `specs.BUILTIN_PROMISES`, `pyarm.BUILTIN`)."""
    out = []
    for path, tree in ts.items():
        if path == ARM_HOME:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Tuple | ast.List | ast.Set):
                names = {e.value for e in n.elts if isinstance(e, ast.Constant)} & ARM_NAMES
                if len(names) >= 2:
                    out.append(f"{path}:{n.lineno} lists {sorted(names)}")
            elif isinstance(n, ast.Dict):
                keys = {k.value for k in n.keys if isinstance(k, ast.Constant)} & ARM_NAMES
                plain = all(isinstance(v, ast.Constant | ast.Name) for v in n.values)
                if len(keys) >= 2 and plain:
                    out.append(f"{path}:{n.lineno} maps {sorted(keys)}")
    return out


SESSION_WRITER = "workbench/run/runner.py"  # the Runner (a tune is its work: tune.tuner.Tune)
WRITES = {"record", "nvml", "finish", "update"}  # what a SessionWriter is written through


def session_writers(ts: dict[str, ast.Module]) -> list[str]:
    """Only the runner writes a run's session: no other module of run/, tune/ or measure/ makes
    a SessionWriter or writes through a ``session`` (``*.session.record(...)``, ``r.session.nvml``):
    a worker and the pool hand records back, the runner journals them."""
    out = []
    for path, tree in ts.items():
        if path == SESSION_WRITER or not path.startswith(
            ("workbench/run/", "workbench/tune/", "workbench/measure/")
        ):
            continue
        for n in ast.walk(tree):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if _name(f) == "SessionWriter":
                out.append(f"{path}:{n.lineno} makes a SessionWriter")
            elif (
                isinstance(f, ast.Attribute)
                and f.attr in WRITES
                and isinstance(f.value, ast.Attribute)
                and f.value.attr == "session"
            ):
                out.append(f"{path}:{n.lineno} writes session.{f.attr}")
    return out


SETTLE_HOME = "workbench/core/sequential.py"
# who asks the settling rule (core/sequential.py): the stopping rule's home for the next look,
# the analysis and the run's config for the level of a look's interval
SETTLE_CALLERS = {
    "next_look": {"workbench/measure/abba.py"},
    "look_conf": {"workbench/analysis/model.py", "workbench/run/config.py"},
}


def settle_rule_copies(ts: dict[str, ast.Module]) -> list[str]:
    """Settling a label over looks is core/sequential.py's: nothing else lists the decided
    labels or asks its rule but the modules SETTLE_CALLERS names."""
    out = []
    decided = {"FASTER", "FASTER<m", "SLOWER<m", "SLOWER"}
    for path, tree in ts.items():
        if path == SETTLE_HOME:
            continue
        for name, homes in SETTLE_CALLERS.items():
            if path not in homes:
                out += [f"{path}:{ln} calls {n}" for ln, n in _calls(tree, {name})]
        for n in ast.walk(tree):
            if isinstance(n, ast.Tuple | ast.List | ast.Set):
                vals = {e.value for e in n.elts if isinstance(e, ast.Constant)}
                if vals == decided:
                    out.append(f"{path}:{n.lineno} lists the decided labels")
    return out


WORDS_HOMES = {  # the words of an interval's method: analysis/words.py, and the Verdict's own
    "workbench/analysis/words.py", "workbench/core/stats.py", "workbench/core/intervals.py",
}  # fmt: skip
METHOD_PHRASES = ("t-interval over", "CI of the median", "CI over workers", "between-worker SD",
                  "distribution-free", "block means")  # fmt: skip


def word_copies(ts: dict[str, ast.Module]) -> list[str]:
    """What an interval is (its method, unit and spread) is worded in analysis/words.py: no
    other module has a string, docstrings apart, that says it (the report's once said "median
    over pairs ... no blocks" above its own "CI over workers", issue 45)."""
    out = []
    for path, tree in ts.items():
        if path in WORDS_HOMES:
            continue
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr)
        }  # fmt: skip
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                out += [(path, n.lineno, p) for p in METHOD_PHRASES if p in n.value]
    return [f"{path}:{ln} says {p!r}" for path, ln, p in sorted(out)]


SHIFT_HOMES = {"workbench/analysis/compare.py", "workbench/analysis/shifts.py"}


def shift_cell_copies(ts: dict[str, ast.Module]) -> list[str]:
    """The shift table of two sessions is analysis/shifts.py's (its cells from compare.py's
    Shift): no other module reads a shift's number or whether its verdict changed, so no face
    words a cell of its own (the CLI's "verdict only" beside the TUI's "no", issue 55)."""
    found = [
        (path, n.lineno, n.attr)
        for path, tree in ts.items()
        if path not in SHIFT_HOMES
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and n.attr in ("shift", "verdict_changed")
    ]
    return [f"{path}:{ln} reads .{attr}" for path, ln, attr in sorted(found)]


TOLERANCE_HOME = "workbench/kernels/specs.py"  # DEFAULT_TOLERANCE
TOLERANCE = 2e-3


def tolerance_copies(ts: dict[str, ast.Module]) -> list[str]:
    """The relative L2 the built-ins promise against float64 is specs.DEFAULT_TOLERANCE: no other
    module writes the number (check.REL_L2_MAX and triton-moe's promise once did), but as one
    step of a scale (a tuple or list of three or more numbers: the TUI chart's tick steps)."""
    out = []
    for path, tree in ts.items():
        if path == TOLERANCE_HOME:
            continue
        scales = {
            id(e)
            for n in ast.walk(tree)
            if isinstance(n, ast.Tuple | ast.List) and len(n.elts) >= 3
            for e in n.elts
        }
        out += [
            f"{path}:{n.lineno} writes {n.value:g}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and type(n.value) is float
            and n.value == TOLERANCE
            and id(n) not in scales
        ]
    return sorted(out)


STALE_HOME = "workbench/store/provenance.py"


def stale_sentences(ts: dict[str, ast.Module]) -> list[str]:
    """What a stale session is, and the sentences that say so, are store/provenance.py's (its
    `staleness` rule, `STALE`, `STALE_NOTE`, `staleness_text`): no other module has a string that
    says "STALE: ..." (`sessions list` once printed its own beside the rule)."""
    return sorted(
        f"{path}:{n.lineno} says {n.value[:40]!r}"
        for path, tree in ts.items()
        if path != STALE_HOME
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and "STALE:" in n.value
    )


GRID_HOME = "workbench/plots/_common.py"  # panel_grid


def subplot_grids(ts: dict[str, ast.Module]) -> list[str]:
    """The grid of per-(kernel, set) panels is plots/_common.py's `panel_grid`: no other figure
    module works out a row count by ceiling division (``-(-n // nc)``), as distributions.py and
    floor.py each did."""
    out = []
    for path, tree in ts.items():
        if path == GRID_HOME or not path.startswith("workbench/plots/"):
            continue
        for n in ast.walk(tree):
            if (
                isinstance(n, ast.UnaryOp)
                and isinstance(n.op, ast.USub)
                and isinstance(n.operand, ast.BinOp)
                and isinstance(n.operand.op, ast.FloorDiv)
                and isinstance(n.operand.left, ast.UnaryOp)
                and isinstance(n.operand.left.op, ast.USub)
            ):
                out.append(f"{path}:{n.lineno} divides rows by ceiling")
    return out


CHECKERS = [
    stopping_rule_copies,
    settle_rule_copies,
    verdict_combiners,
    gate_copies,
    run_config_forms,
    nvcc_readers,
    name_tuples,
    formatter_copies,
    pool_copies,
    arm_lists,
    session_writers,
    word_copies,
    shift_cell_copies,
    tolerance_copies,
    stale_sentences,
    subplot_grids,
]


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
@pytest.mark.slow  # 5 s of the fast lane on the 2-core machine
def test_each_rule_has_one_home(checker):
    ts = trees()
    assert len(ts) > 50, "workbench/ not read"
    assert checker(ts) == []


# ------------------------------------------------------------------ planted copies


def test_each_checker_has_one_planted_copy():
    assert sorted(PLANTED) == sorted(c.__name__ for c in CHECKERS)


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_a_planted_copy_is_found(checker):
    code, found = PLANTED[checker.__name__]
    where = {session_writers: "workbench/run/x.py", subplot_grids: "workbench/plots/x.py"}.get(
        checker, "x.py"
    )
    assert checker({where: ast.parse(code)}) == [f.replace("x.py", where) for f in found]


# ------------------------------------------------------------------ the slow lane


def slow_lane_lists(ts: dict[str, ast.Module]) -> list[str]:
    """The slow lane is declared by marks alone (a file's ``pytestmark = pytest.mark.slow``, a
    test's ``@pytest.mark.slow``): no test module, conftest.py included, adds the mark while
    collecting (``item.add_marker(pytest.mark.slow)``) or lists test files to pick them by (a
    literal of two or more "test_*.py" names), as conftest.py's SLOW_FILES once did."""
    out = []
    for path, tree in ts.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and _name(n.func) == "add_marker":
                marks = [a for a in n.args if _name(a) == "slow"]
                out += [f"{path}:{n.lineno} adds the slow mark"] * bool(marks)
            elif isinstance(n, ast.Tuple | ast.List | ast.Set):
                files = [
                    e.value
                    for e in n.elts
                    if isinstance(e, ast.Constant)
                    and isinstance(e.value, str)
                    and e.value.startswith("test_")
                    and e.value.endswith(".py")
                ]
                if len(files) >= 2:
                    out.append(f"{path}:{n.lineno} lists {len(files)} test files")
    return sorted(out)


@pytest.mark.slow  # 2 s of the fast lane on the 2-core machine
def test_the_slow_lane_is_declared_by_marks_alone():
    ts = {
        p.relative_to(REPO).as_posix(): ast.parse(p.read_text())
        for p in sorted((REPO / "tests").glob("*.py"))
    }
    assert "tests/conftest.py" in ts
    assert slow_lane_lists(ts) == []
    planted = (
        "SLOW_FILES = {'test_ab_cli.py', 'test_tui.py'}\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    for item in items:\n"
        "        if item.path.name in SLOW_FILES:\n"
        "            item.add_marker(pytest.mark.slow)\n"
    )
    assert slow_lane_lists({"tests/conftest.py": ast.parse(planted)}) == [
        "tests/conftest.py:1 lists 2 test files",
        "tests/conftest.py:5 adds the slow mark",
    ]


def test_the_vocabulary_is_what_the_modules_use():
    """The names the checker guards are the vocabulary's (a renamed set would slip past)."""
    from workbench.core import arms, vocab

    assert {a.name for a in arms.TABLE} == ARM_NAMES

    assert set(vocab.KERNEL_CHOICES) == NAME_GROUPS[0] and set(vocab.SETS) == NAME_GROUPS[1]
    from workbench.core import decision

    assert decision.KERNELS == vocab.KERNELS
    from workbench.data.shapes import Shape
    from workbench.run.settings import RunSettings

    assert set(RunSettings.__dataclass_fields__) - set(Shape.__dataclass_fields__) == SETTINGS


def test_both_readers_of_nvcc_read_one_release():
    from workbench.kernels.build import nvcc_release

    line = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.6, V12.6.85\n"
    assert nvcc_release(line) == ("12.6", "release 12.6, V12.6.85")
    assert nvcc_release("nvcc: command not found") is None


def test_the_formatter_debt_is_real():
    """Every FORMATTER_DEBT entry names a function that exists (a stale entry would let a new
    copy of that name in unseen)."""
    defined = {
        f"{path}:{fn.name}"
        for path, tree in trees().items()
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
    }
    assert defined >= FORMATTER_DEBT, sorted(FORMATTER_DEBT - defined)
