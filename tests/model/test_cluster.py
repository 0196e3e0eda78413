"""The cluster's steps, one rule each: takeover, hard and graceful failover, node down and
up, add/remove and rebalance, and the errors that refuse them."""

from __future__ import annotations

import pytest

from mockdcp import ModelError
from mockdcp.model import Change, Cluster, VBucket
from mockdcp.model._replication import is_prefix
from mockdcp.protocol import VBucketState
from tests.model._cluster import check_cluster, keys_in, new_bucket


def loaded(nodes: tuple[str, ...] = ("a", "b", "c"), replicas: int = 2, per_vb: int = 5) -> Cluster:
    """A cluster whose vbuckets hold ``per_vb`` documents each, replicated."""
    b = new_bucket()
    c = Cluster(b, nodes, replicas)
    for vb in range(4):
        for k in keys_in(vb, per_vb):
            b.set(k, '{"v":1}')
    c.replicate()
    return c


def values(c: Cluster) -> dict[tuple[int, bytes], bytes]:
    return {k: item.value for k, item in c.oracle().items()}


# -- takeover ---------------------------------------------------------------------------


def test_a_takeover_keeps_history_and_vbucket_uuid_and_kills_the_old_copy() -> None:
    c = loaded()
    old_node = c.map.active(0)
    assert old_node is not None
    new_node = c.map.replicas(0)[0]
    old, new = c.active(0), c.replicas(0)[new_node]
    c.pause_replication(node=new_node)
    c.bucket.set(keys_in(0, 6)[5], '{"v":2}')  # the new active has not got it yet
    entries, log, generation = list(old.failover.entries), list(old.log), old.generation
    before = values(c)
    move = c.take_over(0, new_node)
    assert move.takeover
    assert move.source[0] == old_node
    assert move.target[0] == new_node
    assert c.active(0) is new
    assert c.bucket.vbuckets[0] is new
    assert new.state is VBucketState.ACTIVE
    assert new.failover.entries == entries, "a transfer adds no failover entry"
    assert all(a is b for a, b in zip(new.log, log, strict=True)), "the same history"
    assert values(c) == before, "nothing lost"
    assert old.generation > generation, "streams on the old copy end STATE_CHANGED"
    # the old active takes the new one's place as a replica
    assert c.map.chain(0)[1:].count(old_node) == 1
    assert c.copy(old_node, 0) is old
    assert old.state is VBucketState.REPLICA
    check_cluster(c)


def test_a_takeover_to_a_node_without_a_copy_builds_one_and_drops_the_old() -> None:
    c = loaded(("a", "b", "c"), 1)
    vb = 0
    old_node = c.map.active(vb)
    assert old_node is not None
    spare = next(n for n in c.nodes if n not in c.map.chain(vb))
    old = c.active(vb)
    c.take_over(vb, spare)
    assert c.map.active(vb) == spare
    assert c.copy(old_node, vb) is None
    assert old.state is VBucketState.DEAD
    assert c.active(vb).persisted_seqno == c.active(vb).high_seqno, "built and persisted"
    check_cluster(c)
    b = c.bucket
    b.set(keys_in(vb, 1)[0], "{}")
    assert b.vbuckets[vb] is c.copy(spare, vb)


def test_a_takeover_is_refused_when_it_cannot_happen() -> None:
    c = loaded()
    with pytest.raises(ModelError, match="already active"):
        c.take_over(0, c.map.active(0) or "")
    with pytest.raises(ModelError, match="no node"):
        c.take_over(0, "z")
    c.node_down("b")
    with pytest.raises(ModelError, match="'b' is down"):
        c.take_over(c.map.actives_on("a")[0], "b")


# -- hard failover --------------------------------------------------------------------


def test_a_hard_failover_promotes_the_replica_with_what_it_had() -> None:
    c = loaded(("a", "b", "c"), 2)
    vb = c.map.actives_on("a")[0]
    first, second = c.map.replicas(vb)
    c.pause_replication(node=first)
    keys = keys_in(vb, 8)
    c.bucket.set(keys[5], '{"v":2}')
    c.bucket.set(keys[6], '{"v":2}')
    c.replicate()  # the second replica has them, the first not
    promoted = c.replicas(vb)[first]
    seqno = promoted.high_seqno
    behind = c.replicas(vb)[second]
    assert behind.high_seqno == seqno + 2
    old = c.active(vb)
    old_uuid = old.failover.newest_uuid
    changed = c.failover_node("a")
    assert vb in changed
    assert "a" not in c.nodes
    assert "a" not in c.map.nodes
    assert c.active(vb) is promoted
    assert c.map.active(vb) == first
    # history cut at the promoted replica's high seqno: a new branch there
    assert promoted.failover.entries[0][1] == seqno
    assert promoted.failover.entries[1][0] == old_uuid
    oracle = c.oracle()
    assert (0, keys[5].encode()) not in oracle
    assert (0, keys[6].encode()) not in oracle
    # the replica that was ahead rolled back to the new branch
    assert behind.high_seqno == seqno
    assert is_prefix(behind, promoted)
    assert old.state is VBucketState.DEAD
    check_cluster(c)
    c.resume_replication()
    c.bucket.set(keys[7], "{}")
    c.replicate()
    assert behind.high_seqno == promoted.high_seqno == seqno + 1


def test_a_hard_failover_prefers_a_replica_on_an_up_node() -> None:
    c = loaded(("a", "b", "c"), 2)
    vb = c.map.actives_on("a")[0]
    first, second = c.map.replicas(vb)
    c.node_down(first)
    c.failover_node("a")
    assert c.map.active(vb) == second
    check_cluster(c)


def test_a_hard_failover_without_replicas_loses_the_vbucket_until_a_rebalance() -> None:
    c = loaded(("a", "b"), 0)
    lost = c.map.actives_on("a")
    uuid = c.active(lost[0]).failover.newest_uuid
    assert c.failover_node("a") == lost
    for vb in lost:
        assert c.map.chain(vb) == (None,)
        assert c.active(vb).state is VBucketState.DEAD
        with pytest.raises(ModelError, match="dead"):
            c.bucket.set(keys_in(vb, 1)[0], "{}")
    assert all(k[1].decode() not in keys_in(lost[0], 5) for k in c.oracle())
    check_cluster(c)
    c.rebalance()
    for vb in lost:
        assert c.map.active(vb) == "b"
        assert c.active(vb).high_seqno == 0
        assert c.active(vb).failover.newest_uuid != uuid, "a new vbucket: consumers roll back"
    check_cluster(c)


def test_failing_over_the_last_node_or_an_unknown_one_is_refused() -> None:
    c = loaded(("a",), 0)
    with pytest.raises(ModelError, match="last node"):
        c.failover_node("a")
    with pytest.raises(ModelError, match="no node 'x'"):
        loaded().failover_node("x")


# -- graceful failover ------------------------------------------------------------------


def test_a_graceful_failover_loses_nothing_and_keeps_the_uuids() -> None:
    c = loaded(("a", "b", "c"), 1)
    c.pause_replication()
    for vb in range(4):
        c.bucket.set(keys_in(vb, 7)[6], '{"v":3}')  # not replicated yet
    moving = c.map.actives_on("b")
    uuids = {vb: c.active(vb).failover.newest_uuid for vb in moving}
    before = values(c)
    assert c.failover_node("b", graceful=True) == moving
    assert values(c) == before
    assert {vb: c.active(vb).failover.newest_uuid for vb in moving} == uuids
    assert "b" not in c.nodes
    check_cluster(c)


def test_a_graceful_failover_needs_the_node_up_and_a_replica_for_each_active() -> None:
    c = loaded(("a", "b"), 0)
    with pytest.raises(ModelError, match="no replica on an up node"):
        c.failover_node("a", graceful=True)
    assert c.nodes == ("a", "b"), "nothing changed"
    c = loaded(("a", "b", "c"), 1)
    c.node_down("a")
    with pytest.raises(ModelError, match="'a' is down"):
        c.failover_node("a", graceful=True)


# -- node down and up -------------------------------------------------------------------


def test_a_node_down_keeps_what_it_persisted_and_warmup_opens_new_branches() -> None:
    c = loaded(("a", "b"), 1, per_vb=4)
    actives = c.map.actives_on("a")
    vb = actives[0]
    c.bucket.persist(vb, upto=2)
    c.persist_replicas(node="a", upto=1)
    entries = {v: list(c.active(v).failover.entries) for v in actives}
    c.node_down("a")
    assert c.down == {"a"}
    active = c.active(vb)
    assert active.high_seqno == 2
    assert not active.online
    with pytest.raises(ModelError, match="node that is down"):
        c.bucket.set(keys_in(vb, 1)[0], "{}")
    with pytest.raises(ModelError, match="node that is down"):
        c.bucket.set_many([keys_in(vb, 1)[0].encode()], [b"{}"])
    with pytest.raises(ModelError, match="down"):
        c.rebalance()
    for replica_vb in c.map.replicas_on("a"):
        assert c.copy("a", replica_vb).high_seqno <= 1  # type: ignore[union-attr]
    # the replica on b still has 4: it is ahead of the crashed active
    assert c.replicas(vb)["b"].high_seqno == 4
    check_cluster(c)
    c.node_up("a")
    for v in actives:
        assert c.active(v).failover.entries[0][1] == c.active(v).high_seqno
        assert c.active(v).failover.entries[1:] == entries[v]
    assert c.replicas(vb)["b"].high_seqno == 2, "rolled back to the active's branch"
    c.replicate()
    assert all(c.copy("a", v).high_seqno == 4 for v in c.map.replicas_on("a"))  # type: ignore[union-attr]
    check_cluster(c)


def test_node_down_and_up_are_refused_out_of_turn() -> None:
    c = loaded()
    with pytest.raises(ModelError, match="not down"):
        c.node_up("a")
    c.node_down("a")
    with pytest.raises(ModelError, match="'a' is down"):
        c.node_down("a")


def test_a_down_node_can_be_failed_over_and_its_replicas_promoted() -> None:
    c = loaded(("a", "b", "c"), 1)
    before = values(c)
    c.node_down("a")
    c.failover_node("a")
    assert values(c) == before, "every write was replicated"
    check_cluster(c)


# -- add, remove, rebalance -------------------------------------------------------------


def test_adding_nodes_and_rebalancing_moves_by_takeover() -> None:
    c = loaded(("a",), 0, per_vb=3)
    uuids = [c.active(vb).failover.newest_uuid for vb in range(4)]
    before = values(c)
    c.add_node("b")
    assert c.nodes == ("a", "b")
    assert c.map.nodes == ("a",)
    moves = c.rebalance()
    assert c.map.counts() == {"a": (2, 0), "b": (2, 0)}
    assert [m.vbucket for m in moves if m.takeover] == c.map.actives_on("b")
    assert [c.active(vb).failover.newest_uuid for vb in range(4)] == uuids
    assert values(c) == before
    check_cluster(c)


def test_removing_a_node_and_rebalancing_takes_it_out() -> None:
    c = loaded(("a", "b", "c"), 1)
    before = values(c)
    c.remove_node("c")
    assert c.leaving == {"c"}
    c.rebalance()
    assert c.nodes == ("a", "b")
    assert c.map.nodes == ("a", "b")
    assert c.map.counts() == {"a": (2, 2), "b": (2, 2)}
    assert values(c) == before
    check_cluster(c)


def test_add_and_remove_are_validated() -> None:
    c = loaded(("a", "b"), 1)
    with pytest.raises(ModelError, match="already in the cluster"):
        c.add_node("a")
    with pytest.raises(ModelError, match="non-empty string"):
        c.add_node("")
    with pytest.raises(ModelError, match="no node 'z'"):
        c.remove_node("z")
    c.remove_node("a")
    with pytest.raises(ModelError, match="already being removed"):
        c.remove_node("a")
    with pytest.raises(ModelError, match="last node"):
        c.remove_node("b")
    c.rebalance()
    assert c.map.chain(0) == ("b", None), "one node holds one copy"
    check_cluster(c)


def test_a_node_added_but_not_rebalanced_fails_over_at_no_cost() -> None:
    c = loaded(("a", "b"), 1)
    c.add_node("d")
    assert c.failover_node("d") == []
    assert c.nodes == ("a", "b")


def test_the_feed_carries_each_node_and_vbucket_touched_once_per_step() -> None:
    c = loaded(("a", "b"), 1)
    changes: list[Change] = []
    c.bucket.feed.subscribe(changes.append)
    vb = c.map.actives_on("a")[0]
    c.take_over(vb, "b")
    move = changes[0]
    assert {("a", vb), ("b", vb)} <= move.copies
    assert {("a", vb), ("b", vb)} <= move.copies_reset, "the old active dead, the new active"
    assert vb in move.vbuckets
    assert vb in move.reset
    assert move.branches == (), "a takeover keeps the vbucket uuid"
    changes.clear()
    c.bucket.set(keys_in(vb, 1)[0], "{}")
    assert changes == [Change((vb,))], "a write: its active's vbucket, once"


def test_a_hard_failover_publishes_the_branches_it_cuts_and_the_copies_it_resets() -> None:
    c = loaded(("a", "b"), 1)
    changes: list[Change] = []
    c.bucket.feed.subscribe(changes.append)
    lost = c.map.actives_on("a")
    c.failover_node("a")
    (change,) = changes
    assert [cut.vbucket for cut in change.branches] == lost
    for cut in change.branches:
        assert (cut.uuid, cut.seqno) == c.active(cut.vbucket).failover.entries[0]
        assert ("b", cut.vbucket) in change.copies_reset, "the promoted replica"
    assert set(change.reset) == set(lost)
    assert all(("a", vb) in change.copies_reset for vb in range(c.bucket.num_vbuckets))


def test_a_move_leaves_the_old_copy_dead_on_its_node_until_ns_server_deletes_it() -> None:
    """ns_server's vbucket mover deletes the old copies once the move is done
    (``janitor_agent:delete_vbucket_copies`` after "Moving vbucket ~p done"): between
    the takeover and then the old node still has the vbucket, dead, with its failover
    log (kv_engine ``getFailoverLog`` answers from it)."""
    c = loaded(("a", "b"), 0, per_vb=3)
    c.remove_node("b")
    [move] = [m for m in c.plan_rebalance() if m.source[0] == "b"][:1]
    vb = move.vbucket
    old = c.active(vb)
    entries = list(old.failover.entries)
    c.prepare_move(move)
    c.apply_move(move)
    assert c.copy("b", vb) is None, "not in b's chain any more"
    kept = c.old_copy("b", vb)
    assert kept is old
    assert kept.state is VBucketState.DEAD
    assert kept.failover.entries == entries
    view = c.view("b")
    assert view.holds(vb) is old
    assert not view.is_active(vb)
    assert vb not in dict(view.high_seqnos())
    assert dict(view.high_seqnos(int(VBucketState.DEAD))) == {vb: old.high_seqno}
    assert c.delete_old_copies(vb) == [("b", vb)]
    assert c.old_copy("b", vb) is None
    assert view.holds(vb) is None
    assert view.high_seqnos(int(VBucketState.DEAD)) == [], "what it lacks is not listed"
    check_cluster(c)


def test_a_rebalance_at_once_or_its_end_deletes_every_old_copy() -> None:
    c = loaded(("a", "b", "c"), 1)
    c.remove_node("c")
    c.rebalance()
    assert all(c.old_copy(n, vb) is None for n in ("a", "b", "c") for vb in range(4))
    c = loaded(("a", "b", "c"), 1)
    c.remove_node("c")
    moves = c.plan_rebalance()
    for move in moves:
        c.prepare_move(move)
        c.apply_move(move)
    assert any(c.old_copy("c", m.vbucket) is not None for m in moves)
    assert c.finish_rebalance() == ["c"]
    assert c.nodes == ("a", "b")
    assert all(c.old_copy(n, vb) is None for n in ("a", "b", "c") for vb in range(4))
    check_cluster(c)


def test_a_replica_a_move_drops_stays_a_replica_until_deleted_then_dies() -> None:
    """ns_server sets a copy dead only when it deletes it (ns_memcached
    ``delete_vbucket``: DEL_VBUCKET, the copy set dead first where it is not): a
    dropped replica answers as a replica until the move ends."""
    c = loaded(("a", "b", "c"), 1)
    c.remove_node("c")
    move = next(m for m in c.plan_rebalance() if m.source[1] == "c" and "c" in m.dropped)
    vb = move.vbucket
    c.prepare_move(move)
    c.apply_move(move)
    kept = c.old_copy("c", vb)
    assert kept is not None
    assert kept.state is VBucketState.REPLICA
    assert c.view("c").holds(vb) is kept
    generation = kept.generation
    c.delete_old_copies(vb)
    assert VBucketState(kept.state) is VBucketState.DEAD  # (mypy narrowed it above)
    assert kept.generation > generation, "its streams end STATE_CHANGED"
    assert c.view("c").holds(vb) is None
    check_cluster(c)


def test_a_view_makes_the_dead_copy_of_a_vbucket_only_when_it_reads_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node's view reads a dead copy for a vbucket it holds none of; one node alone
    holds them all and makes none (each was a vbucket of its own, made at the first
    stream request: 1,024 of them for the default bucket)."""
    from mockdcp.model import _cluster

    made: list[int] = []
    real = _cluster._absent_copy

    def counted(vb: int) -> VBucket:
        made.append(vb)
        return real(vb)

    monkeypatch.setattr(_cluster, "_absent_copy", counted)
    alone = Cluster(new_bucket(), ("a",), 0)
    assert [alone.view("a").vbucket(vb).state for vb in range(4)] == [VBucketState.ACTIVE] * 4
    assert made == []
    c = loaded(("a", "b"), 0)
    view = c.view("a")
    lacking = next(vb for vb in range(4) if c.map.active(vb) != "a")
    dead = view.vbucket(lacking)
    assert dead.state is VBucketState.DEAD
    assert view.vbucket(lacking) is dead
    assert made == [lacking]


def test_replicas_a_branch_cut_rolls_back_are_published_reset() -> None:
    """A cut of the active's branch (``Bucket.cut_branch``) rolls its replicas that were
    ahead back when they attach again: the feed says those copies were reset, so
    their nodes end the streams on them (their history was cut, kv_engine
    ``docs/dcp/documentation/failure-scenarios.md``)."""
    c = loaded(("a", "b"), 1)
    changes: list[Change] = []
    c.bucket.feed.subscribe(changes.append)
    (replica,) = c.map.replicas(0)
    c.bucket.cut_branch(0, lose_after=2)
    cut, rolled = changes
    assert cut.reset == frozenset({0})
    assert [(b.vbucket, b.seqno) for b in cut.branches] == [(0, 2)]
    assert rolled.copies_reset == frozenset({(replica, 0)})
    assert c.replicas(0)[replica].high_seqno <= 2
