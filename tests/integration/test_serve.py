"""``serve()`` as a library: what reaches the caller's own code."""

from __future__ import annotations

import pytest

from mockdcp import ServerError
from mockdcp.server import serve


async def test_an_exception_in_the_served_block_reaches_the_caller_as_itself() -> None:
    # trio >= 0.25 wraps what escapes a nursery in an exception group; serve() yields
    # inside one, and must not hand the caller a group around its own exception.
    with pytest.raises(KeyError, match="mine"):
        async with serve(port=0, http_port=0, vbuckets=4):
            raise KeyError("mine")


async def test_a_taken_port_is_a_server_error() -> None:
    async with serve(port=0, http_port=0, vbuckets=4) as first:
        with pytest.raises(ServerError, match="cannot listen"):
            async with serve(port=first.kv_port, http_port=0, vbuckets=4):
                pass


async def _serve_and_fail_with_a_cause() -> None:
    async with serve(port=0, http_port=0, vbuckets=4):
        try:
            raise ValueError("why")
        except ValueError as exc:
            raise KeyError("mine") from exc


async def test_the_exception_keeps_its_own_cause() -> None:
    with pytest.raises(KeyError) as info:
        await _serve_and_fail_with_a_cause()
    assert isinstance(info.value.__cause__, ValueError)
