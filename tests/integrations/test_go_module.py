"""The Go helpers' module requires only what its own (non-test) code imports; the tests
with real clients are a module of their own (``integrations/go/clients``)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "integrations" / "go"

_IMPORT_BLOCK = re.compile(r"^import \((.*?)^\)", re.M | re.S)
_IMPORT_LINE = re.compile(r'^import (?:\w+ )?"([^"]+)"', re.M)
_QUOTED = re.compile(r'"([^"]+)"')
_REQUIRE = re.compile(r"^\s*(?:require\s+)?(\S+)\s+v\S+(\s*//\s*indirect)?\s*$", re.M)


def go_imports(source: str) -> set[str]:
    """The import paths of one Go file."""
    found = set(_IMPORT_LINE.findall(source))
    for block in _IMPORT_BLOCK.findall(source):
        found.update(_QUOTED.findall(block))
    return found


def direct_requirements(go_mod: str) -> set[str]:
    """The modules a go.mod requires directly (not marked ``// indirect``)."""
    return {m.group(1) for m in _REQUIRE.finditer(go_mod) if not m.group(2)}


def test_go_imports_and_requirements_are_read() -> None:
    source = 'package x\n\nimport "fmt"\n\nimport (\n\t"os"\n\tdcp "github.com/a/b/c"\n)\n'
    assert go_imports(source) == {"fmt", "os", "github.com/a/b/c"}
    go_mod = (
        "module m\n\ngo 1.24.0\n\nrequire github.com/a/b v1.0.0\n\n"
        "require (\n\tgithub.com/c/d v0.1.0 // indirect\n\tgithub.com/e/f v2.0.0\n)\n"
    )
    assert direct_requirements(go_mod) == {"github.com/a/b", "github.com/e/f"}


def test_the_helpers_require_only_what_their_code_imports() -> None:
    own = MODULE / "go.mod"
    module_path = own.read_text().split("\n", 1)[0].removeprefix("module ").strip()
    imported: set[str] = set()
    for source in MODULE.glob("*.go"):
        if not source.name.endswith("_test.go"):
            imported |= go_imports(source.read_text())
    # a path whose first element has a dot is outside the standard library
    outside = {p for p in imported if "." in p.split("/")[0] and not p.startswith(module_path)}
    required = direct_requirements(own.read_text())
    assert {m for m in required if not any(p.startswith(m) for p in outside)} == set()
    assert {p for p in outside if not any(p.startswith(m) for m in required)} == set()
    assert required == {"github.com/testcontainers/testcontainers-go"}


def test_the_real_client_tests_are_a_module_of_their_own() -> None:
    clients = MODULE / "clients"
    go_mod = (clients / "go.mod").read_text()
    assert "github.com/couchbase/gocbcore/v10" in direct_requirements(go_mod)
    assert "github.com/Trendyol/go-dcp" in direct_requirements(go_mod)
    # the helpers of this checkout, not a published version
    assert re.search(r"^replace github.com/mockdcp/mockdcp/integrations/go => \.\./$", go_mod, re.M)
    for source in MODULE.glob("*_test.go"):
        imports = go_imports(source.read_text())
        assert not any("gocbcore" in p or "go-dcp" in p for p in imports), source.name
