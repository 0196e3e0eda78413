"""Validation of a step list against the bucket it will run on, before anything runs.

Types were checked by the converter; this checks references: vbuckets the bucket has,
collections it knows, opcode and status names, documents that must be live, and
``persist``/``purge`` bounds. Data steps are simulated (each vbucket's high and persisted
seqno, which keys are live) so a later step is checked against what the earlier ones
will have done; after a failover or restart liveness is no longer predicted.
"""

from __future__ import annotations

import copy
import os
from typing import TYPE_CHECKING

import attrs

from mockdcp.model import vbucket_of
from mockdcp.scenario import steps as st
from mockdcp.scenario._convert import Problem, ScenarioProblems

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Bucket
    from mockdcp.model._manifest import Manifest, ManifestChange


def resolve_vbuckets(sel: st.Vbuckets, num_vbuckets: int) -> list[int]:
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
    from mockdcp._errors import ModelError

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


@attrs.define
class _Sim:
    """What the data steps will have done: per vbucket (high, persisted), live keys."""

    bucket: Bucket
    high: list[int]
    persisted: list[int]
    #: the manifest as the steps so far will have left it
    manifest: Manifest
    live: dict[tuple[int, bytes], bool] = attrs.field(factory=dict)
    certain: bool = True

    def is_live(self, cid: int, key: bytes) -> bool | None:
        vbid = vbucket_of(key, self.bucket.num_vbuckets)
        if (cid, key) in self.live:
            return self.live[(cid, key)]
        if not self.certain:
            return None
        item = self.bucket.vbucket(vbid).get(key, cid)
        return item is not None and not item.deleted

    def write(self, cid: int, key: bytes, live: bool) -> None:
        self.high[vbucket_of(key, self.bucket.num_vbuckets)] += 1
        self.live[(cid, key)] = live


def check_steps(steps: Sequence[st.Step], bucket: Bucket, source: str = "<steps>") -> None:
    """Raise ``ScenarioProblems`` naming every step that cannot run on ``bucket``."""
    sim = _Sim(
        bucket,
        [vb.high_seqno for vb in bucket.vbuckets],
        [vb.persisted_seqno for vb in bucket.vbuckets],
        copy.deepcopy(bucket.manifest),
    )
    problems: list[Problem] = []
    for i, step in enumerate(steps):
        try:
            _check(step, sim)
        except ValueError as exc:
            problems.append(Problem(str(exc), i, step.NAME, None, source))
    if problems:
        raise ScenarioProblems(problems)


def _key(key: str) -> bytes:
    k = key.encode()
    if not 1 <= len(k) <= 250:
        raise ValueError(f"a key has 1..250 bytes, not {len(k)}")
    return k


def _u32(name: str, value: int) -> None:
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"{name} must be in 0..0xffffffff, not {value}")


def _check(step: st.Step, sim: _Sim) -> None:
    n = sim.bucket.num_vbuckets
    vbs = resolve_vbuckets(getattr(step, "vbuckets", "all"), n)
    if isinstance(step, st.Set):
        _u32("flags", step.flags)
        _u32("expiry", step.expiry)
        sim.write(resolve_in(sim.manifest, step.collection), _key(step.key), True)
    elif isinstance(step, st.Delete | st.Expire | st.Touch):
        cid, key = resolve_in(sim.manifest, step.collection), _key(step.key)
        if sim.is_live(cid, key) is False:
            raise ValueError(f"no live document {step.key!r} to {step.NAME}")
        if isinstance(step, st.Touch):
            _u32("expiry", step.expiry)
        sim.write(cid, key, isinstance(step, st.Touch))
    elif isinstance(step, st.Generate):
        cid = resolve_in(sim.manifest, step.collection)
        if not 0 <= step.docs <= 10_000_000 or step.start < 0:
            raise ValueError("generate takes 0..10,000,000 docs from a start >= 0")
        for i in range(step.start, step.start + step.docs):
            sim.write(cid, _key(f"{step.prefix}::{i:06d}"), True)
    elif isinstance(step, st.Load):
        from mockdcp.pipeline._errors import PipelineError, require_pipeline

        if not os.path.isdir(step.corpus):
            raise ValueError(f"no corpus directory {step.corpus!r}")
        try:
            require_pipeline(spark=False)
        except PipelineError as exc:
            raise ValueError(str(exc)) from None
        sim.certain = False
    elif isinstance(step, st.Persist):
        _check_upto(step.upto, step.vbuckets, {v: sim.high[v] for v in vbs}, "high seqno")
        for v in vbs:
            upto = sim.high[v] if step.upto is None else min(step.upto, sim.high[v])
            sim.persisted[v] = max(sim.persisted[v], upto)
    elif isinstance(step, st.Purge):
        bounds = {v: sim.persisted[v] for v in vbs}
        _check_upto(step.upto, step.vbuckets, bounds, "persisted seqno")
    elif isinstance(step, st.Failover | st.Restart):
        lose_after = getattr(step, "lose_after", None)
        if lose_after is not None:
            _check_upto(lose_after, step.vbuckets, {v: sim.high[v] for v in vbs}, "high seqno")
        for v in vbs:
            kept = sim.persisted[v] if getattr(step, "lose_unpersisted", True) else sim.high[v]
            sim.high[v] = min(sim.high[v], kept if lose_after is None else lose_after)
            sim.persisted[v] = min(sim.persisted[v], sim.high[v])
        sim.certain, sim.live = False, {}
    elif isinstance(step, _MANIFEST_STEPS):
        _check_manifest_step(step, sim)
    elif isinstance(step, st.Flush):
        sim.high = [0] * n
        sim.persisted = [0] * n
        sim.live, sim.certain = {}, False
    elif isinstance(step, st.Delay) and step.request is not None:
        opcode_of(step.request)
    elif isinstance(step, st.Reject):
        opcode_of(step.request)
        status_of(step.status)
        if step.vbucket is not None:
            resolve_vbuckets(step.vbucket, n)
    elif isinstance(step, st.Throttle) and step.bytes_per_second <= 0:
        raise ValueError("bytes_per_second must be positive")
    elif isinstance(step, st.Wait):
        _check_wait(step, n)
    elif isinstance(step, st.Expect):
        _check_expect(step, n)


_COLLECTION_STEPS = (
    st.CreateCollection,
    st.DropCollection,
    st.ModifyCollection,
    st.FlushCollection,
)
_MANIFEST_STEPS = (st.CreateScope, st.DropScope, *_COLLECTION_STEPS)


def plan_manifest_step(manifest: Manifest, step: st.Step) -> ManifestChange:
    """The manifest change a collection step makes; ``ModelError`` if it cannot."""
    if isinstance(step, st.CreateScope):
        return manifest.plan_create_scope(step.name)
    if isinstance(step, st.DropScope):
        return manifest.plan_drop_scope(step.name)
    assert isinstance(
        step, st.CreateCollection | st.DropCollection | st.ModifyCollection | st.FlushCollection
    )
    scope, name = split_collection(step.collection)
    if isinstance(step, st.CreateCollection):
        return manifest.plan_create_collection(scope, name, max_ttl=step.max_ttl)
    if isinstance(step, st.ModifyCollection):
        return manifest.plan_modify_collection(scope, name, max_ttl=step.max_ttl)
    if isinstance(step, st.DropCollection):
        return manifest.plan_drop_collection(scope, name)
    return manifest.plan_flush_collection(scope, name)


def _check_manifest_step(step: st.Step, sim: _Sim) -> None:
    from mockdcp._errors import ModelError

    try:
        change = plan_manifest_step(sim.manifest, step)
    except ModelError as exc:
        raise ValueError(str(exc)) from None
    sim.manifest.apply(change)
    sim.high = [high + len(change.events) for high in sim.high]
    sim.certain = sim.certain and not isinstance(
        step, st.DropCollection | st.DropScope | st.FlushCollection
    )


def _check_upto(upto: int | None, sel: st.Vbuckets, bounds: dict[int, int], what: str) -> None:
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


def _check_wait(step: st.Wait, n: int) -> None:
    c = step.consumer
    if (step.seconds is None) == (c is None):
        raise ValueError("wait takes either seconds or consumer")
    if c is not None:
        resolve_vbuckets(c.vbucket, n)
        conditions = (
            c.seqno is not None,
            c.connections is not None,
            c.streams,
            c.bytes_acked is not None,
            c.noops_answered is not None,
            c.noops_missed is not None,
            c.rollback,
        )
        if not any(conditions):
            raise ValueError("wait: consumer names no condition")
        if c.acked and c.seqno is None:
            raise ValueError("wait: acked needs a seqno")


def _check_expect(step: st.Expect, n: int) -> None:
    kinds = [
        step.rollback is not None,
        step.resume is not None,
        step.acked is not None,
        step.reconnected,
        step.noops_answered is not None,
    ]
    if sum(kinds) != 1:
        raise ValueError(
            "expect names exactly one of rollback, resume, acked, reconnected, noops_answered"
        )
    for target in (step.rollback, step.resume):
        if target is not None:
            resolve_vbuckets(target.vbucket, n)


__all__ = ["ScenarioProblems", "check_steps", "resolve_collection", "resolve_vbuckets"]
