"""Validation of a step list against the bucket it will run on, before anything runs.

Types were checked by the converter; each step's ``check`` checks references: vbuckets
the bucket has, collections it knows, opcode and status names, documents that must be
live, and ``persist``/``purge`` bounds. Data steps are simulated (``Simulation``: each
vbucket's high and persisted seqno, which keys are live) so a later step is checked
against what the earlier ones will have done; after a failover or restart liveness is no
longer predicted. The helpers here resolve what steps name, for checking and applying.
"""

from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING

import attrs

from mockdcp.model import Users, vbucket_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.model import Bucket, Manifest, ManifestChange
    from mockdcp.producer import Topology
    from mockdcp.scenario._cluster_check import ClusterSim
    from mockdcp.scenario.steps import Vbuckets


def resolve_vbuckets(sel: Vbuckets, num_vbuckets: int) -> list[int]:
    """``all`` / one / several vbuckets as a list; ``ValueError`` if one is not there."""
    if sel == "all":
        return list(range(num_vbuckets))
    vbs = [sel] if isinstance(sel, int) else list(sel)
    bad = [vb for vb in vbs if not 0 <= vb < num_vbuckets]
    if bad:
        raise ValueError(f"no vbucket {bad[0]} (the bucket has 0..{num_vbuckets - 1})")
    return vbs


def resolve_collection(bucket: Bucket, name: str) -> int:
    """The collection id of ``scope.collection`` (a bare name is in ``_default``) in the
    bucket's manifest; ``ValueError`` naming the collections it has."""
    return resolve_in(bucket.manifest, name)


def resolve_in(manifest: Manifest, name: str) -> int:
    """``resolve_collection`` against a manifest."""
    from mockdcp.util import ModelError

    try:
        return manifest.resolve(name)
    except ModelError as exc:
        raise ValueError(f"{exc} (the bucket has {', '.join(manifest.paths())})") from None


def split_collection(path: str) -> tuple[str, str]:
    """``scope.name`` as (scope, name); ``ValueError`` unless there is one dot."""
    scope, dot, name = path.partition(".")
    if not dot or not scope or not name or "." in name:
        raise ValueError(f"a collection is named scope.collection, not {path!r}")
    return scope, name


def opcode_of(name: str) -> int:
    """An opcode by its name (``dcp_stream_req``) or number (``0x53``)."""
    from mockdcp.protocol import Opcode

    try:
        return int(name, 0) if name[:1].isdigit() else int(Opcode[name.upper()])
    except (KeyError, ValueError):
        raise ValueError(f"unknown request {name!r} (an opcode name like dcp_stream_req)") from None


def status_of(name: str) -> int:
    """A status by its name (``not_my_vbucket``, ``etmpfail``)."""
    from mockdcp.protocol import Status

    try:
        return int(Status[name.upper()])
    except KeyError:
        raise ValueError(f"unknown status {name!r} (a name like etmpfail)") from None


def key_bytes(key: str) -> bytes:
    """A document key as bytes; ``ValueError`` unless it has 1..250 of them."""
    k = key.encode()
    if not 1 <= len(k) <= 250:
        raise ValueError(f"a key has 1..250 bytes, not {len(k)}")
    return k


def check_u32(name: str, value: int) -> None:
    """``ValueError`` unless ``value`` fits the 32-bit field ``name``."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"{name} must be in 0..0xffffffff, not {value}")


def check_upto(upto: int | None, sel: Vbuckets, bounds: dict[int, int], what: str) -> None:
    """``upto`` is a bound for ``all`` vbuckets (each is taken as far as it goes, as the
    design's example ``persist: {upto: 40}`` needs) and a reference for vbuckets named
    one by one: it must not lie beyond any of theirs."""
    if upto is None:
        return
    if upto < 0:
        raise ValueError("upto must be >= 0")
    beyond = [vb for vb, bound in bounds.items() if upto > bound]
    if sel != "all" and beyond:
        vb = beyond[0]
        raise ValueError(f"upto {upto} is beyond the {what} of vbucket {vb} ({bounds[vb]})")


_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_SPAN_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, None: 1.0}
#: the longest ``advance_clock`` (a hundred years)
MAX_SPAN = 100 * 365 * 86_400.0


def parse_span(value: object) -> float | None:
    """Server time to move by (``advance_clock``): seconds from a number or a string
    with a unit (``90s``, ``10m``, ``2h``, ``30d``); None stays None; ``ValueError``
    else."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _SPAN.match(value)):
        seconds = float(m.group(1)) * _SPAN_UNITS[m.group(2)]
    else:
        raise ValueError(f"seconds is a number or a string like '30d', not {value!r}")
    if not 0 <= seconds <= MAX_SPAN:
        raise ValueError(f"seconds must be between 0 and a hundred years, not {value!r}")
    return seconds


def compact_json(value: object) -> str:
    """A step's JSON value as a document body (no spaces)."""
    return json.dumps(value, separators=(",", ":"))


def for_vbuckets(step: object, sim: Simulation) -> list[int]:
    """The vbuckets a step names (``vbuckets``; all for a step without the field),
    checked against the bucket."""
    return resolve_vbuckets(getattr(step, "vbuckets", "all"), sim.num_vbuckets)


@attrs.define
class Simulation:
    """What the steps checked so far will have done: per vbucket the high and persisted
    seqno, which documents they leave live, and the manifest. ``certain`` turns False once
    liveness can no longer be predicted (after a failover, a restart, a load...)."""

    bucket: Bucket
    high: list[int]
    persisted: list[int]
    #: the manifest as the steps so far will have left it
    manifest: Manifest
    live: dict[tuple[int, bytes], bool] = attrs.field(factory=dict)
    certain: bool = True
    #: the nodes and the map as the topology steps will have left them
    cluster: ClusterSim | None = None
    #: (collection, key) -> a durable write of it pending (after the steps so far)
    pending: dict[tuple[int, bytes], bool] = attrs.field(factory=dict)
    #: the buckets the cluster will have (``create_bucket``, ``delete_bucket``)
    buckets: set[str] = attrs.field(factory=set)
    #: the virtual clock's time after the steps so far (None: not moved yet)
    clock: float | None = None
    #: the simulations of every bucket of the cluster, this one's included (shared: the
    #: node's one clock moves them all, ``advance_clock``); empty: this one alone
    peers: list[Simulation] = attrs.field(factory=list, eq=False, repr=False)
    #: the users and their roles as the steps so far will have left them (a copy)
    users: Users = attrs.field(factory=Users.default)

    @classmethod
    def of(
        cls,
        bucket: Bucket,
        topology: Topology | None = None,
        *,
        nodes: int = 1,
        replicas: int = 0,
        users: Users | None = None,
    ) -> Simulation:
        """The simulation of ``bucket`` (and of the cluster ``topology`` serves it from:
        without one, a new cluster of ``nodes`` with ``replicas``) as it is now; its users
        are ``users``, else the topology's, else the default administrator's."""
        if users is None and topology is not None and topology.nodes:
            users = next(iter(topology.nodes.values())).users
        from mockdcp.scenario._cluster_check import ClusterSim

        names = (
            {bucket.name}
            if topology is None or not topology.nodes
            else set(next(iter(topology.nodes.values())).buckets.names)
        )
        return cls(
            bucket,
            [vb.high_seqno for vb in bucket.vbuckets],
            [vb.persisted_seqno for vb in bucket.vbuckets],
            copy.deepcopy(bucket.manifest),
            cluster=(
                ClusterSim.new(bucket.num_vbuckets, nodes, replicas)
                if topology is None
                else ClusterSim.of(topology)
            ),
            users=Users.default() if users is None else users.copy(),
            buckets=names,
        )

    @property
    def nodes(self) -> ClusterSim:
        assert self.cluster is not None
        return self.cluster

    @property
    def num_vbuckets(self) -> int:
        return self.bucket.num_vbuckets

    def collection(self, name: str) -> int:
        """The id of collection ``name`` in the manifest the steps will have left."""
        return resolve_in(self.manifest, name)

    def is_live(self, cid: int, key: bytes) -> bool | None:
        vbid = vbucket_of(key, self.bucket.num_vbuckets)
        if (cid, key) in self.live:
            return self.live[(cid, key)]
        if not self.certain:
            return None
        item = self.bucket.vbucket(vbid).get(key, cid)
        return item is not None and not item.deleted

    def require_live(self, step: str, cid: int, key: bytes, text: str) -> None:
        """``ValueError`` if the document will certainly not be live for ``step``."""
        if self.is_live(cid, key) is False:
            raise ValueError(f"no live document {text!r} to {step}")

    def is_pending(self, cid: int, key: bytes) -> bool | None:
        """A durable write of the document pending (None: cannot tell)."""
        if (cid, key) in self.pending:
            return self.pending[(cid, key)]
        if not self.certain:
            return None
        vb = self.bucket.vbucket(vbucket_of(key, self.bucket.num_vbuckets))
        return (cid, key) in vb.pending

    def durable(self, step: str, cid: int, key: bytes, text: str, outcome: str) -> None:
        """A step of a durable write (``sync_write`` with ``outcome``, ``commit``,
        ``abort``): ``ValueError`` if the document has (or, to complete, lacks) a
        pending prepare; records the seqnos it takes and what it leaves."""
        pending = self.is_pending(cid, key)
        if step == "sync_write":
            if pending:
                raise ValueError(f"a durable write of {text!r} is pending: commit or abort it")
            self.high[vbucket_of(key, self.bucket.num_vbuckets)] += 1 + (outcome != "pending")
            self.pending[(cid, key)] = outcome == "pending"
            if outcome == "commit":
                self.live[(cid, key)] = True
            return
        if pending is False:
            raise ValueError(f"no pending durable write of {text!r} to {step}")
        self.high[vbucket_of(key, self.bucket.num_vbuckets)] += 1
        self.pending[(cid, key)] = False
        if step == "commit" and pending:
            self.live[(cid, key)] = True

    def write(self, cid: int, key: bytes, *, live: bool) -> None:
        if self.is_pending(cid, key):
            raise ValueError(f"a durable write of {key.decode(errors='replace')!r} is pending")
        self.high[vbucket_of(key, self.bucket.num_vbuckets)] += 1
        self.live[(cid, key)] = live

    def remove(self, step: str, collection: str, text: str) -> None:
        """A deletion or expiry of a document that must be live."""
        cid, key = self.collection(collection), key_bytes(text)
        self.require_live(step, cid, key, text)
        self.write(cid, key, live=False)

    def lose(self, vbs: list[int], *, lose_after: int | None, lose_unpersisted: bool) -> None:
        """A failover or restart of ``vbs``: what is lost, and liveness unknown after."""
        # an ephemeral bucket has nothing unpersisted: its persistence seqno is its high
        # seqno (``mockdcp.model._ephemeral``)
        unpersisted = lose_unpersisted and self.bucket.ephemeral is None
        for v in vbs:
            kept = self.persisted[v] if unpersisted else self.high[v]
            self.high[v] = min(self.high[v], kept if lose_after is None else lose_after)
            self.persisted[v] = min(self.persisted[v], self.high[v])
        self.certain, self.live, self.pending = False, {}, {}

    def change_manifest(
        self, plan: Callable[[Manifest], ManifestChange], *, forgets_documents: bool
    ) -> None:
        """A collection step: its change planned on (and applied to) the manifest, one
        system event a vbucket per change event."""
        from mockdcp.util import ModelError

        try:
            change = plan(self.manifest)
        except ModelError as exc:
            raise ValueError(str(exc)) from None
        self.manifest.apply(change)
        self.high = [high + len(change.events) for high in self.high]
        self.certain = self.certain and not forgets_documents

    def flush(self) -> None:
        """A bucket flush: every vbucket empty, seqnos from 0."""
        self.high = [0] * self.num_vbuckets
        self.persisted = [0] * self.num_vbuckets
        self.live, self.certain, self.pending = {}, False, {}

    @property
    def deleted(self) -> bool:
        """The steps so far will have deleted this bucket (and not made it again)."""
        return self.bucket.name not in self.buckets

    def create_bucket(self, name: str, storage: str) -> None:
        """``create_bucket``: ``ValueError`` (ns_server's message) for a name taken; this
        bucket made again starts empty with only the default collection."""
        if name in self.buckets:
            raise ValueError("Bucket with given name already exists")
        self.buckets.add(name)
        if name == self.bucket.name:
            from mockdcp.model import Manifest

            self.flush()
            self.manifest = Manifest()
            self.manifest.history_allowed = self.manifest.history_default = storage == "magma"

    def delete_bucket(self, name: str) -> None:
        """``delete_bucket``: ``ValueError`` for a bucket the cluster will not have."""
        if name not in self.buckets:
            raise ValueError(f"no bucket {name!r} to delete (the buckets: {sorted(self.buckets)})")
        self.buckets.discard(name)


__all__ = ["Simulation", "parse_span", "resolve_collection", "resolve_vbuckets"]
