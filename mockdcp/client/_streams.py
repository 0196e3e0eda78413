"""What one stream of the reference consumer asks for, and what it has seen of the manifest.

``StreamFilter`` is the JSON value of a DCP_STREAM_REQ (kv_engine
``docs/dcp/documentation/commands/stream-request-value.md``): a set of collection ids or
one scope id, and the stream-id (``sid``) that lets a connection with ``enable_stream_id``
hold several streams of one vbucket. ``ManifestView`` is the manifest as one stream's
system events describe it (kv_engine ``docs/dcp/documentation/commands/system_event.md``):
a filtered stream sees only its collections' events, so each stream keeps its own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import SystemEvent, SystemEventType

if TYPE_CHECKING:
    from collections.abc import Iterable

#: ``(vbucket, stream id)``: how the consumer names a stream (``None``: no stream-id)
StreamKey = tuple[int, int | None]


def _ids(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


def _check_sid(_: object, __: attrs.Attribute[int | None], sid: int | None) -> None:
    if sid is not None and not 0 < sid <= 0xFFFF:
        raise ValueError(f"a stream-id is 1..65535, not {sid}")


@attrs.frozen(kw_only=True)
class StreamFilter:
    """One stream per vbucket: its collections (ids) or its scope (id), and its stream-id.

    Empty (no collections, no scope) is a pass-through stream: every collection. A
    ``sid`` needs ``enable_stream_id`` on the connection, which the consumer sends when
    any of its filters has one; then every one of them must have one (kv_engine refuses
    a stream request without ``sid`` on such a connection with DCP_STREAMID_INVALID).

    Raises ``ValueError`` for a filter with both collections and a scope, or a sid outside
    1..65535.
    """

    collections: tuple[int, ...] = attrs.field(default=(), converter=_ids)
    scope: int | None = None
    sid: int | None = attrs.field(default=None, validator=_check_sid)

    def __attrs_post_init__(self) -> None:
        if self.collections and self.scope is not None:
            raise ValueError("a stream filters on collections or on a scope, not both")

    @property
    def passes_through(self) -> bool:
        """True when the stream gets every collection (no filter)."""
        return not self.collections and self.scope is None

    def includes_default(self) -> bool:
        """True when the ``_default`` collection (id 0) is in the filter."""
        return self.passes_through or 0 in self.collections or self.scope == 0

    def value(self) -> bytes:
        """The stream request's JSON value; ids in base 16 without ``0x``, ``sid`` a JSON
        integer (stream-request-value.md). Empty for a pass-through stream without sid."""
        doc: dict[str, object] = {}
        if self.sid is not None:
            doc["sid"] = self.sid
        if self.collections:
            doc["collections"] = [format(cid, "x") for cid in self.collections]
        if self.scope is not None:
            doc["scope"] = format(self.scope, "x")
        return json.dumps(doc, separators=(",", ":")).encode() if doc else b""

    def collections_in(self, view: ManifestView | None) -> set[int]:
        """The collections this filter selects as ``view`` (its stream's manifest, if
        one was kept) knows them: its collections, or every collection of its scope the
        view has seen."""
        selected = set(self.collections)
        if self.scope is not None and view is not None:
            scope = self.scope
            selected |= {c for c, info in view.collections.items() if info.scope_id == scope}
        return selected


@attrs.frozen
class CollectionInfo:
    """A collection as a stream knows it from its begin (or modify) event."""

    scope_id: int
    name: str
    max_ttl: int | None = None


@attrs.define
class ManifestView:
    """The manifest as one stream's system events tell it: scopes, collections, uid.

    A pass-through stream starts with the ``_default`` scope and collection (they exist
    without an event); a filtered one starts with ``_default`` only if its filter names
    it. ``history`` keeps each event with its seqno, so a rollback can replay the part
    the consumer keeps.
    """

    uid: int = 0
    scopes: dict[int, str] = attrs.field(factory=dict)
    collections: dict[int, CollectionInfo] = attrs.field(factory=dict)
    history: list[SystemEvent] = attrs.field(factory=list)
    #: what the view held before any event (for a replay)
    initial: tuple[dict[int, str], dict[int, CollectionInfo]] = attrs.field(
        factory=lambda: ({}, {})
    )

    @classmethod
    def for_filter(cls, spec: StreamFilter) -> ManifestView:
        """The view of a stream before its first event."""
        scopes = {0: "_default"} if spec.passes_through or spec.scope == 0 else {}
        collections = {0: CollectionInfo(0, "_default")} if spec.includes_default() else {}
        return cls(
            scopes=dict(scopes), collections=dict(collections), initial=(scopes, collections)
        )

    def apply(self, event: SystemEvent) -> int | None:
        """Take in one event; returns the collection id it ends or restarts (a drop, or a
        begin: create or flush), whose documents of this vbucket before it are gone.

        Raises ``RemoteProtocolError`` when the event's value does not parse.
        """
        self.history.append(event)
        return self._apply(event)

    def _apply(self, event: SystemEvent) -> int | None:
        data = event.data()
        self.uid = max(self.uid, data.manifest_uid)
        kind = event.event
        name = event.key.decode(errors="replace")
        cid: int | None = getattr(data, "collection_id", None)
        if kind == SystemEventType.CREATE_SCOPE:
            self.scopes[data.scope_id] = name
        elif kind == SystemEventType.DROP_SCOPE:
            self.scopes.pop(data.scope_id, None)
            for gone in [
                c for c, info in self.collections.items() if info.scope_id == data.scope_id
            ]:
                del self.collections[gone]
        elif cid is not None and kind == SystemEventType.END_COLLECTION:
            self.collections.pop(cid, None)
            return cid
        elif cid is not None and kind == SystemEventType.MODIFY_COLLECTION:
            old = self.collections.get(cid)
            ttl = getattr(data, "max_ttl", None)
            self.collections[cid] = CollectionInfo(data.scope_id, old.name if old else name, ttl)
        elif cid is not None and kind == SystemEventType.BEGIN_COLLECTION:
            ttl = getattr(data, "max_ttl", None)
            self.collections[cid] = CollectionInfo(data.scope_id, name, ttl)
            return cid
        return None

    def roll_back(self, seqno: int) -> None:
        """Forget the events above ``seqno`` (the stream resumes from there)."""
        kept = [e for e in self.history if e.by_seqno <= seqno]
        self.uid = 0
        self.scopes, self.collections = dict(self.initial[0]), dict(self.initial[1])
        self.history = kept
        for event in kept:
            self._apply(event)
