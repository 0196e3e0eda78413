"""The bucket clock through the HTTP API: ``advance_clock`` on a virtual and a wall clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from mockdcp.model import Bucket, ItemKind, ServerTimers, VirtualClock
from mockdcp.server import serve
from mockdcp.util import ServerError

from .conftest import AUTH

if TYPE_CHECKING:
    from mockdcp.server import MockDcpServer

START = "2024-01-01T00:00:00Z"
T0 = 1_704_067_200


async def test_advance_clock_on_a_wall_clock_server_is_422_and_changes_nothing(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    r = await http.post(
        "/mock/steps",
        json=[{"set": {"key": "a", "value": "1"}}, {"advance_clock": {"seconds": "1h"}}],
    )
    assert r.status_code == 422
    [error] = r.json()["errors"]
    assert error["step"] == 1
    assert "needs a virtual clock" in error["detail"]
    assert server.bucket.oracle() == {}
    state = (await http.get("/mock/state")).json()
    assert state["clock"]["kind"] == "wall"
    assert state["clock"]["timers"]["exp_pager_stime"] == 600


async def test_a_virtual_clock_moves_only_by_the_step_and_runs_the_pager() -> None:
    async with (
        serve(port=0, http_port=0, vbuckets=4, clock="virtual", clock_start=START) as server,
        httpx.AsyncClient(base_url=server.http_url, auth=AUTH, timeout=10) as http,
    ):
        state = (await http.get("/mock/state")).json()
        assert state["clock"]["now"] == START
        doc = {"set": {"key": "ttl", "value": "{}", "expiry": T0 + 90}}
        r = await http.post("/mock/steps", json=[doc, {"advance_clock": {"seconds": "10m"}}])
        assert r.status_code == 200
        item = server.bucket.vbucket(server.bucket.vbucket_of("ttl")).get(b"ttl")
        assert item is not None
        assert item.kind is ItemKind.EXPIRATION
        state = (await http.get("/mock/state")).json()
        assert state["clock"] == {
            "kind": "virtual",
            "now": "2024-01-01T00:10:00Z",
            "timers": {
                "exp_pager_stime": 600,
                "metadata_purge_age": 259_200,
                "compaction_interval": 30,
                "backfill_idle_limit": 720,
                "ephemeral_purge_interval": 60,
            },
        }
        back = await http.post("/mock/steps", json=[{"advance_clock": {"to": START}}])
        assert back.status_code == 422
        assert "cannot go back" in back.json()["errors"][0]["detail"]
        assert server.bucket.clock() == T0 + 600
        info = (await http.get("/pools/default/buckets/default")).json()
        assert info["autoCompactionSettings"] is False
        settings = (await http.get("/settings/autoCompaction")).json()
        assert settings["purgeInterval"] == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"clock": "sundial"}, "wall or virtual"),
        ({"clock_start": START}, "needs clock='virtual'"),
        ({"clock": "virtual", "clock_start": "tomorrow"}, "ISO 8601"),
    ],
)
async def test_bad_clock_options_are_refused_before_anything_starts(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(ServerError, match=message):
        async with serve(port=0, http_port=0, vbuckets=4, **options):  # type: ignore[arg-type]
            pass


async def test_a_bucket_s_own_purge_age_is_reported_beside_its_settings() -> None:
    bucket = Bucket(
        "default", 4, seed=1, clock=VirtualClock(T0), timers=ServerTimers(metadata_purge_age=3600)
    )
    async with (
        serve(port=0, http_port=0, bucket_obj=bucket) as server,
        httpx.AsyncClient(base_url=server.http_url, auth=AUTH, timeout=10) as http,
    ):
        info = (await http.get("/pools/default/buckets/default")).json()
        assert info["purgeInterval"] == pytest.approx(3600 / 86_400, abs=1e-4)
        assert info["autoCompactionSettings"]["databaseFragmentationThreshold"]["percentage"] == 30
        state = (await http.get("/mock/state")).json()
        assert state["clock"]["kind"] == "virtual"  # a bucket given keeps its own clock
