"""Corrupted copies of committed sessions, for tests/test_session_fuzz.py.

Each `Case` copies a base session (tests/session_fuzz_mutations.py: `make_base`), then breaks one
thing with one mutation of that module: a field of session.json, of one journal record or of one
NVML reading (type swaps, nulls, lists, NaN/inf/1e308/0/negative values), a line or a whole file
(truncated, missing, foreign JSON, unknown schema, empty journals, ...).
A case states what the workbench must do with it:

* ``expect=(file, field)``: the session is rejected; the one-line error names that file and field;
* ``expect=None``: the session loads (with or without a warning) and every command works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from session_fuzz_mutations import (
    INF,
    NAN,
    Mutation,
    binary_line,
    dump,
    edit_lines,
    insert_record,
    journal,
    meta,
    nth_index,
    nvml_line,
    parse_records,
    record,
    remove,
    samples_where,
    write,
)

# ---------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    name: str
    mutate: Mutation
    expect: tuple[str, str] | None  # (file, field) named by the error; None: must load
    base: str = "default"


CASES: list[Case] = []


def add(name: str, mutate: Mutation, expect: tuple[str, str] | None, base: str = "default"):
    CASES.append(Case(name, mutate, expect, base))


SJ, JL = "session.json", "journal.jsonl"
# (label, value) pairs used as type swaps and bad numbers
SWAPS = {
    "null": None,
    "list": [1, 2],
    "dict": {"x": 1},
    "str": "x",
    "bool": True,
    "zero": 0,
    "neg": -1,
    "nan": NAN,
    "inf": INF,
    "ninf": -INF,
    "huge": 1e308,
    "tiny": 1e-320,
    "float": 1.5,
    "empty": "",
}


def swaps(*labels: str) -> list[tuple[str, Any]]:
    return [(label, SWAPS[label]) for label in labels]


# --- session.json: top level
for label, v in swaps("null", "str", "list", "zero", "empty"):
    add(f"meta-schema-{label}", meta("schema", value=v), (SJ, "schema"))
add("meta-schema-future", meta("schema", value="workbench.session/2"), (SJ, "schema"))
add("meta-schema-missing", meta("schema", delete=True), (SJ, "schema"))
for label, v in swaps("null", "list", "zero", "str"):
    add(f"meta-status-{label}", meta("status", value=v), (SJ, "status"))
add("meta-status-running", meta("status", value="running"), None)
for label, v in swaps("null", "zero", "str", "list"):
    add(f"meta-created-{label}", meta("created", value=v), (SJ, "created"))
add("meta-created-missing", meta("created", delete=True), (SJ, "created"))
for label, v in swaps("zero", "str"):
    add(f"meta-finished-{label}", meta("finished", value=v), (SJ, "finished"))
add("meta-finished-null", meta("finished", value=None), None)
for label, v in swaps("null", "zero", "empty", "list"):
    add(f"meta-slug-{label}", meta("slug", value=v), (SJ, "slug"))
add("meta-error-number", meta("error", value=5), (SJ, "error"))
for section in ("config", "provenance", "environment"):
    for label, v in swaps("null", "list", "str", "zero"):
        add(f"meta-{section}-{label}", meta(section, value=v), (SJ, section))
    add(f"meta-{section}-missing", meta(section, delete=True), (SJ, section))

# --- config
for label, v in swaps("null", "list", "str", "bool", "zero", "neg", "nan", "inf", "huge", "ninf"):
    add(f"config-m-{label}", meta("config", "m", value=v), (SJ, "config.m"))
add("config-m-half", meta("config", "m", value=0.5), (SJ, "config.m"))
add("config-m-big", meta("config", "m", value=0.7), (SJ, "config.m"))
add("config-m-2pct", meta("config", "m", value=0.02), None)
add("config-m-missing", meta("config", "m", delete=True), None)
for label, v in swaps("list", "str", "zero"):
    add(f"config-shape-{label}", meta("config", "shape", value=v), (SJ, "config.shape"))
add("config-shape-null", meta("config", "shape", value=None), None)
for label, v in swaps("str", "neg", "zero", "nan", "huge", "float"):
    add(f"config-shape-hidden-{label}", meta("config", "shape", "hidden", value=v), (SJ, "hidden"))
add("config-shape-tp-zero", meta("config", "shape", "tp", value=0), (SJ, "tp"))
add("config-shape-name-number", meta("config", "shape", "name", value=5), (SJ, "name"))
for key in ("calls", "replays"):
    for label, v in swaps("zero", "nan", "str", "float", "neg"):
        add(f"config-{key}-{label}", meta("config", key, value=v), (SJ, f"config.{key}"))
for label, v in swaps("zero", "list"):
    add(f"config-preset-{label}", meta("config", "preset", value=v), (SJ, "config.preset"))
add("config-kernels-str", meta("config", "kernels", value="w13"), (SJ, "config.kernels"))
add("config-kernels-numbers", meta("config", "kernels", value=[1]), (SJ, "config.kernels"))
add("config-comparisons-dict", meta("config", "comparisons", value={"a": 1}), (SJ, "comparisons"))
add("config-comparisons-nulls", meta("config", "comparisons", value=[None]), (SJ, "comparisons"))
for label, v in swaps("nan", "inf", "huge"):
    add(
        f"config-protocol-target-{label}",
        meta("config", "protocol", "target", value=v),
        (SJ, "config.protocol.target"),
    )
add("config-extra-nan", meta("config", "extra", value=NAN), (SJ, "config.extra"))
add("config-extra-list-inf", meta("config", "extra", value=[1, INF]), (SJ, "config.extra[1]"))
add("config-extra-text", meta("config", "extra", value="anything"), None)

# --- provenance
for label, v in swaps("str", "list", "null", "zero"):
    add(f"prov-git-{label}", meta("provenance", "git", value=v), (SJ, "provenance.git"))
add("prov-git-missing", meta("provenance", "git", delete=True), None)
for label, v in swaps("zero", "list"):
    add(f"prov-git-commit-{label}", meta("provenance", "git", "commit", value=v), (SJ, "commit"))
add("prov-git-dirty-str", meta("provenance", "git", "dirty", value="yes"), (SJ, "dirty"))
add("prov-git-branch-number", meta("provenance", "git", "branch", value=5), (SJ, "branch"))
for label, v in swaps("list", "str", "zero"):
    add(f"prov-files-{label}", meta("provenance", "files", value=v), (SJ, "provenance.files"))
for label, v in swaps("null", "zero", "empty", "list"):
    add(
        f"prov-files-entry-{label}",
        meta("provenance", "files", "csrc/w2.cu", value=v),
        (SJ, "csrc/w2.cu"),
    )
add("prov-files-empty", meta("provenance", "files", value={}), None)
add("prov-files-missing", meta("provenance", "files", delete=True), None)
add("prov-files-other-tree", meta("provenance", "files", "csrc/w2.cu", value="0" * 64), None)
for label, v in swaps("list", "str"):
    add(f"prov-builds-{label}", meta("provenance", "builds", value=v), (SJ, "provenance.builds"))
for label, v in swaps("nan", "list"):
    add(f"prov-version-{label}", meta("provenance", "version", value=v), (SJ, "version"))

# --- environment
for label, v in swaps("zero", "list"):
    add(f"env-gpu-{label}", meta("environment", "gpu", value=v), (SJ, "environment.gpu"))
add("env-gpu-text", meta("environment", "gpu", value="NVIDIA H200"), None)
add("env-gpu-null", meta("environment", "gpu", value=None), None)
for label, v in swaps("zero", "list"):
    add(f"env-gpu-name-{label}", meta("environment", "gpu", "name", value=v), (SJ, "name"))
for label, v in swaps("nan", "list"):
    add(f"env-gpu-driver-{label}", meta("environment", "gpu", "driver", value=v), (SJ, "driver"))
add("env-gpu-sm-inf", meta("environment", "gpu", "sm", value=INF), (SJ, "sm"))
add("env-nvml-number", meta("environment", "nvml", value=5), (SJ, "environment.nvml"))
add("env-unread-nan", meta("environment", "gpu", "clocks", "power_w", value=NAN), None)

# --- summary (the listing reads its recommendations)
for label, v in swaps("list", "str", "zero"):
    add(f"summary-{label}", meta("summary", value=v), (SJ, "summary"))
add("summary-null", meta("summary", value=None), None)
for label, v in swaps("list", "str"):
    add(f"summary-recs-{label}", meta("summary", "recommendations", value=v), (SJ, "summary"))
add("summary-rec-str", meta("summary", "recommendations", "w13", value="coop"), (SJ, "w13"))
for label, v in swaps("null", "zero"):
    add(
        f"summary-rec-decision-{label}",
        meta("summary", "recommendations", "w13", "decision", value=v),
        (SJ, "decision"),
    )
add(
    "summary-rec-decision-missing",
    meta("summary", "recommendations", "w13", "decision", delete=True),
    (SJ, "decision"),
)

# --- session.json as a file
add("file-meta-missing", remove(SJ), (SJ, "no session.json"))
add("file-meta-dir", remove(SJ, as_dir=True), (SJ, "no session.json"))
add("file-meta-empty", write(SJ, ""), (SJ, "empty"))
add("file-meta-truncated", lambda d: write(SJ, (d / SJ).read_text()[:300])(d), (SJ, "truncated"))
add("file-meta-not-json", write(SJ, "status: complete\n"), (SJ, "not JSON"))
for label, text in (
    ("list", "[1, 2]"),
    ("string", '"workbench.session/1"'),
    ("number", "7"),
    ("null", "null"),
    ("pyperf", '{"version": "1.0", "benchmarks": [], "metadata": {}}'),
    ("other-tool", '{"name": "some other tool", "schema": "other/1"}'),
):
    add(f"file-meta-foreign-{label}", write(SJ, text), (SJ, "schema"))
add("file-meta-deep", write(SJ, "[" * 100_000), (SJ, "not JSON"))
add("file-meta-binary", write(SJ, b"\xff\xfe\x00garbage"), (SJ, "cannot read"))
add("file-meta-bom", lambda d: write(SJ, "\ufeff" + (d / SJ).read_text())(d), (SJ, "not JSON"))

# --- journal records: comparison
for field in ("id", "kernel", "set", "role", "a", "b"):
    for label, v in swaps("null", "zero", "list"):
        add(f"cmp-{field}-{label}", record("comparison", field, v), (JL, f"'{field}'"))
add("cmp-id-empty", record("comparison", "id", ""), (JL, "'id'"))
add("cmp-id-list-of-str", record("comparison", "id", ["w13/hot"]), (JL, "'id'"))
add("cmp-id-missing", record("comparison", "id", delete=True), (JL, "'id'"))
for label, v in swaps("zero", "neg", "nan", "inf", "huge", "str", "float", "bool", "null"):
    add(f"cmp-calls-{label}", record("comparison", "calls", v), (JL, "'calls'"))
add("cmp-calls-absurd", record("comparison", "calls", 10**7), (JL, "'calls'"))
add("cmp-calls-missing", record("comparison", "calls", delete=True), (JL, "'calls'"))
for label, v in swaps("zero", "nan", "str"):
    add(f"cmp-replays-{label}", record("comparison", "replays", v), (JL, "'replays'"))
for label, v in swaps("neg", "nan", "huge", "str", "float"):
    add(f"cmp-ws-{label}", record("comparison", "working_set_bytes", v), (JL, "working_set"))
add("cmp-ws-null", record("comparison", "working_set_bytes", None), None)
for label, v in swaps("tiny", "neg", "inf", "str"):
    add(f"cmp-l2-{label}", record("comparison", "l2_bytes", v), (JL, "'l2_bytes'"))
add("cmp-l2-zero", record("comparison", "l2_bytes", 0), None)
add("cmp-l2-null", record("comparison", "l2_bytes", None), None)
for label, v in swaps("zero", "str"):
    add(f"cmp-graphs-{label}", record("comparison", "graphs", v), (JL, "'graphs'"))
add("cmp-spin-neg", record("comparison", "spin", -1), (JL, "'spin'"), base="calibrate")
add("cmp-spin-str", record("comparison", "spin", "10", nth=1), (JL, "'spin'"), base="calibrate")

# --- journal records: sample
for label, v in swaps("zero", "list", "null"):
    add(f"sample-cmp-{label}", record("sample", "cmp", v), (JL, "'cmp'"))
add("sample-cmp-undeclared", record("sample", "cmp", "nope"), None)
for label, v in swaps("neg", "float", "str", "null", "huge"):
    add(f"sample-pair-{label}", record("sample", "pair", v), (JL, "'pair'"))
for label, v in (("four", 4), *swaps("neg", "bool", "str")):
    add(f"sample-slot-{label}", record("sample", "slot", v), (JL, "'slot'"))
for label, v in (("C", "C"), ("lower", "a"), *swaps("null", "zero")):
    add(f"sample-arm-{label}", record("sample", "arm", v), (JL, "'arm'"))
for label, v in swaps("nan", "inf", "ninf", "huge", "zero", "neg", "tiny", "str", "null", "list"):
    add(f"sample-ms-{label}", record("sample", "ms", v), (JL, "'ms'"))
add("sample-ms-bool", record("sample", "ms", True), (JL, "'ms'"))
add("sample-ms-subns", record("sample", "ms", 5e-7), (JL, "'ms'"))
add("sample-ms-2e6", record("sample", "ms", 2e6), (JL, "'ms'"))
add("sample-ms-missing", record("sample", "ms", delete=True), (JL, "'ms'"))
for label, v in (("strs", ["x"]), ("nan", [NAN]), ("huge", [1e308]), ("zero", [0]), ("str", "x")):
    add(f"sample-replay-{label}", record("sample", "replay_ms", v), (JL, "'replay_ms'"))
add("sample-replay-empty", record("sample", "replay_ms", []), None)
add("sample-replay-null", record("sample", "replay_ms", None), None)
add("sample-variant-number", record("sample", "variant", 5), (JL, "'variant'"))
for field, label, v in (
    ("flagged", "str", "yes"),
    ("flagged", "int", 1),
    ("excluded", "null", None),
):
    add(f"sample-{field}-{label}", record("sample", field, v), (JL, f"'{field}'"))
for label, v in swaps("nan", "neg", "str"):
    add(f"sample-mhz-{label}", record("sample", "sm_mhz_min", v), (JL, "'sm_mhz_min'"))
add("sample-mhz-null", record("sample", "sm_mhz_min", None), None)
for label, v in swaps("neg", "float", "nan"):
    add(f"sample-throttle-{label}", record("sample", "throttle", v), (JL, "'throttle'"))
for label, v in swaps("nan", "neg", "str", "null", "huge", "bool"):
    add(f"sample-t-{label}", record("sample", "t", v), (JL, "'t'"))
add("sample-t-missing", record("sample", "t", delete=True), (JL, "'t'"))
add("sample-block-neg", record("sample", "block", -1), (JL, "'block'"))
# one sample of a pair in block 0, the others in none: a pair is measured within one block
add("sample-block-zero", record("sample", "block", 0), (JL, "'block'"))

# --- journal records: gate, memory, note
for label, v in swaps("zero", "null"):
    add(f"gate-cmp-{label}", record("gate", "cmp", v), (JL, "'cmp'"))
for label, v in swaps("str", "null", "zero"):
    add(f"gate-ok-{label}", record("gate", "ok", v), (JL, "'ok'"))
# a NaN/inf error is a real measurement of broken numerics: kept, shown as n/a
for label, v in swaps("nan", "inf"):
    add(f"gate-rel-l2-{label}", record("gate", "rel_l2", v, nth=1), None)
add("gate-max-diff-ninf", record("gate", "max_abs_diff", -INF), None)
add("gate-rel-l2-huge", record("gate", "rel_l2", 1e308, nth=1), None)
for label, v in swaps("neg", "str", "bool"):
    add(f"gate-rel-l2-{label}", record("gate", "rel_l2", v, nth=1), (JL, "'rel_l2'"))
add("gate-kind-number", record("gate", "kind", 5), (JL, "'kind'"))
add("gate-gated-str", record("gate", "gated", "no"), (JL, "'gated'"))
for label, v in swaps("neg", "nan", "huge", "str"):
    add(f"memory-used-{label}", record("memory", "used_before", v), (JL, "'used_before'"))
add("memory-used-null", record("memory", "used_after", None), None)
for label, v in swaps("str", "neg"):
    add(f"memory-banks-{label}", record("memory", "banks", v), (JL, "'banks'"))
add("memory-computed-float", record("memory", "computed", 1.5), (JL, "'computed'"))
add("memory-layout-number", record("memory", "layout", 5), (JL, "'layout'"))
add("memory-kernel-list", record("memory", "kernel", []), (JL, "'kernel'"))
for label, v in swaps("zero", "null"):
    add(
        f"note-text-{label}",
        journal(lambda ls, v=v: [*ls, dump({"type": "note", "t": 1.8e9, "text": v})]),
        (JL, "'text'"),
    )


# --- journal records: record level

add("rec-unknown-type", insert_record({"type": "future", "t": 1.8e9, "x": 1}), None)
add("rec-type-missing", insert_record({"t": 1.8e9, "x": 1}), None)
add("rec-type-number", insert_record({"type": 5, "t": 1.8e9}), None)
add("rec-type-list", insert_record({"type": ["sample"], "t": 1.8e9}), None)
add("rec-unknown-type-nan-t", insert_record({"type": "future", "t": NAN}), (JL, "'t'"))
for label, raw in (("list", "[1, 2]"), ("string", '"sample"'), ("null", "null"), ("number", "3")):
    add(f"rec-{label}", insert_record(raw, raw=True), (JL, "not a journal record"))
add("rec-deep", insert_record("[" * 100_000, raw=True), (JL, "not JSON"))

# --- pairs and comparisons across records
first = "w13/hot"
add(
    "pair-arm-flipped",
    samples_where(
        lambda s: s["cmp"] == first and s["pair"] == 0 and s["slot"] == 1,
        lambda s: {**s, "arm": "A"},
    ),
    (JL, "ABBA or BAAB"),
)
add(
    "pair-arm-disagrees",
    journal(lambda ls: [*ls, dump({**parse_records(ls)[nth_index(ls, "sample")], "arm": "B"})]),
    (JL, "disagree"),
)
add(
    "pair-no-b-samples",
    samples_where(lambda s: s["cmp"] == first and s["arm"] == "B", lambda s: None),
    None,
)
add(
    "pair-slot-missing",
    samples_where(
        lambda s: s["cmp"] == first and s["pair"] == 0 and s["slot"] == 3, lambda s: None
    ),
    None,
)
add(
    "pair-all-excluded",
    samples_where(lambda s: s["cmp"] == first, lambda s: {**s, "excluded": True}),
    None,
)
add("pair-no-samples", samples_where(lambda s: s["cmp"] == first, lambda s: None), None)
add("pair-all-samples-gone", samples_where(lambda s: True, lambda s: None), None)
add("pair-ties", samples_where(lambda s: s["cmp"] == first, lambda s: {**s, "ms": 0.25}), None)
add(
    "pair-outlier",
    samples_where(
        lambda s: s["cmp"] == first and s["pair"] == 1 and s["slot"] == 0,
        lambda s: {**s, "ms": s["ms"] * 1000},
    ),
    None,
)
add("cmp-duplicate", journal(lambda ls: [*ls, ls[nth_index(ls, "comparison")]]), None)
add(
    "cmp-declared-last",
    journal(
        lambda ls: (
            [ln for ln in ls if '"comparison"' not in ln]
            + [ln for ln in ls if '"comparison"' in ln]
        )
    ),
    None,
)

# --- journal as a file
# a session marked complete that journalled nothing contradicts itself (issue 25)
add("file-journal-empty", write(JL, ""), (JL, "holds no records"))
add("file-journal-blank", write(JL, "\n\n  \n"), (JL, "holds no records"))
add("file-journal-truncated-last", lambda d: write(JL, (d / JL).read_text()[:-40])(d), None)
add(
    "file-journal-bad-middle",
    journal(lambda ls: [*ls[:5], ls[5][:30], *ls[6:]]),
    (JL, "line 6 is not JSON"),
)
add("file-journal-binary-middle", lambda d: binary_line(d / JL, 2), (JL, "line 3 is not JSON"))
add("file-journal-missing", remove(JL), (JL, "no journal.jsonl"))
add("file-journal-dir", remove(JL, as_dir=True), (JL, "no journal.jsonl"))
add("file-journal-crlf", lambda d: write(JL, (d / JL).read_text().replace("\n", "\r\n"))(d), None)
add(
    "file-journal-only-comparisons",
    journal(lambda ls: [ln for ln in ls if '"comparison"' in ln]),
    None,
)

# --- nvml.jsonl: bad readings are skipped with a warning, never fatal
NV = "nvml.jsonl"
ONE_READING: set[str] = {"nvml-line-list", "nvml-line-garbage", "nvml-truncated-last"}
add("nvml-missing", remove(NV), None)
add("nvml-empty", write(NV, ""), None)
add("nvml-truncated-last", lambda d: write(NV, (d / NV).read_text()[:-30])(d), None)
for field, label, v in (
    ("sm_mhz", "nan", NAN),
    ("sm_mhz", "str", "fast"),
    ("power_w", "inf", INF),
    ("power_w", "neg", -1),
    ("temp_c", "ninf", -INF),
    ("temp_c", "absurd", -500),
    ("mem_used", "huge", 1e308),
    ("mem_used", "neg", -1),
    ("mem_total", "float", 1.5),
    ("throttle", "nan", NAN),
    ("t", "nan", NAN),
    ("t", "null", None),
):
    add(f"nvml-{field}-{label}", nvml_line(3, field, v), None)
    ONE_READING.add(f"nvml-{field}-{label}")
add("nvml-line-list", lambda d: edit_lines(d, NV, lambda ls: [*ls[:2], "[1, 2]", *ls[2:]]), None)
add(
    "nvml-line-garbage",
    lambda d: edit_lines(d, NV, lambda ls: [*ls[:2], "{garbage", *ls[2:]]),
    None,
)
add("nvml-all-bad", lambda d: edit_lines(d, NV, lambda ls: ['{"t": NaN}'] * len(ls)), None)
add("nvml-dir", remove(NV, as_dir=True), None)


# --- figures: tolerated cases whose figure input is the same as another drawn case's
# `plot` still runs on every case (test_session_fuzz.py); this only spares redrawing equal input.
BASE = "good-default"  # the untouched trimmed base, drawn too
SAME_FIGURES: dict[str, str] = {
    # fields or records no figure reads (figures: titles, verdict table, recommendation,
    # provenance line, samples, replay times, SM clocks, NVML readings, memory record times)
    **dict.fromkeys(
        (
            "summary-null",
            "meta-finished-null",
            "config-m-missing",  # the default m is the base's 0.01
            "config-extra-text",
            "env-unread-nan",
            "cmp-ws-null",
            "cmp-l2-zero",
            "cmp-l2-null",
            "gate-rel-l2-nan",
            "gate-rel-l2-inf",
            "gate-rel-l2-huge",
            "gate-max-diff-ninf",
            "memory-used-null",
            "rec-unknown-type",  # unknown records are set aside by the loader
            "rec-type-missing",
            "rec-type-number",
            "rec-type-list",
            "file-journal-crlf",  # the same records
        ),
        BASE,
    ),
    # the loader drops one NVML reading: the figures get the base's readings less one
    **dict.fromkeys(ONE_READING - {"nvml-sm_mhz-nan"}, "nvml-sm_mhz-nan"),
    # no NVML readings at all
    **dict.fromkeys(("nvml-empty", "nvml-dir", "nvml-all-bad"), "nvml-missing"),
    "sample-replay-empty": "sample-replay-null",  # both fall back to the sample's ms
    "prov-files-empty": "prov-files-missing",  # no source hashes either way
}
