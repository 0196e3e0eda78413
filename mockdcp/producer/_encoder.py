"""Turning model items into DCP frames for one connection, fast, in every form.

An item's frame is encoded once, when written, and reused for every stream. The model
keeps each item's *canonical* frame (DCP_MUTATION, or a V1 DCP_DELETION for tombstones,
opaque 0, LEB128 collection prefix, value as stored; a system event's version 0/1
DCP_SYSTEM_EVENT) in two pieces, ``Item.head`` (header and extras) and ``Item.tail`` (key
and value), with a tag byte beside them. A stream picks the frames its filter lets
through (``mockdcp.producer._filter``), and every kind of stream is sent from those
pieces:

* a frame whose *value form* differs for this connection (xattrs stripped, value
  decompressed or compressed, the xattrs-only value of NO_VALUE with INCLUDE_XATTRS, a
  V2 deletion or DCP_EXPIRATION when delete times were asked for, a system event as
  FlatBuffers) is replaced by a
  variant encoded once per item and form by the message classes and kept on the item
  (``Item.forms``); which frames need one is read from the tags through a 256-entry
  table, without touching the items;
* a collection-aware stream joins head, collection prefix and tail; a legacy stream
  joins head and tail and patches, in bulk with numpy, the key and body lengths (one
  less each); the opaque is patched in bulk for every stream;
* a stream-id stream joins the frame info (id 0x22, the u16 stream id) in front of each
  head, then moves it behind the header and makes the header an alt request (magic
  0x08, framing length 3) in bulk: each frame's first 27 bytes are one numpy element
  of a view over the buffer (138 ns a frame in all, against 359 for the cut below);
* NO_VALUE's value cut (documents only, and the stream-id frame with it) is made on
  the joined frames: headers patched with numpy, the buffer cut by one ``struct``
  unpack.

A connection with ``enable_sync_writes`` takes another path for the runs of a vbucket
that has had durable writes (``ItemEncoder.prepare`` with ``sync``): its prepares and
aborts go as DCP_PREPARE (value in the connection's value form, durability level,
deleted flag: kv_engine docs/dcp/documentation/commands/prepare.md) and DCP_ABORT
(abort.md), its commits read from memory as DCP_COMMIT (commit.md; from disk a commit
is the mutation it made, kv_engine ``ActiveStream::makeResponseFromItem``), each
encoded item by item and cut into pieces like a variant; every other connection keeps
the shared-frame path unchanged.

``encode_item`` is the item-by-item codec (message classes) the fast path must equal;
the tests check it for every form.

Value forms (kv_engine docs/dcp/documentation/commands/open-connection.md and
mutation.md "The meaning of datatype", ``ActiveStream::makeResponseFromItem``): xattrs
are stripped unless DCP_OPEN INCLUDE_XATTRS; values are decompressed unless HELLO
SNAPPY; ``force_value_compression`` compresses every non-empty value (kept as it is
when snappy does not make it smaller); NO_VALUE sends no body (datatype 0, or XATTR
with the xattr section alone under INCLUDE_XATTRS); NO_VALUE_WITH_UNDERLYING_DATATYPE
sends no body with the stored datatype. Without ``enable_expiry_opcode`` an expiration
goes as a DCP_DELETION (its canonical frame).
"""

from __future__ import annotations

import functools
import struct
from array import array
from typing import TYPE_CHECKING, Any, TypedDict

import attrs

from mockdcp.model import (
    DEFAULT_PREFIX,
    TAG_COLLECTION,
    TAG_DATATYPE,
    TAG_EMPTY,
    TAG_SYSTEM,
    TAG_TOMBSTONE,
    CommittedItem,
    DurableItem,
    Item,
    ItemKind,
    SystemEventItem,
    any_outside_default,
)
from mockdcp.producer._numpy import numpy_module
from mockdcp.protocol import (
    Datatype,
    DcpOpenFlag,
    Deletion,
    Expiration,
    Magic,
    Mutation,
    SeqnoAdvanced,
    SystemEvent,
    collection_prefix,
    encode_xattrs,
    split_xattrs,
    stream_id_frame_info,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    import numpy
    from numpy.typing import NDArray

    Offsets = NDArray[numpy.int64]

    from mockdcp.producer._controls import DcpSettings

#: ``ItemEncoder.prepare``'s ``sync``: a disk read (prepares and aborts) and a memory
#: read (commits as DCP_COMMIT too) for a connection with sync writes
SYNC_DISK = 1
SYNC_MEMORY = 2

_OPAQUE = struct.Struct(">I")
_OPAQUE_OFFSET = 12
#: where a header's key length and body length are
_KEY_OFFSET = 2
_BODY_OFFSET = 8
#: a header's key length (at 2) and its body length with the opaque after it (at 8)
_KEY_LENGTH = struct.Struct(">H")
_BODY_OPAQUE = struct.Struct(">II")
#: fewer frames than this are patched one at a time (``_patch_few``): the numpy calls
#: of the vectorised patching cost some 10 µs a piece whatever its size, what a stream
#: of a few documents pays on each of the 1,024 vbuckets (docs/performance.md); a piece
#: of 24 cold frames encodes in 18 µs so against 24 (legacy), 8 against 13 (aware), and
#: the two meet at about 48
_FEW_FRAMES = 32
_HEADER = 24


#: decimal digits of a part's length in a ``struct`` format (a frame is < 10**8 bytes)
_DIGITS = 8
_STRUCTS: dict[str, struct.Struct] = {}


def _decimal(np: ModuleType, values: Offsets) -> NDArray[numpy.uint8]:
    """``values`` (int64) as rows of ``_DIGITS`` ASCII digits, zero-padded: two lookups
    in a table of every 4-digit string (a division per digit cost ~70 ns a value)."""
    table = _FOUR_DIGITS.get("table")
    if table is None:
        text = "".join(f"{i:04d}" for i in range(10_000)).encode()
        table = _FOUR_DIGITS["table"] = np.frombuffer(text, np.uint8).reshape(10_000, 4)
    high, low = np.divmod(values, 10_000)
    rows: NDArray[numpy.uint8] = np.concatenate((table[high], table[low]), axis=1)
    return rows


_FOUR_DIGITS: dict[str, Any] = {}


def _struct_for(layout: str) -> struct.Struct:
    """A compiled ``struct`` for ``layout``; the last few are kept (equal-sized frames
    give the same layout piece after piece)."""
    compiled = _STRUCTS.get(layout)
    if compiled is None:
        if len(_STRUCTS) >= 8:
            _STRUCTS.clear()
        compiled = _STRUCTS[layout] = struct.Struct(layout)
    return compiled


#: the collection prefix joined after a head, by "is the item in _default" (0 or 1)
_PREFIXES = (b"", DEFAULT_PREFIX)


def _snappy_decompress(data: bytes) -> bytes:
    import cramjam

    return bytes(cramjam.snappy.decompress_raw(data))


def _snappy_compress(data: bytes) -> bytes:
    import cramjam

    return bytes(cramjam.snappy.compress_raw(data))


@attrs.frozen
class Form:
    """How one connection's streams carry documents (what HELLO, DCP_OPEN and
    DCP_CONTROL negotiated); ``variant`` is the part that changes an item's value or
    extras, the key of ``Item.forms``."""

    collections: bool = True
    xattrs: bool = False
    snappy: bool = False
    force_compression: bool = False
    no_value: bool = False
    underlying: bool = False
    delete_times: bool = False
    expiry_opcode: bool = False
    #: system events as FlatBuffers (version 2), modifications included
    flatbuffers: bool = False

    @classmethod
    def of(cls, settings: DcpSettings) -> Form:
        flags = settings.open_flags
        return cls(
            collections=settings.collections,
            xattrs=bool(flags & DcpOpenFlag.INCLUDE_XATTRS),
            snappy=settings.snappy,
            force_compression=settings.force_compression,
            no_value=bool(flags & DcpOpenFlag.NO_VALUE),
            underlying=bool(flags & DcpOpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE),
            delete_times=settings.delete_times,
            expiry_opcode=settings.expiry_opcode,
            flatbuffers=settings.collections and settings.flatbuffers_events,
        )

    @property
    def variant(self) -> tuple[bool, ...]:
        return attrs.astuple(self)[1:]

    def needs_variant(self, tag: int) -> bool:
        """True when an item with this ``Item.tag`` is not sent as its canonical frame
        patched in bulk (see ``transmitted_value`` for the rules); a system event needs
        one only as FlatBuffers (its canonical frame is the version 0/1 one)."""
        if tag & TAG_SYSTEM:
            return self.flatbuffers
        dt = tag & TAG_DATATYPE
        if tag & TAG_TOMBSTONE and self.delete_times:
            return True  # V2 deletion or DCP_EXPIRATION: other extras
        if self.underlying:
            return False  # the value is cut, the stored datatype kept
        if self.no_value:
            return bool(dt & Datatype.XATTR) and self.xattrs  # the xattr section stays
        if dt & Datatype.XATTR and not self.xattrs:
            return True
        if dt & Datatype.SNAPPY and not self.snappy:
            return True
        return self.force_compression and not dt & Datatype.SNAPPY and not tag & TAG_EMPTY

    def variant_table(self) -> bytes:
        """``needs_variant`` of every tag byte, as 0/1 bytes (a lookup table)."""
        return bytes(self.needs_variant(t) for t in range(256))


def transmitted_value(value: bytes, datatype: int, form: Form) -> tuple[bytes, int]:
    """The value and datatype a connection of ``form`` gets for a stored value (the
    module docstring gives the rules and their sources)."""
    if form.underlying:
        return b"", datatype
    body, dt = value, datatype
    if dt & Datatype.SNAPPY and (
        not form.snappy or (dt & Datatype.XATTR and (not form.xattrs or form.no_value))
    ):
        body, dt = _snappy_decompress(body), dt & ~Datatype.SNAPPY
    if dt & Datatype.XATTR and not form.xattrs:
        _, body = split_xattrs(body)
        dt &= ~Datatype.XATTR
    if form.no_value:
        if dt & Datatype.XATTR:
            pairs, _ = split_xattrs(body)
            return encode_xattrs(pairs, b""), Datatype.XATTR
        return b"", 0
    if form.force_compression and body and not dt & Datatype.SNAPPY:
        packed = _snappy_compress(body)
        if len(packed) < len(body):
            return packed, dt | Datatype.SNAPPY
    return body, dt


@functools.lru_cache(maxsize=64)
def _variant_table(form: Form) -> bytes:
    return form.variant_table()


class _DocumentFields(TypedDict):
    """The fields Mutation, Deletion and Expiration share."""

    opaque: int
    vbucket: int
    cas: int
    by_seqno: int
    rev_seqno: int
    key: bytes
    collection_id: int | None
    value: bytes
    datatype: int
    stream_id: int | None


def encode_item(item: Item, form: Form, opaque: int = 0, sid: int | None = None) -> bytes:
    """One item's frame for a stream of ``form`` through the message classes: the
    answer every faster path must give. A system event goes to collection-aware forms
    only; a modification without FlatBuffers encodes as DCP_SEQNO_ADVANCED at its seqno,
    though streams never send it (they skip it and reach its seqno at their snapshot's
    end, ``mockdcp.producer._filter``; kv_engine ``ActiveStream::shouldProcessItem``)."""
    if isinstance(item, SystemEventItem):
        assert form.collections, "legacy streams are never sent system events"
        fields = item.event_fields(flatbuffers=form.flatbuffers)
        if fields is None:
            return SeqnoAdvanced(
                opaque=opaque, vbucket=item.vbucket, by_seqno=item.seqno, stream_id=sid
            ).encode()
        version, key, value = fields
        return SystemEvent(
            opaque=opaque,
            vbucket=item.vbucket,
            by_seqno=item.seqno,
            event=int(item.event),
            version=version,
            key=key,
            value=value,
            stream_id=sid,
        ).encode()
    value, datatype = transmitted_value(item.value, item.datatype, form)
    common = _DocumentFields(
        opaque=opaque,
        vbucket=item.vbucket,
        cas=item.cas,
        by_seqno=item.seqno,
        rev_seqno=item.rev_seqno,
        key=item.key,
        collection_id=item.collection_id if form.collections else None,
        value=value,
        datatype=datatype,
        stream_id=sid,
    )
    if item.kind is ItemKind.MUTATION:
        return Mutation(flags=item.flags, expiration=item.expiry, **common).encode()
    if item.kind is ItemKind.EXPIRATION and form.expiry_opcode:
        return Expiration(delete_time=item.delete_time, **common).encode()
    delete_time = item.delete_time if form.delete_times else None
    return Deletion(delete_time=delete_time, **common).encode()


def item_variant(item: Item, form: Form) -> tuple[bytes, bytes]:
    """``item``'s frame in ``form``'s value form, in the canonical layout (collection
    prefix, opaque 0, no stream-id) and in two pieces like ``Item.head`` and
    ``Item.tail``; encoded once per item and form, kept on the item."""
    forms = item.forms
    if forms is None:
        forms = item.forms = {}
    key = form.variant
    pieces = forms.get(key)
    if pieces is None:
        frame = encode_item(item, attrs.evolve(form, collections=True))
        at = _HEADER + frame[4]  # header and extras
        if isinstance(item, SystemEventItem):
            pieces = (frame, b"")  # all of it the head, like the canonical one
        elif item.collection_id:
            at += len(collection_prefix(item.collection_id))
            pieces = (frame[:at], frame[at:])
        else:
            pieces = (frame[:at], frame[at + 1 :])
        forms[key] = pieces
    return pieces


def _pieces(frame: bytes, collection_id: int) -> tuple[tuple[bytes, bytes], int]:
    """A frame with its collection prefix cut into the canonical layout (as
    ``item_variant``), and the tag that makes ``ItemEncoder.encode`` join it right:
    ``TAG_SYSTEM`` keeps NO_VALUE's cut away (the value is already in the connection's
    form), ``TAG_COLLECTION`` says the prefix is in the head (other collections)."""
    at = _HEADER + frame[4]
    if collection_id:
        at += len(collection_prefix(collection_id))
        return (frame[:at], frame[at:]), TAG_SYSTEM | TAG_COLLECTION
    return (frame[:at], frame[at + 1 :]), TAG_SYSTEM


def sync_write_frame(item: Item, form: Form, *, commits: bool) -> bytes | None:
    """The DCP_PREPARE, DCP_ABORT or (``commits``: read from memory) DCP_COMMIT frame of
    ``item`` for a connection with sync writes (collection prefix, opaque 0); None for
    any other item."""
    if isinstance(item, DurableItem):
        if item.kind is ItemKind.ABORT:
            return item.frame(collections=True)
        value, datatype = transmitted_value(item.value, item.datatype, form)
        return item.frame(collections=True, value=value, datatype=datatype)
    if commits and isinstance(item, CommittedItem):
        return item.commit_frame(collections=True)
    return None


@attrs.frozen
class Frames:
    """Frames read for a stream and not yet queued, in pieces (``Item.head``,
    ``Item.tail``) with their tags: ``ends`` are each canonical frame's end offset in
    their concatenation plus ``base``."""

    heads: Sequence[bytes]
    tails: Sequence[bytes]
    tags: bytes
    ends: Sequence[int]
    base: int


class ItemEncoder:
    """Encodes items for the streams of one connection, per its negotiated settings."""

    def __init__(self, settings: DcpSettings) -> None:
        self.form = form = Form.of(settings)
        self._table = _variant_table(form)
        #: the tags that need no variant (``bytes.translate`` deletes them)
        self._plain = bytes(t for t in range(256) if not self._table[t])
        self._cut_value = form.no_value or form.underlying
        #: frames go out exactly as the model keeps them, only the opaque patched
        self.canonical = form.collections and not self._cut_value and not any(self._table)

    # -- reading: the frames a stream will send --------------------------------------

    def prepare(
        self,
        heads: Sequence[bytes],
        tails: Sequence[bytes],
        tags: bytes,
        ends: Sequence[int],
        base: int,
        items_at: Callable[[Sequence[int]], Sequence[Item]],
        *,
        sync: int = 0,
    ) -> Frames:
        """The frames a stream selected (``StreamFilter``), each in this connection's
        value form: frames that need a variant are replaced by it (``items_at`` gives
        their items, called at once). A legacy connection is given only frames of the
        default collection. ``sync`` (a connection with sync writes, a vbucket with
        durable writes): ``SYNC_DISK`` sends prepares and aborts, ``SYNC_MEMORY``
        commits as DCP_COMMIT too (``_prepare_sync``)."""
        if sync and tags:
            return self._prepare_sync(heads, tails, tags, items_at, commits=sync == SYNC_MEMORY)
        assert self.form.collections or not any_outside_default(tags)
        if self.canonical or not tags:
            return Frames(heads, tails, tags, ends, base)
        flagged = self._flagged(tags)
        if not flagged:
            return Frames(heads, tails, tags, ends, base)
        items = items_at(flagged)
        heads, tails = list(heads), list(tails)
        form = self.form
        for i, item in zip(flagged, items, strict=True):
            heads[i], tails[i] = item_variant(item, form)
        return Frames(heads, tails, tags, self.ends_of(heads, tails, tags), 0)

    def _prepare_sync(
        self,
        heads: Sequence[bytes],
        tails: Sequence[bytes],
        tags: bytes,
        items_at: Callable[[Sequence[int]], Sequence[Item]],
        *,
        commits: bool,
    ) -> Frames:
        """``prepare`` item by item for a connection with sync writes: each prepare,
        abort and (``commits``) commit replaced by its own frame, the rest as
        ``prepare`` gives them."""
        items = items_at(range(len(heads)))
        heads, tails, out = list(heads), list(tails), bytearray(tags)
        form, table = self.form, self._table
        for i, item in enumerate(items):
            frame = sync_write_frame(item, form, commits=commits)
            if frame is not None:
                (heads[i], tails[i]), out[i] = _pieces(frame, item.collection_id)
            elif table[tags[i]]:
                heads[i], tails[i] = item_variant(item, form)
        return Frames(heads, tails, bytes(out), self.ends_of(heads, tails, bytes(out)), 0)

    @staticmethod
    def ends_of(heads: Sequence[bytes], tails: Sequence[bytes], tags: bytes) -> Sequence[int]:
        """Each canonical frame's end offset: head, the default prefix, tail."""
        np = numpy_module()
        count = len(heads)
        sizes = np.fromiter(map(len, heads), np.int64, count)
        sizes += np.fromiter(map(len, tails), np.int64, count)
        sizes += (np.frombuffer(tags, np.uint8) & TAG_COLLECTION) == 0
        return array("q", np.cumsum(sizes).tobytes())

    def _flagged(self, tags: bytes) -> list[int]:
        """Positions of the frames that need a variant."""
        if not tags.translate(None, self._plain):  # one C loop: none does (usually)
            return []
        np = numpy_module()
        table = np.frombuffer(self._table, np.uint8)
        return list(np.flatnonzero(table[np.frombuffer(tags, np.uint8)]).tolist())

    # -- writing: one piece of a stream ------------------------------------------------

    def encode(
        self,
        frames: Frames,
        start: int,
        stop: int,
        opaque: int,
        sid: int | None,
    ) -> tuple[bytearray, Sequence[int], int]:
        """Frames ``start:stop`` as the stream sends them: the buffer, and the end
        offset of each frame in it plus the returned base."""
        heads, tails = frames.heads[start:stop], frames.tails[start:stop]
        ends = frames.ends[start:stop]
        base = frames.ends[start - 1] if start else frames.base
        count = len(heads)
        if not count:
            return bytearray(), [], 0
        np = numpy_module()
        # a stream-id frame goes in front of each head, and moves behind its header below
        # (``_move_sid``); NO_VALUE's cuts take the slower path that does both
        lead = 0 if sid is None or self._cut_value else 1
        # the collection prefix joined after each head: ``_default``'s, for a
        # collection-aware stream; other collections' is in the head (Item.head)
        prefixes: bytes | list[bytes] | None = None
        if self.form.collections:
            tags = frames.tags[start:stop]
            prefixes = DEFAULT_PREFIX
            if any_outside_default(tags):
                default = (np.frombuffer(tags, np.uint8) & TAG_COLLECTION) == 0
                prefixes = (
                    list(map(_PREFIXES.__getitem__, default.tobytes())) if default.any() else None
                )
        joined = getattr(heads, "joined_frames", None)  # the cold tier's frames
        if joined is not None and not lead and hasattr(tails, "joined_frames"):
            # the canonical frames as they lie in its buffer, a copy a run; a legacy
            # stream's without their prefixes, a slice a frame (``ColdPieces``; cutting
            # the prefixes out of the joined frames by a ``struct`` unpack, as
            # ``_splice`` does, measured slower)
            if self.form.collections:
                buf: bytearray = joined()
            else:
                buf = heads.joined_with(tails)  # type: ignore[attr-defined]
        else:
            width = lead + 2 + (prefixes is not None)
            parts = [prefixes if isinstance(prefixes, bytes) else b""] * (width * count)
            if sid is not None and lead:
                parts[0::width] = [stream_id_frame_info(sid)] * count
            parts[lead::width], parts[width - 1 :: width] = heads, tails
            if isinstance(prefixes, list):
                parts[lead + 1 :: width] = prefixes
            buf = bytearray().join(parts)
        if count < _FEW_FRAMES and sid is None and not self._cut_value:
            return self._patch_few(buf, ends, base, opaque)
        if not self.form.collections and not lead:
            starts, legacy_ends = self._legacy_headers(buf, ends, base, opaque)
            if self._cut_value:
                return self._transform(buf, starts, sid, frames.tags[start:stop])
            return buf, legacy_ends, 0
        if not lead and not self._cut_value:  # collection-aware: only the opaques
            self.write_opaques(buf, self._starts(ends, base, _OPAQUE_OFFSET), opaque)
            return buf, ends, base
        starts = self._starts(ends, base)
        # bytes every frame grew by: a legacy one is one byte shorter than the canonical
        grow = 3 * lead - (not self.form.collections)
        if grow:  # the frames moved: where their headers and ends are now
            moved = grow * np.arange(1, count + 1, dtype=np.int64)
            starts += moved - grow + 3 * lead  # a header follows its frame info
            frame_ends = self._ends_array(ends, count) - base + moved
            ends, base = array("q", frame_ends.tobytes()), 0
        if self.form.collections:
            self.patch_opaque(buf, starts, opaque)
        else:  # a stream-id stream's legacy frames (they grew: ``frame_ends`` is set)
            self._legacy_fields(buf, starts, frame_ends, opaque)
        if lead:
            self._move_sid(buf, starts)
        elif self._cut_value:  # with the stream-id frame, if any
            return self._transform(buf, starts, sid, frames.tags[start:stop])
        return buf, ends, base

    def _patch_few(
        self, buf: bytearray, ends: Sequence[int], base: int, opaque: int
    ) -> tuple[bytearray, Sequence[int], int]:
        """``encode``'s patching of a few frames without a stream-id, a frame at a time
        (``struct``): ``opaque`` written, and a legacy frame's key and body lengths one
        less (its collection prefix left out, so each frame ends one byte earlier than
        the one before it did), as ``patch_opaque`` and ``_legacy_fields`` do at once."""
        start = 0
        if self.form.collections:
            for end in ends:
                _OPAQUE.pack_into(buf, start + _OPAQUE_OFFSET, opaque)
                start = end - base
            return buf, ends, base
        moved = array("q")
        for shorter, end in enumerate(ends, 1):
            (key,) = _KEY_LENGTH.unpack_from(buf, start + 2)
            (body,) = _OPAQUE.unpack_from(buf, start + 8)
            _KEY_LENGTH.pack_into(buf, start + 2, key - 1)
            _BODY_OPAQUE.pack_into(buf, start + 8, body - 1, opaque)
            start = end - base - shorter
            moved.append(start)
        return buf, moved, 0

    @staticmethod
    def _move_sid(buf: bytearray, headers: Offsets) -> None:
        """Every frame of ``buf`` had its stream-id frame info (3 bytes) in front of its
        header (at ``headers``): put it behind the header, which becomes an alt request
        (magic 0x08, framing extras length 3, body 3 bytes longer; the key length is its
        low byte, < 256). The 27 bytes of each frame are read and written as one numpy
        element (a ``V27`` view over the buffer with a stride of one byte)."""
        np = numpy_module()
        count = len(headers)
        window = np.ndarray((len(buf) - 26,), dtype="V27", buffer=buf, strides=(1,))
        at = headers - 3
        read = window[at].view(np.uint8).reshape(count, 27)
        moved = np.empty_like(read)
        moved[:, :_HEADER] = read[:, 3:]
        moved[:, _HEADER:] = read[:, :3]
        moved[:, 0] = Magic.ALT_REQUEST
        moved[:, 2] = 3
        moved[:, 8:12].view(">u4")[:] += 3
        window[at] = moved.view("V27").ravel()

    @staticmethod
    def _ends_array(ends: Sequence[int], count: int) -> Offsets:
        np = numpy_module()
        out: Offsets = (
            np.frombuffer(ends, np.int64, count)
            if isinstance(ends, array)
            else np.fromiter(ends, np.int64, count)
        )
        return out

    @staticmethod
    def _legacy_headers(
        buf: bytearray, ends: Sequence[int], base: int, opaque: int
    ) -> tuple[Offsets, array[int]]:
        """A legacy stream's frames without a stream id (``encode``): each is one byte
        shorter than its canonical frame (the collection prefix left out), so frame ``i``
        ends ``i + 1`` bytes before the canonical one did; their headers patched by
        ``_legacy_fields``. Returns where each frame starts in ``buf`` and where each
        ends."""
        np = numpy_module()
        count = len(ends)
        moved = ItemEncoder._ends_array(ends, count) - np.arange(
            base + 1, base + count + 1, dtype=np.int64
        )
        starts: Offsets = np.empty(count, np.int64)
        starts[0] = 0
        starts[1:] = moved[:-1]
        ItemEncoder._legacy_fields(buf, starts, moved, opaque)
        return starts, array("q", moved.tobytes())

    @staticmethod
    def _legacy_fields(buf: bytearray, headers: Offsets, ends: Offsets, opaque: int) -> None:
        """The headers of legacy frames (at ``headers``, each frame ending at ``ends``):
        the body length (from the header to the frame's end, less the header's 24) and
        ``opaque`` written as one big-endian ``u64`` (``body << 32 | opaque``, at 8),
        scattered as ``V8`` elements over a view with a stride of one byte (as
        ``patch_opaque`` writes), and the key length less one, in its low byte: a legacy
        stream carries only the default collection's documents, whose key is at most
        250 bytes after the one-byte prefix (the model refuses longer keys, as a node
        does: ``model._validate``, ``split_collection``), so the canonical length is at
        most 251 and its low byte never borrows. Two scatters and a gather: 9.8 µs for
        a hundred frames, where a gather of each header's first 16 bytes, its lengths
        decremented as big-endian columns, took 16. A stream-id stream's frame info, in
        front of each header until ``_move_sid`` moves it, is not in the body yet."""
        np = numpy_module()
        words = ends - headers
        words <<= 32
        words += opaque - (_HEADER << 32)
        fields = np.ndarray((len(buf) - 7,), dtype="V8", buffer=buf, strides=(1,))
        fields[headers + _BODY_OFFSET] = words.astype(">u8").view("V8")
        np.frombuffer(buf, np.uint8)[headers + _KEY_OFFSET + 1] -= 1

    @staticmethod
    def _starts(ends: Sequence[int], base: int, offset: int = 0) -> Offsets:
        """Where each frame starts in a buffer whose frames end at ``ends`` less
        ``base``, plus ``offset`` (a field of each header, in the same numpy call)."""
        np = numpy_module()
        count = len(ends)
        starts: Offsets = np.empty(count, np.int64)
        starts[0] = offset
        if count > 1:
            if isinstance(ends, array):
                previous = np.frombuffer(ends, np.int64, count - 1)
            else:
                previous = np.fromiter(ends, np.int64, count)[:-1]
            np.subtract(previous, base - offset, out=starts[1:])
        return starts

    @staticmethod
    def patch_opaque(buf: bytearray, starts: Offsets, opaque: int) -> None:
        """Write ``opaque`` into every frame of ``buf`` (frames start at ``starts``).

        Vectorised with numpy: a Python-level ``pack_into`` per frame cost about 170 ns,
        this about 8 ns (``mockdcp bench``). numpy is loaded at DCP_OPEN
        (``producer._numpy``), so no batch waits for the import. The four bytes go in
        as one element of a ``V4`` view with a stride of one byte (as ``_legacy_fields``
        writes), one assignment, not one a byte: 2.7 against 4.7 µs for a hundred frames.
        """
        ItemEncoder.write_opaques(buf, starts + _OPAQUE_OFFSET, opaque)

    @staticmethod
    def write_opaques(buf: bytearray, at: Offsets, opaque: int) -> None:
        """``patch_opaque`` with the opaques' own offsets ``at`` (``_starts``'s
        ``offset``: a numpy call less a piece)."""
        np = numpy_module()
        window = np.ndarray((len(buf) - 3,), dtype="V4", buffer=buf, strides=(1,))
        window[at] = np.frombuffer(_OPAQUE.pack(opaque), "V4")[0]

    def _transform(
        self, buf: bytearray, starts: Offsets, sid: int | None, tags: bytes
    ) -> tuple[bytearray, Sequence[int], int]:
        """NO_VALUE's value cut and the stream-id frame: the headers of every frame
        patched in bulk, then the cuts and insertions (module docstring). System events
        and SEQNO_ADVANCED (``TAG_SYSTEM``) keep their values: NO_VALUE is about
        documents."""
        np = numpy_module()
        form = self.form
        view = np.frombuffer(buf, np.uint8)
        count = len(starts)
        stops = np.empty(count, np.int64)
        stops[:-1] = starts[1:]
        stops[-1] = len(buf)
        index = starts[:, None] + np.arange(16)
        head = view[index]  # (count, 16): the first 16 header bytes of every frame
        keylen = head.view(">u2")[:, 1].astype(np.int64)
        extlen = head[:, 4].astype(np.int64)
        bodylen = head.view(">u4")[:, 2].astype(np.int64)
        grow = np.zeros(count, np.int64)
        cuts: list[Any] = []  # (position, bytes skipped, inserts) columns
        if sid is not None:
            cuts.append((starts + _HEADER, 0, 1))
            grow += 3
        if self._cut_value:
            value_at = starts + _HEADER + extlen + keylen
            skip = stops - value_at
            system = (np.frombuffer(tags, np.uint8) & TAG_SYSTEM) != 0
            if form.no_value and form.xattrs:  # an xattr section sent alone stays
                keep = ((head[:, 5] & Datatype.XATTR) != 0) | system
                skip[keep] = 0
                head[:, 5][~keep] = 0
            elif form.no_value:
                skip[system] = 0
                head[:, 5][~system] = 0
            else:
                skip[system] = 0
            cuts.append((value_at, skip, 0))
            grow -= skip
        head.view(">u4")[:, 2] = bodylen + grow
        if sid is not None:
            head[:, 0] = Magic.ALT_REQUEST
            head[:, 2] = 3  # framing extras length; byte 3 stays the key length (< 256)
        view[index] = head
        pieces = self._splice(buf, cuts, count, sid)
        out = bytearray().join(pieces)
        new_ends = np.cumsum(stops - starts + grow)
        return out, array("q", new_ends.tobytes()), 0

    @staticmethod
    def _splice(buf: bytearray, cuts: list[Any], count: int, sid: int | None) -> list[Any]:
        """The parts of ``buf`` between the cuts (in frame order), with the stream-id
        frame where a cut inserts.

        The parts are cut by one ``struct`` unpack whose format (``<n>s<k>x`` per cut)
        is built with numpy: slicing part by part cost several hundred ns a frame.
        """
        np = numpy_module()
        width = len(cuts)
        at = np.empty((count, width), np.int64)
        skip = np.zeros((count, width), np.int64)
        for j, (pos, sk, _ins) in enumerate(cuts):
            at[:, j] = pos
            skip[:, j] = sk
        at, skip = at.ravel(), skip.ravel()
        lengths = np.empty(len(at) + 1, np.int64)
        lengths[0] = at[0]
        np.subtract(at[1:], at[:-1] + skip[:-1], out=lengths[1:-1])
        lengths[-1] = len(buf) - at[-1] - skip[-1]
        rows = np.empty((len(at), 2 * _DIGITS + 2), np.uint8)
        rows[:, :_DIGITS] = _decimal(np, lengths[:-1])
        rows[:, _DIGITS] = ord("s")
        rows[:, _DIGITS + 1 : -1] = _decimal(np, skip)
        rows[:, -1] = ord("x")
        layout = f"={rows.tobytes().decode()}{int(lengths[-1])}s"
        parts: list[Any] = list(_struct_for(layout).unpack_from(buf))
        if sid is None:
            return parts
        inserts = [j for j, (_p, _s, ins) in enumerate(cuts) if ins]
        frame_info = stream_id_frame_info(sid)
        out: list[Any] = [frame_info] * (2 * len(parts) - 1)
        out[0::2] = parts
        if len(inserts) < width:  # only some cuts insert: empty the others
            for j in range(width):
                if j not in inserts:
                    out[2 * j + 1 :: 2 * width] = [b""] * count
        return out
