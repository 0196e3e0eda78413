"""Property: whatever happens to a cluster (writes, replication paused and resumed,
persistence, nodes added, removed, down and up, rebalances, takeovers, hard and graceful
failovers), every live replica holds a prefix of its active's history on the same branch,
the map and the copies agree, and the oracle is the actives' documents. Each step that
must lose nothing (takeover, graceful failover, rebalance) is checked to, and a hard
failover or a node going down loses exactly the writes the surviving copy had not got.
"""

from __future__ import annotations

from hypothesis import event, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mockdcp import ModelError
from mockdcp.model import Bucket, Cluster, Item
from tests.model._cluster import check_cluster, documents, new_bucket

NAMES = ("n0", "n1", "n2", "n3", "n4")
KEYS = tuple(f"k{i}" for i in range(12))
VBUCKETS = 4

Docs = dict[tuple[int, bytes], Item]


class ClusterMachine(RuleBasedStateMachine):
    bucket: Bucket
    cluster: Cluster

    @initialize(nodes=st.integers(1, 3), replicas=st.integers(0, 2))
    def start(self, nodes: int, replicas: int) -> None:
        self.bucket = new_bucket(VBUCKETS, collections={"s": ["c"]}, checkpoint_max_items=4)
        self.cluster = Cluster(self.bucket, NAMES[:nodes], min(replicas, nodes - 1))
        self.counter = 0

    # -- helpers -------------------------------------------------------------------------

    def docs(self) -> Docs:
        return dict(self.cluster.oracle())

    def writable(self, key: str) -> bool:
        vb = self.bucket.vbucket_of(key)
        return self.cluster.map.active(vb) not in (None, *self.cluster.down)

    # -- data ----------------------------------------------------------------------------

    @rule(writes=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([0, 8])), max_size=6))
    def write(self, writes: list[tuple[str, int]]) -> None:
        for key, collection in writes:
            self.counter += 1
            value = f'{{"n":{self.counter}}}'
            if not self.writable(key):
                try:
                    self.bucket.set(key, value, collection_id=collection)
                except ModelError:
                    continue
                raise AssertionError("a write to an unavailable vbucket was taken")
            item = self.bucket.set(key, value, collection_id=collection)
            assert self.docs()[(collection, key.encode())] is item

    @rule(key=st.sampled_from(KEYS))
    def delete(self, key: str) -> None:
        if self.writable(key) and self.bucket.vbuckets[self.bucket.vbucket_of(key)].get(
            key.encode()
        ):
            try:
                self.bucket.delete(key)
            except ModelError:  # already a tombstone
                return
            assert (0, key.encode()) not in self.docs()

    @rule(vb=st.integers(0, VBUCKETS - 1))
    def checkpoint(self, vb: int) -> None:
        self.bucket.checkpoint(vb)

    @rule()
    def flush_collection(self) -> None:
        self.bucket.flush_collection("s", "c")
        # an active on a down node takes the flush when it is back
        online = {vb for vb in range(VBUCKETS) if self.bucket.vbuckets[vb].online}
        assert not any(k[0] == 8 and it.vbucket in online for k, it in self.docs().items())

    @rule(vb=st.integers(0, VBUCKETS - 1), fraction=st.floats(0, 1))
    def persist_active(self, vb: int, fraction: float) -> None:
        active = self.bucket.vbuckets[vb]
        if active.online:
            span = active.high_seqno - active.persisted_seqno
            self.bucket.persist(vb, upto=active.persisted_seqno + int(span * fraction))

    # -- replication ---------------------------------------------------------------------

    @rule(node=st.none() | st.sampled_from(NAMES), vb=st.none() | st.integers(0, 3))
    def pause(self, node: str | None, vb: int | None) -> None:
        if node is None or node in self.cluster.nodes:
            self.cluster.pause_replication(node, vb)

    @rule(node=st.none() | st.sampled_from(NAMES), vb=st.none() | st.integers(0, 3))
    def resume(self, node: str | None, vb: int | None) -> None:
        if node is None or node in self.cluster.nodes:
            self.cluster.resume_replication(node, vb)

    @rule()
    def replicate(self) -> None:
        self.cluster.replicate()
        c = self.cluster
        for vb in range(VBUCKETS):
            node = c.map.active(vb)
            if node is None or node in c.down:
                continue
            for rnode, replica in c.replicas(vb).items():
                if rnode not in c.down and not c.is_paused(rnode, vb):
                    assert replica.high_seqno == c.active(vb).high_seqno

    @rule(upto=st.none() | st.integers(0, 30))
    def persist_replicas(self, upto: int | None) -> None:
        self.cluster.persist_replicas(upto=upto)

    # -- topology ------------------------------------------------------------------------

    @precondition(lambda self: not self.cluster.down)
    @rule(name=st.sampled_from(NAMES))
    def add_and_rebalance(self, name: str) -> None:
        if name in self.cluster.nodes:
            return
        before = self.docs()
        self.cluster.add_node(name)
        self.cluster.rebalance()
        assert self.docs() == before

    @precondition(lambda self: not self.cluster.down and len(self.cluster.nodes) > 1)
    @rule(data=st.data())
    def remove_and_rebalance(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self.cluster.nodes))
        before = self.docs()
        self.cluster.remove_node(name)
        self.cluster.rebalance()
        assert name not in self.cluster.nodes
        assert self.docs() == before

    @rule(vb=st.integers(0, VBUCKETS - 1), data=st.data())
    def take_over(self, vb: int, data: st.DataObject) -> None:
        c = self.cluster
        old = c.map.active(vb)
        up = [n for n in c.nodes if n not in c.down and n != old]
        if old is None or old in c.down or not up:
            return
        node = data.draw(st.sampled_from(up))
        before, uuid = self.docs(), c.active(vb).failover.newest_uuid
        c.take_over(vb, node)
        assert self.docs() == before
        assert c.active(vb).failover.newest_uuid == uuid

    @precondition(lambda self: len(self.cluster.nodes) > 1)
    @rule(data=st.data())
    def hard_failover(self, data: st.DataObject) -> None:
        c = self.cluster
        node = data.draw(st.sampled_from(c.nodes))
        if node in c.map.nodes and len(c.map.nodes) == 1:
            return
        before = expected = self.docs()
        survivors = {}
        if node in c.map.nodes:
            new_map = c.map.with_failed_over(node, c.down)
            for vb in c.map.actives_on(node):
                expected = {k: v for k, v in expected.items() if v.vbucket != vb}
                promoted = new_map.active(vb)
                if promoted is not None:
                    survivor = c.copy(promoted, vb)
                    assert survivor is not None
                    survivors[vb] = (survivor, list(survivor.log))
        c.failover_node(node)
        live = set(self.bucket.manifest.collections)
        for vb, (survivor, log) in survivors.items():
            assert c.active(vb) is survivor
            assert survivor.log[: len(log)] == log, "the promoted replica keeps what it had"
            # and gains only the manifest changes it missed (a flush may forget documents)
            assert all(it.system for it in survivor.log[len(log) :])
            expected.update(documents(survivor.log, live))
        after = self.docs()
        assert after == expected, "exactly what the promoted replicas had"
        event("hard failover", "lost writes" if set(after) != set(before) else "lost nothing")

    @precondition(lambda self: len(self.cluster.nodes) > 1)
    @rule(data=st.data())
    def graceful_failover(self, data: st.DataObject) -> None:
        c = self.cluster
        node = data.draw(st.sampled_from(c.nodes))
        before = self.docs()
        try:
            c.failover_node(node, graceful=True)
        except ModelError:
            return  # down, or a vbucket without an up replica, or the last node
        assert self.docs() == before

    @rule(data=st.data())
    def node_down(self, data: st.DataObject) -> None:
        c = self.cluster
        up = [n for n in c.nodes if n not in c.down]
        if not up:
            return
        node = data.draw(st.sampled_from(up))
        live = set(self.bucket.manifest.collections)
        expected = self.docs()
        for vb in c.map.actives_on(node) if node in c.map.nodes else []:
            active = c.active(vb)
            kept = [it for it in active.log if it.seqno <= active.persisted_seqno]
            expected = {k: v for k, v in expected.items() if v.vbucket != vb}
            expected.update(documents(kept, live))
        before = self.docs()
        c.node_down(node)
        assert self.docs() == expected, "only what the node persisted"
        event("node down", "lost writes" if expected != before else "lost nothing")

    @rule(data=st.data())
    def node_up(self, data: st.DataObject) -> None:
        c = self.cluster
        if not c.down:
            return
        c.node_up(data.draw(st.sampled_from(sorted(c.down))))

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def consistent(self) -> None:
        if hasattr(self, "cluster"):
            check_cluster(self.cluster)


TestCluster = ClusterMachine.TestCase
