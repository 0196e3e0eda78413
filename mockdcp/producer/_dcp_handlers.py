"""The DCP commands of a producer connection: DCP_OPEN, DCP_CONTROL, stream requests
(the decision is ``_stream_request``'s; this opens the ``Stream``), close stream, buffer
acknowledgements and the failover log. Each handler takes the connection, the request
frame, its decoded message and the time, and answers through ``conn.replies``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mockdcp.producer import events as ev
from mockdcp.producer._privileges import stream_status
from mockdcp.producer._stream import Stream
from mockdcp.producer._stream_request import decide_stream_request
from mockdcp.protocol import (
    Datatype,
    DcpAddStream,
    DcpBufferAck,
    DcpCloseStream,
    DcpControl,
    DcpGetFailoverLog,
    DcpOpen,
    DcpOpenFlag,
    DcpSeqnoAcknowledged,
    DcpStreamRequest,
    HelloFeature,
    Status,
    StreamEndReason,
    encode_failover_log,
    encode_rollback_value,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.producer._connection import Connection
    from mockdcp.protocol import Frame

log = logging.getLogger("mockdcp.producer")

#: DCP_OPEN flags a producer accepts (kv_engine ``dcp_open_validator``, the same mask in
#: 7.0 to 8.0 but for PiTR, which the mock does not implement; SKIP_DELETES_IN_INITIAL_
#: BACKFILL is newer than 8.0).
_OPEN_FLAGS_OK = (
    DcpOpenFlag.PRODUCER
    | DcpOpenFlag.INCLUDE_XATTRS
    | DcpOpenFlag.NO_VALUE
    | DcpOpenFlag.INCLUDE_DELETE_TIMES
    | DcpOpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE
    | DcpOpenFlag.INCLUDE_DELETED_USER_XATTRS
)


def check_open_flags(flags: DcpOpenFlag) -> str | None:
    """kv_engine ``dcp_open_validator``: the DCP_OPEN flag combinations a producer refuses
    (EINVAL)."""
    if flags & ~_OPEN_FLAGS_OK:
        return f"invalid DCP_OPEN flags {int(flags & ~_OPEN_FLAGS_OK):#x}"
    if flags & DcpOpenFlag.NO_VALUE and flags & DcpOpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE:
        return "NO_VALUE and NO_VALUE_WITH_UNDERLYING_DATATYPE are exclusive"
    if flags & DcpOpenFlag.INCLUDE_DELETED_USER_XATTRS and not flags & DcpOpenFlag.INCLUDE_XATTRS:
        return "INCLUDE_DELETED_USER_XATTRS needs INCLUDE_XATTRS"
    return None


def on_dcp_open(conn: Connection, frame: Frame, msg: DcpOpen, now: float) -> None:
    flags = DcpOpenFlag(msg.flags)
    if not flags & DcpOpenFlag.PRODUCER:
        conn.replies.respond(frame, Status.NOT_SUPPORTED, context="mockdcp only serves producers")
        return
    problem = check_open_flags(flags)
    if problem:
        conn.replies.respond(frame, Status.EINVAL, context=problem)
        return
    if HelloFeature.UNORDERED_EXECUTION in conn.features:
        conn.replies.respond(frame, Status.NOT_SUPPORTED, context="unordered execution")
        return
    conn.opened(msg.name, flags)
    conn.node.claim_producer_name(msg.name, conn)
    conn.keepalive.restart(now)
    import numpy  # noqa: F401  (at connection set-up, not on the first batch)

    conn.replies.respond(frame)
    conn.emit(ev.DcpOpened, flags=int(flags))
    conn.watch(frame, now)


def on_control(conn: Connection, frame: Frame, msg: DcpControl, now: float) -> None:
    status = conn.control(msg.key, msg.value)
    if msg.key == "connection_buffer_size" and status == Status.SUCCESS:
        conn.flow.resize(conn.settings.buffer_size)
    if msg.key == "set_noop_interval" or msg.key == "enable_noop":
        conn.keepalive.restart(now)
    conn.replies.respond(
        frame,
        status,
        context=None if status == Status.SUCCESS else f"control {msg.key}={msg.value}",
    )


def on_failover_log(conn: Connection, frame: Frame, msg: DcpGetFailoverLog, now: float) -> None:
    """DCP_GET_FAILOVER_LOG: the failover log of the node's copy, whatever its state (a
    dead copy a move left included); NOT_MY_VBUCKET only where the node has none
    (kv_engine ``EventuallyPersistentEngine::getFailoverLog`` checks that the vbucket
    exists, not its state)."""
    view = conn.node.view
    vb = view.holds(msg.vbucket) if 0 <= msg.vbucket < view.num_vbuckets else None
    if vb is None or not vb.online:
        conn.replies.not_my_vbucket(frame)  # a node answers for the copies it holds
        return
    conn.replies.respond(frame, value=encode_failover_log(vb.failover.entries))


def on_stream_request(conn: Connection, frame: Frame, msg: DcpStreamRequest, now: float) -> None:
    def active_stream_exists(sid: int | None) -> bool:
        existing = conn.streams.get(msg.vbucket, sid)
        return existing is not None and existing.alive

    def privilege(collections: frozenset[int] | None, scope: int | None) -> Status | None:
        node = conn.node
        manifest = node.bucket.manifest
        return stream_status(node.users, conn.user, node.bucket.name, manifest, collections, scope)

    decision = decide_stream_request(
        msg,
        bucket=conn.node.view,
        settings=conn.settings,
        active_stream_exists=active_stream_exists,
        profile=conn.node.profile,
        privilege=privilege,
    )
    rollback = decision.status == Status.ROLLBACK
    status = decision.status.name
    if log.isEnabledFor(logging.INFO):  # (its arguments cost more than the call)
        log.info(
            "connection %d stream request vb %d start %d uuid %#x snap [%d,%d] flags %#x -> %s %s",
            conn.conn_id,
            msg.vbucket,
            msg.start_seqno,
            msg.vbucket_uuid,
            msg.snap_start_seqno,
            msg.snap_end_seqno,
            msg.flags,
            status,
            decision.rollback_seqno if rollback else decision.reason,
        )
    # (the two events of every stream request are made here, not through ``emit``:
    # its keywords, packed and unpacked again, cost a microsecond a stream)
    node = conn.node
    node.record(
        ev.StreamRequested(
            time=conn.now,
            conn_id=conn.conn_id,
            name=conn.text_name,
            vbucket=msg.vbucket,
            stream_id=msg.stream_id,
            start_seqno=msg.start_seqno,
            end_seqno=msg.end_seqno,
            vbucket_uuid=msg.vbucket_uuid,
            snap_start_seqno=msg.snap_start_seqno,
            snap_end_seqno=msg.snap_end_seqno,
            flags=msg.flags,
            status=status,
            rollback_seqno=decision.rollback_seqno if rollback else None,
        )
    )
    if rollback:
        value = encode_rollback_value(decision.rollback_seqno)
        conn.replies.respond(frame, Status.ROLLBACK, value=value)
        return
    if decision.status == Status.NOT_MY_VBUCKET:
        conn.replies.not_my_vbucket(frame)
        return
    if decision.status != Status.SUCCESS:
        conn.replies.respond(
            frame,
            decision.status,
            value=decision.error_body,
            datatype=Datatype.JSON if decision.error_body else 0,
            context=decision.reason,
        )
        return
    vb = conn.node.view.vbucket(msg.vbucket)
    conn.replies.respond(frame, value=encode_failover_log(vb.failover.entries))
    stream = Stream(
        vb=vb,
        opaque=msg.opaque,
        request=decision,
        encoder=conn.encoder_for_streams(),
        cursor_name=f"{conn.conn_id}:{msg.vbucket}:{decision.stream_id or 0}",
        # an ephemeral bucket has no by-id scan (kv_engine ``EphemeralBucket::
        # isByIdScanSupported`` false), so ``DcpProducer::isOutOfOrderSnapshotsEnabled``
        # is false whatever the control said: its backfills go by seqno, never OSO
        oso="" if conn.node.bucket.ephemeral is not None else conn.settings.oso,
        change_streams=conn.settings.change_streams,
        sync_writes=conn.settings.sync_writes,
        sync_replication=conn.settings.sync_replication,
        observer=conn.tap.snapshot_observer,
        backfills=conn.backfills,
        memory_backfills=conn.node.bucket.ephemeral is not None,
    )
    conn.streams.add(stream)
    node.record(
        ev.StreamOpened(
            time=conn.now,
            conn_id=conn.conn_id,
            name=conn.text_name,
            vbucket=msg.vbucket,
            stream_id=decision.stream_id,
            start_seqno=decision.start_seqno,
            end_seqno=decision.end_seqno,
        )
    )


def on_close_stream(conn: Connection, frame: Frame, msg: DcpCloseStream, now: float) -> None:
    if (msg.stream_id is not None) != conn.settings.stream_ids:
        conn.replies.respond(frame, Status.DCP_STREAMID_INVALID, context="stream-id mismatch")
        return
    stream = conn.streams.get(msg.vbucket, msg.stream_id)
    if stream is None or not stream.alive:
        others = conn.streams.of_vbucket(msg.vbucket)
        status = (
            Status.DCP_STREAMID_INVALID
            if others and msg.stream_id is not None
            else Status.KEY_ENOENT
        )
        conn.replies.respond(frame, status, context="no such stream")
        return
    conn.replies.respond(frame)
    if conn.settings.stream_end_on_close:
        stream.end(StreamEndReason.CLOSED, discard_queue=stream.state.value == "backfilling")
        conn.streams.mark_ready(stream)
    else:
        stream.close()
        conn.streams.forget(stream)
    conn.emit(ev.StreamClosed, vbucket=msg.vbucket, stream_id=msg.stream_id)


def on_buffer_ack(conn: Connection, frame: Frame, msg: DcpBufferAck, now: float) -> None:
    # No response, ever (kv_engine docs/dcp/documentation/commands/buffer-ack.md;
    # Java drops a connection that gets one).
    excess = conn.flow.ack(msg.nbytes)
    if excess:
        log.debug("connection %d acked %d bytes never outstanding", conn.conn_id, excess)
    conn.emit(ev.BytesAcked, nbytes=msg.nbytes, total=conn.flow.acked)


def on_add_stream(conn: Connection, frame: Frame, msg: object, now: float) -> None:
    # kv_engine: a producer disconnects on DCP_ADD_STREAM (a consumer's opcode)
    conn.close("DCP_ADD_STREAM sent to a producer")


def on_seqno_acknowledged(
    conn: Connection, frame: Frame, msg: DcpSeqnoAcknowledged, now: float
) -> None:
    """kv_engine ``DcpProducer::seqno_acknowledged``: EINVAL unless the connection
    enabled sync writes with a consumer name; else accepted without a reply
    (docs/dcp/documentation/commands/seqno-acknowledged.md). The mock completes its
    prepares by steps, so the acknowledgement changes nothing."""
    if not conn.settings.sync_replication:
        conn.replies.respond(frame, Status.EINVAL, context="sync replication is not enabled")
        return
    log.debug(
        "connection %d acknowledged prepare %d of vbucket %d",
        conn.conn_id,
        msg.prepared_seqno,
        msg.vbucket,
    )


def on_unsupported(conn: Connection, frame: Frame, msg: object, now: float) -> None:
    conn.replies.respond(frame, Status.NOT_SUPPORTED, context="not supported by a producer")


#: The DCP commands' part of the dispatch table (``_dispatch``).
HANDLERS: dict[type, Callable[[Connection, Frame, Any, float], None]] = {
    DcpOpen: on_dcp_open,
    DcpControl: on_control,
    DcpGetFailoverLog: on_failover_log,
    DcpStreamRequest: on_stream_request,
    DcpCloseStream: on_close_stream,
    DcpBufferAck: on_buffer_ack,
    DcpAddStream: on_add_stream,
    DcpSeqnoAcknowledged: on_seqno_acknowledged,
}
