"""The Faker pools of the seeded documents, kept on disk (``data._faker.cached_pools``):
a start with documents reads them back instead of importing Faker (issue 44)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.machinery import ModuleSpec
from typing import TYPE_CHECKING

import pytest

from mockdcp.data import _faker
from mockdcp.data._dataset import POOLS

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MOCKDCP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _drawn(seed: int) -> dict[str, list[str]]:
    return _faker.draw_pools(
        seed, {name: (_faker._provider(method), n) for name, (method, n) in POOLS.items()}
    )


def _no_drawing(*_: object) -> dict[str, list[str]]:
    raise AssertionError("drawn again")


def test_the_pools_are_kept_and_read_back_without_drawing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _faker.cached_pools(3, POOLS)
    assert first == _drawn(3)
    assert [len(first[name]) for name in POOLS] == [256, 256, 16, 128, 64]
    assert len(list((cache / "faker-pools").iterdir())) == 1
    monkeypatch.setattr(_faker, "draw_pools", _no_drawing)
    assert _faker.cached_pools(3, POOLS) == first
    with pytest.raises(AssertionError, match="drawn again"):  # another seed: its own file
        _faker.cached_pools(4, POOLS)


@pytest.mark.parametrize(
    "kept",
    [
        b"{not json",
        b"[]",
        json.dumps({"first": ["a"] * 256}).encode(),  # names missing
        json.dumps({name: ["x"] * (n - 1) for name, (_, n) in POOLS.items()}).encode(),
        json.dumps({name: [1] * n for name, (_, n) in POOLS.items()}).encode(),
    ],
)
def test_a_kept_file_of_another_shape_is_drawn_again_and_replaced(cache: Path, kept: bytes) -> None:
    path = _faker._pools_file(5, POOLS)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(kept)
    assert _faker.cached_pools(5, POOLS) == _drawn(5)
    assert json.loads(path.read_bytes()) == _drawn(5)


def test_the_pools_are_drawn_where_the_cache_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MOCKDCP_CACHE", str(blocked))
    assert _faker.cached_pools(6, POOLS) == _drawn(6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_another_faker_keeps_pools_of_its_own(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = _faker._pools_file(7, POOLS)
    other = tmp_path / "faker" / "__init__.py"
    other.parent.mkdir()
    other.write_text("")
    spec = ModuleSpec("faker", None, origin=str(other))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: spec)
    elsewhere = _faker._pools_file(7, POOLS)
    os.utime(other, ns=(1, 1))
    touched = _faker._pools_file(7, POOLS)
    assert len({installed, elsewhere, touched}) == 3
    assert _faker._pools_file(7, {**POOLS, "city": ("city", 64)}) != touched


def test_a_second_start_with_documents_does_not_import_faker(cache: Path) -> None:
    script = (
        "import sys\n"
        "from mockdcp.data._dataset import DocumentGenerator\n"
        "keys, values = DocumentGenerator(seed=11).block(0)\n"
        "print('faker' in sys.modules, values[2].decode())\n"
    )
    env = {**os.environ, "MOCKDCP_CACHE": str(cache)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        ).stdout.split(" ", 1)
        for _ in range(2)
    ]
    assert [imported for imported, _ in runs] == ["True", "False"]
    assert runs[0][1] == runs[1][1]


def test_the_pools_are_drawn_without_a_home_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``$MOCKDCP_CACHE`` and no home directory (a container's user without a name):
    nothing is kept, the pools are drawn."""
    monkeypatch.delenv("MOCKDCP_CACHE", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr("pathlib.Path.home", no_home)
    assert _faker._pools_file(8, POOLS) is None
    assert _faker.cached_pools(8, POOLS) == _drawn(8)
