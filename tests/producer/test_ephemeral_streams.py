"""Streams and lookups of an ephemeral bucket: backfills from the sequence list with a
disk snapshot's marker, the mid-stream Rollback of a backfill whose range was purged,
OBSERVE_SEQNO's persisted seqno, a full noEviction bucket's TMPFAIL, the restart."""

from __future__ import annotations

from mockdcp.model import Bucket, Ephemeral
from mockdcp.protocol import (
    DcpStreamRequest,
    Mutation,
    ObserveSeqno,
    ObserveSeqnoResult,
    Response,
    SnapshotFlag,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
)
from mockdcp.protocol._document_requests import Set
from tests.producer._session import Session, decode_all

MAX = 2**64 - 1
T0 = 1_700_000_000.0


def ephemeral(vbuckets: int = 2, **settings: object) -> Bucket:
    return Bucket(
        "cache",
        vbuckets,
        seed=5,
        clock=lambda: T0,
        bucket_type="ephemeral",
        ephemeral=Ephemeral(**settings) if settings else None,  # type: ignore[arg-type]
    )


def dcp_session(b: Bucket) -> Session:
    session = Session(b, features=())
    session.open_dcp()
    session.read()
    return session


def request(vb: int, start: int = 0, uuid: int = 0) -> bytes:
    return DcpStreamRequest(
        opaque=vb,
        vbucket=vb,
        flags=0,
        start_seqno=start,
        end_seqno=MAX,
        vbucket_uuid=uuid,
        snap_start_seqno=start,
        snap_end_seqno=start,
    ).encode()


def everything(session: Session) -> list[object]:
    out: list[object] = []
    while data := session.conn.data_to_send(session.now, 1 << 30):
        out += decode_all(data, collections=False)
    return out


def test_a_backfill_reads_the_sequence_list_with_a_disk_snapshots_marker() -> None:
    """kv_engine ``DCPBackfillMemoryBuffered::create``: ``markDiskSnapshot`` over
    [start, the list's high seqno]: DISK|CHECKPOINT, no flusher needed."""
    b = ephemeral(vbuckets=1)
    for i in range(20):
        b.set(f"k{i}", b"v" * 10, vbucket=0)
    b.checkpoint(0)  # the closed checkpoint goes: the stream must backfill
    session = dcp_session(b)
    session.send(request(0))
    out = everything(session)
    marker = next(m for m in out if isinstance(m, SnapshotMarker))
    assert marker.flags == SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT
    assert (marker.start_seqno, marker.end_seqno) == (0, 20)
    assert len([m for m in out if isinstance(m, Mutation)]) == 20


def test_a_backfill_whose_range_was_purged_while_it_waited_ends_the_stream() -> None:
    """kv_engine ``backfill_memory.cc``: a start at or below the purge seqno (and not 1)
    sets the stream dead with Rollback, written STATE_CHANGED; asked again, ROLLBACK 0."""
    b = ephemeral()
    for vb in range(2):
        for i in range(30):
            b.set(f"k{vb}-{i}", b"v" * 20_000, vbucket=vb)
        b.checkpoint(vb)
    uuid = b.vbucket(1).failover.newest_uuid
    session = dcp_session(b)
    session.send(request(0))
    session.send(request(1, start=5, uuid=uuid))  # accepted: nothing purged yet
    first = decode_all(session.conn.data_to_send(session.now, 1000), collections=False)
    assert not [m for m in first if isinstance(m, StreamEnd)]
    for i in range(10, 20):
        b.delete(f"k1-{i}", vbucket=1)
    b.set("k1-last", b"v", vbucket=1)
    b.checkpoint(1)
    assert b.ephemeral_purge(1, age=0) == 10
    rest = everything(session)
    ends = [(m.vbucket, m.reason) for m in rest if isinstance(m, StreamEnd)]
    assert ends == [(1, StreamEndReason.STATE_CHANGED)]
    assert not [m for m in rest if isinstance(m, Mutation) and m.vbucket == 1]
    session.send(request(1, start=5, uuid=uuid))
    [reply] = everything(session)
    assert isinstance(reply, Response)
    assert (reply.status, reply.value) == (Status.ROLLBACK, (0).to_bytes(8, "big"))


def test_observe_seqno_reports_nothing_persisted() -> None:
    """kv_engine ``EphemeralVBucket::getPublicPersistenceSeqno``: 0, whatever was written
    (go-dcp's rollback mitigation waits for it forever: go-dcp-kafka #66)."""
    b = ephemeral(vbuckets=1)
    for i in range(3):
        b.set(f"k{i}", b"v", vbucket=0)
    session = Session(b)
    uuid = b.vbucket(0).failover.newest_uuid
    [reply] = session.call(ObserveSeqno(opaque=7, vbucket=0, vbucket_uuid=uuid))
    assert isinstance(reply, Response)
    result = ObserveSeqnoResult.decode(reply.value)
    assert (result.persisted_seqno, result.current_seqno) == (0, 3)


def test_a_full_no_eviction_bucket_answers_a_set_tmpfail() -> None:
    b = ephemeral(vbuckets=1, eviction_policy="noEviction", memory_quota=2_000)
    session = Session(b)
    statuses = [
        session.call(Set(opaque=i, key=f"k{i}".encode(), vbucket=0, value=b"v" * 300))[0]
        for i in range(10)
    ]
    codes = [r.status for r in statuses if isinstance(r, Response)]
    assert codes[0] == Status.SUCCESS
    assert Status.ETMPFAIL in codes
    assert b.vbucket(0).high_seqno == codes.count(Status.SUCCESS)


def test_the_config_says_ephemeral_without_couchapi() -> None:
    """ns_server ``bucket_info_cache.erl``: ``bucketType`` ``ephemeral``; no ``couchapi``
    (no views) and no ``rangeScan`` (not persistent)."""
    session = Session(ephemeral())
    config = session.node.config()
    assert config["bucketType"] == "ephemeral"
    caps = config["bucketCapabilities"]
    assert isinstance(caps, list)
    assert "couchapi" not in caps
    assert "rangeScan" not in caps
    assert "dcp" in caps
    couch = Session(Bucket("default", 1, clock=lambda: T0)).node.config()
    assert couch["bucketType"] == "membase"
    assert "couchapi" in couch["bucketCapabilities"]  # type: ignore[operator]


def test_an_ephemeral_backfill_is_never_oso() -> None:
    """kv_engine ``EphemeralBucket::isByIdScanSupported`` is false, so
    ``DcpProducer::isOutOfOrderSnapshotsEnabled`` is too: a stream filtered to one
    collection gets a seqno-ordered DISK snapshot, not OSO markers."""
    from mockdcp.protocol import DcpControl, HelloFeature, OsoSnapshot

    b = Bucket(
        "cache",
        1,
        clock=lambda: T0,
        bucket_type="ephemeral",
        collections={"inventory": ["hotel"]},
    )
    cid = b.resolve_collection("inventory.hotel")
    for key in ("b", "a", "c"):
        b.set(key, b"v", collection_id=cid, vbucket=0)
    b.checkpoint(0)
    session = Session(b, features=(HelloFeature.COLLECTIONS, HelloFeature.XERROR))
    session.open_dcp()
    session.call(DcpControl(opaque=0, key="enable_noop", value="true"))
    session.call(DcpControl(opaque=0, key="enable_out_of_order_snapshots", value="true"))
    session.send(
        DcpStreamRequest(
            opaque=1,
            vbucket=0,
            flags=0,
            start_seqno=0,
            end_seqno=MAX,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
            value=f'{{"collections":["{cid:x}"]}}'.encode(),
        ).encode()
    )
    out = everything(session)
    assert not [m for m in out if isinstance(m, OsoSnapshot)]
    marker = next(m for m in out if isinstance(m, SnapshotMarker))
    assert marker.flags == SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT


def _legacy_backfill(bucket_type: str) -> tuple[list[object], int]:
    """A legacy stream's backfill of a vbucket whose last write is in another collection
    than ``_default``: what it is sent, and the high seqno."""
    b = Bucket(
        "cache",
        1,
        clock=lambda: T0,
        bucket_type=bucket_type,
        collections={"inventory": ["hotel"]},
    )
    cid = b.resolve_collection("inventory.hotel")
    b.set("a", b"v", vbucket=0)
    b.set("b", b"v", vbucket=0)
    b.set("h", b"v", collection_id=cid, vbucket=0)
    b.checkpoint(0)
    if bucket_type == "couchbase":
        b.persist(0)
    session = dcp_session(b)
    session.send(request(0))
    return everything(session), b.vbucket(0).high_seqno


def test_a_legacy_memory_backfill_marker_ends_at_the_max_visible_seqno() -> None:
    """kv_engine ``ActiveStream::markDiskSnapshot`` for a memory backfill
    (``backfill_memory.cc``): a stream without collections or sync writes gets a marker
    ending at the max visible seqno; a disk backfill's ends on the default collection's
    last item (``markLegacyDiskSnapshot``, disk only)."""
    out, high = _legacy_backfill("ephemeral")
    marker = next(m for m in out if isinstance(m, SnapshotMarker))
    assert marker.end_seqno == high  # the hotel document's seqno
    assert [m.key for m in out if isinstance(m, Mutation)] == [b"a", b"b"]
    out, _ = _legacy_backfill("couchbase")
    marker = next(m for m in out if isinstance(m, SnapshotMarker))
    assert marker.end_seqno == high - 1  # b's
