"""Validation of a step list against the bucket it will run on, before anything runs.

Types were checked by the converter; this checks references: vbuckets the bucket has,
collections it knows, opcode and status names, documents that must be live, and
``persist``/``purge`` bounds. Data steps are simulated (each vbucket's high and persisted
seqno, which keys are live) so a later step is checked against what the earlier ones
will have done; after a failover or restart liveness is no longer predicted.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import attrs

from mockdcp.model import vbucket_of
from mockdcp.scenario import steps as st
from mockdcp.scenario._convert import Problem, ScenarioProblems

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Bucket


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
    from mockdcp._errors import ModelError

    try:
        return bucket.resolve_collection(name)
    except ModelError as exc:
        known = ", ".join(bucket.manifest.paths())
        raise ValueError(f"{exc} (the bucket has {known})") from None


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
        sim.write(resolve_collection(sim.bucket, step.collection), _key(step.key), True)
    elif isinstance(step, st.Delete | st.Expire | st.Touch):
        cid, key = resolve_collection(sim.bucket, step.collection), _key(step.key)
        if sim.is_live(cid, key) is False:
            raise ValueError(f"no live document {step.key!r} to {step.NAME}")
        if isinstance(step, st.Touch):
            _u32("expiry", step.expiry)
        sim.write(cid, key, isinstance(step, st.Touch))
    elif isinstance(step, st.Generate):
        cid = resolve_collection(sim.bucket, step.collection)
        if not 0 <= step.docs <= 10_000_000 or step.start < 0:
            raise ValueError("generate takes 0..10,000,000 docs from a start >= 0")
        for i in range(step.start, step.start + step.docs):
            sim.write(cid, _key(f"{step.prefix}::{i:06d}"), True)
    elif isinstance(step, st.Load):
        if not os.path.isdir(step.corpus):
            raise ValueError(f"no corpus directory {step.corpus!r}")
        sim.certain = False
    elif isinstance(step, st.Persist):
        _check_upto(step.upto, [sim.high[v] for v in vbs], "high seqno")
        for v in vbs:
            upto = sim.high[v] if step.upto is None else min(step.upto, sim.high[v])
            sim.persisted[v] = max(sim.persisted[v], upto)
    elif isinstance(step, st.Purge):
        _check_upto(step.upto, [sim.persisted[v] for v in vbs], "persisted seqno")
    elif isinstance(step, st.Failover | st.Restart):
        lose_after = getattr(step, "lose_after", None)
        if lose_after is not None:
            _check_upto(lose_after, [sim.high[v] for v in vbs], "high seqno")
        for v in vbs:
            kept = sim.persisted[v] if getattr(step, "lose_unpersisted", True) else sim.high[v]
            sim.high[v] = min(sim.high[v], kept if lose_after is None else lose_after)
            sim.persisted[v] = min(sim.persisted[v], sim.high[v])
        sim.certain, sim.live = False, {}
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


def _check_upto(upto: int | None, bounds: list[int], what: str) -> None:
    if upto is not None and bounds and upto > max(bounds):
        raise ValueError(f"upto {upto} is beyond the {what} of every vbucket ({max(bounds)})")
    if upto is not None and upto < 0:
        raise ValueError("upto must be >= 0")


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
