from __future__ import annotations

import pytest

from mockdcp.model import Bucket, Flusher


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def bucket() -> Bucket:
    return Bucket("default", 4, seed=1, clock=FakeClock())


def flusher(bucket: Bucket, interval: float | None = 0.005) -> Flusher:
    bucket.flusher.interval = interval
    return bucket.flusher


def test_a_write_is_persisted_once_it_has_been_dirty_for_the_interval(bucket: Bucket) -> None:
    f = flusher(bucket)
    item = bucket.set("k", b"{}")
    assert f.flush(10.0) == []  # first seen dirty at 10.0
    assert f.next_deadline() == pytest.approx(10.005)
    assert f.flush(10.004) == []
    assert bucket.vbuckets[item.vbucket].persisted_seqno == 0
    assert f.flush(10.005) == [item.vbucket]
    assert bucket.vbuckets[item.vbucket].persisted_seqno == item.seqno


def test_the_oldest_unpersisted_write_sets_the_deadline_not_the_newest(bucket: Bucket) -> None:
    f = flusher(bucket, 1.0)
    first = bucket.set("k", b"1", vbucket=0)
    f.poll(0.0)
    bucket.set("k", b"2", vbucket=0)
    f.poll(0.9)
    third = bucket.set("k", b"3", vbucket=0)
    assert f.flush(1.0) == [0]
    assert bucket.vbuckets[0].persisted_seqno == third.seqno > first.seqno


def test_only_dirty_vbuckets_are_persisted(bucket: Bucket) -> None:
    f = flusher(bucket)
    bucket.set("a", b"1", vbucket=1)
    bucket.set("b", b"1", vbucket=3)
    assert f.flush(1.0) == []
    assert f.flush(2.0) == [1, 3]
    assert f.flush(3.0) == []
    assert f.next_deadline() is None


def test_a_vbucket_persisted_by_a_step_is_no_longer_dirty(bucket: Bucket) -> None:
    f = flusher(bucket)
    bucket.set("a", b"1", vbucket=2)
    f.poll(0.0)
    bucket.persist(2)
    assert f.flush(5.0) == []
    assert f.next_deadline() is None


def test_paused_flusher_persists_nothing_and_resume_persists_what_is_due(bucket: Bucket) -> None:
    f = flusher(bucket)
    f.pause()
    bucket.set("a", b"1", vbucket=0)
    assert f.flush(0.0) == []
    assert f.flush(60.0) == []
    assert f.next_deadline() is None
    assert bucket.vbuckets[0].persisted_seqno == 0
    f.resume()
    assert f.flush(60.0) == [0]  # dirty since 0.0: long due
    assert bucket.vbuckets[0].persisted_seqno == 1


def test_persist_step_works_while_the_flusher_is_held(bucket: Bucket) -> None:
    f = flusher(bucket)
    f.pause()
    bucket.set("a", b"1", vbucket=0)
    bucket.set("b", b"1", vbucket=0)
    bucket.persist(0, upto=1)
    assert bucket.vbuckets[0].persisted_seqno == 1
    assert f.flush(100.0) == []


def test_failover_while_held_loses_the_unpersisted_writes(bucket: Bucket) -> None:
    f = flusher(bucket)
    bucket.set("kept", b"1", vbucket=0)
    f.flush(0.0)
    f.flush(1.0)
    f.pause()
    bucket.set("lost", b"1", vbucket=0)
    f.flush(2.0)
    bucket.failover(0)
    assert bucket.vbuckets[0].high_seqno == 1
    f.resume()
    assert f.flush(3.0) == []


def test_a_disabled_flusher_never_persists(bucket: Bucket) -> None:
    f = flusher(bucket, None)
    bucket.set("a", b"1", vbucket=0)
    assert f.flush(1e9) == []
    assert f.next_deadline() is None


def test_on_change_is_called_for_writes_and_on_release(bucket: Bucket) -> None:
    f = flusher(bucket)
    calls: list[None] = []
    f.on_change = lambda: calls.append(None)
    bucket.set("a", b"1")
    assert len(calls) == 1
    f.pause()
    f.resume()
    assert len(calls) == 2


def test_a_write_is_due_at_exactly_its_deadline(bucket: Bucket) -> None:
    """A clock that wakes the flusher at exactly ``next_deadline`` (trio's MockClock, as
    explore's in-process runs use): 2.3 + 0.3 - 2.3 rounds below 0.3, and the flusher
    woke at the same deadline for ever."""
    f = flusher(bucket, 0.3)
    item = bucket.set("k", b"{}")
    assert f.flush(2.3) == []
    deadline = f.next_deadline()
    assert deadline is not None
    assert f.flush(deadline) == [item.vbucket]
