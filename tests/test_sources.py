"""Docstrings and comments cite public sources only.

mockdcp was written from internal fact sheets (a wire sheet, a producer sheet, a clients
sheet, a design and a style note) and numbered seed pages; its users have none of them.
Every fact must name the public source it came from instead: a kv_engine file or
``docs/`` page, a client's source file, or a README section. This test walks the source,
tests, Docker files and the README and fails on any citation of the internal documents,
naming each file and line.

The patterns are assembled from pieces so that this file's own text does not match them,
and this file is scanned like any other.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: What is scanned: these trees and files, relative to the repository root.
SCANNED = (
    "mockdcp",
    "tests",
    "docker",
    "docs",
    "integrations",
    "README.md",
    "CHANGELOG.md",
    "mkdocs.yml",
)
#: Text files by suffix, plus these names without one.
SUFFIXES = frozenset({".py", ".md", ".yaml", ".yml", ".toml", ".java", ".go", ".fbs", ".sh"})
NAMES = frozenset({"Dockerfile"})
#: Build outputs and caches: directories never scanned, wherever they are.
SKIPPED_DIRS = frozenset(
    {"__pycache__", "target", "build", "dist", "bin", "node_modules", ".venv", "venv"}
)

_MD = r"\." + "md"
#: The internal sheets' names, their folders, and the numbered seed pages.
_SHEETS = ("wire", "producer", "clients", "design", "style")
_SHARED = ("protocol", "seeds", "design", "style")
INTERNAL = re.compile(
    "|".join(
        (
            r"\b(?:" + "|".join(_SHEETS) + ")" + _MD + r"\b",
            r"\bshared" + "/" + "(?:" + "|".join(_SHARED) + ")",
            r"(?:\b|_)seeds?[ _-]?0\d\d(?:\b|_)",
            r"\bseed" + ' "' + "[A-Z]",
        )
    ),
    re.IGNORECASE,
)


def _scanned_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            files.append(top)
            continue
        for path in sorted(top.rglob("*")):
            parts = path.relative_to(ROOT).parts
            if any(p in SKIPPED_DIRS or p.endswith(".egg-info") for p in parts):
                continue
            if any(p.startswith(".") for p in parts):
                continue
            if path.is_file() and (path.suffix in SUFFIXES or path.name in NAMES):
                files.append(path)
    return files


def internal_citations(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line of ``text`` that cites an internal document."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if INTERNAL.search(line)
    ]


def test_no_file_cites_an_internal_document() -> None:
    files = _scanned_files()
    assert ROOT / "mockdcp" / "__init__.py" in files
    assert Path(__file__).resolve() in files
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line}"
        for path in files
        for number, line in internal_citations(path.read_text(encoding="utf-8"))
    ]
    assert not found, "cite the public source instead:\n" + "\n".join(found)


_DOT_MD = "." + "md"


@pytest.mark.parametrize(
    "line",
    [
        f"Sources: producer{_DOT_MD} §11 (kv_engine ``failover-table.cc``)",
        f'"""DCP_STREAM_REQ extras flags (wire{_DOT_MD} §8.3)."""',
        f"# the client already has this map (clients{_DOT_MD} §8)",
        f'"""The ``mockdcp`` command line (design{_DOT_MD} "Command line").',
        f"A snapshot of one connection's counters (style{_DOT_MD} §15).",
        "and ``shared" + "/protocol/wire" + _DOT_MD + "``.",
        "see ../shared" + "/seeds/README" + _DOT_MD,
        '"""Snapshot marker type bits (seed ' + '000; 0x01 is MEMORY)."""',
        '"""Seed ' + '002: sid must be a JSON integer."""',
        "as the seeds " + "000, 003 and 004 show",
        '(DCP_SYSTEM_EVENT, seed "' + 'System Event (0x5f)")',
        "def test_seed_" + "003_begin_collection_v1_is_the_canonical_frame() -> None:",
        '"seed-' + '000-snapshot-marker-v1",',
    ],
)
def test_an_internal_citation_is_found(line: str) -> None:
    assert internal_citations(f"first line\n{line}\n") == [(2, line)]


@pytest.mark.parametrize(
    "line",
    [
        "Sources: kv_engine ``engines/ep/src/failover-table.cc`` for the table",
        '"""DCP_STREAM_REQ extras flags (``include/mcbp/protocol/dcp_add_stream_flags.h``)."""',
        "kv_engine ``docs/dcp/documentation/commands/snapshot-marker.md``",
        '"""The ``mockdcp`` command line (README "The two commands").',
        "self.rng = random.Random(seed)",
        "fake.seed_instance(seed)",
        "partition seeds Faker with (seed, partition)",
        "the seed nodes the client is given",
    ],
)
def test_a_public_citation_or_a_random_seed_is_not_flagged(line: str) -> None:
    assert internal_citations(line) == []
