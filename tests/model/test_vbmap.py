"""The vbucket map: balanced placement, minimal moves, failover, validation, JSON."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, strategies as st

from mockdcp import ModelError
from mockdcp.model import MAX_REPLICAS, VBucketMap, VBucketMove


def assert_balanced(m: VBucketMap, replicas: int) -> None:
    """Actives and replicas within one of each other per node; a chain never repeats a
    node nor puts a replica on its active's node; every chain has min(R, N-1) replicas."""
    counts = m.counts()
    actives = [a for a, _ in counts.values()]
    held = [r for _, r in counts.values()]
    assert max(actives) - min(actives) <= 1, counts
    assert max(held) - min(held) <= 1, counts
    copies = min(replicas, len(m.nodes) - 1)
    for vb in range(m.num_vbuckets):
        chain = [n for n in m.chain(vb) if n is not None]
        assert len(chain) == len(set(chain)) == copies + 1
        assert m.active(vb) not in m.replicas(vb)


@pytest.mark.parametrize(
    ("vbuckets", "nodes", "replicas"),
    [(1024, 1, 0), (1024, 2, 1), (1024, 3, 1), (1024, 3, 2), (1024, 4, 3), (64, 5, 2), (7, 3, 2)],
)
def test_balanced_spreads_actives_and_replicas_evenly(
    vbuckets: int, nodes: int, replicas: int
) -> None:
    m = VBucketMap.balanced(vbuckets, [f"n{i}" for i in range(nodes)], replicas)
    assert m.num_vbuckets == vbuckets
    assert_balanced(m, replicas)


def test_a_new_map_places_actives_in_blocks_as_a_new_cluster_does() -> None:
    m = VBucketMap.balanced(1024, ["a", "b"], 1)
    assert [m.active(vb) for vb in (0, 511, 512, 1023)] == ["a", "a", "b", "b"]
    assert m.replicas(0) == ("b",)
    assert m.replicas(1023) == ("a",)


@given(vbuckets=st.integers(1, 1100), nodes=st.integers(1, 8), replicas=st.integers(0, 3))
def test_a_new_cluster_without_replicas_is_placed_as_any_placement_would_place_it(
    vbuckets: int, nodes: int, replicas: int
) -> None:
    """``place``'s shortcut for a new cluster with no replica to place (``_blocks``) gives
    the chains the general placement gives from no placement at all."""
    from mockdcp.model import _placement

    copies = min(replicas, nodes - 1)
    old: list[list[int]] = [[] for _ in range(vbuckets)]
    actives = _placement._place_actives(vbuckets, nodes, old)
    chosen = _placement._Replicas(vbuckets, nodes, copies, actives, old).place()
    general = [[a, *r] for a, r in zip(actives, chosen, strict=True)]
    assert _placement.place(vbuckets, nodes, replicas) == general


def test_a_map_names_the_first_vbucket_whose_chain_is_wrong() -> None:
    """A map checks each distinct chain once, and names the first vbucket holding a
    wrong one, whichever came first; entries that are not indexes (JSON lists) too."""
    good, bad, worse = (0, 1), (0, 0), (2, 0)
    with pytest.raises(ModelError, match="vbucket 2: chain \\[0, 0\\] names a node twice"):
        VBucketMap(("a", "b"), (good, good, bad, worse, bad), 1)
    with pytest.raises(ModelError, match=r"vbucket 1: chain \[0, 1\.0\] names no node"):
        VBucketMap(("a", "b"), (good, (0, 1.0), good), 1)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="vbucket 1: chain \\[\\[0\\], 1\\] names no node"):
        VBucketMap.from_json(
            {"serverList": ["a", "b"], "vBucketMap": [[0, 1], [[0], 1]], "numReplicas": 1}
        )


def test_copies_are_every_vbuckets_active_and_replicas_in_order() -> None:
    m = VBucketMap(("a", "b", "c"), ((0, 1), (1, -1), (-1, -1), (2, 0)), 1)
    assert m.copies() == [("a", ("b",)), ("b", ()), (None, ()), ("c", ("a",))]
    assert m.copies() == [(m.active(vb), m.replicas(vb)) for vb in range(4)]


@given(
    nodes=st.integers(1, 6),
    replicas=st.integers(0, 3),
    vbuckets=st.integers(1, 80),
    steps=st.lists(st.sets(st.integers(0, 7), min_size=1), max_size=4),
)
def test_rebalancing_any_map_onto_any_nodes_is_balanced_and_then_stays(
    nodes: int, replicas: int, vbuckets: int, steps: list[set[int]]
) -> None:
    replicas = min(replicas, nodes - 1)
    m = VBucketMap.balanced(vbuckets, [f"n{i}" for i in range(nodes)], replicas)
    for step in steps:
        names = [f"n{i}" for i in sorted(step)]
        m = m.rebalanced(names)
        assert m.nodes == tuple(names)
        assert m.num_replicas == replicas
        assert_balanced(m, replicas)
        assert m.moves_to(m.rebalanced(names)) == [], "a balanced map needs no move"


def test_adding_a_node_moves_only_what_it_takes() -> None:
    m = VBucketMap.balanced(1024, ["a", "b", "c"], 1)
    target = m.rebalanced(["a", "b", "c", "d"])
    moves = m.moves_to(target)
    assert target.counts()["d"] == (256, 256)
    # d needs 256 actives and 256 replicas; each vbucket gaining a copy on d is a move
    assert sum(m.takeover for m in moves) == 256
    assert sum(len(m.new_copies) for m in moves) == 512
    assert all(m.new_copies == ("d",) for m in moves)
    unmoved = set(range(1024)) - {m.vbucket for m in moves}
    assert all(m.chain(vb) == target.chain(vb) for vb in unmoved)


def test_removing_a_node_hands_its_actives_to_their_replicas_where_there_is_room() -> None:
    m = VBucketMap.balanced(16, ["a", "b", "c"], 1)
    target = m.rebalanced(["b", "c"])
    leaving = m.actives_on("a")
    # each of b and c is active for 8 in the end: it takes as many of a's vbuckets as it
    # has room for among those it holds a replica of (a takeover with no backfill)
    room = {n: 8 - len(m.actives_on(n)) for n in ("b", "c")}
    held = Counter(m.replicas(vb)[0] for vb in leaving)
    in_place = sum(min(held[n], room[n]) for n in room)
    moves = [mv for mv in m.moves_to(target) if mv.source[0] == "a"]
    assert len(moves) == len(leaving)
    assert sum(mv.target[0] in mv.source for mv in moves) == in_place
    assert all("a" not in mv.target for mv in m.moves_to(target))
    assert_balanced(target, 1)


def test_fewer_nodes_than_copies_pad_the_chains() -> None:
    m = VBucketMap.balanced(8, ["a", "b", "c"], 2)
    one = m.rebalanced(["b"])
    assert one.num_replicas == 2
    assert all(one.chain(vb) == ("b", None, None) for vb in range(8))
    assert one.to_json()["vBucketMap"][0] == [0, -1, -1]
    back = one.rebalanced(["a", "b", "c"])
    assert_balanced(back, 2)


def test_move_properties() -> None:
    move = VBucketMove(3, ("a", "b", None), ("c", "a", None))
    assert move.takeover
    assert move.new_copies == ("c",)
    assert move.dropped == ("b",)
    assert not VBucketMove(0, (None, None), ("a", None)).takeover


def test_failing_over_promotes_the_first_replica_and_drops_the_node() -> None:
    m = VBucketMap.from_chains(
        ["a", "b", "c"], [("a", "b", "c"), ("b", "a", "c"), ("a", None, None), ("c", "b", "a")], 2
    )
    after = m.with_failed_over("a")
    assert after.nodes == ("b", "c")
    assert after.chain(0) == ("b", "c", None)
    assert after.chain(1) == ("b", "c", None)
    assert after.chain(2) == (None, None, None), "no replica: no copy left"
    assert after.chain(3) == ("c", "b", None)
    skip_down = m.with_failed_over("a", down={"b"})
    assert skip_down.chain(0) == ("c", "b", None), "the first replica on an up node"
    assert skip_down.chain(1) == ("b", "c", None), "only where the failed node was active"


def test_failing_over_the_last_node_or_an_unknown_one_is_refused() -> None:
    with pytest.raises(ModelError, match="last node"):
        VBucketMap.balanced(4, ["a"], 0).with_failed_over("a")
    with pytest.raises(ModelError, match="no node 'x'"):
        VBucketMap.balanced(4, ["a", "b"], 1).with_failed_over("x")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: VBucketMap.balanced(4, ["a", "b"], 2), "2 replicas need 3 nodes"),
        (lambda: VBucketMap.balanced(4, [f"n{i}" for i in range(6)], 4), "0..3 replicas"),
        (lambda: VBucketMap.balanced(4, [], 0), "at least one node"),
        (lambda: VBucketMap.balanced(4, ["a", "a"], 1), "unique"),
        (lambda: VBucketMap.balanced(0, ["a"], 0), "at least one vbucket"),
        (lambda: VBucketMap(("a",), ((0, 0),), 1), "twice"),
        (lambda: VBucketMap(("a", "b"), ((-1, 0),), 1), "after a -1"),
        (lambda: VBucketMap(("a",), ((1,),), 0), "names no node"),
        (lambda: VBucketMap(("a",), ((0, -1),), 0), "1 entries"),
        (lambda: VBucketMap.from_chains(["a"], [("b",)], 0), "no node 'b'"),
        (lambda: VBucketMap.balanced(4, ["a", "b"], 1).rebalanced([]), "at least one node"),
        (lambda: VBucketMap.balanced(4, ["a"], 0).actives_on("z"), "no node 'z'"),
        (lambda: VBucketMap.balanced(4, ["a"], 0).chain(4), "no vbucket 4"),
        (
            lambda: VBucketMap.balanced(4, ["a"], 0).moves_to(VBucketMap.balanced(8, ["a"], 0)),
            "4 and 8 vbuckets",
        ),
    ],
)
def test_invalid_maps_and_arguments_raise_model_error(call: object, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        call()  # type: ignore[operator]


def test_json_is_the_vbucket_server_map() -> None:
    m = VBucketMap.balanced(4, ["h:11210", "h:11211"], 1)
    assert m.to_json() == {
        "hashAlgorithm": "CRC",
        "numReplicas": 1,
        "serverList": ["h:11210", "h:11211"],
        "vBucketMap": [[0, 1], [0, 1], [1, 0], [1, 0]],
    }
    assert VBucketMap.from_json(m.to_json()) == m
    with pytest.raises(ModelError, match="CRC"):
        VBucketMap.from_json({**m.to_json(), "hashAlgorithm": "KETAMA"})
    with pytest.raises(ModelError, match="serverList"):
        VBucketMap.from_json({"vBucketMap": []})


def test_with_chain_adds_new_nodes_at_the_end() -> None:
    m = VBucketMap.balanced(2, ["a", "b"], 1).with_chain(0, ["c", "a"])
    assert m.nodes == ("a", "b", "c")
    assert m.chain(0) == ("c", "a")
    assert m.chain(1) == ("b", "a")


def test_replica_count_is_capped_at_three() -> None:
    assert MAX_REPLICAS == 3
    m = VBucketMap.balanced(12, ["a", "b", "c", "d"], 3)
    assert Counter(itertools.chain.from_iterable(m.chains)) == {0: 12, 1: 12, 2: 12, 3: 12}
