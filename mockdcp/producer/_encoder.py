"""Turning model items into DCP frames for one connection, fast, in every form.

Performance rule (design.md): an item's frame is encoded once and reused for every
stream. The model keeps each item's *canonical* frame (``Item.wire``): DCP_MUTATION, or
a V1 DCP_DELETION for tombstones, opaque 0, LEB128 collection prefix, value as stored.
Every kind of stream is sent from those frames:

* a frame whose *value form* differs for this connection (xattrs stripped, value
  decompressed or compressed, the xattrs-only value of NO_VALUE with INCLUDE_XATTRS, a
  V2 deletion or DCP_EXPIRATION when delete times were asked for) is replaced by a
  variant encoded once per item and form by the message classes and kept on the item
  (``Item.forms``); which frames need one is read from the tags the model keeps beside
  the frames (one byte per item), through a 256-entry table, without touching items;
* then the per-stream layout is patched in bulk on the joined frames: the opaque, the
  one-byte collection prefix cut for a legacy connection (key and body lengths less
  one), the value cut for NO_VALUE, the stream-id frame inserted (magic 0x08, framing
  length 3). Header fields are patched with numpy (one gather and one scatter of the
  first 16 bytes of every frame); cuts and insertions join slices of the buffer.

``encode_item`` is the item-by-item codec (message classes) the fast path must equal;
the tests check it for every form.

Value forms (docs/dcp/documentation/commands/open-connection.md, mutation.md "The
meaning of datatype"; kv_engine ``ActiveStream::makeResponseFromItem``): xattrs are
stripped unless DCP_OPEN INCLUDE_XATTRS; values are decompressed unless HELLO SNAPPY;
``force_value_compression`` compresses every non-empty value (kept as it is when snappy
does not make it smaller); NO_VALUE sends no body (datatype 0, or XATTR with the xattr
section alone under INCLUDE_XATTRS); NO_VALUE_WITH_UNDERLYING_DATATYPE sends no body
with the stored datatype.
"""

from __future__ import annotations

import struct
from array import array
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any, TypedDict

import attrs

from mockdcp._numpy import load_numpy
from mockdcp.model import Item, ItemKind
from mockdcp.model._item import (
    TAG_COLLECTION,
    TAG_DATATYPE,
    TAG_EMPTY,
    TAG_TOMBSTONE,
)
from mockdcp.protocol import (
    Datatype,
    DcpOpenFlag,
    Deletion,
    Expiration,
    Magic,
    Mutation,
    encode_xattrs,
    split_xattrs,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mockdcp.producer._controls import DcpSettings

_OPAQUE = struct.Struct(">I")
_OPAQUE_OFFSET = 12
_HEADER = 24
#: the stream-id frame info: id 2, length 2 (wire.md §2)
_SID_TAG = 0x22


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
        )

    @property
    def variant(self) -> tuple[bool, ...]:
        return attrs.astuple(self)[1:]  # type: ignore[no-any-return]

    def needs_variant(self, tag: int) -> bool:
        """True when an item with this ``Item.tag`` is not sent as its canonical frame
        patched in bulk (see ``transmitted_value`` for the rules)."""
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
    """The value and datatype a connection of ``form`` gets for a stored value (wire.md
    §3 table; see the module docstring)."""
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
    answer every faster path must give."""
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


def item_variant(item: Item, form: Form) -> bytes:
    """``item``'s frame in ``form``'s value form, in the canonical layout (collection
    prefix, opaque 0, no stream-id); encoded once per item and form, kept on the item."""
    forms = item.forms
    if forms is None:
        forms = item.forms = {}
    key = form.variant
    frame = forms.get(key)
    if frame is None:
        frame = forms[key] = encode_item(item, attrs.evolve(form, collections=True))
    return frame


@attrs.frozen
class Frames:
    """Frames read for a stream and not yet queued: ``ends`` are each frame's end offset
    in their concatenation plus ``base``."""

    wires: list[bytes]
    ends: Sequence[int]
    base: int


class ItemEncoder:
    """Encodes items for the streams of one connection, per its negotiated settings."""

    def __init__(self, settings: DcpSettings) -> None:
        self.form = form = Form.of(settings)
        self._table = form.variant_table()
        self._cut_value = form.no_value or form.underlying
        #: frames go out exactly as the model keeps them, only the opaque patched
        self.canonical = form.collections and not self._cut_value and not any(self._table)

    # -- reading: the frames a stream will send --------------------------------------

    def prepare(
        self,
        wires: list[bytes],
        ends: Sequence[int],
        base: int,
        tags: bytes,
        items_at: Callable[[Sequence[int]], list[Item]],
    ) -> Frames | None:
        """The frames of a batch or backfill, each in this connection's value form.

        Frames that need a variant are replaced by it (``items_at`` gives their items,
        called at once). ``None`` when the batch holds an item outside the default
        collection and the connection is legacy (it goes item by item, filtered).
        """
        if not self.form.collections and any(t & TAG_COLLECTION for t in tags):
            return None
        if self.canonical or not tags:
            return Frames(wires, ends, base)
        flagged = self._flagged(tags)
        if not flagged:
            return Frames(wires, ends, base)
        items = items_at(flagged)
        wires = list(wires)
        form = self.form
        for i, item in zip(flagged, items, strict=True):
            wires[i] = item_variant(item, form)
        return Frames(wires, array("q", accumulate(map(len, wires))), 0)

    def _flagged(self, tags: bytes) -> list[int]:
        """Positions of the frames that need a variant."""
        np = load_numpy()
        table = np.frombuffer(self._table, np.uint8)
        flags = table[np.frombuffer(tags, np.uint8)]
        return list(np.flatnonzero(flags).tolist()) if flags.any() else []

    # -- writing: one piece of a stream ------------------------------------------------

    def encode(
        self, wires: Sequence[bytes], ends: Sequence[int], base: int, opaque: int, sid: int | None
    ) -> tuple[bytearray, Sequence[int], int]:
        """Prepared frames as the stream sends them: the buffer, the end offset of each
        frame in it (plus the returned base)."""
        buf = bytearray().join(wires)
        if not wires:
            return buf, [], 0
        if self.form.collections and not self._cut_value and sid is None:
            self.patch_opaque(buf, ends, base, opaque)
            return buf, ends, base
        return self._transform(buf, ends, base, opaque, sid)

    @staticmethod
    def _starts(ends: Sequence[int], base: int) -> Any:
        np = load_numpy()
        count = len(ends)
        starts = np.empty(count, np.int64)
        starts[0] = 0
        if count > 1:
            if isinstance(ends, array):
                previous = np.frombuffer(ends, np.int64, count - 1)
            else:
                previous = np.fromiter(ends, np.int64, count)[:-1]
            np.subtract(previous, base, out=starts[1:])
        return starts

    @classmethod
    def patch_opaque(cls, buf: bytearray, ends: Sequence[int], base: int, opaque: int) -> None:
        """Write ``opaque`` into every frame of ``buf`` (frame ends at ``ends`` - ``base``).

        Vectorised with numpy: a Python-level ``pack_into`` per frame cost about 170 ns,
        this about 8 ns (``mockdcp bench``). numpy is loaded at DCP_OPEN
        (``mockdcp._numpy``), so no batch waits for the import.
        """
        np = load_numpy()
        if not len(ends):
            return
        at = cls._starts(ends, base) + _OPAQUE_OFFSET
        view = np.frombuffer(buf, np.uint8)
        for i, byte in enumerate(_OPAQUE.pack(opaque)):
            view[at + i] = byte

    def _transform(
        self, buf: bytearray, ends: Sequence[int], base: int, opaque: int, sid: int | None
    ) -> tuple[bytearray, Sequence[int], int]:
        """Patch the headers of every frame in bulk, then cut and insert (module
        docstring). Frame ``i`` spans ``starts[i]`` to ``stops[i]`` of ``buf``."""
        np = load_numpy()
        form = self.form
        view = np.frombuffer(buf, np.uint8)
        starts = self._starts(ends, base)
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
        cuts: list[Any] = []  # (position, bytes skipped, bytes inserted) columns
        if sid is not None:
            cuts.append((starts + _HEADER, 0, 1))
            grow += 3
        if not form.collections:  # the collection prefix of the default collection
            cuts.append((starts + _HEADER + extlen, 1, 0))
            keylen = keylen - 1
            grow -= 1
        if self._cut_value:
            value_at = starts + _HEADER + extlen + head.view(">u2")[:, 1]
            skip = stops - value_at
            if form.no_value and form.xattrs:  # an xattr section sent alone stays
                keep = (head[:, 5] & Datatype.XATTR) != 0
                skip[keep] = 0
                head[:, 5][~keep] = 0
            elif form.no_value:
                head[:, 5] = 0
            cuts.append((value_at, skip, 0))
            grow -= skip
        head.view(">u4")[:, 3] = opaque
        head.view(">u4")[:, 2] = bodylen + grow
        if sid is not None:
            head[:, 0] = Magic.ALT_REQUEST
            head[:, 2] = 3  # framing extras length; byte 3 stays the key length (< 256)
            head[:, 3] = keylen
        else:
            head.view(">u2")[:, 1] = keylen
        view[index] = head
        pieces = self._splice(buf, cuts, count, sid)
        out = bytearray().join(pieces)
        new_ends = np.cumsum(stops - starts + grow)
        return out, array("q", new_ends.tobytes()), 0

    @staticmethod
    def _splice(buf: bytearray, cuts: list[Any], count: int, sid: int | None) -> list[Any]:
        """Slices of ``buf`` between the cuts (in frame order), with the stream-id frame
        where a cut inserts."""
        np = load_numpy()
        width = len(cuts)
        at = np.empty((count, width), np.int64)
        skip = np.zeros((count, width), np.int64)
        insert = np.zeros((count, width), np.bool_)
        for j, (pos, sk, ins) in enumerate(cuts):
            at[:, j] = pos
            skip[:, j] = sk
            insert[:, j] = bool(ins)
        at, skip = at.ravel(), skip.ravel()
        seg_starts = np.empty(len(at) + 1, np.int64)
        seg_starts[0] = 0
        seg_starts[1:] = at + skip
        seg_stops = np.empty(len(at) + 1, np.int64)
        seg_stops[:-1] = at
        seg_stops[-1] = len(buf)
        data = memoryview(buf)
        segments = list(map(data.__getitem__, map(slice, seg_starts.tolist(), seg_stops.tolist())))
        if sid is None:
            return segments
        frame_info = bytes((_SID_TAG,)) + sid.to_bytes(2, "big")
        inserts = [frame_info if i else b"" for i in insert.ravel().tolist()]
        return [*chain.from_iterable(zip(segments, inserts, strict=False)), segments[-1]]

    # -- item by item (streams that filter collections) ----------------------------------

    def batch(
        self, items: Sequence[Item], opaque: int, sid: int | None
    ) -> tuple[bytearray, Sequence[int]]:
        """Frames of ``items`` joined, and the end offset of each frame (the codec, item
        by item: only for streams the shared frames cannot serve)."""
        frames = [encode_item(it, self.form, opaque, sid) for it in items]
        return bytearray().join(frames), list(accumulate(map(len, frames)))
