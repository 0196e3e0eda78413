"""What the producer observed of its consumers: typed, frozen events.

Each event is stamped with the time the sans-IO layer was given (``now``) and the
connection it happened on. Stream data events are reported **as written**: the shell
calls ``Connection.data_written(now)`` once the bytes of a ``buffers_to_send`` call are
on the socket, and only then are the events of that write released. Triggers and
expectations (``mockdcp.scenario``) read these; do not subclass them.
"""

from __future__ import annotations

from typing import TypeVar

import attrs


@attrs.frozen(kw_only=True)
class ProducerEvent:
    """Base of every event: when, and on which connection (its id and DCP name)."""

    time: float
    conn_id: int
    name: str = ""

    @property
    def kind(self) -> str:
        """The event's snake_case name, as reports and the HTTP API show it."""
        return _KINDS[type(self)]


@attrs.frozen(kw_only=True)
class ConnectionOpened(ProducerEvent):
    """A client connected."""

    peer: str = ""


@attrs.frozen(kw_only=True)
class Authenticated(ProducerEvent):
    """SASL succeeded."""

    user: str


@attrs.frozen(kw_only=True)
class DcpOpened(ProducerEvent):
    """DCP_OPEN as a producer succeeded."""

    flags: int


@attrs.frozen(kw_only=True)
class StreamRequested(ProducerEvent):
    """A DCP_STREAM_REQ arrived, with what the producer answered (its status name and,
    for ROLLBACK, the seqno)."""

    vbucket: int
    stream_id: int | None
    start_seqno: int
    end_seqno: int
    vbucket_uuid: int
    snap_start_seqno: int
    snap_end_seqno: int
    flags: int
    status: str
    rollback_seqno: int | None = None


@attrs.frozen(kw_only=True)
class StreamOpened(ProducerEvent):
    """A stream was accepted (the reply carried the failover log)."""

    vbucket: int
    stream_id: int | None
    start_seqno: int
    end_seqno: int


@attrs.frozen(kw_only=True)
class StreamClosed(ProducerEvent):
    """The consumer closed a stream with DCP_CLOSE_STREAM."""

    vbucket: int
    stream_id: int | None


@attrs.frozen(kw_only=True)
class SeqnoWritten(ProducerEvent):
    """Every frame of ``vbucket`` up to ``seqno`` is on the socket and nothing after it:
    reported where a trigger holds the stream (``Node.hold``)."""

    vbucket: int
    seqno: int
    #: stream bytes counted by flow control on this connection up to that frame (an
    #: acknowledgement total at or past it covers the frame)
    flow_bytes: int = 0


@attrs.frozen(kw_only=True)
class StreamWritten(ProducerEvent):
    """A write carried frames of this stream; ``seqno`` is the last item's seqno in it
    (as written to the socket: released once the write completed)."""

    vbucket: int
    stream_id: int | None
    seqno: int


@attrs.frozen(kw_only=True)
class StreamEnded(ProducerEvent):
    """A DCP_STREAM_END of this stream is on the socket (as written); ``reason`` is its
    ``StreamEndReason`` name."""

    vbucket: int
    stream_id: int | None
    reason: str
    #: the stream's opaque (the STREAM_END carries it)
    opaque: int = 0


@attrs.frozen(kw_only=True)
class ProtocolViolation(ProducerEvent):
    """The consumer broke a DCP rule (the protocol checker, ``_checker_rules``): ``rule``
    its id, ``message`` one line, the stream it is about (None: the connection), and the
    frame that shows it (``summary`` in one line, ``frame`` its first bytes in hex)."""

    rule: str
    message: str
    vbucket: int | None = None
    stream_id: int | None = None
    summary: str = ""
    frame: str = ""


@attrs.frozen(kw_only=True)
class BytesAcked(ProducerEvent):
    """DCP_BUFFER_ACKNOWLEDGEMENT: ``nbytes`` freed, ``total`` acknowledged so far."""

    nbytes: int
    total: int


@attrs.frozen(kw_only=True)
class NoopSent(ProducerEvent):
    """The producer sent a DCP_NOOP (as written)."""

    opaque: int


@attrs.frozen(kw_only=True)
class NoopAnswered(ProducerEvent):
    """The consumer answered a DCP_NOOP."""

    opaque: int


@attrs.frozen(kw_only=True)
class ConfigPushed(ProducerEvent):
    """A new cluster config was pushed to the consumer (HELLO clustermap change
    notification: the whole config, or with ``brief`` its epoch and revision only)."""

    revision: int
    brief: bool


@attrs.frozen(kw_only=True)
class SeqnoObserved(ProducerEvent):
    """The connection's first OBSERVE_SEQNO was answered (the later ones are not
    reported): its consumer mitigates rollbacks, delivering a write only once told it is
    persisted (java-dcp-client ``PersistencePollingHandler``, go-dcp's rollback
    mitigation)."""

    vbucket: int
    persisted_seqno: int


@attrs.frozen(kw_only=True)
class ConnectionClosed(ProducerEvent):
    """The connection ended; ``reason`` says why (peer closed, idle, a step, ...)."""

    reason: str


E = TypeVar("E", bound=ProducerEvent)


def written_at(event: E, time: float) -> E:
    """``event``, made when its write was handed out, as of ``time``, when the write
    was done (``Connection.data_written``). A ``StreamWritten``, one a stream a write,
    is made again field by field: ``attrs.evolve`` reads every field's definition
    first, twice the cost."""
    if isinstance(event, StreamWritten) and type(event) is StreamWritten:
        return StreamWritten(  # type: ignore[return-value]
            time=time,
            conn_id=event.conn_id,
            name=event.name,
            vbucket=event.vbucket,
            stream_id=event.stream_id,
            seqno=event.seqno,
        )
    return attrs.evolve(event, time=time)


_KINDS: dict[type, str] = {
    ConnectionOpened: "connection_opened",
    Authenticated: "authenticated",
    DcpOpened: "dcp_opened",
    StreamRequested: "stream_requested",
    StreamOpened: "stream_opened",
    StreamClosed: "stream_closed",
    SeqnoWritten: "seqno_written",
    StreamWritten: "stream_written",
    StreamEnded: "stream_ended",
    ProtocolViolation: "protocol_violation",
    BytesAcked: "bytes_acked",
    NoopSent: "noop_sent",
    NoopAnswered: "noop_answered",
    ConfigPushed: "config_pushed",
    SeqnoObserved: "seqno_observed",
    ConnectionClosed: "connection_closed",
}


def event_record(event: ProducerEvent) -> dict[str, object]:
    """An event as a JSON-ready mapping: ``{"event": kind, **fields}``."""
    return {"event": event.kind, **attrs.asdict(event)}
