"""``StreamFilter.select`` for runs with prepares and aborts: the quick selection of a
whole run less its durable frames (``without_durable``) is the general rule's."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from hypothesis import given, strategies as st

from mockdcp.model import TAG_COLLECTION, TAG_DURABLE
from mockdcp.producer._filter import (
    ALL,
    MaskPositions,
    Selection,
    StreamFilter,
    without_durable,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Item

#: (tag, collection id) of the frames a run is made of
DEFAULT_DOC = st.tuples(st.integers(0, 7), st.just(0))
OTHER_DOC = st.tuples(
    st.integers(0, 7).map(lambda dt: dt | TAG_COLLECTION), st.sampled_from([8, 9])
)
DURABLE = st.tuples(st.just(TAG_DURABLE), st.sampled_from([0, 8]))
#: a collection no frame is of: skipping it sends the general rule's way, changing nothing
UNUSED = frozenset({0x7777})


def _no_items(positions: Sequence[int]) -> list[Item]:
    assert not positions, "a run without system events reads no item"
    return []


def _sent(selection: Selection, count: int) -> list[int]:
    """The positions a selection sends of a run of ``count`` frames."""
    return list(range(count) if selection.positions is None else selection.positions)


def _run(frames: list[tuple[int, int]]) -> tuple[bytes, array[int]]:
    return bytes(t for t, _ in frames), array("I", (c for _, c in frames))


def _filters() -> list[StreamFilter]:
    return [StreamFilter.legacy(), StreamFilter(None)]


@given(st.lists(st.one_of(DEFAULT_DOC, DURABLE), min_size=1, max_size=60))
def test_without_durable_selects_what_the_general_rule_selects_for_default_documents(
    frames: list[tuple[int, int]],
) -> None:
    tags, cids = _run(frames)
    for make in range(2):
        quick = _filters()[make].select(tags, cids, _no_items)
        general = _filters()[make].select(tags, cids, _no_items, skip=UNUSED)
        assert _sent(quick, len(tags)) == _sent(general, len(tags))
        assert quick.hidden == general.hidden
        assert quick.ended == general.ended


@given(st.lists(st.one_of(DEFAULT_DOC, OTHER_DOC, DURABLE), min_size=1, max_size=60))
def test_pass_through_stream_without_sync_writes_drops_only_prepares_and_aborts(
    frames: list[tuple[int, int]],
) -> None:
    tags, cids = _run(frames)
    quick = StreamFilter(None).select(tags, cids, _no_items)
    general = StreamFilter(None).select(tags, cids, _no_items, skip=UNUSED)
    assert _sent(quick, len(tags)) == _sent(general, len(tags))
    assert quick.hidden == general.hidden
    expected = [i for i, (t, _) in enumerate(frames) if t != TAG_DURABLE]
    assert _sent(quick, len(tags)) == expected


def test_a_run_with_prepares_is_selected_by_a_mask_and_hides_the_last_prepare() -> None:
    tags = bytes([1, TAG_DURABLE, 1, 1, TAG_DURABLE, 1])
    selection = StreamFilter(None).select(tags, array("I", [0] * 6), _no_items)
    assert selection.mask == bytes([1, 0, 1, 1, 0, 1])
    assert selection.hidden == 4
    assert list(selection.positions or ()) == [0, 2, 3, 5]


def test_a_connection_with_sync_writes_gets_the_whole_run() -> None:
    tags = bytes([1, TAG_DURABLE, 1])
    sync = StreamFilter(None, sync_writes=True)
    assert sync.select(tags, array("I", [0] * 3), _no_items) is ALL


def test_legacy_stream_hides_only_prepares_of_the_default_collection() -> None:
    tags, cids = _run([(1, 0), (TAG_DURABLE, 0), (1, 0), (TAG_DURABLE, 8)])
    assert without_durable(tags, cids).hidden == 1
    assert without_durable(tags).hidden == 3


def test_mask_positions_read_as_the_list_of_set_positions() -> None:
    positions = MaskPositions(bytes([0, 1, 1, 0, 1, 0]))
    assert len(positions) == 3
    assert (positions[0], positions[-1], positions[1], positions[2]) == (1, 4, 2, 4)
    assert list(positions) == [1, 2, 4]
    assert list(positions[1:]) == [2, 4]
    empty = MaskPositions(bytes(3))
    assert len(empty) == 0
    assert list(empty) == []
