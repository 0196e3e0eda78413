"""The failover table and the rollback decision.

Sources: kv_engine ``engines/ep/src/failover-table.cc`` for the table and
``FailoverTable::needsRollback`` for the decision, kv_engine
``docs/dcp/documentation/discussion.md`` for the worked examples.
Pure: randomness comes from the ``random.Random`` the bucket passes in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

#: kv_engine ``engines/ep/configuration.json``: ``max_failover_entries``.
MAX_FAILOVER_ENTRIES = 25


class FailoverTable:
    """(uuid, seqno) entries, newest first; a new vbucket has one entry at seqno 0."""

    def __init__(self, rng: random.Random, max_entries: int = MAX_FAILOVER_ENTRIES) -> None:
        self._rng = rng
        self.max_entries = max_entries
        self.entries: list[tuple[int, int]] = []
        self.entries = [(self._new_uuid(), 0)]  # ``add_entry(0)`` of an empty table

    @property
    def newest_uuid(self) -> int:
        return self.entries[0][0]

    def _new_uuid(self) -> int:
        """A random 64-bit value shifted right by 16, never 0 (``failover-table.cc``)."""
        used = {u for u, _ in self.entries}
        while True:
            uuid = self._rng.getrandbits(64) >> 16
            if uuid and uuid not in used:
                return uuid

    def add_entry(self, seqno: int) -> tuple[int, int]:
        """A new branch at ``seqno``: entries above it go, the new one goes in front,
        the oldest drop off beyond the capacity."""
        entry = (self._new_uuid(), seqno)
        self.entries = [e for e in self.entries if e[1] <= seqno]
        self.entries.insert(0, entry)
        del self.entries[self.max_entries :]
        return entry

    def prune_above(self, seqno: int) -> None:
        """After a KV rollback to ``seqno``: drop entries above it; if none is left,
        start a new branch there (kv_engine ``failover-table.cc``)."""
        self.entries = [e for e in self.entries if e[1] <= seqno]
        if not self.entries:
            self.add_entry(seqno)


def needs_rollback(
    *,
    start_seqno: int,
    high_seqno: int,
    vbucket_uuid: int,
    snap_start_seqno: int,
    snap_end_seqno: int,
    purge_seqno: int,
    failover_entries: list[tuple[int, int]],
    strict_vbuuid: bool = False,
    ignore_purged_tombstones: bool = False,
    client_purge_seqno: int = 0,
    collections_high_seqno: int | None = None,
) -> tuple[bool, int, str]:
    """Must a stream request roll back, and to which seqno? (kv_engine
    ``FailoverTable::needsRollback``).

    Returns (rollback, seqno, reason). Steps, in kv_engine's order:

    1. start 0 (and not strict, or uuid 0): never.
    2. the collection exemption E: CH defined, S < P, S >= CH and CH <= P.
    3. purge: S < P, S != 0, not E, client's purge seqno != P → 0.
    4. the uuid's oldest match; upper = the next newer entry's seqno, else high seqno;
       no match → 0.
    5. S = snap start → snap end := S.
    6. snap end <= upper → no rollback.
    7. S = snap end → snap start := S.
    8. rollback to upper if upper < snap start, else snap start.
    """
    s, a, b = start_seqno, snap_start_seqno, snap_end_seqno
    if s == 0 and (not strict_vbuuid or vbucket_uuid == 0):
        return False, 0, ""
    purge = 0 if ignore_purged_tombstones else purge_seqno
    ch = collections_high_seqno
    exempt = ch is not None and s < purge and s >= ch and ch <= purge
    if s < purge and s != 0 and not exempt and client_purge_seqno != purge:
        return True, 0, f"start {s} is below the purge seqno {purge}"
    upper = None
    for i in range(len(failover_entries) - 1, -1, -1):  # oldest to newest
        if failover_entries[i][0] == vbucket_uuid:
            upper = failover_entries[i - 1][1] if i > 0 else high_seqno
            break
    if upper is None:
        return True, 0, f"vbucket uuid {vbucket_uuid} is not in the failover table"
    if s == a:
        b = s
    if b <= upper:
        return False, 0, ""
    if s == b:
        a = s
    seqno = upper if upper < a else a
    return True, seqno, f"consumer ahead of producer - producer upper at {upper}"
