"""``mockdcp serve``'s users (``--user NAME:PASSWORD[:ROLES]``) and its TLS by default
(``--no-tls`` to leave it out), issue 42."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mockdcp.cli._commands import users_option
from mockdcp.model import Privilege
from mockdcp.util import ServerError


def test_user_option_names_users_with_their_roles() -> None:
    users = users_option(["dcp:secret:data_dcp_reader[default],data_reader[*]", "ops:pw"], "x")
    assert [str(r) for r in users.require("dcp").roles] == [
        "data_dcp_reader[default]",
        "data_reader[*]",
    ]
    assert users["ops"] == "pw"  # no policy on the command line; admin by default
    assert users.allowed("ops", Privilege.ADMINISTRATOR)
    assert not users.allowed("dcp", Privilege.DCP_PRODUCER, "other")
    assert users_option(["alone"], "given")["alone"] == "given"
    assert users_option(None, "password")["Administrator"] == "password"
    with pytest.raises(ServerError, match=r"--user dcp: .*\[nosuch\]"):
        users_option(["dcp:secret:nosuch"], "x")


def _ready(*args: str) -> dict[str, object]:
    serve = [sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"]
    proc = subprocess.Popen(
        [*serve, "--docs", "0", "--vbuckets", "4", "--json", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready: dict[str, object] = json.loads(proc.stdout.readline())
        return ready
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_serve_lists_tls_ports_by_default_and_not_with_no_tls() -> None:
    ready = _ready()
    assert ready["tls_port"]
    assert ready["https_port"]
    assert str(ready["tls_connection_string"]).startswith("couchbases://")
    plain = _ready("--no-tls")
    assert "tls_port" not in plain
    assert "https_port" not in plain
