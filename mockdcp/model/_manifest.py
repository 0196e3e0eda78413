"""The bucket's collections manifest: scopes, collections, ids and the manifest uid.

Sources: kv_engine ``docs/Collections.md`` and ``engines/ep/docs/collections.md``;
kv_engine ``docs/dcp/documentation/commands/system_event.md`` (events and manifest-uid
stamping); the manifest JSON that GET_COLLECTIONS_MANIFEST and the collections REST
endpoint return.

Rules kept here:

* ``_default`` scope and ``_default`` collection have id 0 and exist from the start; the
  default collection can be dropped (and never re-created), the default scope cannot.
* New scope ids and new collection ids are allocated from 8 up (0..7 are reserved by KV:
  1 is the system-event namespace), each by its own counter, never reused after a drop.
* Every change advances the manifest uid by one. A change produces the system events
  every vbucket writes, in order; only the last carries the new uid, the others carry the
  uid of the last manifest completely processed (the previous one), as that page's
  "Manifest ID" section says.
* Every change is validated first: a bad one raises ``ModelError`` and changes nothing.

``Manifest`` is a mutable value owned by the bucket; ``plan_*`` methods return the
change without applying it, ``apply`` makes it current.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from mockdcp.protocol import SystemEventType
from mockdcp.util import ModelError

DEFAULT_NAME = "_default"
DEFAULT_ID = 0
#: ids 0..7 are reserved by KV (``include/memcached/dockey_view.h``); users get 8 up
FIRST_USER_ID = 8
#: the largest max TTL a collection may have (seconds, a signed 32-bit value)
MAX_TTL_LIMIT = 0x7FFFFFFF
#: ns_server's limits on a bucket's scopes and collections
MAX_SCOPES = 1000
MAX_COLLECTIONS = 1000

#: a scope or collection name: 1..251 of ``A-Za-z0-9_-%``, not starting with ``_`` or
#: ``%`` (names starting with ``_`` are the system's; ``_default`` is the only one here)
_NAME = re.compile(r"[A-Za-z0-9-][A-Za-z0-9_%-]{0,250}")


@attrs.frozen
class Scope:
    sid: int
    name: str


@attrs.frozen
class Collection:
    cid: int
    name: str
    scope_id: int
    #: seconds; ``None`` when the collection has no max TTL of its own
    max_ttl: int | None = None
    #: the manifest uid of its last flush (0: never flushed)
    flush_uid: int = 0
    #: every revision is kept (7.2+ change history, Magma only): the checkpoints never
    #: de-duplicate its keys (kv_engine ``collections/manifest.cc``, ``CanDeduplicate``)
    history: bool = False


@attrs.frozen(kw_only=True)
class ManifestEvent:
    """One system event a manifest change writes into every vbucket.

    ``collection_id`` is ``None`` for scope events; ``name`` is the collection or scope
    name (on the wire only for creations and modifications); ``max_ttl`` and
    ``flush_uid`` are the collection's (begin and modify events). A begin event of a
    collection that exists already is a flush: its documents written before are gone.
    """

    event: SystemEventType
    manifest_uid: int = 0
    scope_id: int
    collection_id: int | None = None
    name: str = ""
    max_ttl: int | None = None
    flush_uid: int = 0
    history: bool = False


def _begin(c: Collection) -> ManifestEvent:
    return ManifestEvent(
        event=SystemEventType.BEGIN_COLLECTION,
        scope_id=c.scope_id,
        collection_id=c.cid,
        name=c.name,
        max_ttl=c.max_ttl,
        flush_uid=c.flush_uid,
        history=c.history,
    )


def _modify(c: Collection) -> ManifestEvent:
    return attrs.evolve(_begin(c), event=SystemEventType.MODIFY_COLLECTION)


def _end(c: Collection) -> ManifestEvent:
    return ManifestEvent(
        event=SystemEventType.END_COLLECTION, scope_id=c.scope_id, collection_id=c.cid, name=c.name
    )


def _scope_event(kind: SystemEventType, sc: Scope) -> ManifestEvent:
    return ManifestEvent(event=kind, scope_id=sc.sid, name=sc.name)


def _stamp(events: Sequence[ManifestEvent], old: int, new: int) -> tuple[ManifestEvent, ...]:
    """Every event carries ``old`` (the last manifest completely processed) but the last,
    which carries ``new`` (kv_engine
    ``system_event.md``, "Manifest ID")."""
    last = len(events) - 1
    return tuple(
        attrs.evolve(ev, manifest_uid=new if i == last else old) for i, ev in enumerate(events)
    )


@attrs.frozen
class ManifestChange:
    """A validated change: the manifest after it, and the events it writes."""

    uid: int
    scopes: tuple[Scope, ...]
    collections: tuple[Collection, ...]
    events: tuple[ManifestEvent, ...]
    next_scope_id: int
    next_collection_id: int


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ModelError(
            f"{what} name {name!r} is invalid: 1..251 characters of A-Z a-z 0-9 _ - %, "
            "not starting with _ or %"
        )
    return name


class Keep(enum.Enum):
    """The type of ``KEEP``."""

    KEEP = "keep"


#: a collection setting a modification leaves as it is
KEEP = Keep.KEEP


def _check_history(history: object) -> bool:
    if not isinstance(history, bool):
        raise ModelError(f"a collection's history is true or false, not {history!r}")
    return history


def _check_ttl(max_ttl: object) -> int | None:
    if max_ttl is None:
        return None
    if isinstance(max_ttl, bool) or not isinstance(max_ttl, int):
        raise ModelError(f"maxTTL must be an integer, not {max_ttl!r}")
    if not 0 <= max_ttl <= MAX_TTL_LIMIT:
        raise ModelError(f"maxTTL must be in 0..{MAX_TTL_LIMIT}, not {max_ttl}")
    return max_ttl


class Manifest:
    """See the module docstring."""

    def __init__(self) -> None:
        self.uid = 0
        self.scopes: dict[int, Scope] = {DEFAULT_ID: Scope(DEFAULT_ID, DEFAULT_NAME)}
        self.collections: dict[int, Collection] = {
            DEFAULT_ID: Collection(DEFAULT_ID, DEFAULT_NAME, DEFAULT_ID)
        }
        self.next_scope_id = FIRST_USER_ID
        self.next_collection_id = FIRST_USER_ID
        #: the storage can keep history (Magma): ``history: true`` is allowed
        self.history_allowed = False
        #: a new collection's history when none is given (ns_server's
        #: ``historyRetentionCollectionDefault``, true on a Magma bucket)
        self.history_default = False

    # -- lookups ---------------------------------------------------------------------

    def scope_named(self, name: str) -> Scope | None:
        return next((s for s in self.scopes.values() if s.name == name), None)

    def collection_named(self, scope: str, name: str) -> Collection | None:
        """The collection ``name`` of scope ``scope``, or None."""
        sc = self.scope_named(scope)
        if sc is None:
            return None
        return next(
            (c for c in self.collections.values() if c.scope_id == sc.sid and c.name == name),
            None,
        )

    def resolve(self, path: str) -> int:
        """The id of ``scope.collection`` (a bare name is in ``_default``, as is an empty
        part); ``ModelError`` naming what is unknown."""
        scope, _, name = path.rpartition(".") if "." in path else (DEFAULT_NAME, "", path)
        if "." in scope:
            raise ModelError(f"collection path {path!r} has more than one '.'")
        scope, name = scope or DEFAULT_NAME, name or DEFAULT_NAME
        if self.scope_named(scope) is None:
            raise ModelError(f"unknown scope {scope!r} in {path!r}")
        coll = self.collection_named(scope, name)
        if coll is None:
            raise ModelError(f"unknown collection {name!r} in scope {scope!r}")
        return coll.cid

    def check_collection(self, cid: int) -> Collection:
        """The live collection ``cid``; ``ModelError`` if unknown or dropped."""
        coll = self.collections.get(cid)
        if coll is None:
            raise ModelError(f"unknown collection id {cid:#x} (manifest uid {self.uid:x})")
        return coll

    def name_of(self, cid: int) -> tuple[str, str]:
        """(scope, collection) of the live collection ``cid``; ``ModelError`` if none."""
        coll = self.check_collection(cid)
        return self.scopes[coll.scope_id].name, coll.name

    def paths(self) -> list[str]:
        """Every collection as ``scope.collection``."""
        return [f"{self.scopes[c.scope_id].name}.{c.name}" for c in self.collections.values()]

    def to_json(self) -> dict[str, Any]:
        """The manifest as GET_COLLECTIONS_MANIFEST returns it: ids and uid as lower-case
        hex strings; ``maxTTL`` only on collections that have one."""
        scopes = []
        for sc in self.scopes.values():
            cols: list[dict[str, Any]] = []
            for c in self.collections.values():
                if c.scope_id != sc.sid:
                    continue
                entry: dict[str, Any] = {"name": c.name, "uid": f"{c.cid:x}"}
                if c.max_ttl is not None:
                    entry["maxTTL"] = c.max_ttl
                if c.history:  # kv_engine Manifest::toJson writes it only when true
                    entry["history"] = True
                cols.append(entry)
            scopes.append({"name": sc.name, "uid": f"{sc.sid:x}", "collections": cols})
        return {"uid": f"{self.uid:x}", "scopes": scopes}

    # -- planning changes (validate, change nothing) -------------------------------------

    def _change(
        self,
        events: Sequence[ManifestEvent],
        scopes: Iterable[Scope],
        collections: Iterable[Collection],
        *,
        next_scope_id: int | None = None,
        next_collection_id: int | None = None,
    ) -> ManifestChange:
        uid = self.uid + 1
        return ManifestChange(
            uid,
            tuple(scopes),
            tuple(collections),
            _stamp(events, self.uid, uid),
            self.next_scope_id if next_scope_id is None else next_scope_id,
            self.next_collection_id if next_collection_id is None else next_collection_id,
        )

    def _scope(self, name: str) -> Scope:
        sc = self.scope_named(name)
        if sc is None:
            raise ModelError(f"no scope {name!r} (manifest uid {self.uid:x})")
        return sc

    def _collection(self, scope: str, name: str) -> Collection:
        self._scope(scope)
        coll = self.collection_named(scope, name)
        if coll is None:
            raise ModelError(f"no collection {name!r} in scope {scope!r}")
        return coll

    def _check_history(self, history: object) -> bool:
        """``history`` if it is a bool the storage allows; ``ModelError`` otherwise
        (ns_server refuses ``history: true`` on a couchstore bucket)."""
        value = _check_history(history)
        if value and not self.history_allowed:
            raise ModelError("history: true needs a magma bucket (couchstore keeps no history)")
        return value

    def plan_create_scope(self, name: str) -> ManifestChange:
        _check_name(name, "scope")
        if self.scope_named(name) is not None:
            raise ModelError(f"scope {name!r} already exists")
        if len(self.scopes) >= MAX_SCOPES:
            raise ModelError(f"a bucket has at most {MAX_SCOPES} scopes")
        sc = Scope(self.next_scope_id, name)
        return self._change(
            [_scope_event(SystemEventType.CREATE_SCOPE, sc)],
            [*self.scopes.values(), sc],
            self.collections.values(),
            next_scope_id=sc.sid + 1,
        )

    def plan_drop_scope(self, name: str) -> ManifestChange:
        """Its collections end first, then the scope (kv_engine drops them in that order)."""
        if name == DEFAULT_NAME:
            raise ModelError("the _default scope cannot be dropped")
        sc = self._scope(name)
        inside = [c for c in self.collections.values() if c.scope_id == sc.sid]
        return self._change(
            [*map(_end, inside), _scope_event(SystemEventType.DROP_SCOPE, sc)],
            [s for s in self.scopes.values() if s.sid != sc.sid],
            [c for c in self.collections.values() if c.scope_id != sc.sid],
        )

    def plan_create_collection(
        self, scope: str, name: str, *, max_ttl: int | None = None, history: bool | None = None
    ) -> ManifestChange:
        """A new collection; ``history`` None takes the bucket's default."""
        sc = self._scope(scope)
        if name == DEFAULT_NAME:
            raise ModelError("the _default collection cannot be created (only dropped)")
        _check_name(name, "collection")
        ttl = _check_ttl(max_ttl)
        if self.collection_named(scope, name) is not None:
            raise ModelError(f"collection {scope}.{name} already exists")
        if len(self.collections) >= MAX_COLLECTIONS:
            raise ModelError(f"a bucket has at most {MAX_COLLECTIONS} collections")
        coll = Collection(
            self.next_collection_id,
            name,
            sc.sid,
            ttl,
            history=self._check_history(self.history_default if history is None else history),
        )
        return self._change(
            [_begin(coll)],
            self.scopes.values(),
            [*self.collections.values(), coll],
            next_collection_id=coll.cid + 1,
        )

    def plan_drop_collection(self, scope: str, name: str) -> ManifestChange:
        coll = self._collection(scope, name)
        return self._change(
            [_end(coll)],
            self.scopes.values(),
            [c for c in self.collections.values() if c.cid != coll.cid],
        )

    def plan_modify_collection(
        self,
        scope: str,
        name: str,
        *,
        max_ttl: int | Keep | None = KEEP,
        history: bool | Keep = KEEP,
    ) -> ManifestChange:
        """A new max TTL (``None``: none of its own) and/or history setting; what is
        not given (``KEEP``) stays. ``ModelError`` if nothing would change."""
        coll = self._collection(scope, name)
        ttl = coll.max_ttl if isinstance(max_ttl, Keep) else _check_ttl(max_ttl)
        hist = coll.history if isinstance(history, Keep) else self._check_history(history)
        if ttl == coll.max_ttl and hist == coll.history:
            raise ModelError(
                f"collection {scope}.{name} already has maxTTL {ttl} and history {hist}"
            )
        new = attrs.evolve(coll, max_ttl=ttl, history=hist)
        return self._change(
            [_modify(new)],
            self.scopes.values(),
            [new if c.cid == coll.cid else c for c in self.collections.values()],
        )

    def plan_flush_collection(self, scope: str, name: str) -> ManifestChange:
        """Empty a collection: its begin event again, at a new seqno, whose ``flush_uid``
        is the new manifest uid (kv_engine ``system_event.md``, "Flush Collection")."""
        coll = self._collection(scope, name)
        new = attrs.evolve(coll, flush_uid=self.uid + 1)
        return self._change(
            [_begin(new)],
            self.scopes.values(),
            [new if c.cid == coll.cid else c for c in self.collections.values()],
        )

    def apply(self, change: ManifestChange) -> None:
        """Make a planned change current (it must have been planned on this manifest)."""
        if change.uid != self.uid + 1:
            raise ModelError(f"change to uid {change.uid} does not follow uid {self.uid}")
        self.uid = change.uid
        self.scopes = {s.sid: s for s in change.scopes}
        self.collections = {c.cid: c for c in change.collections}
        self.next_scope_id = change.next_scope_id
        self.next_collection_id = change.next_collection_id


# -- declarations at bucket creation ---------------------------------------------------

#: ``{"inventory": ["hotel", "airline"]}``, or with max TTLs:
#: ``{"inventory": {"hotel": {"maxTTL": 3600}, "airline": {}}}`` or
#: ``{"inventory": [{"name": "hotel", "maxTTL": 3600}, "airline"]}``
CollectionsSpec = Mapping[str, Any]


def _entries(scope: str, spec: object) -> list[tuple[str, int | None, bool | None]]:
    """(name, max TTL, history) of the collections one scope declares."""
    if isinstance(spec, Mapping):
        items: list[object] = [
            {"name": name, **(opts or {})} if isinstance(opts, Mapping | None) else opts
            for name, opts in spec.items()
        ]
    elif isinstance(spec, list | tuple):
        items = list(spec)
    else:
        raise ModelError(f"scope {scope!r}: collections are a list or a mapping, not {spec!r}")
    out: list[tuple[str, int | None, bool | None]] = []
    for entry in items:
        if isinstance(entry, str):
            out.append((entry, None, None))
        elif isinstance(entry, Mapping) and "name" in entry:
            unknown = set(entry) - {"name", "maxTTL", "history"}
            if unknown:
                raise ModelError(f"scope {scope!r}: unknown collection keys {sorted(unknown)}")
            out.append((entry["name"], entry.get("maxTTL"), entry.get("history")))
        else:
            raise ModelError(f"scope {scope!r}: bad collection entry {entry!r}")
    return out


def declare(manifest: Manifest, spec: CollectionsSpec) -> list[ManifestChange]:
    """The changes that create ``spec``'s scopes and collections on ``manifest`` (which
    is left as it was); ``ModelError`` before anything if one of them is invalid."""
    if not isinstance(spec, Mapping):
        raise ModelError(f"collections must map scope names to collections, not {spec!r}")
    scratch = Manifest()
    scratch.uid, scratch.scopes, scratch.collections = (
        manifest.uid,
        dict(manifest.scopes),
        dict(manifest.collections),
    )
    scratch.history_allowed = manifest.history_allowed
    scratch.history_default = manifest.history_default
    scratch.next_scope_id, scratch.next_collection_id = (
        manifest.next_scope_id,
        manifest.next_collection_id,
    )
    changes: list[ManifestChange] = []
    for scope, cols in spec.items():
        if scratch.scope_named(scope) is None:
            changes.append(scratch.plan_create_scope(scope))
            scratch.apply(changes[-1])
        for name, ttl, history in _entries(scope, cols):
            if scope == DEFAULT_NAME == name:
                if history:
                    changes.append(scratch.plan_modify_collection(scope, name, history=True))
                    scratch.apply(changes[-1])
                continue  # always there
            changes.append(
                scratch.plan_create_collection(scope, name, max_ttl=ttl, history=history)
            )
            scratch.apply(changes[-1])
    return changes


# -- a vbucket's own view of the manifest ------------------------------------------------


@attrs.define
class VBucketManifest:
    """What a vbucket's system events say the manifest is (kv_engine
    ``Collections::VB::Manifest``): it lags the bucket's after a failover or restart cut
    events off, until the missing changes are written again."""

    uid: int = 0
    scopes: dict[int, Scope] = attrs.field(
        factory=lambda: {DEFAULT_ID: Scope(DEFAULT_ID, DEFAULT_NAME)}
    )
    collections: dict[int, Collection] = attrs.field(
        factory=lambda: {DEFAULT_ID: Collection(DEFAULT_ID, DEFAULT_NAME, DEFAULT_ID)}
    )

    @classmethod
    def replay(cls, events: Iterable[ManifestEvent]) -> VBucketManifest:
        """The state after ``events``, in order."""
        state = cls()
        for ev in events:
            state.uid = ev.manifest_uid
            kind, cid = ev.event, ev.collection_id
            if kind is SystemEventType.CREATE_SCOPE:
                state.scopes[ev.scope_id] = Scope(ev.scope_id, ev.name)
            elif kind is SystemEventType.DROP_SCOPE:
                state.scopes.pop(ev.scope_id, None)
            elif cid is None:
                continue
            elif kind is SystemEventType.END_COLLECTION:
                state.collections.pop(cid, None)
            else:  # begin (create or flush) or modify
                state.collections[cid] = Collection(
                    cid, ev.name, ev.scope_id, ev.max_ttl, ev.flush_uid, ev.history
                )
        return state

    def catch_up(self, manifest: Manifest) -> list[ManifestEvent]:
        """The events that bring this vbucket to ``manifest``: dropped collections end,
        dropped scopes go, new scopes begin, new or flushed collections begin, changed
        ones are modified; the last event carries the manifest's uid, the others this
        vbucket's."""
        events = [_end(c) for c in self.collections.values() if c.cid not in manifest.collections]
        events += [
            _scope_event(SystemEventType.DROP_SCOPE, sc)
            for sc in self.scopes.values()
            if sc.sid not in manifest.scopes
        ]
        events += [
            _scope_event(SystemEventType.CREATE_SCOPE, sc)
            for sc in manifest.scopes.values()
            if sc.sid not in self.scopes
        ]
        for c in manifest.collections.values():
            known = self.collections.get(c.cid)
            if known is None or known.flush_uid != c.flush_uid:
                events.append(_begin(c))
            elif known.max_ttl != c.max_ttl or known.history != c.history:
                events.append(_modify(c))
        return list(_stamp(events, self.uid, manifest.uid))
