from __future__ import annotations

from typing import Any

from mockdcp.model import Bucket
from mockdcp.protocol import (
    DcpControl,
    DcpStreamRequest,
    HelloFeature,
    Mutation,
    Response,
    SnapshotFlag,
    SnapshotMarker,
    Status,
    StreamEnd,
)
from tests.producer._session import FEATURES, Session

MAX = 0xFFFFFFFFFFFFFFFF
F = SnapshotFlag
HISTORY_DISK = F.DISK | F.CHECKPOINT | F.HISTORY | F.MAY_CONTAIN_DUPLICATE_KEYS


def magma(storage: str = "magma") -> Bucket:
    return Bucket(
        "default",
        1,
        seed=1,
        clock=lambda: 1_700_000_000.0,
        storage=storage,
        collections={"_default": [{"name": "_default", "history": True}]}
        if storage == "magma"
        else None,
    )


def session(b: Bucket, *, change_streams: bool = True) -> Session:
    s = Session(b, features=(*FEATURES, HelloFeature.COLLECTIONS))
    s.open_dcp()
    s.call(DcpControl(opaque=0, key="enable_noop", value="true"))
    if change_streams:
        [reply] = s.call(DcpControl(opaque=0, key="change_streams", value="true"))
        assert isinstance(reply, Response)
        assert reply.status == Status.SUCCESS
    return s


def stream(s: Session, start: int = 0, end: int = MAX) -> list[object]:
    req = DcpStreamRequest(
        opaque=1,
        vbucket=0,
        flags=0,
        start_seqno=start,
        end_seqno=end,
        vbucket_uuid=s.node.bucket.vbucket(0).failover.entries[0][0] if start else 0,
        snap_start_seqno=start,
        snap_end_seqno=start,
    )
    return [m for m in s.call(req) if not isinstance(m, Response)]


def summary(msgs: list[object]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in msgs:
        if isinstance(m, SnapshotMarker):
            out.append(("marker", m.start_seqno, m.end_seqno, F(m.flags)))
        elif isinstance(m, Mutation):
            out.append((m.key, m.value, m.by_seqno))
        elif isinstance(m, StreamEnd):
            out.append(("end",))
    return out


def write(b: Bucket, *pairs: tuple[str, str]) -> None:
    for k, v in pairs:
        b.set(k, v, vbucket=0)


class TestControl:
    def test_change_streams_succeeds_on_magma_with_retention(self) -> None:
        session(magma())

    def test_change_streams_is_not_supported_on_couchstore(self) -> None:
        s = session(magma("couchstore"), change_streams=False)
        [reply] = s.call(DcpControl(opaque=0, key="change_streams", value="true"))
        assert isinstance(reply, Response)
        assert reply.status == Status.NOT_SUPPORTED

    def test_change_streams_succeeds_on_magma_without_retention(self) -> None:
        """kv_engine ``DcpProducer::control`` asks the storage
        (``StorageProperties::canRetainHistory``: Magma), not the retention."""
        b = Bucket(
            "default",
            1,
            clock=lambda: 1_700_000_000.0,
            storage="magma",
            history_retention_bytes=0,
            history_retention_seconds=0,
        )
        assert not b.retains_history
        session(b)

    def test_change_streams_false_is_invalid(self) -> None:
        s = session(magma(), change_streams=False)
        [reply] = s.call(DcpControl(opaque=0, key="change_streams", value="false"))
        assert isinstance(reply, Response)
        assert reply.status == Status.EINVAL


class TestMemory:
    def test_each_revision_in_its_own_history_marker(self) -> None:
        b = magma()
        s = session(b)
        msgs = stream(s)
        write(b, ("k", "1"), ("k", "2"), ("k", "3"))
        msgs += s.read()
        got = [x for x in summary(msgs) if x[0] != "marker" or x[1] > 1]
        muts = [x for x in got if x[0] == b"k"]
        assert [m[1] for m in muts] == [b"1", b"2", b"3"]
        markers = [x for x in got if x[0] == "marker"]
        assert len(markers) >= 3
        assert all(x[3] & F.HISTORY for x in markers)
        assert not any(x[3] & F.MAY_CONTAIN_DUPLICATE_KEYS for x in markers)

    def test_a_connection_without_change_streams_gets_no_history_flag(self) -> None:
        b = magma()
        s = session(b, change_streams=False)
        msgs = stream(s)
        write(b, ("k", "1"), ("k", "2"))
        msgs += s.read()
        markers = [x for x in summary(msgs) if x[0] == "marker"]
        assert markers
        assert not any(x[3] & F.HISTORY for x in markers)


class TestHistoricalCheckpoints:
    """A checkpoint is historical when the bucket retains history, whatever the
    collections written (kv_engine ``CheckpointManager::addNewCheckpoint`` reads
    ``isHistoryRetentionEnabled()``; ``dcp_stream_test.cc`` ``CDCActiveStreamTest``)."""

    @staticmethod
    def memory_markers(b: Bucket) -> list[tuple[Any, ...]]:
        s = session(b)
        msgs = stream(s)
        write(b, ("k", "1"), ("j", "2"))
        msgs += s.read()
        return [x for x in summary(msgs) if x[0] == "marker"]

    def test_retention_without_history_collections_still_flags_history(self) -> None:
        b = Bucket(
            "default",
            1,
            clock=lambda: 1_700_000_000.0,
            storage="magma",
            collections={"_default": [{"name": "_default", "history": False}]},
        )
        assert not b.vbucket(0).history_collections
        markers = self.memory_markers(b)
        assert markers
        assert all(x[3] & F.HISTORY for x in markers)

    def test_magma_without_retention_streams_plain_markers(self) -> None:
        """``CDCActiveStreamTest``: retention bytes and seconds 0, a write to a history
        collection: the marker is Memory|Checkpoint, no History."""
        b = Bucket(
            "default",
            1,
            clock=lambda: 1_700_000_000.0,
            storage="magma",
            history_retention_bytes=0,
            history_retention_seconds=0,
            collections={"_default": [{"name": "_default", "history": True}]},
        )
        markers = self.memory_markers(b)
        assert markers
        assert markers[0][3] == F.MEMORY | F.CHECKPOINT
        assert not any(x[3] & (F.HISTORY | F.MAY_CONTAIN_DUPLICATE_KEYS) for x in markers)


def to_disk(b: Bucket) -> None:
    # closed and persisted checkpoints are expelled: a stream from 0 must backfill
    b.checkpoint()
    b.persist()
    assert b.vbucket(0).checkpoints[0].start_seqno > 1


class TestDisk:
    def test_backfill_above_history_start_is_one_history_snapshot(self) -> None:
        b = magma()
        write(b, ("k", "1"), ("j", "x"), ("k", "2"), ("k", "3"))
        to_disk(b)
        got = summary(stream(session(b)))
        assert got[0] == ("marker", 0, b.vbucket(0).persisted_seqno, HISTORY_DISK)
        assert [x[1] for x in got if x[0] == b"k"] == [b"1", b"2", b"3"]

    def test_backfill_below_history_start_splits_with_one_end(self) -> None:
        b = magma()
        write(b, ("a", "1"), ("a", "2"), ("b", "1"), ("b", "2"), ("b", "3"))
        to_disk(b)
        vb = b.vbucket(0)
        # seqno 1 is the _default modify event; a@2, a@3, b@4, b@5, b@6
        b.purge_history(vbucket=0, upto=4)
        got = summary(stream(session(b)))
        markers = [x for x in got if x[0] == "marker"]
        assert markers[0][3] == F.DISK | F.CHECKPOINT
        assert markers[1][3] == HISTORY_DISK
        assert markers[0][2] == markers[1][2] == vb.persisted_seqno
        assert markers[1][1] == 5
        # below the history start: newest only; from it: every revision
        keys = [(x[0], x[1]) for x in got if x[0] in (b"a", b"b")]
        assert keys == [(b"a", b"2"), (b"b", b"2"), (b"b", b"3")]

    def test_split_without_data_below_the_history_start_sends_only_history(self) -> None:
        b = magma()
        write(b, ("b", "1"), ("b", "2"), ("b", "3"))
        to_disk(b)
        b.purge_history(vbucket=0, upto=3)
        # a legacy consumer: below the history start there is only the modify event
        s = Session(b)
        s.open_dcp()
        [reply] = s.call(DcpControl(opaque=0, key="change_streams", value="true"))
        assert isinstance(reply, Response)
        assert reply.status == Status.SUCCESS
        got = summary(stream(s))
        assert got == [("marker", 0, 4, HISTORY_DISK), (b"b", b"3", 4)]

    def test_a_connection_without_change_streams_gets_one_deduplicated_snapshot(self) -> None:
        b = magma()
        write(b, ("k", "1"), ("k", "2"), ("k", "3"))
        to_disk(b)
        got = summary(stream(session(b, change_streams=False)))
        assert next(x for x in got if x[0] == "marker")[3] == F.DISK | F.CHECKPOINT
        assert [x[1] for x in got if x[0] == b"k"] == [b"3"]
