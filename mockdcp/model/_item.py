"""A document version as a vbucket holds it, and the key-to-vbucket hash.

``Item`` is slotted and shared: the hash table, the checkpoints and the on-disk view
point at the same object (design.md "Keep the model compact"). Following the performance
rule "encode an item's DCP body once, when it is written", an item keeps its frame in the
canonical form every collection-aware consumer gets (``wire``: DCP_MUTATION, or a V1
DCP_DELETION for tombstones, opaque 0, LEB128 collection prefix); the producer patches
the opaque per stream. The value is not stored twice: ``value`` reads it from ``wire``.

``tag`` sums up, in one byte, what a producer must know to send the frame in another form
without touching the item (the checkpoints and the on-disk view keep the tags beside
the frames): the datatype bits, tombstone, expiration, empty value, and a collection
other than the default. ``forms`` caches the frames of other value forms (xattrs
stripped, decompressed, compressed, V2 deletions...), computed once per item and form
and shared by every stream that needs them.
"""

from __future__ import annotations

import enum
import zlib

from mockdcp.protocol._document_frame import encode_document_frame

#: ``Item.tag`` bits above the datatype bits (0x07: JSON, SNAPPY, XATTR)
TAG_DATATYPE = 0x07
TAG_TOMBSTONE = 0x08
TAG_EXPIRATION = 0x10
TAG_EMPTY = 0x20
TAG_COLLECTION = 0x40


def item_tag(datatype: int, deleted: bool, expiration: bool, empty: bool, cid: int) -> int:
    """The ``tag`` byte of an item with these properties."""
    return (
        (datatype & TAG_DATATYPE)
        | (TAG_TOMBSTONE if deleted else 0)
        | (TAG_EXPIRATION if expiration else 0)
        | (TAG_EMPTY if empty else 0)
        | (TAG_COLLECTION if cid else 0)
    )


class ItemKind(enum.Enum):
    MUTATION = "mutation"
    DELETION = "deletion"
    EXPIRATION = "expiration"


class Item:
    """One version of one document (or its tombstone) at one seqno."""

    __slots__ = (
        "cas",
        "collection_id",
        "datatype",
        "delete_time",
        "expiry",
        "flags",
        "forms",
        "key",
        "kind",
        "rev_seqno",
        "seqno",
        "tag",
        "vbucket",
        "wire",
    )

    def __init__(
        self,
        *,
        key: bytes,
        collection_id: int,
        vbucket: int,
        seqno: int,
        rev_seqno: int,
        cas: int,
        flags: int = 0,
        expiry: int = 0,
        datatype: int = 0,
        value: bytes = b"",
        kind: ItemKind = ItemKind.MUTATION,
        delete_time: int = 0,
    ) -> None:
        self.key = key
        self.collection_id = collection_id
        self.vbucket = vbucket
        self.seqno = seqno
        self.rev_seqno = rev_seqno
        self.cas = cas
        self.flags = flags
        self.expiry = expiry
        self.datatype = datatype
        self.kind = kind
        self.delete_time = delete_time
        self.forms: dict[object, bytes] | None = None
        self.tag = item_tag(
            datatype,
            kind is not ItemKind.MUTATION,
            kind is ItemKind.EXPIRATION,
            not value,
            collection_id,
        )
        self.wire = encode_document_frame(
            vbucket=vbucket,
            cas=cas,
            by_seqno=seqno,
            rev_seqno=rev_seqno,
            key=key,
            collection_id=collection_id,
            value=value,
            datatype=datatype,
            flags=flags,
            expiration=expiry,
            deleted=kind is not ItemKind.MUTATION,
        )

    @property
    def value(self) -> bytes:
        """The stored value (a copy out of ``wire``: header, extras and key skipped)."""
        w = self.wire
        return w[24 + w[4] + ((w[2] << 8) | w[3]) :]

    @property
    def deleted(self) -> bool:
        return self.kind is not ItemKind.MUTATION

    @property
    def doc_key(self) -> tuple[int, bytes]:
        return (self.collection_id, self.key)

    def __repr__(self) -> str:
        return (
            f"Item({self.kind.value} {self.collection_id}:{self.key!r} vb={self.vbucket} "
            f"seqno={self.seqno} rev={self.rev_seqno})"
        )


def vbucket_of(key: bytes, num_vbuckets: int) -> int:
    """The vbucket Couchbase clients hash ``key`` to.

    CRC32 of the key, bits 16..30, modulo the vbucket count (libcouchbase
    ``vbucket_map``, gocbcore ``cbCrc``).
    """
    return ((zlib.crc32(key) >> 16) & 0x7FFF) % num_vbuckets


def new_mutation(
    key: bytes,
    collection_id: int,
    vbucket: int,
    seqno: int,
    rev_seqno: int,
    cas: int,
    flags: int,
    expiry: int,
    datatype: int,
    wire: bytes,
    tag: int,
) -> Item:
    """A mutation ``Item`` whose frame and tag the caller (a bulk writer) has built as
    ``Item.__init__`` would: the same object, without the keyword-argument overhead."""
    item = Item.__new__(Item)
    item.key = key
    item.collection_id = collection_id
    item.vbucket = vbucket
    item.seqno = seqno
    item.rev_seqno = rev_seqno
    item.cas = cas
    item.flags = flags
    item.expiry = expiry
    item.datatype = datatype
    item.kind = ItemKind.MUTATION
    item.delete_time = 0
    item.forms = None
    item.tag = tag
    item.wire = wire
    return item
