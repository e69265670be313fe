"""Sessions to a decision document (docs/EXPORT.md): the reader recommendation of the analysis
model, per device and MoE shape, with the evidence behind it, for ``workbench.core.decision``.

Nothing is decided here: one session's choice is ``analysis.analyse(session).recommendations``,
several sessions' of one board is ``analysis.pool_sessions``, of two or more boards the GPU
model's (``analysis.fleet``: the board the unit), and the numbers per expert set are those same
objects' verdicts. What this module adds is the grouping (device name as vLLM keys it, shape
key), each entry's ``scope`` (``model`` or ``board``) and the boards it sampled, and the
refusals: sessions of one entry must have measured the same kernel sources and the same pair of
arms, or the merged choice would describe no single build; and ``model=True`` (`export
--model`) refuses an entry that is not the model's.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterable
from typing import Any

from workbench import __version__
from workbench.analysis import words
from workbench.analysis.fleet import Fleet, fleet
from workbench.analysis.model import Analysis, analyse
from workbench.analysis.pool import Pool, check_poolable, pool_sessions, session_board
from workbench.analysis.recommend import READER_KERNELS, Recommendation, reader_results
from workbench.core import decision
from workbench.core.errors import BadArgument
from workbench.store.session import Session

LAYOUT_RULE = (
    "the compact layout (b3) is the default where every reader kernel has a reader "
    "recommendation from these sessions, with the recommended arm per kernel; the 4-byte layout "
    "(b4) has one reader, scalar; anything else falls back to b4-scalar (workbench.core.decision)"
)


def _shape_key(s: Session) -> decision.ShapeKey:
    shape = s.config.get("shape")
    if not isinstance(shape, dict):
        from workbench.data.shapes import PRESETS

        preset = s.config.get("preset")
        if preset not in PRESETS:
            raise BadArgument(f"SESSION {s.name!r} records no shape (config.shape): cannot key it")
        shape = PRESETS[preset].to_dict()
    try:
        return decision.ShapeKey.of(shape)
    except decision.DecisionError as e:
        raise BadArgument(f"SESSION {s.name!r}: {e}") from None


def _session_record(s: Session) -> dict[str, Any]:
    gpu = s.gpu
    git = s.provenance.get("git") or {}
    return {
        "id": s.name, "created": s.created, "status": s.status, "mode": s.config.get("mode"),
        "gpu": s.gpu_name, "gpu_uuid": gpu.get("uuid"), "commit": git.get("commit"),
        "dirty": git.get("dirty"), "top_k": (s.config.get("shape") or {}).get("top_k"),
    }  # fmt: skip


def _verdict(v: Any, boards: int) -> dict[str, Any]:
    return {"verdict": v.verdict, "ratio": v.median, "ci": [v.ci_low, v.ci_high],
            "blocks": v.blocks, "pairs": v.n, "m": v.m, "reason": words.reason(v),
            "method": v.method, "interval": words.method_line(v, boards)}  # fmt: skip


def _one(a: Analysis, kernel: str) -> tuple[Recommendation, dict[str, Any]]:
    """The recommendation and the per-set verdicts of one session (its reader comparisons)."""
    rec = a.recommendations[kernel]
    boards = len(a.session.boards)
    sets = {
        r.set: {"cmp": r.id, "a": r.cmp["a"], "b": r.cmp["b"], **_verdict(r.verdict, boards)}
        for r in reader_results(a.results, kernel)
    }
    return rec, sets


def _pooled(
    analyses: list[Analysis], kernel: str, pooled: tuple[Pool, Fleet | None]
) -> tuple[Recommendation, dict[str, Any]]:
    """The pooled recommendation of several sessions and its rows per set: the GPU model's
    (analysis.fleet) where they ran on two or more boards, else the runs' (analysis.pool)."""
    pool, model = pooled
    recs = pool.recommendations if model is None else model.recommendations
    rec = next((r for r in recs if r.kernel == kernel), None)
    ids = {r.id for r in reader_results(analyses[0].results, kernel)}
    if rec is None:
        names = ", ".join(a.session.name for a in analyses)
        raise BadArgument(
            f"{kernel}: sessions {names} share no reader comparison to pool: export them apart"
        )
    levels = {} if model is None else {r.id: r for r in model.results}
    sets = {}
    for row in pool.rows:
        if row.id in ids:
            lo, hi = row.interval
            sets[row.set] = {
                "cmp": row.id, "verdict": row.verdict, "ratio": row.estimate, "ci": [lo, hi],
                "session_verdicts": row.words, "session_ratios": row.medians,
                "session_cis": [list(c) for c in row.cis], "pairs": row.pairs,
                "blocks": [
                    next(r.verdict.blocks for r in a.results if r.id == row.id) for a in analyses
                ],
                "covered": row.covered, "coverage": _coverage(row),
            }  # fmt: skip
            r = levels.get(row.id)
            if r is not None:  # the model's verdict on the interval over boards decides
                v, c = r.verdict, model.checks[row.id]
                sets[row.set].update({
                    "verdict": v.verdict, "words": v.words, "runs_verdict": row.verdict,
                    "ratio": v.median, "ci": [v.ci_low, v.ci_high], "method": v.method,
                    "interval": f"{model.text(r)}; {model.holds_for()}", "reason": words.reason(v),
                    "boards_differ": c.differ, "f_test_p": c.p, "covered": c.held,
                })  # fmt: skip
    scope = "board" if model is None else "model"
    return rec, {"pooled": len(analyses), "scope": scope, "warnings": pool.warnings, "sets": sets}


def _coverage(row: Any) -> dict[str, Any] | None:
    """`PooledComparison.coverage` as a record (None under three sessions with an interval)."""
    c = row.coverage()
    return None if c is None else {"agreeing": c[0], "sessions": c[1], "p": c[2]}


def _boards(analyses: list[Analysis]) -> list[dict[str, Any]]:
    """The boards an entry sampled ({board, sessions}, first-seen order), as `sessions pool`
    keys them (analysis.pool.session_board: a session of several GPUs is one key, "a+b")."""
    out: dict[str, list[str]] = {}
    for a in analyses:
        out.setdefault(session_board(a.session), []).append(a.session.name)
    return [{"board": k, "sessions": v} for k, v in out.items()]


def _entry(analyses: list[Analysis], m: float | None) -> dict[str, Any]:
    first = analyses[0].session
    files = first.provenance.get("files") or {}
    # one source tree and one pair of arms per comparison: the refusals `sessions pool` makes
    check_poolable([a.session for a in analyses], [a.results for a in analyses])
    compact: dict[str, Any] = {}
    pools: dict[tuple[str, ...], tuple[Pool, Fleet | None]] = {}  # one pool per session set
    for kernel in READER_KERNELS:
        have = [a for a in analyses if kernel in a.recommendations]
        if not have:
            continue
        if len(have) == 1:
            rec, sets = _one(have[0], kernel)
            ev: dict[str, Any] = {"pooled": 1, "scope": "board", "warnings": [], "sets": sets}
        else:
            key = tuple(a.session.name for a in have)
            if key not in pools:
                pool = pool_sessions([a.session for a in have], m)
                pools[key] = (pool, fleet(pool))
            rec, ev = _pooled(have, kernel, pools[key])
        compact[kernel] = {
            "arm": rec.arm, "reader": _reader(rec.arm), "decision": rec.decision,
            "rule": rec.rule, "evidence": rec.evidence,
            "sessions": [a.session.name for a in have], **ev,
        }  # fmt: skip
    safe = {k: {"arm": decision.SAFE_ARM, "reader": "scalar", "decision": "only reader"}
            for k in READER_KERNELS}  # fmt: skip
    scopes = {k["scope"] for k in compact.values()}
    return {
        "shape": dataclasses.asdict(_shape_key(first)),
        "scope": "model" if scopes == {"model"} else "board",
        "boards": _boards(analyses),
        "layouts": {decision.COMPACT: compact, decision.SAFE: safe},
        "layout_rule": LAYOUT_RULE,
        "sessions": [_session_record(a.session) for a in analyses],
        "sources": {"files": files, "builds": _builds(analyses)},
    }


def _reader(arm: str) -> str:
    return arm.partition("@")[0].rpartition("-")[2]


def _builds(analyses: list[Analysis]) -> dict[str, dict[str, str]]:
    """{session: {variant: sha256 of the built library}} (builds differ per host and toolchain)."""
    return {a.session.name: dict(a.session.provenance.get("builds") or {}) for a in analyses}


def not_the_models(dev: str, key: str, entry: dict[str, Any]) -> str | None:
    """Why an entry is no GPU model's decision (None where it is): what `export` notes, and what
    `export --model` refuses with (docs/EXPORT.md)."""
    if entry["scope"] == "model":
        return None
    boards = entry["boards"]
    runs = sum(len(b["sessions"]) for b in boards)
    where = f"{dev} {key}"
    if len(boards) == 1 and boards[0]["board"] == "?":
        what = f"its {runs} session(s) record no board (GPU UUID)"
    elif len(boards) == 1 and "+" not in boards[0]["board"]:
        what = f"rests on one board ({boards[0]['board'][:12]}, {runs} session(s))"
    else:  # a session of several GPUs is one unit of the pool: no interval over boards
        each = ", ".join(b["board"] for b in boards)
        what = f"has no interval over boards ({each}: {runs} session(s), one unit each)"
    return (
        f"{where} {what}: a decision for the GPU model needs sessions of two or more boards, "
        "pooled with the board as the unit"
    )


def build(
    sessions: Iterable[Session], m: float | None = None, model: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """(decision document, notes): one entry per (device, shape) of ``sessions``; sessions
    without a reader recommendation are skipped with a note, and an entry that is one board's
    decision, not its model's, gets a note; ``model=True`` refuses it instead (BadArgument,
    exit 2: `export --model`)."""
    groups: dict[tuple[str, str], list[Analysis]] = {}
    names: dict[str, set[str]] = {}
    notes = []
    for s in sessions:
        a = analyse(s, m)
        if not a.recommendations:
            notes.append(
                f"skipped {s.name}: no reader comparison with pairs (mode {s.config.get('mode')})"
            )
            continue
        gpu = s.gpu_name
        if not gpu:
            raise BadArgument(f"SESSION {s.name!r} records no GPU name: cannot key it by device")
        dev = decision.device_key(gpu)
        names.setdefault(dev, set()).add(gpu)
        groups.setdefault((dev, _shape_key(s).key()), []).append(a)
    if not groups:
        raise BadArgument("no session has a reader recommendation: nothing to export")
    devices: dict[str, Any] = {}
    for (dev, key), analyses in sorted(groups.items()):
        slot = devices.setdefault(dev, {"names": sorted(names[dev]), "shapes": {}})
        entry = _entry(analyses, m)
        why = not_the_models(dev, key, entry)
        if why is not None and model:
            raise BadArgument(
                f"--model: {why}; add another board's runs, or export without --model"
            )
        if why is not None:
            notes.append(f"{why}: written as that board's (scope 'board')")
        slot["shapes"][key] = entry
    doc = {
        "schema": decision.SCHEMA,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "generator": f"workbench {__version__}",
        "devices": devices,
    }
    return decision.check(doc), notes


def split(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{file name: document} for ``--format per-shape``: one file per device and (E, N), each a
    document of its own (the same schema, ``decision.load`` merges a folder of them)."""
    out: dict[str, dict[str, Any]] = {}
    for dev, d in doc["devices"].items():
        for key, e in d["shapes"].items():
            name = decision.file_name(dev, key)
            part = out.setdefault(name, {**{k: v for k, v in doc.items() if k != "devices"},
                                         "devices": {dev: {"names": d["names"], "shapes": {}}}})  # fmt: skip
            part["devices"][dev]["shapes"][key] = e
    return out
