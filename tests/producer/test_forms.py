"""The shared-frame path against the codec, item by item, for every form a connection
can negotiate: the fast path is an optimisation, never a different answer."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import attrs
import cramjam
import pytest
from hypothesis import given, settings, strategies as st

from mockdcp.model import TAG_DURABLE, Bucket
from mockdcp.producer import StreamRequestDecision
from mockdcp.producer._controls import DcpSettings
from mockdcp.producer._encoder import _FEW_FRAMES, Form, ItemEncoder, encode_item
from mockdcp.producer._stream import Stream
from mockdcp.protocol import (
    Datatype,
    DcpOpenFlag,
    FrameReader,
    Opcode,
    Status,
    SystemEventType,
    split_xattrs,
)
from tests.producer._session import stream_bytes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Item
    from mockdcp.model._disk_store import DiskSnapshot
    from mockdcp.model._vbucket import VBucket
    from mockdcp.producer._encoder import Frames

BODY = b'{"name":"Ada","city":"London","pad":"' + b"abc" * 40 + b'"}'
XATTRS = {"_sync": '{"rev":1}', "meta": '"user"'}

#: the documents a test writes: (kind, argument); every value form differs for some
DOCS: list[tuple[str, dict[str, Any]]] = [
    ("set", {}),
    ("set", {"value": b"", "datatype": 0}),
    ("set", {"value": b"\x00raw\xff", "datatype": 0}),
    ("set", {"xattrs": XATTRS}),
    ("set", {"value": bytes(cramjam.snappy.compress_raw(BODY)), "datatype": 3}),
    (
        "set",
        {
            "value": bytes(cramjam.snappy.compress_raw(BODY)),
            "datatype": 3,
            "xattrs": XATTRS,
        },
    ),
    ("set", {"value": b"tiny", "datatype": 0}),  # snappy would make it larger
    ("delete", {}),
    ("expire", {}),
]
docs = st.sampled_from(DOCS)


def write(b: Bucket, ops: list[tuple[int, tuple[str, dict[str, Any]]]]) -> None:
    for key, (kind, kwargs) in ops:
        name = f"doc{key}"
        if kind == "set":
            args = {"value": BODY, "datatype": 1, **kwargs}
            b.set(name, args.pop("value"), **args)
        elif (it := b.vbucket(0).get(name.encode())) is not None and not it.deleted:
            getattr(b, kind)(name)


def settings_for(
    xattrs: bool,
    snappy: bool,
    force: bool,
    no_value: str,
    collections: bool,
    delete_times: bool,
    expiry: bool,
) -> DcpSettings:
    flags = DcpOpenFlag.PRODUCER
    if xattrs:
        flags |= DcpOpenFlag.INCLUDE_XATTRS
    if no_value == "no_value":
        flags |= DcpOpenFlag.NO_VALUE
    elif no_value == "underlying":
        flags |= DcpOpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE
    if delete_times:
        flags |= DcpOpenFlag.INCLUDE_DELETE_TIMES
    return DcpSettings(
        open_flags=flags,
        collections=collections,
        snappy=snappy,
        force_compression=force and snappy,
        expiry_opcode=expiry and delete_times,
    )


FORMS = [
    settings_for(*combo)
    for combo in itertools.product(
        [False, True],
        [False, True],
        [False, True],
        ["", "no_value", "underlying"],
        [False, True],
        [False, True],
        [False, True],
    )
    if not (combo[2] and not combo[1]) and not (combo[6] and not combo[5])
]


def expected(items: list[Item], form: Form, opaque: int, sid: int | None) -> list[bytes]:
    return [encode_item(it, form, opaque, sid) for it in items]


def frames_of(buf: bytes, ends: Sequence[int], base: int) -> list[bytes]:
    out, start = [], 0
    for end in ends:
        out.append(buf[start : end - base])
        start = end - base
    return out


def one_bucket(ops: list[tuple[int, tuple[str, dict[str, Any]]]]) -> Bucket:
    b = Bucket("default", 1, seed=4, clock=lambda: 1_700_000_000.0)
    write(b, [(0, DOCS[0]), *ops])
    return b


operations = st.lists(st.tuples(st.integers(0, 6), docs), min_size=1, max_size=25)


@settings(deadline=None, max_examples=60)
@given(operations, st.sampled_from([None, 7]), st.integers(0, 30))
@pytest.mark.parametrize("dcp", FORMS, ids=lambda s: repr(Form.of(s)))
def test_memory_frames_equal_the_codec_item_by_item(
    dcp: DcpSettings,
    ops: list[tuple[int, tuple[str, dict[str, Any]]]],
    sid: int | None,
    split: int,
) -> None:
    b = one_bucket(ops)
    encoder = ItemEncoder(dcp)
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    batch = cursor.next_batch()
    assert batch is not None
    frames = encoder.prepare(
        batch.heads, batch.tails, batch.tags, batch.ends, batch.base, batch.items_at
    )
    assert frames is not None
    cut = min(split, len(frames.heads))
    out = []
    for start, stop in ((0, cut), (cut, len(frames.heads))):
        buf, new_ends, new_base = encoder.encode(frames, start, stop, 0xA1B2C3D4, sid)
        out += frames_of(bytes(buf), new_ends, new_base)
    assert out == expected(batch.items, encoder.form, 0xA1B2C3D4, sid)


def prepared(encoder: ItemEncoder, vb: VBucket, snap: DiskSnapshot) -> Frames:
    """A disk snapshot's frames (``disk_snapshot(frames=True)``) in ``encoder``'s form,
    as a backfill prepares them."""
    frames = encoder.prepare(
        snap.heads,
        snap.tails,
        snap.tags,
        ItemEncoder.ends_of(snap.heads, snap.tails, snap.tags),
        0,
        lambda at: snap.items_at(vb.disk_by_seqno, at),
    )
    assert frames is not None
    return frames


@settings(deadline=None, max_examples=40)
@given(operations, st.sampled_from([None, 7]))
@pytest.mark.parametrize("dcp", FORMS, ids=lambda s: repr(Form.of(s)))
def test_disk_frames_equal_the_codec_item_by_item(
    dcp: DcpSettings, ops: list[tuple[int, tuple[str, dict[str, Any]]]], sid: int | None
) -> None:
    b = one_bucket(ops)
    b.persist()
    vb = b.vbucket(0)
    encoder = ItemEncoder(dcp)
    snap = vb.disk_snapshot(0, frames=True)
    frames = prepared(encoder, vb, snap)
    buf, ends, base = encoder.encode(frames, 0, len(frames.heads), 5, sid)
    items = [vb.store[s] for s in snap.seqnos]
    assert frames_of(bytes(buf), ends, base) == expected(items, encoder.form, 5, sid)


@pytest.mark.parametrize("count", [1, 5, _FEW_FRAMES - 1, _FEW_FRAMES, 40])
def test_cold_frames_equal_the_codec_few_or_many(count: int) -> None:
    """A backfill of the cold tier (a bulk load's columns), fewer frames than
    ``_FEW_FRAMES`` patched one at a time and more patched as columns, encodes each
    item as the codec does, in every form; the frames of a stream-id stream too."""
    b = Bucket("default", 1, seed=4, clock=lambda: 1_700_000_000.0)
    keys = [b"k%03d" % i for i in range(count)]
    b.load_cold(keys, [BODY[: 20 + 7 * i] for i in range(count)], datatypes=[1] * count)
    vb = b.vbucket(0)
    snap = vb.disk_snapshot(0, frames=True)
    assert len(snap.heads) == count
    assert not isinstance(snap.heads, list)
    items = [vb.get(k) for k in keys]
    for dcp in FORMS:
        encoder = ItemEncoder(dcp)
        frames = prepared(encoder, vb, snap)
        for sid in (None, 7):
            buf, ends, base = encoder.encode(frames, 0, count, 0xA1B2C3D4, sid)
            got = frames_of(bytes(buf), ends, base)
            want = expected(items, encoder.form, 0xA1B2C3D4, sid)  # type: ignore[arg-type]
            assert got == want, (Form.of(dcp), sid)


def test_a_legacy_frames_body_length_borrows_when_its_low_byte_was_zero() -> None:
    """A legacy stream's frame is its canonical frame without the collection prefix:
    each length one less. Where the canonical body length is a multiple of 256 its low
    byte 0 borrows from the bytes above (512 -> 511), in a backfill of many cold frames
    (patched as columns) as of a few."""
    keys = [b"k%03d" % i for i in range(40)]

    def loaded(pad: int) -> tuple[VBucket, DiskSnapshot, list[int]]:
        b = Bucket("default", 1, seed=4, clock=lambda: 1_700_000_000.0)
        values = [b'"' + b"x" * (400 + pad + 9 * i) + b'"' for i in range(len(keys))]
        b.load_cold(keys, values, datatypes=[1] * len(keys))
        vb = b.vbucket(0)
        snap = vb.disk_snapshot(0, frames=True)
        return vb, snap, [int.from_bytes(bytes(h)[8:12], "big") for h in snap.heads]

    *_, bodies = loaded(0)
    vb, snap, bodies = loaded(-bodies[0] % 256)  # the first frame's body: 512 bytes
    assert bodies[0] == 512
    items = [item for k in keys if (item := vb.get(k)) is not None]
    assert len(items) == len(keys)
    legacy_as_the_codec(vb, snap, items, 0x01020304)


def legacy_as_the_codec(
    vb: VBucket, snap: DiskSnapshot, items: list[Item], opaque: int
) -> list[list[bytes]]:
    """The frames of ``snap`` in every legacy form, all of them (more than
    ``_FEW_FRAMES``: patched as columns) and ``_FEW_FRAMES - 1`` (patched a frame at a
    time), each asserted equal to the codec's encoding of ``items``."""
    legacy = [dcp for dcp in FORMS if not dcp.collections]
    assert legacy
    encoded = []
    for dcp in legacy:
        encoder = ItemEncoder(dcp)
        frames = prepared(encoder, vb, snap)
        for count in (len(items), _FEW_FRAMES - 1):
            buf, ends, base = encoder.encode(frames, 0, count, opaque, None)
            got = frames_of(bytes(buf), ends, base)
            assert got == expected(items[:count], encoder.form, opaque, None)
            encoded.append(got)
    return encoded


@pytest.mark.parametrize("length", [3, 200, 250])
def test_legacy_frames_of_the_longest_keys_keep_their_key_length(length: int) -> None:
    """A legacy stream's key length is the canonical one less the prefix's byte, written
    in its low byte (``ItemEncoder._legacy_headers``): a key of 250 bytes, the most a
    key has, is 251 with its prefix and 250 without, in a backfill patched as columns
    (40 frames) as in one patched a frame at a time."""
    b = Bucket("default", 1, seed=4, clock=lambda: 1_700_000_000.0)
    keys = [b"k" * (length - 3) + b"%03d" % i for i in range(40)]
    b.load_cold(keys, [BODY[: 20 + 3 * i] for i in range(len(keys))], datatypes=[1] * len(keys))
    vb = b.vbucket(0)
    snap = vb.disk_snapshot(0, frames=True)
    items = [item for k in keys if (item := vb.get(k)) is not None]
    assert len(items) == len(keys)
    for got in legacy_as_the_codec(vb, snap, items, 0x0A0B0C0D):
        assert {int.from_bytes(f[2:4], "big") for f in got} == {length}


DOCUMENT_AND_EVENT = (
    Opcode.DCP_MUTATION,
    Opcode.DCP_DELETION,
    Opcode.DCP_EXPIRATION,
    Opcode.DCP_SYSTEM_EVENT,
)


def stream_frames(
    b: Bucket,
    dcp: DcpSettings,
    sid: int | None,
    collections: frozenset[int] | None,
    scope: int | None,
) -> list[bytes]:
    """The document and system-event frames a stream of this filter sends."""
    stream = Stream(
        vb=b.vbucket(0),
        opaque=77,
        request=StreamRequestDecision(
            status=Status.SUCCESS,
            stream_id=sid,
            start_seqno=0,
            end_seqno=2**64 - 1,
            snap_start_seqno=0,
            collections=collections,
            scope=scope,
        ),
        encoder=ItemEncoder(dcp),
        cursor_name="s",
    )
    reader = FrameReader(max_frame_size=1 << 24)
    reader.feed(stream_bytes(stream))
    out = []
    while (frame := reader.next_frame()) is not None:
        if frame.opcode in DOCUMENT_AND_EVENT:
            out.append(frame.encode())
    return out


def stream_items(b: Bucket, dcp: DcpSettings, sid: int | None) -> list[bytes]:
    """The document frames an unfiltered stream (legacy: ``_default``) sends."""
    every = stream_frames(b, dcp, sid, None if dcp.collections else frozenset({0}), None)
    return [frame for frame in every if frame[1] != Opcode.DCP_SYSTEM_EVENT]


@pytest.mark.parametrize("sid", [None, 3])
@pytest.mark.parametrize("dcp", FORMS[::7], ids=lambda s: repr(Form.of(s)))
def test_streams_send_what_the_codec_encodes_from_memory_and_from_disk(
    dcp: DcpSettings, sid: int | None
) -> None:
    ops = [(i % 5, op) for i, op in enumerate(DOCS * 2)]
    b = one_bucket(ops)
    items = list(b.vbucket(0).all_items())
    want = expected(sorted(items, key=lambda it: it.seqno), Form.of(dcp), 77, sid)
    assert stream_items(b, dcp, sid) == want
    b.persist()
    b.checkpoint()
    b.set("later", BODY, datatype=1)  # memory after the backfill
    b.persist()
    b.vbucket(0).close_checkpoint()
    got = stream_items(b, dcp, sid)
    items = list(b.vbucket(0).all_items())
    assert got == expected(sorted(items, key=lambda it: it.seqno), Form.of(dcp), 77, sid)


def test_a_legacy_connection_never_gets_another_collections_items() -> None:
    b = Bucket(
        "default", 1, seed=4, clock=lambda: 1_700_000_000.0, collections={"s": ["c"]}
    )  # collection 8, and its system events
    b.set("a", BODY, datatype=1)
    b.set("b", BODY, datatype=1, collection_id=8)
    b.set("c", BODY, datatype=1)
    dcp = settings_for(False, False, False, "", False, False, False)
    got = stream_items(b, dcp, None)
    items = [b.vbucket(0).get(b"a"), b.vbucket(0).get(b"c")]
    assert got == expected([it for it in items if it is not None], Form.of(dcp), 77, None)


#: durable writes beside the documents: (outcome, key) of a sync write
sync_writes = st.lists(
    st.tuples(st.sampled_from(["commit", "abort", "pending"]), st.integers(0, 3)),
    min_size=1,
    max_size=12,
)


def durable_bucket(
    ops: list[tuple[int, tuple[str, dict[str, Any]]]], durable: list[tuple[str, int]]
) -> Bucket:
    """``one_bucket``'s documents with sync writes of other keys between them (a key
    with a prepare pending is not written again)."""
    b = one_bucket([])
    pending: set[int] = set()
    for i, op in enumerate(ops):
        write(b, [op])
        if i < len(durable):
            outcome, key = durable[i]
            if key not in pending:
                b.sync_write(f"sw{key}", BODY, datatype=1, outcome=outcome)
                if outcome == "pending":
                    pending.add(key)
    return b


@settings(deadline=None, max_examples=25)
@given(operations, sync_writes, st.sampled_from([None, 5]))
@pytest.mark.parametrize("dcp", FORMS[::5], ids=lambda s: repr(Form.of(s)))
def test_streams_without_sync_writes_send_the_codec_frames_of_visible_items_only(
    dcp: DcpSettings,
    ops: list[tuple[int, tuple[str, dict[str, Any]]]],
    durable: list[tuple[str, int]],
    sid: int | None,
) -> None:
    """Prepares and aborts left out of a run (a mask over the shared frames), commits
    sent as mutations, every other frame in its negotiated form: from memory, then
    from disk (kv_engine ``ActiveStream::processItems``; commit.md)."""
    b = durable_bucket(ops, durable)
    vb = b.vbucket(0)
    cursor = vb.register_cursor("probe", 0)
    assert cursor is not None
    visible = []
    while (batch := cursor.next_batch()) is not None:
        visible += [it for it in batch.items if it.tag != TAG_DURABLE]
    vb.remove_cursor("probe")
    assert stream_items(b, dcp, sid) == expected(visible, Form.of(dcp), 77, sid)
    b.persist()
    b.checkpoint()
    b.vbucket(0).close_checkpoint()
    on_disk = sorted(
        (it for it in vb.disk_by_seqno.values() if it.tag != TAG_DURABLE),
        key=lambda it: it.seqno,
    )
    assert stream_items(b, dcp, sid) == expected(on_disk, Form.of(dcp), 77, sid)


@pytest.mark.parametrize(
    ("dcp", "datatype", "value"),
    [
        # no INCLUDE_XATTRS: the section stripped, the bit cleared
        (settings_for(False, True, False, "", True, False, False), Datatype.JSON, BODY),
        # no SNAPPY: decompressed (the xattrs kept)
        (settings_for(True, False, False, "", True, False, False), 5, None),
        # NO_VALUE with INCLUDE_XATTRS: the xattr section alone
        (settings_for(True, True, False, "no_value", True, False, False), Datatype.XATTR, None),
        # NO_VALUE_WITH_UNDERLYING_DATATYPE: no body, the stored datatype
        (settings_for(False, False, False, "underlying", True, False, False), 7, b""),
    ],
)
def test_a_compressed_document_with_xattrs_arrives_in_the_negotiated_form(
    dcp: DcpSettings, datatype: int, value: bytes | None
) -> None:
    b = Bucket("default", 1, seed=4, clock=lambda: 1_700_000_000.0)
    b.set("d", bytes(cramjam.snappy.compress_raw(BODY)), datatype=3, xattrs=XATTRS)
    (frame,) = stream_items(b, dcp, None)
    reader = FrameReader()
    reader.feed(frame)
    decoded = reader.next_frame()
    assert decoded is not None
    assert decoded.datatype == datatype
    if value is not None:
        assert decoded.value == value
    else:  # an xattr section: its u32 length, then the pairs (kv_engine docs/Document.md "XAttr")
        pairs, body = split_xattrs(decoded.value)
        assert dict(pairs) == {k.encode(): v.encode() for k, v in XATTRS.items()}
        assert body == (b"" if dcp.open_flags & DcpOpenFlag.NO_VALUE else BODY)


# -- filtered, scope and stream-id streams: the frames they select, against the codec -------

#: operations across collections: a document write (collection, doc), or a manifest change
collection_ops = st.lists(
    st.one_of(
        st.tuples(st.just("doc"), st.sampled_from([0, 8, 9]), st.integers(0, 4), docs),
        st.tuples(st.just("create"), st.sampled_from(["rail", "bus"])),
        st.tuples(st.just("drop"), st.sampled_from(["_default", "hotel", "air", "rail"])),
        st.tuples(st.just("modify"), st.sampled_from(["hotel", "air"]), st.integers(1, 9)),
    ),
    min_size=1,
    max_size=30,
)
SCOPE_OF = {"_default": "_default", "hotel": "inventory", "air": "inventory"}


def write_collections(b: Bucket, ops: list[tuple[Any, ...]]) -> None:
    manifest = b.manifest
    for op in ops:
        if op[0] == "doc":
            _, cid, key, (kind, kwargs) = op
            if cid not in manifest.collections:
                continue
            name = f"doc{key}"
            if kind == "set":
                args = {"value": BODY, "datatype": 1, **kwargs}
                b.set(name, args.pop("value"), collection_id=cid, **args)
            elif (it := b.vbucket(0).get(name.encode(), cid)) is not None and not it.deleted:
                getattr(b, kind)(name, collection_id=cid)
        elif op[0] == "create":
            if manifest.collection_named("inventory", op[1]) is None:
                b.create_collection("inventory", op[1])
        elif op[0] == "drop":
            scope = SCOPE_OF.get(op[1], "inventory")
            if manifest.collection_named(scope, op[1]) is not None:
                b.drop_collection(scope, op[1])
        elif (coll := manifest.collection_named("inventory", op[1])) and coll.max_ttl != op[2]:
            b.modify_collection("inventory", op[1], max_ttl=op[2])


def reference_selection(
    items: list[Item], filt: frozenset[int] | None, scope: int | None, form: Form
) -> list[Item]:
    """What a stream sends, by the rules read plainly (not ``StreamFilter``)."""
    out: list[Item] = []
    held = set(filt) if filt is not None else None
    for it in items:
        if not form.collections:
            if it.system:
                if getattr(it, "event_collection_id", None) == 0 and it.deleted:
                    break  # _default dropped: the legacy stream ends
                continue
            if it.collection_id == 0:
                out.append(it)
            continue
        if held is None:
            out.append(it)
            continue
        if not it.system:
            if it.collection_id in held:
                out.append(it)
            continue
        ev = it
        target = getattr(ev, "event_collection_id", None)
        if scope is not None:
            if getattr(ev, "scope_id", None) != scope:
                continue
            out.append(ev)
            # a creation joins the filter (a modification does not: a collection
            # dropped before the request, its creation de-duplicated, stays out)
            if (
                target is not None
                and getattr(ev, "event", None) is SystemEventType.BEGIN_COLLECTION
            ):
                held.add(target)
            if target is None and ev.deleted:
                break  # the scope dropped
            continue
        if target is None or target not in held:
            continue
        out.append(ev)
        if ev.deleted:
            held.discard(target)
            if not held:
                break
    return out


FILTERS = [(None, None), (frozenset({8}), None), (frozenset({0, 9}), None), ("scope", 8)]


@settings(deadline=None, max_examples=25)
@given(collection_ops, st.sampled_from([None, 5]), st.sampled_from(FILTERS), st.booleans())
@pytest.mark.parametrize("dcp", FORMS[::5], ids=lambda s: repr(Form.of(s)))
def test_filtered_streams_send_what_the_codec_encodes_item_by_item(
    dcp: DcpSettings,
    ops: list[tuple[Any, ...]],
    sid: int | None,
    filt: tuple[Any, int | None],
    from_disk: bool,
) -> None:
    """Every stream kind, from memory or disk, sends exactly the selected items as the
    codec encodes them one by one (modifications without FlatBuffers are skipped, and
    the codec's SEQNO_ADVANCED for them left out of the comparison like the snapshot
    ends')."""
    for flatbuffers in (False, True):
        settings_ = attrs.evolve(dcp, flatbuffers_events=flatbuffers)
        b = Bucket(
            "default",
            1,
            seed=4,
            clock=lambda: 1_700_000_000.0,
            collections={"inventory": ["hotel", "air"]},
        )
        write_collections(b, ops)
        if from_disk:
            b.checkpoint()
            b.persist()
        collections, scope = filt
        if collections == "scope":
            collections = frozenset(
                c.cid for c in b.manifest.collections.values() if c.scope_id == 8
            )
        if not settings_.collections:
            collections, scope = frozenset({0}), None
        form = Form.of(settings_)
        vb = b.vbucket(0)
        history = [e for cp in vb.checkpoints for e in cp.entries if e is not None]
        if from_disk:  # a disk backfill skips the documents of dropped collections
            dropped = {
                getattr(e, "event_collection_id", None) for e in vb.system_events if e.deleted
            }
            history = [vb.disk_by_seqno[s] for s in vb.store.columns.seqnos]
            history = [it for it in history if it.system or it.collection_id not in dropped]
        want_items = reference_selection(history, collections, scope, form)
        want = [
            frame
            for frame in expected(want_items, form, 77, sid)
            if frame[1] != Opcode.DCP_SEQNO_ADVANCED
        ]
        got = stream_frames(b, settings_, sid, collections, scope)
        assert got == want


#: values a cold load takes (value, datatype): every value form differs for some
COLD_VALUES = [
    (BODY, 1),
    (b"", 0),
    (b"\x00raw\xff", 0),
    (bytes(cramjam.snappy.compress_raw(BODY)), 3),
    (b"tiny", 0),
]


@settings(deadline=None, max_examples=15)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.sampled_from(COLD_VALUES)), min_size=1, max_size=20),
    st.lists(st.tuples(st.integers(0, 12), docs), max_size=6),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=4),
)
@pytest.mark.parametrize("sid", [None, 3])
@pytest.mark.parametrize("dcp", FORMS[::5], ids=lambda s: repr(Form.of(s)))
def test_streams_of_a_cold_loaded_bucket_send_what_the_codec_encodes(
    dcp: DcpSettings,
    sid: int | None,
    loaded: list[tuple[int, tuple[bytes, int]]],
    ops: list[tuple[int, tuple[str, dict[str, Any]]]],
    compacted: bool,
    removed: list[tuple[int, bool]],
) -> None:
    """The cold tier's frames are read from its buffer a run at a time (collection-
    aware) or piece by piece; with tombstones loaded cold (deletions and expiries,
    whose delete times some forms carry), with persisted writes over it (slots die,
    the hot disk follows the cold tier), and with the checkpoints holding them or not."""
    b = Bucket("default", 1, seed=4, clock=lambda: 1_700_000_000.0)
    load = b.cold_load()
    load.add(
        [b"doc%d" % k for k, _ in loaded],
        [v for _, (v, _) in loaded],
        datatypes=[dt for _, (_, dt) in loaded],
        expiry=[k * 1000 for k, _ in loaded],
    )
    live = {k for k, _ in loaded}
    for k, expiration in removed:  # each a key live there (its tombstone at most once)
        if k in live:
            live.discard(k)
            load.remove([b"doc%d" % k], expiration=expiration)
    load.finish()
    write(b, ops)
    b.persist()  # (unpersisted, a key would go from disk and again from memory)
    if compacted:
        b.vbucket(0).close_checkpoint()
    items = sorted(b.vbucket(0).all_items(), key=lambda it: it.seqno)
    assert stream_items(b, dcp, sid) == expected(items, Form.of(dcp), 77, sid)
