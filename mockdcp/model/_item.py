"""A document version as a vbucket holds it, and the key-to-vbucket hash.

``Item`` is slotted and shared: the hash table, the checkpoints and the on-disk view
point at the same object. Following the performance
rule "encode an item's DCP body once, when it is written", an item keeps its frame in the
canonical form every collection-aware consumer gets (``wire``: DCP_MUTATION, or a V1
DCP_DELETION for tombstones, opaque 0, LEB128 collection prefix), in two pieces: ``head``
(header and extras; for a collection other than the default, its prefix too) and
``tail`` (key and value). A collection-aware stream joins head, prefix (``b"\x00"`` for
the default collection) and tail; a legacy stream joins head and tail and patches two
lengths, so neither has to cut bytes out of a frame. The value is not stored twice:
``value`` reads it from ``tail``.

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

from mockdcp.protocol._document_frame import collection_prefix, document_head

#: the collection prefix of a key in the default collection (LEB128 0; kv_engine
#: docs/dcp/documentation/commands/mutation.md, "Collections Enabled")
DEFAULT_PREFIX = b"\x00"

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
        "head",
        "key",
        "kind",
        "rev_seqno",
        "seqno",
        "tag",
        "tail",
        "vbucket",
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
        self.forms: dict[object, tuple[bytes, bytes]] | None = None
        self.tag = item_tag(
            datatype,
            kind is not ItemKind.MUTATION,
            kind is ItemKind.EXPIRATION,
            not value,
            collection_id,
        )
        prefix = collection_prefix(collection_id)
        head = document_head(
            vbucket=vbucket,
            cas=cas,
            by_seqno=seqno,
            rev_seqno=rev_seqno,
            key_length=len(prefix) + len(key),
            value_length=len(value),
            datatype=datatype,
            flags=flags,
            expiration=expiry,
            deleted=kind is not ItemKind.MUTATION,
        )
        self.head = head if not collection_id else head + prefix
        self.tail = key + value

    @property
    def value(self) -> bytes:
        """The stored value (a copy out of ``tail``)."""
        return self.tail[len(self.key) :]

    @property
    def wire(self) -> bytes:
        """The canonical frame: ``head``, the default collection's prefix unless the
        head ends with another collection's, ``tail``."""
        if self.collection_id:
            return self.head + self.tail
        return self.head + DEFAULT_PREFIX + self.tail

    @property
    def size(self) -> int:
        """``len(self.wire)``, without building it."""
        return len(self.head) + len(self.tail) + (0 if self.collection_id else 1)

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
