from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import pytest

import mockdcp

if TYPE_CHECKING:
    import pathlib

PUBLIC = {
    "mockdcp": {
        "LocalProtocolError",
        "MockDcpError",
        "MockDcpServer",
        "ModelError",
        "ProtocolError",
        "RemoteProtocolError",
        "ScenarioError",
        "Server",
        "ServerError",
        "__version__",
        "serve",
    },
    "mockdcp.server": {"DEFAULT_USERS", "MockDcpServer", "Server", "serve"},
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_all_names_the_documented_api(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == PUBLIC[package]
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_every_step_class_is_exported_by_the_scenario_package() -> None:
    from mockdcp import scenario
    from mockdcp.scenario.steps import STEP_TYPES

    for cls in STEP_TYPES:
        assert getattr(scenario, cls.__name__) is cls
        assert cls.__name__ in scenario.__all__


def test_serve_and_server_are_the_top_level_api() -> None:
    from mockdcp.server import Server, serve

    assert mockdcp.serve is serve
    assert mockdcp.Server is Server


@pytest.mark.full  # a mypy run (about 20 s): a tooling check, as tests/test_tooling.py's
def test_a_misspelled_import_of_a_lazily_loaded_name_fails_the_type_check(
    tmp_path: pathlib.Path,
) -> None:
    from mypy import api

    good = tmp_path / "good.py"
    good.write_text("from mockdcp.protocol import DcpStreamRequest as DcpStreamRequest\n")
    bad = tmp_path / "bad.py"
    bad.write_text("from mockdcp.protocol import DcpStreamReqest as DcpStreamReqest\n")
    out, _, status = api.run(["--strict", "--no-incremental", str(good), str(bad)])
    assert status == 1
    assert 'bad.py:1: error: Module "mockdcp.protocol" has no attribute "DcpStreamReqest"' in out
    assert "good.py" not in out
