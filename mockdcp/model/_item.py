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
from typing import TYPE_CHECKING

from mockdcp.protocol import (
    SystemEventType,
    collection_prefix,
    document_head,
    encode_leb128,
    encode_seqno_advanced_frame,
    encode_system_event_frame,
)

if TYPE_CHECKING:
    from mockdcp.model._manifest import ManifestEvent

#: the collection prefix of a key in the default collection (LEB128 0; kv_engine
#: docs/dcp/documentation/commands/mutation.md, "Collections Enabled")
DEFAULT_PREFIX = b"\x00"

#: ``Item.tag`` bits above the datatype bits (0x07: JSON, SNAPPY, XATTR)
TAG_DATATYPE = 0x07
TAG_TOMBSTONE = 0x08
TAG_EXPIRATION = 0x10
TAG_EMPTY = 0x20
TAG_COLLECTION = 0x40
#: a system event, or a message a stream adds (SEQNO_ADVANCED): never a document
TAG_SYSTEM = 0x80


#: the tag of a prepare or an abort (``DurableItem``): a combination no other item has
#: (system, outside the default collection, expiration), so a run's tags say in one C
#: loop whether it holds any (``any_durable``) and legacy streams never take it as a
#: default-collection document
TAG_DURABLE = TAG_SYSTEM | TAG_COLLECTION | TAG_EXPIRATION

#: every tag byte but ``TAG_DURABLE`` (``bytes.translate`` deletes them)
_NOT_DURABLE = bytes(t for t in range(256) if t != TAG_DURABLE)


def any_durable(tags: bytes) -> bool:
    """True if one of ``tags`` is a prepare's or an abort's (one C loop)."""
    return bool(tags.translate(None, _NOT_DURABLE))


#: every tag byte without TAG_SYSTEM (``bytes.translate`` deletes them)
_NOT_SYSTEM = bytes(t for t in range(256) if not t & TAG_SYSTEM)


def any_system(tags: bytes) -> bool:
    """True if one of ``tags`` is a system event's (or a prepare's or an abort's): one C
    loop."""
    return bool(tags.translate(None, _NOT_SYSTEM))


#: every tag byte without TAG_COLLECTION (``bytes.translate`` deletes them)
_DEFAULT_TAGS = bytes(range(TAG_COLLECTION))


def any_outside_default(tags: bytes) -> bool:
    """True if one of ``tags`` says its item is outside the default collection (or a
    system event): ``bytes.translate`` deletes the others in one C loop, no Python per
    byte."""
    return bool(tags.translate(None, _DEFAULT_TAGS))


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
    #: a collections manifest change (``SystemEventItem``)
    SYSTEM_EVENT = "system_event"
    #: a durable write's prepare, and the abort that discards one (``DurableItem``)
    PREPARE = "prepare"
    ABORT = "abort"


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
    def system(self) -> bool:
        """A system event (a manifest change), not a document."""
        return False

    @property
    def doc_key(self) -> tuple[int, bytes]:
        return (self.collection_id, self.key)

    def __repr__(self) -> str:
        return (
            f"Item({self.kind.value} {self.collection_id}:{self.key!r} vb={self.vbucket} "
            f"seqno={self.seqno} rev={self.rev_seqno})"
        )


#: The collection id of KV's system-event namespace (``include/memcached/dockey_view.h``):
#: system events are keyed there, apart from every user collection.
SYSTEM_COLLECTION_ID = 1

#: The first byte of a system event's key: which kind of thing it is about. Create and
#: drop of one collection share a key (a drop de-duplicates its creation in an open
#: checkpoint, as in kv_engine, whose drop event is the creation's key marked deleted);
#: a modification has a key of its own.
_KEY_COLLECTION, _KEY_SCOPE, _KEY_MODIFY = b"\x00", b"\x01", b"\x02"
_DROPS = frozenset({SystemEventType.END_COLLECTION, SystemEventType.DROP_SCOPE})
_SCOPE_EVENTS = frozenset({SystemEventType.CREATE_SCOPE, SystemEventType.DROP_SCOPE})


def system_event_key(event: SystemEventType, scope_id: int, collection_id: int | None) -> bytes:
    """The key (in ``SYSTEM_COLLECTION_ID``) of a system event about a scope or collection."""
    if event in _SCOPE_EVENTS:
        return _KEY_SCOPE + encode_leb128(scope_id)
    assert collection_id is not None
    kind = _KEY_MODIFY if event is SystemEventType.MODIFY_COLLECTION else _KEY_COLLECTION
    return kind + encode_leb128(collection_id)


class SystemEventItem(Item):
    """A manifest change as a vbucket holds it: an item at its own seqno, stored,
    checkpointed, de-duplicated, persisted, purged (drops only, as tombstones) and cut by
    failover like any other, keyed in the system namespace (collection 1).

    ``wire`` (here all of it in ``head``, ``tail`` empty) is the frame a
    collection-aware consumer without FlatBuffers gets (DCP_SYSTEM_EVENT, kv_engine
    ``docs/dcp/documentation/commands/system_event.md``): begin collection as
    version 1 when the collection has a max TTL and version 0 otherwise (kv_engine
    ``SystemEventProducerMessage::make``), end collection, create and drop scope as
    version 0. Such a consumer is never sent a MODIFY_COLLECTION event (only FlatBuffers
    consumers are): a modification's ``wire`` is a DCP_SEQNO_ADVANCED to its seqno, the
    message a collection-aware consumer gets for a seqno it is not shown. ``frame()``
    gives the other forms; legacy consumers get no system event at all.
    """

    __slots__ = (
        "event",
        "event_collection_id",
        "flush_uid",
        "history",
        "manifest_uid",
        "max_ttl",
        "name",
        "scope_id",
    )

    def __init__(
        self,
        *,
        vbucket: int,
        seqno: int,
        cas: int,
        event: SystemEventType,
        manifest_uid: int,
        scope_id: int,
        collection_id: int | None = None,
        name: str = "",
        max_ttl: int | None = None,
        flush_uid: int = 0,
        history: bool = False,
    ) -> None:
        self.key = system_event_key(event, scope_id, collection_id)
        self.collection_id = SYSTEM_COLLECTION_ID
        self.vbucket = vbucket
        self.seqno = seqno
        self.rev_seqno = 1
        self.cas = cas
        self.flags = self.expiry = self.datatype = self.delete_time = 0
        self.kind = ItemKind.SYSTEM_EVENT
        self.event = event
        self.manifest_uid = manifest_uid
        self.scope_id = scope_id
        #: the collection the event is about (None for scope events)
        self.event_collection_id = collection_id
        self.name = name
        self.max_ttl = max_ttl
        #: the manifest uid of the collection's last flush (0: never flushed)
        self.flush_uid = flush_uid
        #: the collection keeps every revision (begin and modify events)
        self.history = history
        if event is SystemEventType.MODIFY_COLLECTION:
            wire = encode_seqno_advanced_frame(vbucket=vbucket, by_seqno=seqno)
        else:
            frame = self.frame(flatbuffers=False)
            assert frame is not None
            wire = frame
        # the whole frame is the head (its key has no collection prefix); the tag marks
        # it a system event outside the default collection (legacy streams never get
        # it), without datatype, tombstone or value bits: only a FlatBuffers connection
        # needs a variant of it (``ItemEncoder``)
        self.head, self.tail, self.forms = wire, b"", None
        self.tag = TAG_COLLECTION | TAG_EMPTY | TAG_SYSTEM

    def as_manifest_event(self) -> ManifestEvent:
        """The manifest change this event records."""
        from mockdcp.model._manifest import ManifestEvent

        return ManifestEvent(
            event=self.event,
            manifest_uid=self.manifest_uid,
            scope_id=self.scope_id,
            collection_id=self.event_collection_id,
            name=self.name,
            max_ttl=self.max_ttl,
            flush_uid=self.flush_uid,
            history=self.history,
        )

    @property
    def deleted(self) -> bool:
        """Drops are tombstones (kv_engine marks the drop event deleted)."""
        return self.event in _DROPS

    @property
    def system(self) -> bool:
        return True

    @property
    def value(self) -> bytes:
        """The event's value in the canonical (version 0/1) form."""
        from mockdcp.protocol import CollectionEventData, ScopeEventData

        if self.event in _SCOPE_EVENTS:
            return ScopeEventData(manifest_uid=self.manifest_uid, scope_id=self.scope_id).encode()
        assert self.event_collection_id is not None
        ttl = self.max_ttl if self.event is not SystemEventType.END_COLLECTION else None
        return CollectionEventData(
            manifest_uid=self.manifest_uid,
            scope_id=self.scope_id,
            collection_id=self.event_collection_id,
            max_ttl=ttl,
        ).encode()

    def flatbuffers_value(self) -> bytes:
        """The event's value as a FlatBuffers table (version 2)."""
        from mockdcp.protocol import (
            CollectionEventV2,
            DroppedCollectionV2,
            DroppedScopeV2,
            ScopeEventV2,
            encode_flatbuffers_value,
        )

        uid, sid, cid = self.manifest_uid, self.scope_id, self.event_collection_id
        if self.event is SystemEventType.CREATE_SCOPE:
            return encode_flatbuffers_value(
                ScopeEventV2(manifest_uid=uid, scope_id=sid, name=self.name)
            )
        if self.event is SystemEventType.DROP_SCOPE:
            return encode_flatbuffers_value(DroppedScopeV2(manifest_uid=uid, scope_id=sid))
        assert cid is not None
        if self.event is SystemEventType.END_COLLECTION:
            return encode_flatbuffers_value(
                DroppedCollectionV2(manifest_uid=uid, scope_id=sid, collection_id=cid)
            )
        data = CollectionEventV2(
            manifest_uid=uid,
            scope_id=sid,
            collection_id=cid,
            name=self.name,
            max_ttl=self.max_ttl,
            flush_uid=self.flush_uid,
            history=self.history,
        )
        return encode_flatbuffers_value(data)

    def event_fields(self, *, flatbuffers: bool) -> tuple[int, bytes, bytes] | None:
        """The version, key and value of the DCP_SYSTEM_EVENT a collection-aware consumer
        gets, with FlatBuffers values (version 2) or without (versions 0/1); ``None``
        when such a consumer is not sent this event (a modification without
        FlatBuffers). The key is the name on creations and modifications, empty on drops.
        """
        ev = self.event
        if ev is SystemEventType.MODIFY_COLLECTION and not flatbuffers:
            return None
        if flatbuffers:
            version, value = 2, self.flatbuffers_value()
        else:
            value = self.value
            version = (
                1 if ev is SystemEventType.BEGIN_COLLECTION and self.max_ttl is not None else 0
            )
        return version, b"" if ev in _DROPS else self.name.encode(), value

    def frame(self, *, flatbuffers: bool) -> bytes | None:
        """The DCP_SYSTEM_EVENT frame (opaque 0, no stream-id) of ``event_fields``."""
        fields = self.event_fields(flatbuffers=flatbuffers)
        if fields is None:
            return None
        version, key, value = fields
        return encode_system_event_frame(
            vbucket=self.vbucket,
            cas=0,  # as system_event.md's example: a system event carries no CAS
            by_seqno=self.seqno,
            event=int(self.event),
            version=version,
            key=key,
            value=value,
        )

    def __repr__(self) -> str:
        target = "" if self.event_collection_id is None else f" cid={self.event_collection_id}"
        return (
            f"SystemEventItem({self.event.name} {self.name!r} sid={self.scope_id}{target} "
            f"uid={self.manifest_uid} vb={self.vbucket} seqno={self.seqno})"
        )


#: durability levels by name (kv_engine ``include/memcached/durability_spec.h``; the
#: byte DCP_PREPARE and the durability frame info carry)
DURABILITY_LEVELS = {"majority": 1, "majority_and_persist_on_master": 2, "persist_to_majority": 3}


class DurableItem(Item):
    """A durable write's prepare (``ItemKind.PREPARE``) or the abort that discarded one
    (``ItemKind.ABORT``), at its own seqno (kv_engine ``queue_op::pending_sync_write``
    and ``abort_sync_write``; docs/dcp/documentation/commands/prepare.md, abort.md).

    Prepares and aborts live in a key namespace of their own (``doc_key``: kv_engine's
    prepared key index and the on-disk prepare namespace), apart from the committed
    document of the same key: never in the hash table (the oracle), never de-duplicating
    a committed version nor de-duplicated by one. ``head`` is the DCP_PREPARE or
    DCP_ABORT frame a collection-aware consumer gets (``frame`` gives both forms);
    ``tail`` is empty; the tag is ``TAG_DURABLE``, so a consumer without sync writes
    never gets one on the shared-frame path.
    """

    __slots__ = ("body", "level", "prepared_deleted", "prepared_seqno")

    def __init__(
        self,
        *,
        kind: ItemKind,
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
        level: int = 1,
        deleted: bool = False,
        prepared_seqno: int = 0,
    ) -> None:
        assert kind in (ItemKind.PREPARE, ItemKind.ABORT)
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
        self.delete_time = 0
        self.forms = None
        self.body = value
        #: the durability level (1..3) of the prepare
        self.level = level
        #: the prepare is of a deletion
        self.prepared_deleted = deleted
        #: an abort's prepare (the seqno it discarded); a prepare's own seqno
        self.prepared_seqno = prepared_seqno if kind is ItemKind.ABORT else seqno
        self.head = self.frame(collections=True)
        self.tail = b""
        self.tag = TAG_DURABLE

    def frame(self, *, collections: bool, value: bytes | None = None, datatype: int = -1) -> bytes:
        """The DCP_PREPARE or DCP_ABORT frame (opaque 0): the key with its collection
        prefix when ``collections``; a prepare's value (and datatype) as given, else
        the stored one."""
        from mockdcp.protocol import Abort, Prepare

        cid = self.collection_id if collections else None
        if self.kind is ItemKind.ABORT:
            return Abort(
                opaque=0,
                vbucket=self.vbucket,
                prepared_seqno=self.prepared_seqno,
                abort_seqno=self.seqno,
                key=self.key,
                collection_id=cid,
            ).encode()
        return Prepare(
            opaque=0,
            vbucket=self.vbucket,
            cas=self.cas,
            by_seqno=self.seqno,
            rev_seqno=self.rev_seqno,
            flags=self.flags,
            expiration=self.expiry,
            deleted=self.prepared_deleted,
            durability_level=self.level,
            key=self.key,
            collection_id=cid,
            value=self.body if value is None else value,
            datatype=self.datatype if datatype < 0 else datatype,
        ).encode()

    @property
    def value(self) -> bytes:
        return self.body

    @property
    def size(self) -> int:
        return len(self.head)

    @property
    def deleted(self) -> bool:
        """An abort is a tombstone of the prepare namespace (purged like one); a
        prepare is not."""
        return self.kind is ItemKind.ABORT

    @property
    def system(self) -> bool:
        return False

    @property
    def doc_key(self) -> tuple[int, bytes]:
        """The prepare namespace: ``(-1 - collection, key)``."""
        return (-1 - self.collection_id, self.key)

    def __repr__(self) -> str:
        return (
            f"DurableItem({self.kind.value} {self.collection_id}:{self.key!r} "
            f"vb={self.vbucket} seqno={self.seqno} prepared={self.prepared_seqno})"
        )


class CommittedItem(Item):
    """A durable write's commit: the document the prepare at ``prepared_seqno`` held,
    visible at the commit's own seqno (kv_engine ``queue_op::commit_sync_write``; a
    consumer without sync writes gets it as a DCP_MUTATION or DCP_DELETION, one with them
    a DCP_COMMIT from memory: docs/dcp/documentation/commands/commit.md)."""

    __slots__ = ("prepared_seqno",)

    def __init__(self, *, prepared_seqno: int, **fields: object) -> None:
        super().__init__(**fields)  # type: ignore[arg-type]
        self.prepared_seqno = prepared_seqno

    def commit_frame(self, *, collections: bool) -> bytes:
        """The DCP_COMMIT frame (opaque 0)."""
        from mockdcp.protocol import Commit

        return Commit(
            opaque=0,
            vbucket=self.vbucket,
            prepared_seqno=self.prepared_seqno,
            commit_seqno=self.seqno,
            key=self.key,
            collection_id=self.collection_id if collections else None,
        ).encode()


def vbucket_of(key: bytes, num_vbuckets: int) -> int:
    """The vbucket Couchbase clients hash ``key`` to.

    CRC32 of the key, bits 16..30, modulo the vbucket count (libcouchbase
    ``vbucket_map``, gocbcore ``cbCrc``).
    """
    return ((zlib.crc32(key) >> 16) & 0x7FFF) % num_vbuckets
