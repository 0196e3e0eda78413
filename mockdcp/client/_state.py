"""What the reference consumer holds: the versions of each document it received and, per
stream, where it resumes (kv_engine docs/dcp/documentation: a stream resumes from a seqno,
the branch's vbucket uuid and the last snapshot received, and a ROLLBACK returns it to a
consistent point at or below the seqno the producer names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.client._streams import ManifestView, StreamFilter, StreamKey
from mockdcp.util import MockDcpError

if TYPE_CHECKING:
    from mockdcp.protocol import Prepare


class ConsumerError(MockDcpError):
    """The producer refused the bootstrap or a stream in a way the consumer cannot fix."""


class AuthenticationFailed(ConsumerError):
    """The node refused the credentials (SASL AUTH_ERROR): a wrong or changed password,
    a deleted user. After the consumer has streamed, a reconnect that meets it tries
    again later (an operator may put the credentials right); before, it is raised."""


class CallbackError(ConsumerError):
    """The ``on_event`` callback raised (the original exception is the cause).

    Kept apart from connection errors: an ``OSError`` from the callback (a closed pipe,
    a full disk) must stop the consumer, not make it reconnect and resume forever.
    """


@attrs.frozen(kw_only=True)
class StreamRefused:
    """Passed to ``on_event`` when a stream request is refused for good: its filter names
    collections or a scope that no longer exist (the stream is over, not an error)."""

    vbucket: int
    stream_id: int | None
    status: int


@attrs.define
class Version:
    """One version of a document as received (``sid``: the stream it came on)."""

    vbucket: int
    seqno: int
    value: bytes
    deleted: bool
    rev: int = 0
    cas: int = 0
    sid: int | None = None


@attrs.define
class VbPosition:
    """Where a stream resumes: last seqno, branch uuid, last snapshot."""

    seqno: int = 0
    uuid: int = 0
    snap_start: int = 0
    snap_end: int = 0
    failover_log: list[tuple[int, int]] = attrs.field(factory=list)
    #: the stream is done and is not asked for again (``end_reason`` says why)
    ended: bool = False
    #: the last STREAM_END reason, or the status that refused the stream for good
    end_reason: int | None = None


def _newest(versions: list[Version]) -> Version:
    # one stream delivers a key's versions in seqno order; two streams whose filters
    # overlap interleave theirs
    if len(versions) == 1:
        return versions[0]
    return max(reversed(versions), key=lambda v: v.seqno)


@attrs.define
class ConsumerState:
    """What the consumer holds: versions per document, position per stream.

    Streams are named ``(vbucket, stream id)``; the stream id is ``None`` without
    stream-ids, so ``position(vb)`` is the vbucket's one stream.
    """

    versions: dict[tuple[int, bytes], list[Version]] = attrs.field(factory=dict)
    positions: dict[StreamKey, VbPosition] = attrs.field(factory=dict)
    rollbacks: list[tuple[int, int]] = attrs.field(factory=list)
    stream_ends: list[tuple[int, int]] = attrs.field(factory=list)
    #: per stream, the seqnos at which the consumer held a complete snapshot: the only
    #: points a rollback can return to with a consistent state (dedup inside a snapshot
    #: means a seqno in its middle is not one).
    consistent: dict[StreamKey, list[int]] = attrs.field(factory=dict)
    markers: int = 0
    items: int = 0
    violations: list[str] = attrs.field(factory=list)
    #: (vbucket, collection id) -> seqno of the last END_COLLECTION (drop) or
    #: BEGIN_COLLECTION (create or flush) event seen: the collection's documents of that
    #: vbucket written before it are gone
    cleared: dict[tuple[int, int], int] = attrs.field(factory=dict)
    system_events: int = 0
    seqno_advances: int = 0
    #: cluster configs pushed to it (HELLO clustermap change notification)
    config_pushes: int = 0
    #: per stream, the manifest as its system events tell it
    manifests: dict[StreamKey, ManifestView] = attrs.field(factory=dict)
    #: (vbucket, stream id, collection id, key) -> the prepare received and not yet
    #: committed or aborted (sync writes): never a version until its commit
    prepares: dict[tuple[int, int | None, int, bytes], Prepare] = attrs.field(factory=dict)
    aborts: int = 0

    def position(self, vb: int, sid: int | None = None) -> VbPosition:
        return self.positions.setdefault((vb, sid), VbPosition())

    def manifest(self, vb: int, sid: int | None = None) -> ManifestView:
        """The stream's view of the manifest (pass-through until it saw anything)."""
        return self.manifests.setdefault((vb, sid), ManifestView.for_filter(StreamFilter()))

    def documents(self) -> dict[tuple[int, bytes], Version]:
        """The live documents: the newest version of each key that is not a deletion,
        leaving out those written before their collection was dropped or flushed."""
        out = {}
        cleared = self.cleared
        for key, versions in self.versions.items():
            if not versions:
                continue
            last = _newest(versions)
            if last.deleted or last.seqno < cleared.get((last.vbucket, key[0]), -1):
                continue
            out[key] = last
        return out

    def mark_consistent(self, vb: int, seqno: int, sid: int | None = None) -> None:
        points = self.consistent.setdefault((vb, sid), [0])
        if seqno > points[-1]:
            points.append(seqno)

    def roll_back(self, vb: int, rollback_seqno: int, sid: int | None = None) -> int:
        """Return stream ``(vb, sid)`` to its last consistent point at or below
        ``rollback_seqno``.

        Every version that stream received above that point is undone, and the drops
        and flushes it saw there; the point is where the stream resumes. Returns the
        seqno rolled back to.
        """
        key = (vb, sid)
        points = [p for p in self.consistent.get(key, [0]) if p <= rollback_seqno] or [0]
        self.consistent[key] = points
        seqno = points[-1]
        for doc in list(self.versions):
            kept = [
                v for v in self.versions[doc] if v.vbucket != vb or v.sid != sid or v.seqno <= seqno
            ]
            if kept:
                self.versions[doc] = kept
            else:
                del self.versions[doc]
        view = self.manifests.get(key)
        if view is not None:
            undone = {e.by_seqno for e in view.history if e.by_seqno > seqno}
            view.roll_back(seqno)
            for at in [k for k, s in self.cleared.items() if k[0] == vb and s in undone]:
                del self.cleared[at]
        else:
            for at in [k for k, s in self.cleared.items() if k[0] == vb and s > seqno]:
                del self.cleared[at]
        for held in [k for k, p in self.prepares.items() if k[:2] == key and p.by_seqno > seqno]:
            del self.prepares[held]
        pos = self.position(vb, sid)
        pos.seqno = pos.snap_start = pos.snap_end = seqno
        entries = [e for e in pos.failover_log if e[1] <= seqno]
        pos.uuid = entries[0][0] if entries else 0
        self.rollbacks.append((vb, rollback_seqno))
        return seqno
