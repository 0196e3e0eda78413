"""The benchmark's consumer process: bootstrap like the reference consumer, then a
minimal frame walker that counts items, answers DCP_NOOP and acks the buffer.

Prints one JSON line: events, bytes and seconds from the first stream request to the
last expected item. ``--collections 8,9`` streams with a collection filter;
``--stream-ids N`` opens N streams per vbucket with stream-ids 1..N (with
``--collections``, stream k filters the k-th collection; without, each is pass-through);
the system events and seqno advances they bring are counted apart from the items.
``--tls-ca FILE`` connects to a TLS port, trusting that CA (``mockdcp bench --tls``).
``--bare`` negotiates nothing (``mockdcp bench --bare``): no HELLO, no DCP_CONTROL, so
no flow-control window and no noops.
"""

from __future__ import annotations

import argparse
import json
import struct
import time
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.client import DcpConsumer, StreamFilter
from mockdcp.protocol import (
    DcpBufferAck,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Opcode,
    Response,
    SaslAuth,
    SelectBucket,
    SnapshotFlag,
    Status,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

# plain ints: hashing an IntEnum member goes through Python code, an int does not
_ITEM_OPCODES = frozenset(
    {int(Opcode.DCP_MUTATION), int(Opcode.DCP_DELETION), int(Opcode.DCP_EXPIRATION)}
)
_NOOP = int(Opcode.DCP_NOOP)
_SYSTEM_EVENT = int(Opcode.DCP_SYSTEM_EVENT)
_SEQNO_ADVANCED = int(Opcode.DCP_SEQNO_ADVANCED)
_ALT_REQUEST = 0x08  # magic of a frame with framing extras (a stream-id)
_RESPONSE = 0x81
_STREAM_REQ = int(Opcode.DCP_STREAM_REQ)
_STATUS = struct.Struct(">H")
_MARKER = int(Opcode.DCP_SNAPSHOT_MARKER)
_DISK = int(SnapshotFlag.DISK)
_FLAGS = struct.Struct(">I")
_BODY = struct.Struct(">I")
_OPAQUE = struct.Struct(">I")


async def _connect(port: int, ca_file: str | None) -> trio.abc.Stream:
    """A TCP connection to the producer, with TLS when ``ca_file`` names its CA."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    if ca_file is None:
        return stream
    from mockdcp.server import TlsStream, client_context

    context = client_context(await trio.Path(ca_file).read_bytes())
    tls = TlsStream(stream, context, server_side=False, server_hostname="127.0.0.1")
    await tls.do_handshake()
    return tls


async def _run(
    port: int,
    items: int,
    vbuckets: int | list[int],
    buffer_size: int,
    legacy: bool = False,
    name: str = "mockdcp-bench",
    streams: tuple[StreamFilter, ...] = (),
    ca_file: str | None = None,
    start: _Start | None = None,
    controls: tuple[tuple[str, str], ...] = (),
    bare: bool = False,
) -> dict[str, float]:
    vbs = range(vbuckets) if isinstance(vbuckets, int) else vbuckets
    stream = await _connect(port, ca_file)
    if bare:  # nothing negotiated: no window to acknowledge
        buffer_size = 0
        buf = await _bare_bootstrap(stream, name)
        t0 = time.perf_counter()
        c0 = time.process_time()
        await stream.send_all(_stream_requests(vbs))
    else:
        # the reference consumer bootstraps and asks for the streams; this walks the frames
        consumer = DcpConsumer(
            "127.0.0.1",
            port,
            vbuckets=vbs,
            name=name,
            buffer_size=buffer_size,
            reconnect=False,
            collections=not legacy,
            streams=streams,
            controls=controls,
        )
        await consumer.start_on(stream)
        if start is not None:  # every connection bootstrapped before any streams
            await start.wait()
        t0 = time.perf_counter()
        c0 = time.process_time()
        await consumer.request_streams()
        buf = consumer.hand_over()  # whatever the bootstrap read past its last response
    count = total = unacked = disk_markers = system_events = advances = 0
    half = buffer_size // 2
    body_at = _BODY.unpack_from
    while count < items:
        data = await stream.receive_some(1 << 20)
        if not data:
            raise RuntimeError("producer closed the connection")
        buf += data
        pos, end_buf = 0, len(buf)
        while end_buf - pos >= 24:
            end = pos + 24 + body_at(buf, pos + 8)[0]
            if end > end_buf:
                break
            op = buf[pos + 1]
            if op in _ITEM_OPCODES:
                count += 1
            elif op == _MARKER and buf[pos + 4] == 20:  # v1 extras: start, end, flags
                framing = buf[pos + 2] if buf[pos] == _ALT_REQUEST else 0
                flags_at = pos + 24 + framing + 16
                disk_markers += bool(_FLAGS.unpack_from(buf, flags_at)[0] & _DISK)
            elif op == _SYSTEM_EVENT:
                system_events += 1
            elif op == _SEQNO_ADVANCED:
                advances += 1
            elif op == _STREAM_REQ and buf[pos] == _RESPONSE:
                status = _STATUS.unpack_from(buf, pos + 6)[0]
                if status:  # the items it was to bring will never come
                    raise RuntimeError(f"stream request refused: status {status:#x}")
            elif op == _NOOP and buf[pos] == 0x80:
                opaque = _OPAQUE.unpack_from(buf, pos + 12)[0]
                reply = Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=opaque)
                await stream.send_all(reply.encode())
            pos = end
        total += pos
        unacked += pos
        del buf[:pos]
        if buffer_size and unacked >= half:
            await stream.send_all(DcpBufferAck(opaque=0, nbytes=unacked).encode())
            unacked = 0
    seconds = time.perf_counter() - t0
    await stream.aclose()
    return {
        "events": count,
        "complete": int(count == items),
        "bytes": total,
        "seconds": seconds,
        "cpu_s": time.process_time() - c0,
        "disk_snapshots": disk_markers,
        "system_events": system_events,
        "seqno_advances": advances,
        "t0": t0,
        "c0": c0,
    }


async def _bare_bootstrap(stream: trio.abc.Stream, name: str) -> bytearray:
    """What a consumer that negotiates nothing sends before its streams, answered: no
    HELLO (no feature: no collections, no XATTR, no JSON, no snappy), SASL PLAIN,
    SELECT_BUCKET and DCP_OPEN, and no DCP_CONTROL (no flow control, no noop). Returns
    what was read past the three answers; ``RuntimeError`` if one is a refusal."""
    await stream.send_all(
        b"".join(
            m.encode()
            for m in (
                SaslAuth(opaque=1, mechanism="PLAIN", payload=b"\0Administrator\0password"),
                SelectBucket(opaque=2, bucket="default"),
                DcpOpen(opaque=3, name=name.encode(), flags=int(DcpOpenFlag.PRODUCER)),
            )
        )
    )
    buf, answered = bytearray(), 0
    while answered < 3:
        data = await stream.receive_some(1 << 16)
        if not data:
            raise RuntimeError("producer closed the connection during the bootstrap")
        buf += data
        while answered < 3 and len(buf) >= 24:
            end = 24 + _BODY.unpack_from(buf, 8)[0]
            if len(buf) < end:
                break
            status = _STATUS.unpack_from(buf, 6)[0]
            if status:
                raise RuntimeError(f"bootstrap refused: opcode {buf[1]:#x} status {status:#x}")
            del buf[:end]
            answered += 1
    return buf


def _stream_requests(vbuckets: Iterable[int]) -> bytes:
    """A stream request from 0, for everything, for each of ``vbuckets``."""
    return b"".join(
        DcpStreamRequest(
            opaque=0x10000 + vb,
            vbucket=vb,
            flags=0,
            start_seqno=0,
            end_seqno=2**64 - 1,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        ).encode()
        for vb in vbuckets
    )


class _Start:
    """Several connections' start line: each bootstraps (HELLO, SASL, DCP_OPEN,
    controls), then waits until all have, so that the streaming they time together
    starts at once (a consumer of a cluster connects to every node, then streams; one
    connection's figure leaves its bootstrap out too)."""

    def __init__(self, count: int) -> None:
        self.waiting = count
        self.go = trio.Event()

    async def wait(self) -> None:
        self.waiting -= 1
        if self.waiting <= 0:
            self.go.set()
        await self.go.wait()


def bench_streams(collections: list[int], stream_ids: int) -> tuple[StreamFilter, ...]:
    """The streams each vbucket gets (see the module docstring); () is one pass-through
    stream without a stream-id."""
    if stream_ids:
        if collections:
            return tuple(
                StreamFilter(collections=[cid], sid=k + 1)
                for k, cid in enumerate(collections[:stream_ids])
            )
        return tuple(StreamFilter(sid=k + 1) for k in range(stream_ids))
    return (StreamFilter(collections=collections),) if collections else ()


async def _run_many(
    connections: int,
    port: int,
    items: int,
    vbuckets: int,
    buffer_size: int,
    legacy: bool,
    streams: tuple[StreamFilter, ...] = (),
    ca_file: str | None = None,
) -> dict[str, float]:
    """``connections`` consumers at once, each streaming every item (DCP_OPEN names
    differ: a node drops a producer whose name another one takes). Events and bytes
    are summed; seconds run from the start (once all have bootstrapped) to the last
    item of the slowest."""
    reports: list[dict[str, float]] = []
    start = _Start(connections)

    async def one(i: int) -> None:
        name = f"mockdcp-bench-{i}"
        reports.append(
            await _run(port, items, vbuckets, buffer_size, legacy, name, streams, ca_file, start)
        )

    async with trio.open_nursery() as nursery:
        for i in range(connections):
            nursery.start_soon(one, i)
    # connections that got exactly every item (no more: none sent twice)
    complete = sum(r["events"] == items for r in reports)
    return _summed(reports, complete)


def _summed(reports: list[dict[str, float]], complete: int) -> dict[str, float]:
    """Several connections' reports as one: events, bytes and counts summed, seconds
    and CPU seconds since the first connection started streaming (``t0``, ``c0``: all
    had bootstrapped), to the last item of the slowest."""
    summed = ("events", "bytes", "disk_snapshots", "system_events", "seqno_advances")
    t0, c0 = min(r["t0"] for r in reports), min(r["c0"] for r in reports)
    return {
        **{key: sum(r[key] for r in reports) for key in summed},
        "complete": complete,
        "seconds": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
    }


async def _run_plan(plan: list[dict[str, Any]], buffer_size: int, legacy: bool) -> dict[str, float]:
    """One consumer across a cluster (``mockdcp bench --nodes``): a connection per node,
    each streaming the vbuckets active there (``plan``: port, vbuckets and the items
    they hold, per node). Events and bytes are summed; seconds run from the first
    start (once every connection has bootstrapped) to the last item of the slowest node."""
    reports: list[dict[str, float]] = []
    busy = [node for node in plan if node["items"]]
    start = _Start(len(busy))

    async def one(node: dict[str, Any]) -> None:
        report = await _run(
            node["port"], node["items"], node["vbuckets"], buffer_size, legacy, start=start
        )
        reports.append(report)

    async with trio.open_nursery() as nursery:
        for node in busy:
            nursery.start_soon(one, node)
    return _summed(reports, int(all(r["complete"] for r in reports)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--items", type=int, required=True)
    p.add_argument("--vbuckets", type=int, default=64)
    p.add_argument("--buffer-size", type=int, default=20 * 1024 * 1024)
    p.add_argument("--legacy", action="store_true", help="do not negotiate collections")
    p.add_argument(
        "--bare", action="store_true", help="negotiate nothing: no HELLO, no DCP_CONTROL"
    )
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--collections", default="", help="collection ids to filter on: 8,9")
    p.add_argument("--stream-ids", type=int, default=0, help="streams per vbucket, sids 1..N")
    p.add_argument("--tls-ca", default=None, help="connect with TLS, trusting this CA (PEM)")
    p.add_argument(
        "--change-streams", action="store_true", help="DCP_CONTROL change_streams (history)"
    )
    p.add_argument(
        "--plan", default=None, help="JSON: per node its port, active vbuckets and their items"
    )
    a = p.parse_args()
    if a.plan:
        report = trio.run(_run_plan, json.loads(a.plan), a.buffer_size, a.legacy)
        print(json.dumps(report), flush=True)
        return
    cids = [int(c) for c in a.collections.split(",") if c]
    streams = bench_streams(cids, a.stream_ids)
    if a.connections > 1:
        report = trio.run(
            _run_many,
            a.connections,
            a.port,
            a.items,
            a.vbuckets,
            a.buffer_size,
            a.legacy,
            streams,
            a.tls_ca,
        )
    else:
        controls = (("change_streams", "true"),) if a.change_streams else ()
        report = trio.run(
            partial(
                _run,
                a.port,
                a.items,
                a.vbuckets,
                a.buffer_size,
                a.legacy,
                "mockdcp-bench",
                streams,
                a.tls_ca,
                controls=controls,
                bare=a.bare,
            )
        )
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
