from __future__ import annotations

import time

import pytest
import trio

from mockdcp.model import Bucket
from mockdcp.server import serve
from mockdcp.util._errors import ServerError

from ._raw import wait_until


async def test_serve_persists_writes_by_itself() -> None:
    async with serve(port=0, http_port=0, vbuckets=4) as server:
        item = server.bucket.set("k", b"{}")
        vb = server.bucket.vbucket(item.vbucket)
        with trio.fail_after(5):
            await wait_until(lambda: vb.persisted_seqno == item.seqno)


async def test_a_held_flusher_persists_nothing_until_released() -> None:
    async with serve(port=0, http_port=0, vbuckets=4, flush_interval=0.001) as server:
        server.bucket.flusher.pause()
        item = server.bucket.set("k", b"{}")
        vb = server.bucket.vbucket(item.vbucket)
        await trio.sleep(0.05)
        assert vb.persisted_seqno == 0
        server.bucket.flusher.resume()
        with trio.fail_after(5):
            await wait_until(lambda: vb.persisted_seqno == item.seqno)


async def test_serve_without_a_flusher_never_persists() -> None:
    bucket = Bucket("default", 4, seed=1, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket, flush_interval=None):
        item = bucket.set("k", b"{}")
        await trio.sleep(0.05)
        assert bucket.vbucket(item.vbucket).persisted_seqno == 0


@pytest.mark.parametrize("interval", [0, -1.0])
async def test_serve_refuses_a_flush_interval_that_is_not_positive(interval: float) -> None:
    with pytest.raises(ServerError, match="flush_interval"):
        async with serve(port=0, http_port=0, vbuckets=4, flush_interval=interval):
            pass


async def test_the_persistence_step_holds_and_releases_the_flusher() -> None:
    async with serve(port=0, http_port=0, vbuckets=4, flush_interval=0.001) as server:
        await server.apply({"persistence": {"paused": True}})
        assert server.persistence_paused
        item = server.bucket.set("k", b"{}")
        vb = server.bucket.vbucket(item.vbucket)
        await trio.sleep(0.05)
        assert vb.persisted_seqno == 0
        await server.apply({"persist": {}})  # persist works while the flusher is held
        assert vb.persisted_seqno == item.seqno
        second = server.bucket.set("k", b'{"v":2}')
        await server.apply({"persistence": {"paused": False}})
        with trio.fail_after(5):
            await wait_until(lambda: vb.persisted_seqno == second.seqno)
        assert server.state()["persistence_paused"] is False
