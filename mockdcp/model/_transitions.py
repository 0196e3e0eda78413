"""What happens to one vbucket's copies when the cluster changes: the rules.

Each rule acts on ``VBucket`` copies only (which node holds which copy is ``Cluster``'s):

* ``take_over``: a rebalance's vbucket move ends with a takeover;
* ``promote``: a hard failover makes a replica the active;
* ``retire``: a copy leaves its node (moved away, failed over, dropped);
* ``crash`` and ``warm_up``: a node goes down uncleanly and comes back.

Every change of state or history gives the copy a new generation, so the streams on it
end (STATE_CHANGED), as ``VBucket.set_state`` and ``VBucket.truncate`` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._replication import as_active, attach, catch_up
from mockdcp.protocol import VBucketState

if TYPE_CHECKING:
    from mockdcp.model._vbucket import VBucket


def take_over(old: VBucket, new: VBucket) -> None:
    """Hand ``old``'s vbucket over to ``new``, with nothing lost: the takeover stream
    sends ``new`` everything ``old`` has, ``old`` goes dead (its streams end
    STATE_CHANGED), and ``new`` becomes the active with the same history: the same
    items, the same failover table, so the same vbucket uuid (kv_engine
    ``docs/dcp/documentation/rebalance.md``, "VBucket Takeover"; a transfer adds no
    failover entry: ``kv_bucket.cc``, ``KVBucket::continueToActive``). Its open
    checkpoint closes (``continueToActive`` creates a new one) and it takes ``old``'s
    checkpoint limits."""
    attach(new, old)
    catch_up(new, old)
    old.set_state(VBucketState.DEAD)
    new.failover.entries = list(old.failover.entries)
    new.set_state(VBucketState.ACTIVE, transfer=True)
    new.close_checkpoint()
    as_active(new, old.checkpoint_max_items, old.checkpoint_max_bytes)


def promote(replica: VBucket, checkpoint_max_items: int, checkpoint_max_bytes: int) -> None:
    """A hard failover's promotion: ``replica`` becomes the active with exactly what it
    has. The vbucket's history is cut at the replica's high seqno (writes it never
    received are gone from the cluster) and a failover entry there opens a new branch
    (kv_engine ``docs/dcp/documentation/failure-scenarios.md``: "The change of state
    from replica to active causes a new VBucket UUID to be generated"; ``kv_bucket.cc``,
    ``KVBucket::continueToActive``: not a transfer, so ``processFailover``). Its open
    checkpoint closes and it takes the bucket's checkpoint limits."""
    replica.set_state(VBucketState.ACTIVE)
    replica.close_checkpoint()
    as_active(replica, checkpoint_max_items, checkpoint_max_bytes)


def retire(copy: VBucket) -> None:
    """``copy`` leaves its node: dead, its streams end STATE_CHANGED (kv_engine
    ``DcpProducer::closeStreamDueToVbStateChange``)."""
    copy.set_state(VBucketState.DEAD)


def crash(copy: VBucket) -> None:
    """The node holding ``copy`` goes down uncleanly: what it had not persisted is gone
    (warmup reads the disk only: kv_engine ``vbucket_loader.cc``), its streams end, and
    it takes no writes until ``warm_up``."""
    copy.truncate(copy.persisted_seqno)
    copy.online = False


def warm_up(copy: VBucket) -> None:
    """The node holding ``copy`` is up again: an active copy opens a new branch at its
    (persisted) high seqno, as after any unclean shutdown (kv_engine
    ``docs/dcp/documentation/failure-scenarios.md``: a new failover entry "whenever a
    node recovers from an unclean shutdown"; ``vbucket_loader.cc``)."""
    copy.online = True
    if copy.state is VBucketState.ACTIVE:
        copy.failover.add_entry(copy.high_seqno)
