"""Checks of a request against a vbucket's state, run by the bucket before it changes
anything (each raises ``ModelError`` naming the vbucket and what is wrong).

Sources: kv_engine ``kv_bucket.cc`` (a write to a vbucket that is not active answers
NOT_MY_VBUCKET), ``docs/dcp/documentation/rollback.md`` (only persisted tombstones are
purged).
"""

from __future__ import annotations

from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError


class VBucketChecks:
    """The checks, for ``VBucket``: they read its ``vbid``, ``state``, ``online``,
    ``high_seqno`` and ``persisted_seqno``."""

    vbid: int
    state: VBucketState
    online: bool
    high_seqno: int
    persisted_seqno: int

    def check_writable(self) -> None:
        """``ModelError`` unless the vbucket is active (only an active vbucket takes
        writes; a replica's come by replication) and its node is up."""
        if self.state is not VBucketState.ACTIVE:
            state = self.state.name.lower()
            raise ModelError(f"vbucket {self.vbid} is {state}: writes need active")
        if not self.online:
            raise ModelError(f"vbucket {self.vbid} is on a node that is down")

    def check_persist(self, upto: int) -> None:
        """``ModelError`` unless ``upto`` is between the persisted and the high seqno."""
        if not self.persisted_seqno <= upto <= self.high_seqno:
            raise ModelError(
                f"vbucket {self.vbid}: persist upto {upto} is outside "
                f"[{self.persisted_seqno}, {self.high_seqno}]"
            )

    def check_purge(self, upto: int) -> None:
        """``ModelError`` unless ``upto`` is persisted: only tombstones on disk purge."""
        if not 0 <= upto <= self.persisted_seqno:
            raise ModelError(
                f"vbucket {self.vbid}: only persisted tombstones can be purged "
                f"(upto {upto} > persisted {self.persisted_seqno})"
            )

    def check_history(self, seqno: int) -> None:
        """``ModelError`` unless history can be cut at ``seqno`` (0..high seqno)."""
        if not 0 <= seqno <= self.high_seqno:
            raise ModelError(
                f"vbucket {self.vbid}: lose_after {seqno} beyond high seqno {self.high_seqno}"
            )
