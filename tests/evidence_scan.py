"""Session citations in the docs, and whether the evidence they cite is current (issue 11): the
scanner of tests/test_evidence.py (a test helper; the package's part is provenance.staleness,
the rule the tools share).

Convention (docs/EVIDENCE.md): a session folder name (``<YYYYmmddTHHMMSSZ>_<slug>``, bare, after
``sessions/``, or as the stem of a figure or report named after the session, such as
``<name>_summary.png``) cited in README.md or docs/*.md is CURRENT evidence: it must exist under
sessions/ and its recorded csrc/ hashes must equal the working tree's. A citation under a Markdown
heading whose text contains "History" (any level, any case; the section runs until the next
heading of the same or a higher level, so its subsections are historical too) is HISTORICAL: it
must exist, and may be stale. So is every citation in docs/investigations/, whose files are dated
notes of what was measured then.

Headings come from markdown-it-py (CommonMark), so a ``#`` line inside a code block is not one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import SessionError
from workbench.store.provenance import (  # noqa: F401 (same_device_code, load_equivalence: the tests')
    gpu_arch,
    load_equivalence,
    same_device_code,
    staleness,
)

SESSION_NAME = re.compile(r"\d{8}T\d{6}Z_[A-Za-z0-9][A-Za-z0-9._-]*")
# files named after a session by `workbench plot` / the TUI export: <name>_<kind>.<ext>
_NAMED_FILE = re.compile(
    r"_(summary|ratios|distributions|nvml|report|samples_[A-Za-z0-9.-]+)\.(png|svg|pdf|md)$"
)
HISTORY = "history"
INVESTIGATIONS = "investigations"  # docs/investigations/: dated notes, historical throughout


@dataclass(frozen=True)
class Citation:
    file: str
    line: int  # 1-based
    name: str  # the session folder name
    historical: bool
    heading: str  # the innermost heading above it ("" before the first)


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(0-based line, level, text) of every heading, in order."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    out = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map:
            out.append((tok.map[0], int(tok.tag[1:]), tokens[i + 1].content))
    return out


def _name(raw: str) -> str:
    name = raw.rstrip(".")  # the full stop of a sentence is not part of a slug
    m = _NAMED_FILE.search(name)
    return name[: m.start()] if m else name


def citations(text: str, file: str = "") -> list[Citation]:
    """Every session cited in the Markdown ``text``, with its line and section."""
    heads = _headings(text)
    out: list[Citation] = []
    stack: list[tuple[int, str]] = []  # (level, heading text) of the open sections
    h = 0
    for lineno, line in enumerate(text.splitlines()):
        while h < len(heads) and heads[h][0] <= lineno:
            _, level, title = heads[h]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            h += 1
        historical = any(HISTORY in title.lower() for _, title in stack)
        heading = stack[-1][1] if stack else ""
        for m in SESSION_NAME.finditer(line):
            out.append(Citation(file, lineno + 1, _name(m.group()), historical, heading))
    return out


def _resolve(name: str, known: set[str]) -> str:
    """A cited name, or the known session it names a file after (``<session>_<anything>``)."""
    if name in known:
        return name
    longer = [k for k in known if name.startswith(k + "_")]
    return max(longer, key=len) if longer else name


def session_arch(folder: Path) -> str | None:
    """compute_XY of the GPU a session ran on (environment.gpu.sm, e.g. "9.0")."""
    import json

    try:
        gpu = json.loads((folder / "session.json").read_text())["environment"]["gpu"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return gpu_arch(gpu)


def check(
    docs: Iterable[Path],
    sessions_root: Path,
    current: Mapping[str, str] | None = None,
    base: Path | None = None,
    equivalence: Mapping | None | bool = True,
) -> list[str]:
    """One line per problem with the sessions ``docs`` cite (empty: the evidence is sound).

    ``current``: the kernel-source hashes to compare with (default: the working tree's);
    ``base``: folder the file names in messages are relative to.
    """
    from workbench.store.session import load_session

    known = (
        {p.name for p in sessions_root.iterdir() if p.is_dir()} if sessions_root.is_dir() else set()
    )
    problems, seen = [], set()
    for doc in docs:
        label = str(doc.relative_to(base)) if base else str(doc)
        for c in citations(doc.read_text(encoding="utf-8"), label):
            name = _resolve(c.name, known)
            where = f"{c.file}:{c.line}"
            if (where, name) in seen:  # a session and its figure on one line: one problem
                continue
            seen.add((where, name))
            if name not in known:
                problems.append(f"{where}: cites {name}, which is not in {sessions_root.name}/")
                continue
            if c.historical or doc.parent.name == INVESTIGATIONS:
                continue
            try:
                files = load_session(sessions_root / name, nvml=False).provenance.get("files")
            except SessionError as e:
                problems.append(f"{where}: cites {name}, which cannot be loaded: {e}")
                continue
            # the one staleness rule of the tools (sessions list/show, report, TUI, export)
            st = staleness(files, session_arch(sessions_root / name), current, equivalence)
            stale = st.differ if st.stale or st.differ is None else []
            if stale is None:
                problems.append(f"{where}: cites {name} as current, but it records no csrc/ hashes")
            elif stale:
                problems.append(
                    f"{where}: cites {name} as current evidence, but its kernel sources differ "
                    f"from the working tree: {', '.join(stale)} (re-measure, or move the "
                    "citation under a 'History' heading)"
                )
    return problems


def doc_files(repo: Path) -> list[Path]:
    """The Markdown the convention covers: README.md, docs/*.md and docs/investigations/*.md."""
    docs = repo / "docs"
    found = [
        repo / "README.md",
        *sorted(docs.glob("*.md")),
        *sorted(docs.glob("investigations/*.md")),
    ]
    return [p for p in found if p.is_file()]
