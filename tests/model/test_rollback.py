from __future__ import annotations

import random

import pytest

from mockdcp.model import FailoverTable, needs_rollback

# kv_engine docs/dcp/documentation/discussion.md: failover.json, newest first
HUMPTY = [(2222, 3), (1111, 0)]


def decide(
    start: int,
    uuid: int,
    snap: tuple[int, int],
    *,
    high: int = 10,
    purge: int = 0,
    table: list[tuple[int, int]] = HUMPTY,
    **kw: object,
) -> tuple[bool, int]:
    rollback, seqno, _ = needs_rollback(
        start_seqno=start,
        high_seqno=high,
        vbucket_uuid=uuid,
        snap_start_seqno=snap[0],
        snap_end_seqno=snap[1],
        purge_seqno=purge,
        failover_entries=table,
        **kw,  # type: ignore[arg-type]
    )
    return rollback, seqno


def test_discussion_page_correct_resume_rolls_back_to_1() -> None:
    # echo "1111 1 4 3" | ./humpty_dumpty failover.json 10 0 -> Rollback:true, seqno 1
    assert decide(3, 1111, (1, 4)) == (True, 1)


def test_discussion_page_incorrect_snapshot_does_not_roll_back() -> None:
    # echo "1111 3 3 3" | ./humpty_dumpty failover.json 10 0 -> Rollback:false
    assert decide(3, 1111, (3, 3)) == (False, 0)


def test_discussion_page_reason_names_the_producer_upper() -> None:
    _, _, reason = needs_rollback(
        start_seqno=3,
        high_seqno=10,
        vbucket_uuid=1111,
        snap_start_seqno=1,
        snap_end_seqno=4,
        purge_seqno=0,
        failover_entries=HUMPTY,
    )
    assert reason == "consumer ahead of producer - producer upper at 3"


@pytest.mark.parametrize(
    ("start", "uuid", "snap", "expected"),
    [
        (8, 2222, (8, 8), (False, 0)),  # newest uuid, behind high, complete snapshot
        (10, 2222, (10, 10), (False, 0)),  # at the high seqno
        (15, 2222, (15, 15), (True, 10)),  # ahead of the producer: back to high
        (15, 2222, (12, 15), (True, 10)),  # ahead, mid snapshot starting above high
        (9, 2222, (5, 12), (True, 5)),  # mid-snapshot beyond upper: back to snap start
        (2, 1111, (2, 2), (False, 0)),  # older branch, below its end
        (5, 1111, (5, 5), (True, 3)),  # older branch, beyond the branch point
        (5, 9999, (5, 5), (True, 0)),  # unknown uuid
        (0, 9999, (0, 0), (False, 0)),  # start 0: always fine
    ],
)
def test_rollback_table_of_producer_md(
    start: int, uuid: int, snap: tuple[int, int], expected: tuple[bool, int]
) -> None:
    assert decide(start, uuid, snap) == expected


def test_start_zero_with_strict_and_unknown_uuid_rolls_back_to_zero() -> None:
    assert decide(0, 9999, (0, 0), strict_vbuuid=True) == (True, 0)


def test_start_zero_with_strict_and_uuid_zero_is_fine() -> None:
    assert decide(0, 0, (0, 0), strict_vbuuid=True) == (False, 0)


def test_start_below_purge_seqno_rolls_back_to_zero() -> None:
    assert decide(5, 2222, (5, 5), purge=7) == (True, 0)


def test_ignore_purged_tombstones_skips_the_purge_rule() -> None:
    assert decide(5, 2222, (5, 5), purge=7, ignore_purged_tombstones=True) == (False, 0)


def test_client_purge_seqno_equal_to_servers_skips_the_purge_rule() -> None:
    assert decide(5, 2222, (5, 5), purge=7, client_purge_seqno=7) == (False, 0)


def test_legacy_collection_exemption() -> None:
    # kv_engine FailoverTable::needsRollback, VBucket::getHighSeqnoOfCollections: legacy
    # client S=50, P=100, _default high seqno 40 -> no rollback
    table = [(4444, 0)]
    assert decide(
        50, 4444, (50, 50), high=120, purge=100, table=table, collections_high_seqno=40
    ) == (False, 0)
    assert decide(50, 4444, (50, 50), high=120, purge=100, table=table) == (True, 0)


def test_failover_table_adds_newest_first_and_prunes_above() -> None:
    table = FailoverTable(random.Random(1))
    first = table.entries[0]
    assert first[1] == 0
    assert first[0] != 0
    assert first[0] < 2**48
    table.add_entry(10)
    table.add_entry(20)
    assert [s for _, s in table.entries] == [20, 10, 0]
    table.add_entry(15)  # entries above the new branch point go
    assert [s for _, s in table.entries] == [15, 10, 0]


def test_failover_table_keeps_at_most_25_entries() -> None:
    table = FailoverTable(random.Random(2))
    for seqno in range(1, 40):
        table.add_entry(seqno)
    assert len(table.entries) == 25
    assert table.entries[0][1] == 39
    assert len({u for u, _ in table.entries}) == 25


def test_failover_table_prune_after_kv_rollback_creates_entry_when_empty() -> None:
    table = FailoverTable(random.Random(3))
    table.entries = [(7, 30), (6, 20)]
    table.prune_above(10)
    assert len(table.entries) == 1
    assert table.entries[0][1] == 10
