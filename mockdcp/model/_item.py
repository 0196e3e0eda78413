"""A document version as a vbucket holds it, and the key-to-vbucket hash.

``Item`` is slotted and shared: the hash table, the checkpoints and the on-disk view
point at the same object (design.md "Keep the model compact"). Its one mutable slot,
``wire``, is the producer's cache of the item's encoded frame (encoded once, reused for
every stream).
"""

from __future__ import annotations

import enum
import zlib


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
        "value",
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
        self.value = value
        self.kind = kind
        self.delete_time = delete_time
        self.wire: bytes | None = None

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
