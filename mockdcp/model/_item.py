"""A document version as a vbucket holds it, and the key-to-vbucket hash.

``Item`` is slotted and shared: the hash table, the checkpoints and the on-disk view
point at the same object (design.md "Keep the model compact"). Following the performance
rule "encode an item's DCP body once, when it is written", an item keeps its frame in the
canonical form every collection-aware consumer gets (``wire``: DCP_MUTATION, or a V1
DCP_DELETION for tombstones, opaque 0, LEB128 collection prefix); the producer patches
the opaque per stream. The value is not stored twice: ``value`` reads it from ``wire``.
"""

from __future__ import annotations

import enum
import zlib

from mockdcp.protocol._document_frame import encode_document_frame


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
        "key",
        "kind",
        "rev_seqno",
        "seqno",
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
