"""The bucket's collections steps: a validated manifest change made current, its events
written into every vbucket (kv_engine ``collections/manifest.cc`` applied to each
``collections/vbucket_manifest.cc``).
"""

from __future__ import annotations

from mockdcp.model._bucket_core import BucketCore
from mockdcp.model._changes import Change
from mockdcp.model._manifest import KEEP, Keep, ManifestChange


class CollectionsSteps(BucketCore):
    """Scopes and collections (a part of ``Bucket``)."""

    def _apply_change(self, change: ManifestChange) -> None:
        """Make a validated change current; its events go into every vbucket, but one
        whose node is down (``VBucket.online``), which catches up when it is back."""
        self.manifest.apply(change)
        history = frozenset(c.cid for c in change.collections if c.history)
        for vb in self.vbuckets:
            vb.history_collections = history
        for vb in self.vbuckets:
            if vb.online:
                self._write_events(vb, change.events)
        self.publish(Change(range(self.num_vbuckets), collections=True))

    def manifest_json(self) -> dict[str, object]:
        """The manifest as GET_COLLECTIONS_MANIFEST returns it."""
        return self.manifest.to_json()

    def resolve_collection(self, path: str) -> int:
        """The id of ``scope.collection`` (``ModelError`` if unknown)."""
        return self.manifest.resolve(path)

    def collection_name(self, cid: int) -> tuple[str, str]:
        """(scope, collection) of collection id ``cid`` (``ModelError`` if unknown)."""
        return self.manifest.name_of(cid)

    def create_scope(self, name: str) -> int:
        """Create a scope; returns its id (8 up). ``ModelError`` if the name is invalid
        or taken."""
        change = self.manifest.plan_create_scope(name)
        self._apply_change(change)
        return change.events[-1].scope_id

    def drop_scope(self, name: str) -> None:
        """Drop a scope and every collection in it (not ``_default``)."""
        self._apply_change(self.manifest.plan_drop_scope(name))

    def create_collection(
        self, scope: str, name: str, *, max_ttl: int | None = None, history: bool | None = None
    ) -> int:
        """Create a collection in ``scope``; returns its id (8 up). ``max_ttl`` in
        seconds (None: none of its own); ``history`` None: the bucket's default (true
        on Magma); true on couchstore is a ``ModelError``."""
        change = self.manifest.plan_create_collection(scope, name, max_ttl=max_ttl, history=history)
        self._apply_change(change)
        cid = change.events[-1].collection_id
        assert cid is not None
        return cid

    def drop_collection(self, scope: str, name: str) -> None:
        """Drop a collection (``_default._default`` included; it cannot come back).
        Its documents leave the oracle; writes to it are refused from now on."""
        self._apply_change(self.manifest.plan_drop_collection(scope, name))

    def flush_collection(self, scope: str, name: str) -> None:
        """Empty a collection: its begin event again at a new seqno of every vbucket,
        carrying the flush's manifest uid; its documents leave the oracle."""
        self._apply_change(self.manifest.plan_flush_collection(scope, name))

    def modify_collection(
        self,
        scope: str,
        name: str,
        *,
        max_ttl: int | Keep | None = KEEP,
        history: bool | Keep = KEEP,
    ) -> None:
        """Give a collection a new max TTL and/or history setting (a MODIFY_COLLECTION
        event); what is not given stays."""
        change = self.manifest.plan_modify_collection(scope, name, max_ttl=max_ttl, history=history)
        self._apply_change(change)
