"""`workbench report`: numbers checked against the journal, recomputed here independently.

The independent arithmetic below reads journal.jsonl line by line and uses only NumPy/SciPy
(not workbench.core.stats), so a bug in the report's path from samples to tables shows up here.
Fixtures: synthetic sessions of known effect (tests/fixtures_sessions.py) and every real
session committed under sessions/.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from fixtures_sessions import representative_sessions, write_calibration_session, write_session
from scipy import stats as sps

from workbench.analysis import analyse
from workbench.cli import main
from workbench.core.errors import SessionError
from workbench.data.shapes import PRESETS
from workbench.report.markdown import render_report, resolve_session, variant_label
from workbench.store.session import SessionWriter, load_session

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sessions")


@pytest.fixture(scope="module")
def synthetic(root) -> Path:
    return write_session(root, seed=11, slug="synthetic")


# ------------------------------------------------------------------ independent arithmetic


def _journal(path: Path) -> list[dict]:
    out = []
    plain = path / "journal.jsonl"  # else the packed form (workbench sessions pack)
    text = (
        plain.read_text() if plain.exists()
        else gzip.decompress((path / "journal.jsonl.gz").read_bytes()).decode()
    )  # fmt: skip
    for line in text.splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a killed writer's last line
            out.append(json.loads(line))
    return out


def _pairs(journal: list[dict], cmp_id: str) -> list[tuple[list[float], list[float]]]:
    """(A ms, B ms) of each complete pair: per slot the last sample not excluded."""
    slots: dict[int, dict[int, dict]] = {}
    for r in journal:
        if r["type"] == "sample" and r["cmp"] == cmp_id and not r.get("excluded", False):
            slots.setdefault(r["pair"], {})[r["slot"]] = r
    out = []
    for p in sorted(slots):
        if sorted(slots[p]) != [0, 1, 2, 3]:
            continue
        recs = [slots[p][k] for k in range(4)]
        out.append(
            ([r["ms"] for r in recs if r["arm"] == "A"], [r["ms"] for r in recs if r["arm"] == "B"])
        )
    return out


def _blocks(journal: list[dict], cmp_id: str, key: str = "block") -> list[int | None]:
    """The block (or ``key``: the worker) of each complete pair, in the order of ``_pairs``."""
    slots: dict[int, dict[int, dict]] = {}
    for r in journal:
        if r["type"] == "sample" and r["cmp"] == cmp_id and not r.get("excluded", False):
            slots.setdefault(r["pair"], {})[r["slot"]] = r
    return [slots[p][0].get(key) for p in sorted(slots) if sorted(slots[p]) == [0, 1, 2, 3]]


def _expected(journal: list[dict], cmp_id: str) -> dict:
    pairs = _pairs(journal, cmp_id)
    ratios = np.sort([sum(b) / sum(a) for a, b in pairs])
    n = len(ratios)
    exp = {"n": n, "median": float(np.median(ratios)), "k": int((ratios < 1).sum())}
    by: dict[tuple, list[float]] = {}
    blocks, workers = _blocks(journal, cmp_id), _blocks(journal, cmp_id, "worker")
    for (a, b), blk, wk in zip(pairs, blocks, workers, strict=True):
        if blk is not None:
            by.setdefault((wk, blk), []).append(np.log(sum(b) / sum(a)))
    per_worker: dict = {}
    for (wk, _), v in by.items():
        per_worker.setdefault(wk, []).append(np.median(v))
    if len(per_worker) >= 2:
        # workers (docs/DESIGN.md §7.3): each worker's mean of its block median log-ratios,
        # t-interval over the workers
        y = np.array([np.mean(v) for v in per_worker.values()])
    else:
        # one process: mean of the block median log-ratios, t-interval over the blocks
        y = np.array([np.median(v) for v in by.values()])
    if len(by) >= 2:
        half = sps.t.ppf(0.975, y.size - 1) * y.std(ddof=1) / np.sqrt(y.size)
        exp["median"] = float(np.exp(y.mean()))
        exp["ci"] = (np.exp(y.mean() - half), np.exp(y.mean() + half))
        exp["p"] = _signed_rank_p(np.log(ratios)) if n >= 6 else None
        return exp
    # distribution-free CI: order statistics x_(k), x_(n+1-k), largest k with coverage >= 95 %
    ks = [k for k in range(1, n // 2 + 1) if 1 - 2 * sps.binom.cdf(k - 1, n, 0.5) >= 0.95]
    if ks:
        exp["ci"] = (ratios[max(ks) - 1], ratios[n - max(ks)])
        exp["p"] = _signed_rank_p(np.log(ratios))
    return exp


def _signed_rank_p(logs: np.ndarray) -> float:
    """scipy's signed-rank p. Where scipy runs its permutation test (13 pairs or fewer with
    ties or zeros), its 2^n sign flips through a Python statistic took 27 s of this file's 36 s:
    the same null is enumerated here at once (zeros dropped, average ranks, both tails)."""
    nz = logs[logs != 0]
    if logs.size <= 13 and (nz.size < logs.size or np.unique(np.abs(nz)).size < nz.size):
        ranks = sps.rankdata(np.abs(nz))
        observed = ranks[nz > 0].sum()
        signs = (np.arange(2**nz.size)[:, None] >> np.arange(nz.size)) & 1
        null = signs @ ranks
        tol = 1e-12 * max(observed, 1.0)
        tails = np.mean(null <= observed + tol), np.mean(null >= observed - tol)
        return float(min(1.0, 2 * min(tails)))
    return float(sps.wilcoxon(logs).pvalue)


def _body(md: str) -> str:
    """The report after its answer (which repeats a few cells: test_report_answer.py)."""
    return md[md.index("\n## ") :]


def _row(md: str, first_cell: str) -> list[str]:
    for line in _body(md).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row starting with {first_cell!r} in the report")


def _check_numbers(path: Path) -> None:
    md = render_report(path)
    journal = _journal(path)
    cmps = {r["id"]: r for r in journal if r["type"] == "comparison"}
    assert cmps, "session without comparisons"
    for cmp_id in cmps:
        exp = _expected(journal, cmp_id)
        row = _row(md, f"`{cmp_id}`")
        if exp["n"] == 0:
            assert row[4] == "n/a"
            continue
        assert row[4] == f"{exp['median']:.4f}", cmp_id
        assert row[5] == f"{(exp['median'] - 1) * 100:+.2f} %", cmp_id
        assert row[8] == f"{exp['k']}/{exp['n']}", cmp_id
        if "ci" in exp:
            assert row[6] == f"[{exp['ci'][0]:.4f}, {exp['ci'][1]:.4f}]", cmp_id
            p = "n/a" if exp["p"] is None else f"{exp['p']:.2g}"
            assert row[7] == p, cmp_id
    # seed table: per variant the median over the kept samples of complete pairs, in µs/call
    per: dict[tuple[str, str, str], list[float]] = {}
    for cmp_id, c in cmps.items():
        if c["role"] not in ("main", "reference", "confirm", "aa"):
            continue
        for a, b in _pairs(journal, cmp_id):
            for arm, ms in (("a", a), ("b", b)):
                key = (c["kernel"], c["set"], c[arm])
                per.setdefault(key, []).extend(x * 1000 / c["calls"] for x in ms)
    titles = {"w13": "W13 + SwiGLU", "w2": "W2 + weighted sum", "step": "step (W13 then W2)"}
    for (kernel, st, variant), us in per.items():
        header, rows = _table(md, titles[kernel])
        calls = int(header[0].split("ms per ")[1].split(" calls")[0])
        row = rows[variant_label(variant)]
        ms_col = next(i for i, h in enumerate(header) if h.startswith(st))
        us_col = header.index(f"µs/call {st}")
        assert row[ms_col] == f"{np.median(us) * calls / 1000:.4f}", (kernel, st, variant)
        assert row[us_col] == f"{np.median(us):.2f}", (kernel, st, variant)


def _table(md: str, title: str) -> tuple[list[str], dict[str, list[str]]]:
    """Header and rows (by first cell) of the Markdown table whose first header cell starts
    with ``title``."""
    lines = _body(md).splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(title):
            rows = {}
            for body in lines[i + 2 :]:
                if not body.startswith("|"):
                    break
                r = [c.strip() for c in body.strip().strip("|").split("|")]
                rows[r[0]] = r
            return cells, rows
    raise AssertionError(f"no table titled {title!r} in the report")


def test_numbers_match_the_journal_synthetic(synthetic):
    _check_numbers(synthetic)


@pytest.mark.parametrize("path", representative_sessions(), ids=lambda p: p.name)
@pytest.mark.slow  # 18 s of the fast lane on the 2-core machine
def test_numbers_match_the_journal_real(path):
    _check_numbers(path)


def test_known_effects_and_recommendation(synthetic):
    """The fixture's true effects (W13 -7.5/-8.4 %, W2 +11.9/+11.4 %) come out, seed-style."""
    md = render_report(synthetic)
    assert _row(md, "`w13/hot`")[-1] == "**FASTER**"
    assert _row(md, "`w2/rotating`")[-1] == "**SLOWER**"
    assert abs(float(_row(md, "`w13/hot`")[4]) - 0.925) < 0.005
    assert "**W13 + SwiGLU: cooperative** → `b3-coop`" in md
    assert "**W2 + weighted sum: scalar** → `b3-scalar`" in md
    assert "Rule: Take the cooperative reader" in md
    assert "12/12 pairs favour the mix: **FASTER**" in md  # the step confirmation
    assert "Numerics gate: 10 of 10 comparisons bit-identical." in md
    assert "`w2/hot/tinygemm` (not bit-identical by design): rel_l2 vs b3-coop" in md
    assert "0.0024, within tolerance" in md
    # one flagged-and-excluded sample in w13/rotating, one flagged-and-kept in w2/hot
    assert _row(md, "`w13/rotating`")[9] == "1 (1 excluded)"
    assert _row(md, "`w2/hot`")[9] == "1 (0 excluded)"
    # rows of the seed table: baseline and the tinygemm peer included
    assert _row(md, "b4-scalar (4-byte baseline)")
    assert float(_row(md, "tinygemm (peer: torch int4 tinygemm, bf16)")[3]) > 20  # µs/call


def test_summary_in_session_json_is_ignored(tmp_path, synthetic):
    copy = Path(shutil.copytree(synthetic, tmp_path / synthetic.name))
    before = render_report(copy)
    meta = json.loads((copy / "session.json").read_text())
    meta["summary"] = {
        "w13/hot": {"median": 1.5, "verdict": "SLOWER", "a_ms": 9.0, "b_ms": 99.0},
        "recommendation": {"w13": "scalar", "w2": "cooperative"},
    }
    (copy / "session.json").write_text(json.dumps(meta))
    assert render_report(copy) == before


def test_changing_samples_changes_the_report(tmp_path, synthetic):
    copy = Path(shutil.copytree(synthetic, tmp_path / synthetic.name))
    before = render_report(copy)
    lines = (copy / "journal.jsonl").read_text().splitlines()
    out = []
    for line in lines:
        r = json.loads(line)
        if r["type"] == "sample" and r["cmp"] == "w13/hot" and r["arm"] == "B":
            r["ms"] *= 1.25  # the cooperative reader of W13 hot now measures 15 % slower
        out.append(json.dumps(r))
    (copy / "journal.jsonl").write_text("\n".join(out) + "\n")
    after = render_report(copy)
    assert after != before
    assert _row(after, "`w13/hot`")[-1] == "**SLOWER**"
    assert "**W13 + SwiGLU: scalar** → `b3-scalar`" in after
    # only w13/hot's row moved in the verdict table
    assert _row(after, "`w13/rotating`") == _row(before, "`w13/rotating`")
    _check_numbers(copy)


def test_memory_working_set_and_provenance(synthetic):
    md = render_report(synthetic)
    w13 = _row(md, "W13 + SwiGLU")
    # computed saving of a bank of 512 W13 experts: 80 groups x 320 columns x 1 byte each
    assert w13[1] == "48 / 48" and "13,107,200 B (12.5 MiB)" in w13[5]
    journal = _journal(synthetic)
    mem = {(r["kernel"], r["layout"]): r for r in journal if r["type"] == "memory"}
    d4, d3 = (mem["w13", x]["used_after"] - mem["w13", x]["used_before"] for x in ("b4", "b3"))
    assert w13[4] == f"{(d4 - d3) / 48:,.0f} B ({(d4 - d3) / 48 / 2**20:,.1f} MiB)"
    assert "943,718,400 bytes (900.0 MiB) computed" in md  # docs/DESIGN.md §2's per-rank figure
    assert "MiB) from the measured banks" in md
    assert "| w2 / rotating |" in md and "5.57×" in md  # 350,208,000 B over a 60 MiB L2
    prov = md.split("## Provenance", 1)[1]
    for needle in ("NVIDIA H200", "driver 580.95.05", "CUDA 13.0", "torch 2.11.0+cu130"):
        assert needle in prov
    assert "3f9c2d1e8b7a" in prov and "w13.cuh 55010c76a1" in prov


def test_nvml_unavailable_and_interrupted(root):
    p = write_session(root, seed=2, slug="nonvml", nvml=False)
    md = render_report(p)
    assert "NVML unavailable" in _row(md, "W13 + SwiGLU")[4]
    q = write_session(root, seed=3, slug="killed", stop_after_samples=150)
    md = render_report(q)
    assert "status **interrupted**" in md
    assert "This session is interrupted" in md
    rec = md.split("## Recommendation", 1)[1].split("##", 1)[0]
    assert "**W13 + SwiGLU: cooperative**" in rec
    assert "**W2 + weighted sum: not measured**" in rec
    _check_numbers(q)


def test_memory_allocated_in_steps_is_compared_per_bank(tmp_path):
    """b4 banks in two steps (1 + 5), b3 banks in one (6): the saving is taken per bank."""
    w = SessionWriter(tmp_path, "mem", config={"shape": PRESETS["qwen3.8-flash-next"].to_dict()})
    page = 2 << 20
    per_bank = {"b4": 300 * page, "b3": 294 * page}  # NVML: 6 pages less per bank for b3
    meta = {"b4": 52_428_800, "b3": 39_321_600}  # metadata bytes per bank: 12.5 MiB less in b3
    used = 1000 * page
    for layout, steps in (("b4", (1, 5)), ("b3", (6,))):
        for n in steps:
            w.record(
                "memory",
                kernel="w2",
                layout=layout,
                banks=n,
                used_before=used,
                used_after=used + n * per_bank[layout],
                computed=n * meta[layout],
            )
            used += n * per_bank[layout]
    w.finish()
    row = _row(render_report(w.path), "W2 + weighted sum")
    assert row[1] == "6 / 6"
    assert row[4] == f"{6 * page:,} B (12.0 MiB)"
    assert row[5] == "13,107,200 B (12.5 MiB)" and row[6] == "-4.0 %"


def test_a_bank_window_other_processes_changed_is_not_measured(tmp_path):
    """A memory record whose window saw other processes change GPU memory (``others``, by
    NVML's process list) gives no measured saving: the report says why, `ab`'s lines say it
    too, and a record without the key (every session before it) reads as before."""
    from workbench.commands._tables import event_line, memory_table, saving_lines

    page = 2 << 20
    rows = {}
    for others in (None, 0, 2):
        w = SessionWriter(
            tmp_path, f"mem{others}", config={"shape": PRESETS["qwen3.8-flash-next"].to_dict()}
        )
        recs = []
        for layout, per in (("b4", 300), ("b3", 294)):
            rec = dict(kernel="w2", layout=layout, banks=6, used_before=1000 * page,
                       used_after=(1000 + 6 * per) * page, computed=6 * 10_000_000)  # fmt: skip
            if others is not None:
                rec["others"] = others
            w.record("memory", **rec)
            recs.append({**rec, "measured": rec["used_after"] - rec["used_before"],
                         "computed_total": rec["computed"], "seconds": 0.5})  # fmt: skip
        w.finish()
        rows[others] = (_row(render_report(w.path), "W2 + weighted sum"), recs)
    assert rows[None][0] == rows[0][0]
    assert rows[0][0][4] == f"{6 * page:,} B (12.0 MiB)"
    shared, recs = rows[2]
    assert shared[4] == "other processes on the GPU" and shared[6] == "n/a"
    assert "2 other process(es) changing GPU memory meanwhile" in event_line("memory", recs[0])
    assert "other process" not in event_line("memory", rows[0][1][0])
    assert "other processes changed GPU memory" in saving_lines(recs)[0]
    assert "72.00 MiB measured (NVML)" in saving_lines(rows[0][1])[0]  # 6 pages x 6 banks
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(memory_table(recs))
    assert console.export_text().count("shared GPU") == 2


def test_calibration_session(tmp_path):
    md = render_report(write_calibration_session(tmp_path, seed=9))
    verdicts = {}
    for spin in (0, 10, 20, 40, 80, 160, 320):
        row = _row(md, f"`w13/hot/spin={spin}`")
        assert row[1] == "calibration"
        verdicts[spin] = row[-1].strip("*")
    assert verdicts[0] == "SAME" and verdicts[320] == "SLOWER"
    spins = sorted(verdicts)
    reliable = next(
        s for i, s in enumerate(spins) if s and all(verdicts[x] == "SLOWER" for x in spins[i:])
    )
    change = _row(md, f"`w13/hot/spin={reliable}`")[5]
    line = f"w13 / hot: smallest injected delay that clears m: spin={reliable}, measured {change}"
    assert line in md and "controls (spin 0): SAME" in md
    # this fixture has no blocks, so there is no block spread to detect from
    assert "the run can detect (from the block spread): n/a (no blocks)" in md
    assert "Numerics gate: 7 of 7 comparisons bit-identical." in md
    assert "## Recommendation" not in md and "## Step confirmation" not in md


@pytest.mark.skipif(
    not (REPO / "sessions/20261130T201751Z_calibrate").is_dir(), reason="committed session"
)
def test_calibration_report_states_detectable_beside_clears_m():
    # sessions/20261130T201751Z_calibrate: W13 hot spin 40 reads 1.0045 [1.0041, 1.0048],
    # resolved but below m; spin 80 is the first to clear m
    path = REPO / "sessions/20261130T201751Z_calibrate"
    md = render_report(path)
    line = next(x for x in md.splitlines() if x.startswith("- w13 / hot:"))
    assert "clears m: spin=80" in line
    assert "smallest spin resolved above 1: spin=40 (+0.45 %, SLOWER<m)" in line
    cal = analyse(load_session(path)).calibration()
    det = cal["groups"]["w13/hot"]["detectable_pct"]
    assert f"(from the block spread): {det:.2f} %" in line
    # what the spread can see lies well below m, and below the smallest resolved spin's effect
    assert 0 < det < 0.45 < cal["m"] * 100


def test_analysis_reads_m_from_the_config(synthetic):
    s = load_session(synthetic)
    assert analyse(s).m == pytest.approx(0.01)
    # with m = 20 % no effect of the fixture is large enough: every main set is AMBIGUOUS/SAME
    big = analyse(s, m=0.2)
    assert {r.verdict.verdict for r in big.by_role("main")} <= {"SAME", "AMBIGUOUS"}


def test_plot_links_are_relative_to_the_report(tmp_path, synthetic):
    plots = tmp_path / "plots"
    plots.mkdir()
    for kind in ("summary", "ratios"):
        (plots / f"{synthetic.name}_{kind}.png").write_bytes(b"\x89PNG fake")
    (plots / "other-session_summary.png").write_bytes(b"\x89PNG fake")
    md = render_report(synthetic, plots_dir=plots, link_base=tmp_path / "docs")
    assert f"![summary of {synthetic.name}](../plots/{synthetic.name}_summary.png)" in md
    assert f"- [ratios](../plots/{synthetic.name}_ratios.png)" in md
    assert "other-session" not in md


# ---------------------------------------------------------------------------------- CLI


def test_cli_report_to_file_and_latest(tmp_path, capsys):
    sessions = tmp_path / "sessions"
    write_session(sessions, seed=7, slug="older")
    newest = write_session(sessions, seed=8, slug="newer")
    assert resolve_session("latest", sessions) == newest
    out = tmp_path / "pr" / "report.md"
    rc = main(["report", "latest", "--root", str(sessions), "--output", str(out), "--no-plots"])
    assert rc == 0
    text = out.read_text()
    assert f"`{newest.name}`" in text and text == render_report(newest)
    rc = main(["report", str(newest / "session.json"), "--no-plots"])
    assert rc == 0
    assert capsys.readouterr().out == text


def _missing(d: Path) -> Path:
    return d / "missing"


def _foreign(d: Path) -> Path:
    (d / "x.json").write_text("{}")
    return d / "x.json"


def _truncated(d: Path) -> Path:
    (d / "session.json").write_text('{"sch')
    return d


@pytest.mark.parametrize(
    "make, needle",
    [
        (_missing, "no such session"),
        (_foreign, "not a workbench session"),
        (_truncated, "truncated or not JSON"),
    ],
)
def test_cli_bad_session_exits_2_with_one_message(tmp_path, capsys, make, needle):
    rc = main(["report", str(make(tmp_path)), "--no-plots"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert needle in err and len(err.splitlines()) == 1


def test_latest_without_sessions_is_a_session_error(tmp_path):
    with pytest.raises(SessionError, match="no loadable session"):
        resolve_session("latest", tmp_path)
    with pytest.raises(
        SessionError, match="SESSION 'latest': --sessions-dir .*none.* does not exist"
    ):
        resolve_session("latest", tmp_path / "none")
