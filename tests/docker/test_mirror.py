"""The Debian archive of the base image's debootstrap comes from apt's own sources (or
MOCKDCP_DEBIAN_MIRROR): the repository names no archive host."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.docker._engine import Unavailable, debian_mirror

if TYPE_CHECKING:
    from pathlib import Path

DEB822 = """\
Types: deb
# a comment inside the stanza
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://sources.example/debian
Suites: bookworm

Types: deb
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
"""


def test_the_archive_of_the_suite_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "debian.sources").write_text(DEB822)
    assert debian_mirror([tmp_path], env={}) == "http://mirror.example/debian"


def test_the_archive_of_the_suite_from_one_line_sources(tmp_path: Path) -> None:
    listing = tmp_path / "sources.list"
    listing.write_text(
        "# deb http://old.example/debian bookworm main\n"
        "deb [arch=amd64] http://other.example/debian trixie main\n"
        "deb [signed-by=/k.gpg] http://one.example/debian bookworm main contrib\n"
    )
    assert debian_mirror([listing], env={}) == "http://one.example/debian"


def test_the_environment_chooses_first(tmp_path: Path) -> None:
    (tmp_path / "debian.sources").write_text(DEB822)
    env = {"MOCKDCP_DEBIAN_MIRROR": "http://chosen.example/debian"}
    assert debian_mirror([tmp_path], env=env) == "http://chosen.example/debian"


def test_no_archive_of_the_suite_says_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "other.sources").write_text(DEB822.replace("bookworm", "trixie"))
    with pytest.raises(Unavailable, match="MOCKDCP_DEBIAN_MIRROR"):
        debian_mirror([tmp_path, tmp_path / "missing.list"], env={})
