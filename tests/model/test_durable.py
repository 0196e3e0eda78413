"""Durable writes in the model: prepares, commits and aborts take seqnos; one pending
prepare per key; the max visible and high completed seqnos; disk; restart and failover."""

from __future__ import annotations

import pytest

from mockdcp.model import Bucket, CommittedItem, DurableItem, ItemKind
from mockdcp.util import ModelError


def _bucket() -> Bucket:
    return Bucket(num_vbuckets=1, clock=lambda: 1_700_000_000.0)


def test_commit_takes_its_own_seqno_and_makes_the_value_visible() -> None:
    b = _bucket()
    b.set("a", "1")
    item = b.sync_write("k", '{"v":1}', outcome="commit")
    vb = b.vbucket(0)
    assert isinstance(item, CommittedItem)
    assert (item.seqno, item.prepared_seqno, vb.high_seqno) == (3, 2, 3)
    assert vb.max_visible_seqno == 3
    assert vb.high_completed_seqno == 2
    assert b.oracle()[(0, b"k")].value == b'{"v":1}'
    assert not vb.pending


def test_abort_discards_the_value_and_keeps_the_committed_one() -> None:
    b = _bucket()
    b.set("k", "old")
    item = b.sync_write("k", "new", outcome="abort")
    vb = b.vbucket(0)
    assert isinstance(item, DurableItem)
    assert item.kind is ItemKind.ABORT
    assert (item.seqno, item.prepared_seqno) == (3, 2)
    assert vb.high_seqno == 3
    assert vb.max_visible_seqno == 1
    assert vb.high_completed_seqno == 2
    assert b.oracle()[(0, b"k")].value == b"old"


def test_pending_prepare_blocks_writes_until_completed() -> None:
    b = _bucket()
    b.set("x", "1")
    b.sync_write("k", "v", outcome="pending")
    vb = b.vbucket(0)
    assert vb.high_seqno == 2
    assert vb.max_visible_seqno == 1
    assert (0, b"k") not in b.oracle()
    with pytest.raises(ModelError, match="SYNC_WRITE_IN_PROGRESS"):
        b.sync_write("k", "w")
    with pytest.raises(ModelError, match="SYNC_WRITE_IN_PROGRESS"):
        b.set("k", "w")
    b.commit("k")
    assert b.oracle()[(0, b"k")].value == b"v"
    with pytest.raises(ModelError, match="no pending durable write"):
        b.abort("k")
    with pytest.raises(ModelError, match="no pending durable write"):
        b.commit("k")
    with pytest.raises(ModelError, match="durability level"):
        b.sync_write("k", "v", level="fast")


def test_prepares_do_not_deduplicate_committed_versions() -> None:
    b = _bucket()
    b.set("k", "1")
    b.sync_write("k", "2", outcome="commit")
    cp = b.vbucket(0).checkpoints[-1]
    seqnos = [e.seqno for e in cp.entries if e is not None]
    # the set at 1 is de-duplicated by the commit at 3; the prepare at 2 stays
    assert seqnos == [2, 3]
    # a second prepare of the key while one is in the open checkpoint opens a new one
    b.sync_write("k", "3", outcome="commit")
    assert b.vbucket(0).checkpoints[-1].start_seqno == 4


def test_disk_keeps_aborts_and_pending_prepares_not_completed_ones() -> None:
    b = _bucket()
    b.sync_write("a", "1", outcome="commit")  # 1 prepare, 2 commit
    b.sync_write("b", "1", outcome="abort")  # 3 prepare, 4 abort
    b.sync_write("c", "1", outcome="pending")  # 5 prepare
    b.persist()
    snap = b.vbucket(0).disk_snapshot(0)
    assert [(it.seqno, type(it).__name__) for it in snap.items] == [
        (2, "CommittedItem"),
        (4, "DurableItem"),
        (5, "DurableItem"),
    ]
    assert snap.max_visible_seqno == 2
    assert snap.high_completed_seqno == 3


def test_failover_drops_prepares_after_the_cut_and_reopens_cut_commits() -> None:
    b = _bucket()
    b.set("x", "1")  # 1
    b.sync_write("k", "v", outcome="pending")  # 2
    b.commit("k")  # 3
    b.sync_write("j", "v", outcome="pending")  # 4
    b.failover(lose_after=2)
    vb = b.vbucket(0)
    assert vb.high_seqno == 2
    assert set(vb.pending) == {(0, b"k")}
    assert vb.max_visible_seqno == 1
    assert vb.high_completed_seqno == 0
    assert (0, b"k") not in b.oracle()
    b.failover(lose_after=1)
    assert not vb.pending
    b.sync_write("k", "again", outcome="commit")
    assert b.oracle()[(0, b"k")].value == b"again"


def test_restart_keeps_persisted_prepares_pending() -> None:
    b = _bucket()
    b.sync_write("k", "v", outcome="pending")  # 1
    b.sync_write("j", "v", outcome="pending")  # 2
    b.persist(upto=1)
    b.restart()
    vb = b.vbucket(0)
    assert set(vb.pending) == {(0, b"k")}
    assert vb.high_seqno == 1
    b.abort("k")
    assert vb.high_completed_seqno == 1
    assert not b.oracle()


def test_prepared_deletion_commits_a_tombstone() -> None:
    b = _bucket()
    b.set("k", "v")
    item = b.sync_write("k", deleted=True)
    assert item.deleted
    assert item.kind is ItemKind.DELETION
    assert (0, b"k") not in b.oracle()
