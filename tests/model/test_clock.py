"""The bucket's virtual clock and what a node does on its timers as it moves."""

from __future__ import annotations

import math
import time

import pytest

from mockdcp.model import (
    Bucket,
    Documents,
    Ephemeral,
    ItemKind,
    KvError,
    ServerTimers,
    VirtualClock,
    WallTimers,
    iso_time,
    parse_time,
)
from mockdcp.model._timers import runs_between
from mockdcp.protocol import Status
from mockdcp.util import ModelError

T0 = 1_700_000_000.0
DAY = 86_400


def bucket(vbuckets: int = 4, *, flusher: bool = True, **kw: object) -> Bucket:
    b = Bucket("default", vbuckets, seed=1, clock=VirtualClock(T0), **kw)  # type: ignore[arg-type]
    b.flusher.interval = 0.005 if flusher else None
    return b


def test_runs_between_counts_the_runs_in_the_half_open_interval() -> None:
    count, last = runs_between(0, 600, 0, 599)
    assert count == 0
    assert math.isnan(last)
    assert runs_between(0, 600, 0, 600) == (1, 600)
    assert runs_between(0, 600, 600, 1200) == (1, 1200)  # 600 ran already
    assert runs_between(0, 600, 0, 30 * DAY) == (4320, 30 * DAY)


def test_the_pager_expires_a_document_at_its_first_run_after_the_expiry() -> None:
    b = bucket()
    doc = b.set("k", "{}", expiry=int(T0) + 100)
    vb = b.vbuckets[doc.vbucket]
    assert b.advance_clock(T0 + 599).expired == 0  # the first run is at 600 s
    assert (0, b"k") in b.oracle()
    run = b.advance_clock(T0 + 600)
    assert (run.pager_runs, run.expired, run.vbuckets) == (1, 1, (doc.vbucket,))
    gone = vb.get(b"k")
    assert gone is not None
    assert gone.kind is ItemKind.EXPIRATION
    assert gone.delete_time == int(T0) + 100  # stamped with the document's expiry
    assert gone.cas >> 16 == int((T0 + 600) * 1e9) >> 16  # written at the pager's run
    assert (0, b"k") not in b.oracle()


def test_documents_expire_in_time_order_one_run_at_a_time() -> None:
    b = bucket(1)
    b.set("late", "{}", expiry=int(T0) + 1300)
    b.set("early", "{}", expiry=int(T0) + 700)
    b.set("never", "{}")
    assert b.advance_clock(T0 + 2 * DAY).expired == 2
    vb = b.vbuckets[0]
    order = [it.key for it in vb.log if it.kind is ItemKind.EXPIRATION]
    assert order == [b"early", b"late"]  # run at 1200 s, then at 1800 s
    assert not vb.items[(0, b"never")].deleted


def test_expiry_on_access_before_the_pager_runs() -> None:
    b = bucket()
    doc = b.set("k", "{}", expiry=int(T0) + 10)
    docs = Documents(b)
    b.advance_clock(T0 + 60)  # no pager run yet
    assert not b.vbuckets[doc.vbucket].items[(0, b"k")].deleted
    with pytest.raises(KvError) as err:
        docs.get(doc.vbucket, 0, b"k")
    assert err.value.status is Status.KEY_ENOENT
    assert b.vbuckets[doc.vbucket].items[(0, b"k")].kind is ItemKind.EXPIRATION


def test_compaction_purges_tombstones_older_than_the_purge_age() -> None:
    b = bucket(1)
    b.set("a", "1")
    b.set("b", "1")
    b.delete("a")  # seqno 3, deleted at T0
    b.advance_clock(T0 + DAY)
    b.delete("b")  # seqno 4, a day younger
    vb = b.vbuckets[0]
    run = b.advance_clock(T0 + 3 * DAY - 60)
    assert (run.purged, vb.purge_seqno) == (0, 0)  # not 3 days old yet
    run = b.advance_clock(T0 + 3 * DAY + 30)
    assert (run.purged, vb.purge_seqno) == (1, 3)
    assert b.advance_clock(T0 + 5 * DAY).purged == 1
    assert vb.purge_seqno == 4


def test_the_pager_s_expirations_are_purged_once_old_enough() -> None:
    b = bucket(1)
    b.set("k", "{}", expiry=int(T0) + 30)
    run = b.advance_clock(T0 + 30 * DAY)
    assert (run.expired, run.purged) == (1, 1)
    assert b.vbuckets[0].purge_seqno == 2


def test_a_held_flusher_keeps_tombstones_off_disk_and_unpurged() -> None:
    b = bucket(1)
    b.set("a", "1")
    b.delete("a")
    b.flusher.pause()
    assert b.advance_clock(T0 + 4 * DAY).purged == 0
    assert b.vbuckets[0].purge_seqno == 0
    b.flusher.resume()
    assert b.advance_clock(T0 + 4 * DAY + 30).purged == 1


def test_the_purge_age_is_a_bucket_setting() -> None:
    b = bucket(1, timers=ServerTimers(metadata_purge_age=3600))
    b.set("a", "1")
    b.delete("a")
    assert b.advance_clock(T0 + 3630).purged == 1
    with pytest.raises(ModelError, match="metadata_purge_age"):
        ServerTimers(metadata_purge_age=0)


def test_magma_history_older_than_the_retention_seconds_goes_at_compaction() -> None:
    b = bucket(1, storage="magma", history_retention_seconds=3600)
    b.set("k", "1")
    b.set("k", "2")
    b.persist()
    vb = b.vbuckets[0]
    assert vb.history_start_seqno == 1
    b.advance_clock(T0 + 1800)
    assert vb.history_start_seqno == 1
    b.advance_clock(T0 + 3630)
    assert vb.history_start_seqno == 3  # both revisions older than an hour


def test_a_wall_clock_bucket_refuses_and_backwards_is_refused() -> None:
    wall = Bucket("default", 1, seed=1, clock=time.time)
    with pytest.raises(ModelError, match="wall clock"):
        wall.advance_clock(time.time() + 10)
    b = bucket(1)
    b.advance_clock(T0 + 10)
    with pytest.raises(ModelError, match="cannot go back"):
        b.advance_clock(T0 + 5)
    assert b.clock() == T0 + 10


class Wall:
    """A wall clock the test sets (the shell reads ``time.time``)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_wall_timers_run_what_fell_due_when_the_shell_hands_the_time_in() -> None:
    wall = Wall()
    b = Bucket("default", 1, seed=1, clock=wall)
    b.flusher.interval = 0.005
    timers = WallTimers(b, T0)
    assert timers.due() == T0 + 30  # the first compaction; the pager's at 600 s
    b.set("ttl", "{}", expiry=int(T0) + 100)
    b.set("a", "1")
    b.delete("a")
    wall.now = T0 + 30
    run = timers.run(wall.now)
    assert (run.compactions, run.pager_runs, run.expired) == (1, 0, 0)
    assert timers.due() == T0 + 60
    assert timers.run(wall.now).compactions == 0  # nothing ran twice
    wall.now = T0 + 600
    run = timers.run(wall.now)
    assert (run.pager_runs, run.expired, run.purged) == (1, 1, 0)
    gone = b.vbuckets[0].items[(0, b"ttl")]
    assert gone.kind is ItemKind.EXPIRATION
    assert gone.cas >> 16 == int((T0 + 600) * 1e9) >> 16  # at the wall clock's time
    assert timers.due() == T0 + 630
    wall.now = T0 + 3 * DAY + 120
    assert timers.run(wall.now).purged == 2  # the deletion and the expiration, 3 days old
    assert b.clock() == wall.now  # the model moved no clock


def test_wall_timers_look_again_only_at_vbuckets_that_changed_or_came_of_age(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compaction every 30 s must not scan a large bucket each time: a vbucket
    unchanged since the last pass, whose tombstones are too young, is skipped."""
    from mockdcp.model._disk_store import DiskStore

    looked: list[int] = []
    bound = DiskStore.purge_bound

    def counting(store: DiskStore, before: float) -> int | None:
        looked.append(id(store))
        return bound(store, before)

    monkeypatch.setattr(DiskStore, "purge_bound", counting)
    wall = Wall()
    b = Bucket("default", 4, seed=1, clock=wall, timers=ServerTimers(metadata_purge_age=3600))
    b.flusher.interval = 0.005
    timers = WallTimers(b, T0)
    b.set("a", "1", vbucket=0)
    b.delete("a", vbucket=0)
    wall.now = T0 + 30
    timers.run(wall.now)
    assert len(looked) == 4
    wall.now = T0 + 60
    timers.run(wall.now)
    assert len(looked) == 4  # nothing changed, the tombstone is young
    b.set("b", "1", vbucket=1)
    wall.now = T0 + 90
    timers.run(wall.now)
    assert looked[4:] == [id(b.vbuckets[1].store)]
    wall.now = T0 + 3630
    assert timers.run(wall.now).purged == 1  # of age: looked at again
    assert b.vbuckets[0].purge_seqno == 2


def test_wall_timers_of_an_ephemeral_bucket_run_its_purger() -> None:
    wall = Wall()
    b = Bucket(
        "cache",
        1,
        seed=1,
        clock=wall,
        bucket_type="ephemeral",
        ephemeral=Ephemeral(purge_age=10),
        timers=ServerTimers(ephemeral_purge_interval=5),
    )
    timers = WallTimers(b, T0)
    assert timers.due() == T0 + 5
    b.set("a", "1")
    b.delete("a")
    b.set("b", "1")
    wall.now = T0 + 10
    assert timers.run(wall.now).purged == 1
    assert b.vbuckets[0].purge_seqno == 2


def test_replicas_do_not_expire_their_copies() -> None:
    from mockdcp.protocol import VBucketState

    b = bucket(1)
    b.set("k", "{}", expiry=int(T0) + 1)
    b.vbuckets[0].set_state(VBucketState.REPLICA)
    assert b.advance_clock(T0 + DAY).expired == 0


def test_iso_times() -> None:
    assert parse_time("2023-11-14T22:13:20Z") == T0
    assert parse_time("2023-11-14T22:13:20") == T0  # no zone: UTC
    assert iso_time(T0) == "2023-11-14T22:13:20Z"
    with pytest.raises(ModelError, match="ISO 8601"):
        parse_time("yesterday")


@pytest.mark.full
def test_thirty_days_over_20000_documents_take_seconds_not_days() -> None:
    b = bucket(1024)
    keys = [f"doc-{i}".encode() for i in range(20_000)]
    expiries = [int(T0) + 60 * (i % 3000) + 1 for i in range(20_000)]  # up to 50 h
    b.set_many(keys, [b'{"a":1}'] * len(keys), expiry=expiries)
    b.persist()  # as a node's flusher left them
    # CPU seconds of this process: what the work costs, whatever else shares the cores
    # (an idle machine's wall time; the bench modes measure the same way)
    started = time.process_time()
    run = b.advance_clock(T0 + 30 * DAY)
    took = time.process_time() - started
    assert (run.expired, run.purged) == (20_000, 20_000)
    assert took < 5.0, f"30 days over 20,000 documents took {took:.1f} CPU s"


def test_the_pager_reads_the_cold_tier_s_expiries_too() -> None:
    b = bucket(2)
    keys = [f"c{i}".encode() for i in range(50)]
    expiries = [int(T0) + 100 if i % 5 == 0 else (int(T0) + 10 * DAY if i % 5 == 1 else 0)
                for i in range(50)]  # fmt: skip
    b.load_cold(keys, [b'{"c":1}'] * 50, expiry=expiries)
    b.set("c5", "hot")  # a hot version shadows its slot: no expiry now
    run = b.advance_clock(T0 + DAY)
    assert run.expired == 9  # c0, c10, ... c45; not c5
    oracle = b.oracle()
    assert (0, b"c0") not in oracle
    assert (0, b"c5") in oracle
    assert (0, b"c1") in oracle  # expires in ten days
    assert b.advance_clock(T0 + 11 * DAY).expired == 10
