"""The running server against hypothesis-generated and mutated frames (issue 18).

Each example is one connection's script: a bootstrap phase (none, HELLO, HELLO + SASL,
or through DCP_OPEN), then up to 20 frames pipelined in one write (valid requests with
hostile fields, the same with mutated bytes, random well-framed frames), then either a
NOOP sentinel or a bad-framing tail (unknown magic, an oversized body, inconsistent
lengths, a truncated frame). After each example: the server is alive and answers a new
connection, nothing was logged at ERROR (a handler's traceback is), and every reply was
a well-formed response (magic 0x81) to a request sent with that opaque and opcode, at
most one per request. Every ``CHECK_EVERY`` examples, and at the end, the reference
consumer streams the whole bucket and holds exactly ``Bucket.oracle()``.

The fast tier runs ``QUICK_EXAMPLES`` connections (a few seconds), the full tier 3,000
(about a minute; ``BUDGET`` seconds at most); ``MOCKDCP_FUZZ=long`` runs 100,000.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st

from mockdcp.client import DcpConsumer
from mockdcp.producer._controls import CONTROL_RULES
from mockdcp.protocol import (
    DcpOpenFlag,
    Frame,
    FrameReader,
    HelloFeature,
    Magic,
    Opcode,
    encode_frame,
)

from ._server_thread import ServerThread, seeded_bucket

if TYPE_CHECKING:
    from collections.abc import Iterator

LONG = os.environ.get("MOCKDCP_FUZZ") == "long"
EXAMPLES = int(os.environ.get("MOCKDCP_FUZZ_EXAMPLES", 100_000 if LONG else 3_000))
#: Seconds after which the remaining examples are skipped (CI stays near a minute even
#: on a slow machine); the count is what normally ends a run.
BUDGET = 4 * 3600 if LONG else 120
#: the fast tier's run: every kind of script a few times over, on a quick budget
QUICK_EXAMPLES = 300
QUICK_BUDGET = 30
CHECK_EVERY = 100
VBUCKETS = 16
DOCS = 1_000
SENTINEL = 0xFEEDF00D
PLAIN = b"\0Administrator\0password"
#: Requests that the protocol never answers (and client responses, which are no requests).
NO_REPLY = {int(Opcode.DCP_BUFFER_ACKNOWLEDGEMENT)}


# -- strategies ------------------------------------------------------------------------------

u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.one_of(st.sampled_from([0, 1, 5, 100, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))
vbuckets = st.one_of(st.integers(0, VBUCKETS + 1), u16)
short_bytes = st.binary(max_size=40)

json_docs = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["uid", "sid", "collections", "scope", "purge_seqno", "cts", "x"])
            | st.text(max_size=4),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
).map(lambda doc: json.dumps(doc).encode())


class Blob(bytes):
    """Bytes that print as their size and start (a failing example stays readable)."""

    def __repr__(self) -> str:
        return f"Blob({len(self)} bytes: {bytes(self[:24])!r}...)"


hostile_json = st.sampled_from(
    [
        b"[" * 3000,
        b'{"uid":' + b"[" * 2000 + b"]" * 2000 + b"}",
        b'{"purge_seqno":"' + b"9" * 5000 + b'"}',
        b'{"sid":' + b"7" * 5000 + b"}",
        b'{"collections":["' + b"f" * 40 + b'"]}',
        b'{"uid":"\\ud800"}',
        b"\xff\xfe{}",
        b'{"uid":"0","x":"' + b"a" * 70_000 + b'"}',
    ]
).map(Blob)
json_values = st.one_of(st.just(b""), json_docs, hostile_json, short_bytes)
control_values = st.one_of(
    st.sampled_from(["true", "false", "0", "1", "4294967296", "1e309", "²", "٣", "1_0", "inf"]),
    st.sampled_from(["9" * 5000, " 1", "+1", "-1", "0.05", "2.5", "nan", "1" * 400]),
    st.from_regex(r"[0-9]{1,25}(\.[0-9]{0,12})?", fullmatch=True),
    st.text(min_size=1, max_size=12),
)


def _frame(opcode: int, **fields: object) -> Frame:
    return Frame(magic=Magic.REQUEST, opcode=opcode, **fields)  # type: ignore[arg-type]


@st.composite
def valid_requests(draw: st.DrawFn) -> Frame:
    """A request of each kind a producer serves, with hostile field values."""
    kind = draw(st.sampled_from(range(14)))
    if kind == 0:
        key = draw(st.sampled_from(sorted(CONTROL_RULES)) | st.text(min_size=1, max_size=8))
        value = draw(control_values)
        return _frame(Opcode.DCP_CONTROL, key=key.encode(), value=value.encode())
    if kind == 1:
        extras = struct.pack(
            ">IIQQQQQ",
            draw(st.sampled_from([0, 0x04, 0x10, 0x20, 0x80]) | u32),
            0,
            draw(u64),
            draw(u64),
            draw(u64),
            draw(u64),
            draw(u64),
        )
        return _frame(
            Opcode.DCP_STREAM_REQ,
            extras=extras,
            vbucket_or_status=draw(vbuckets),
            value=draw(json_values),
            datatype=draw(st.sampled_from([0, 1])),
        )
    if kind == 2:
        flags = draw(st.sampled_from([1, 1 | 4, 1 | 8, 0, 2]) | u32)
        return _frame(
            Opcode.DCP_OPEN,
            extras=struct.pack(">II", 0, flags),
            key=draw(st.binary(min_size=0, max_size=300)),
            value=draw(json_values),
            datatype=draw(st.sampled_from([0, 1])),
        )
    if kind == 3:
        features = draw(
            st.lists(st.sampled_from([int(f) for f in HelloFeature]) | u16, max_size=12)
        )
        return _frame(
            Opcode.HELLO,
            key=draw(short_bytes),
            value=b"".join(struct.pack(">H", f) for f in features)
            + draw(st.sampled_from([b"", b"\x01"])),
        )
    if kind == 4:
        mech = draw(st.sampled_from([b"PLAIN", b"SCRAM-SHA512", b"SCRAM-SHA1", b"NOPE"]))
        return _frame(
            draw(st.sampled_from([Opcode.SASL_AUTH, Opcode.SASL_STEP])),
            key=mech,
            value=draw(st.sampled_from([PLAIN, b"n,,n=Administrator,r=abc"]) | short_bytes),
        )
    if kind == 5:
        return _frame(Opcode.SELECT_BUCKET, key=draw(st.sampled_from([b"default"]) | short_bytes))
    if kind == 6:
        return _frame(Opcode.GET_ERROR_MAP, value=draw(st.binary(min_size=0, max_size=3)))
    if kind == 7:
        extras = draw(st.sampled_from([b""]) | st.binary(min_size=16, max_size=16) | short_bytes)
        return _frame(Opcode.GET_CLUSTER_CONFIG, extras=extras)
    if kind == 8:
        extras = draw(st.sampled_from([b"", b"\0\0\0\1"]) | st.binary(max_size=9))
        return _frame(Opcode.GET_ALL_VB_SEQNOS, extras=extras)
    if kind == 9:
        return _frame(
            Opcode.DCP_BUFFER_ACKNOWLEDGEMENT,
            extras=draw(st.binary(min_size=4, max_size=4) | short_bytes),
        )
    if kind == 10:
        opcode = draw(
            st.sampled_from(
                [Opcode.DCP_CLOSE_STREAM, Opcode.DCP_GET_FAILOVER_LOG, Opcode.GET_FAILOVER_LOG]
            )
        )
        return _frame(opcode, vbucket_or_status=draw(vbuckets), framing_extras=b"")
    if kind == 11:
        return _frame(
            Opcode.OBSERVE_SEQNO,
            vbucket_or_status=draw(vbuckets),
            value=draw(st.binary(min_size=8, max_size=8) | short_bytes),
        )
    if kind == 12:
        opcode = draw(
            st.sampled_from(
                [Opcode.GET_COLLECTION_ID, Opcode.GET_SCOPE_ID, Opcode.GET_COLLECTIONS_MANIFEST]
            )
        )
        path = draw(st.sampled_from([b"_default._default", b"a.b.c", b"", b".."]) | short_bytes)
        return _frame(
            opcode,
            key=path if draw(st.booleans()) else b"",
            value=b"" if draw(st.booleans()) else path,
        )
    opcode = draw(
        st.sampled_from(
            [
                Opcode.NOOP,
                Opcode.VERSION,
                Opcode.SASL_LIST_MECHS,
                Opcode.DCP_SEQNO_ACKNOWLEDGED,
                Opcode.DCP_ADD_STREAM,
            ]
        )
    )
    return _frame(opcode, extras=draw(st.sampled_from([b""]) | short_bytes))


@st.composite
def random_frames(draw: st.DrawFn) -> Frame:
    """Any well-framed frame: every magic a client may send, any opcode and parts."""
    # mostly requests: a client's response the producer did not ask for closes the connection
    magic = draw(
        st.sampled_from(
            [*[Magic.REQUEST] * 6, *[Magic.ALT_REQUEST] * 2, Magic.RESPONSE, Magic.SERVER_RESPONSE]
        )
    )
    alt = magic is Magic.ALT_REQUEST
    opcode = draw(st.sampled_from([int(o) for o in Opcode]) | st.integers(0, 255))
    framing = (
        draw(st.sampled_from([b"", b"\x22\x00\x07", b"\xf0", b"\x2f"]) | st.binary(max_size=6))
        if alt
        else b""
    )
    return Frame(
        magic=magic,
        opcode=opcode,
        datatype=draw(st.sampled_from([0, 1, 2, 3, 4, 7]) | st.integers(0, 255)),
        vbucket_or_status=draw(vbuckets),
        cas=draw(u64),
        framing_extras=framing,
        extras=draw(st.binary(max_size=60)),
        key=draw(st.binary(max_size=255 if alt else 300)),
        value=draw(json_values),
    )


@attrs.frozen
class Mutation:
    """Bytes replaced in an encoded frame: never the magic, body length or opaque. Most
    edits hit the opcode, datatype, vbucket or body, so the stream stays framed; an edit
    with ``lengths`` may also change the key or extras length (which may break it)."""

    edits: tuple[tuple[int, int, bool], ...]

    def apply(self, data: bytes) -> bytes:
        out = bytearray(data)
        for pos, byte, lengths in self.edits:
            fixed = range(1, 24) if lengths else (1, 5, 6, 7)
            positions = [p for p in fixed if not 8 <= p < 16] + list(range(24, len(out)))
            out[positions[pos % len(positions)]] = byte
        return bytes(out)


mutations = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.integers(0, 9).map(lambda n: n == 0)),
    min_size=1,
    max_size=6,
).map(lambda e: Mutation(tuple(e)))
elements = st.one_of(
    st.tuples(valid_requests(), st.none()),
    st.tuples(valid_requests(), mutations),
    st.tuples(random_frames(), st.none()),
)
bad_tails = st.one_of(
    st.binary(min_size=24, max_size=24).filter(
        lambda b: b[0] not in (0x80, 0x81, 0x08, 0x18, 0x82, 0x83)
    ),
    st.just(encode_frame(Magic.REQUEST, 0x0B)[:8] + struct.pack(">I", 40 << 20) + bytes(12)),
    st.just(
        encode_frame(Magic.REQUEST, 0x0B, key=b"k", extras=b"e")[:4]
        + b"\xff"
        + encode_frame(Magic.REQUEST, 0x0B, key=b"k", extras=b"e")[5:]
    ),
    st.binary(min_size=1, max_size=23).map(lambda b: b"\x80" + b),  # truncated header
    st.just(encode_frame(Magic.REQUEST, 0x0B, value=b"x" * 100)[:60]),  # truncated body
)
PHASES = ("none", "hello", "auth", "open")


@attrs.frozen
class Script:
    phase: str
    frames: list[tuple[Frame, Mutation | None]]
    tail: bytes | None


scripts = st.builds(
    Script,
    phase=st.sampled_from([*PHASES, "open", "open"]),
    frames=st.lists(elements, min_size=1, max_size=20),
    tail=st.one_of(*[st.none()] * 6, bad_tails),  # a bad tail ends the connection: 4 in 10
)


# -- playing a script ---------------------------------------------------------------------


@attrs.define
class Tally:
    examples: int = 0
    frames: int = 0
    replies: int = 0
    ended: int = 0  # connections that ended with EOF (closed by the server, or by a tail)
    names: int = 0


def _bootstrap(phase: str, name: bytes) -> list[bytes]:
    features = [
        HelloFeature.XERROR,
        HelloFeature.JSON,
        HelloFeature.SELECT_BUCKET,
        HelloFeature.COLLECTIONS,
        HelloFeature.XATTR,
    ]
    hello = encode_frame(
        Magic.REQUEST,
        Opcode.HELLO,
        opaque=1,
        key=b"fuzz",
        value=b"".join(struct.pack(">H", f) for f in features),
    )
    sasl = encode_frame(Magic.REQUEST, Opcode.SASL_AUTH, opaque=2, key=b"PLAIN", value=PLAIN)
    select = encode_frame(Magic.REQUEST, Opcode.SELECT_BUCKET, opaque=3, key=b"default")
    dcp_open = encode_frame(
        Magic.REQUEST,
        Opcode.DCP_OPEN,
        opaque=4,
        key=name,
        extras=struct.pack(">II", 0, int(DcpOpenFlag.PRODUCER)),
    )
    noop = encode_frame(
        Magic.REQUEST, Opcode.DCP_CONTROL, opaque=5, key=b"enable_noop", value=b"true"
    )
    steps = {"none": 0, "hello": 1, "auth": 2, "open": 5}[phase]
    return [hello, sasl, select, dcp_open, noop][:steps]


def _frames(sock: socket.socket, reader: FrameReader) -> Iterator[Frame | None]:
    """The server's frames until it closes (then one None); raises on a timeout."""
    while True:
        frame = reader.next_frame()  # a malformed reply raises: the test fails
        if frame is not None:
            yield frame
            continue
        try:
            data = sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        if not data:
            yield None
            return
        reader.feed(data)


def play(port: int, script: Script, tally: Tally) -> None:
    tally.names += 1
    sent: dict[int, int] = {}  # opaque -> opcode of each request sent
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        reader = FrameReader()
        boot = _bootstrap(script.phase, b"fuzz-%d" % tally.names)
        if boot:
            sock.sendall(b"".join(boot))
            frames = _frames(sock, reader)
            for opaque in range(1, len(boot) + 1):
                reply = next(frames)
                assert reply is not None
                assert (reply.opaque, reply.status) == (opaque, 0), reply
        payload = []
        for n, (frame, mutation) in enumerate(script.frames):
            data = attrs.evolve(frame, opaque=0x10000 + n).encode()
            if mutation is not None:
                data = mutation.apply(data)
            if data[0] in (Magic.REQUEST, Magic.ALT_REQUEST):
                sent[0x10000 + n] = data[1]
            payload.append(data)
        tally.frames += len(payload)
        if script.tail is None:
            payload.append(encode_frame(Magic.REQUEST, Opcode.NOOP, opaque=SENTINEL))
            sent[SENTINEL] = Opcode.NOOP
        else:
            payload.append(script.tail)
            tally.frames += 1
        try:
            sock.sendall(b"".join(payload))
            if script.tail is not None:
                sock.shutdown(socket.SHUT_WR)  # a truncated tail ends with the stream
        except OSError:  # EPIPE, ECONNRESET, ENOTCONN: the server closed the connection
            pass  # (on a bad frame, say): the replies it sent must still be sound
        answered: set[int] = set()
        for reply in _frames(sock, reader):
            if reply is None:
                tally.ended += 1
                break
            if reply.magic in (Magic.REQUEST, Magic.SERVER_REQUEST):
                continue  # the server's own requests: stream messages, DCP_NOOP
            assert reply.magic is Magic.RESPONSE, reply
            assert reply.opaque in sent, f"reply to no request: {reply}"
            assert reply.opcode == sent[reply.opaque], f"opcode of {reply} is not the request's"
            assert reply.opaque not in answered, f"second reply: {reply}"
            answered.add(reply.opaque)
            tally.replies += 1
            if reply.opaque == SENTINEL:
                break


# -- the test --------------------------------------------------------------------------------


async def _stream_whole_bucket(port: int, expected: dict[tuple[int, bytes], bytes]) -> None:
    consumer = DcpConsumer("127.0.0.1", port, vbuckets=range(VBUCKETS), name="fuzz-check")

    def complete() -> bool:
        docs = consumer.state.documents()
        return len(docs) == len(expected) and {k: v.value for k, v in docs.items()} == expected

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer.run)
        with trio.fail_after(30):
            while not complete():  # noqa: ASYNC110 - the consumer offers no event to wait on
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert consumer.state.violations == []


def _check(server: ServerThread, *, consumer: bool) -> None:
    assert server.alive()
    assert server.errors.messages() == []
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(encode_frame(Magic.REQUEST, Opcode.VERSION, opaque=9))
        reply = next(_frames(sock, FrameReader()))
        assert reply is not None
        assert (reply.opaque, reply.status) == (9, 0)
    if consumer:
        expected = {k: item.value for k, item in server.bucket.oracle().items()}
        trio.run(_stream_whole_bucket, server.port, expected)


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[ServerThread]:
    with ServerThread(seeded_bucket(VBUCKETS, DOCS)) as server:
        yield server


@pytest.mark.parametrize(
    ("examples", "budget"),
    [
        pytest.param(QUICK_EXAMPLES, QUICK_BUDGET, id="quick"),
        pytest.param(EXAMPLES, BUDGET, id="thorough", marks=pytest.mark.full),
    ],
)
def test_fuzzed_frames_never_hurt_the_server(
    fuzz_server: ServerThread, capsys: pytest.CaptureFixture[str], examples: int, budget: float
) -> None:
    tally = Tally()
    give_up = time.monotonic() + budget

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(script=scripts)
    def run(script: Script) -> None:
        if time.monotonic() > give_up:
            return
        play(fuzz_server.port, script, tally)
        tally.examples += 1
        _check(fuzz_server, consumer=tally.examples % CHECK_EVERY == 0)

    run()
    _check(fuzz_server, consumer=True)
    with capsys.disabled():
        print(
            f"\nfuzz: {tally.frames} frames in {tally.examples} connections, "
            f"{tally.replies} replies checked, {tally.ended} connections ended by EOF"
        )
