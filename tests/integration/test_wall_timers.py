"""On the wall clock (the default) the server runs its timers by itself, as a node does:
the expiry pager, compaction purging old tombstones, an ephemeral bucket's purger
(``mockdcp/server/_timers.py``). The intervals are the bucket's settings, here a second."""

from __future__ import annotations

import time

import trio

import mockdcp
from mockdcp.model import Bucket, Ephemeral, ItemKind, ServerTimers
from mockdcp.protocol import Hello, HelloFeature, SaslAuth, SelectBucket, Set, Status

from ._raw import RawClient, wait_until

AUTH = b"\0Administrator\0password"
FAST = ServerTimers(exp_pager_stime=1, compaction_interval=1, metadata_purge_age=1)


async def _kv(port: int, bucket: str) -> RawClient:
    c = await RawClient.connect(port)
    await c.call(Hello(opaque=c.next_opaque(), agent=b"timers", features=(HelloFeature.XERROR,)))
    await c.call(SaslAuth(opaque=c.next_opaque(), mechanism="PLAIN", payload=AUTH))
    assert (await c.call(SelectBucket(opaque=c.next_opaque(), bucket=bucket))).status == 0
    return c


async def test_the_pager_expires_a_kv_write_and_compaction_purges_it_in_every_bucket() -> None:
    bucket = Bucket("default", 4, seed=1, clock=time.time, timers=FAST)
    async with mockdcp.serve(
        port=0, http_port=0, bucket_obj=bucket, buckets=["default", "other"]
    ) as server:
        other = server.buckets.first_node("other").bucket
        assert other.timers == FAST
        c = await _kv(server.kv_port, "default")
        for key, ttl in ((b"ttl", 1), (b"keep", 0)):
            vbid = bucket.vbucket_of(key)
            r = await c.call(
                Set(opaque=c.next_opaque(), key=key, vbucket=vbid, value=b"1", expiry=ttl)
            )
            assert r.status == Status.SUCCESS
        other.set("ttl", "1", expiry=int(time.time()) + 1)
        vb, vb_other = (
            bucket.vbucket(bucket.vbucket_of("ttl")),
            other.vbucket(other.vbucket_of("ttl")),
        )

        def expired() -> bool:  # by the pager: nothing reads the documents
            return all(
                (item := v.items.get((0, b"ttl"))) is not None and item.kind is ItemKind.EXPIRATION
                for v in (vb, vb_other)
            )

        with trio.fail_after(20):
            await wait_until(expired, poll=0.05)
            seqnos = [v.items[(0, b"ttl")].seqno for v in (vb, vb_other)]
            await wait_until(lambda: [vb.purge_seqno, vb_other.purge_seqno] == seqnos, poll=0.05)
        keep = bucket.vbucket(bucket.vbucket_of("keep")).items[(0, b"keep")]
        assert not keep.deleted


async def test_an_ephemeral_buckets_purger_runs_on_the_wall_clock() -> None:
    bucket = Bucket(
        "cache",
        1,
        seed=1,
        clock=time.time,
        bucket_type="ephemeral",
        ephemeral=Ephemeral(purge_age=1),
        timers=ServerTimers(ephemeral_purge_interval=1),
    )
    async with mockdcp.serve(port=0, http_port=0, bucket_obj=bucket):
        bucket.set("a", "1")
        bucket.delete("a")
        bucket.set("b", "1")  # the list's last element stays (kv_engine purgeStaleItems)
        vb = bucket.vbucket(0)
        with trio.fail_after(20):
            await wait_until(lambda: vb.purge_seqno == 2, poll=0.05)


async def test_a_virtual_clock_bucket_runs_no_timer_by_itself() -> None:
    async with mockdcp.serve(port=0, http_port=0, vbuckets=1, clock="virtual") as server:
        bucket = server.bucket
        bucket.set("ttl", "1", expiry=int(bucket.clock()) - 10)  # long expired
        await trio.sleep(0.5)
        item = bucket.vbucket(0).items[(0, b"ttl")]
        assert not item.deleted  # only advance_clock moves it (or a read)
