from __future__ import annotations

import pytest

from mockdcp import ModelError
from mockdcp.model import Bucket
from mockdcp.protocol import SystemEventType
from mockdcp.protocol._flatbuffers import decode_flatbuffers_value


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def magma(clock: Clock | None = None, **kw: object) -> Bucket:
    return Bucket(
        "default",
        1,
        seed=1,
        clock=clock or Clock(),
        storage="magma",
        collections={"inventory": ["hotel", {"name": "log", "history": False}]},
        **kw,  # type: ignore[arg-type]
    )


def seqnos_of(b: Bucket, cid: int, key: bytes) -> list[int]:
    snap = b.vbucket(0).history_snapshot(0)
    return [s for s, c, h in zip(snap.seqnos, snap.cids, snap.tails, strict=True)
            if c == cid and h.startswith(key)]  # fmt: skip


class TestStorage:
    def test_couchstore_is_the_default_and_retains_no_history(self) -> None:
        b = Bucket("default", 1, clock=Clock())
        assert b.storage == "couchstore"
        assert not b.retains_history
        assert b.vbucket(0).history_start_seqno == 0

    def test_magma_retains_history_by_default(self) -> None:
        b = magma()
        assert b.retains_history
        assert b.history_retention_bytes > 0
        assert b.vbucket(0).history_start_seqno == 1

    @pytest.mark.parametrize(
        "kw",
        [
            {"storage": "rocksdb"},
            {"history_retention_bytes": 10},
            {"history_retention_seconds": 60},
            {"storage": "magma", "history_retention_bytes": -1},
        ],
    )
    def test_bad_storage_settings_are_refused(self, kw: dict[str, object]) -> None:
        with pytest.raises(ModelError):
            Bucket("default", 1, clock=Clock(), **kw)  # type: ignore[arg-type]

    def test_history_true_on_couchstore_is_a_clear_error(self) -> None:
        b = Bucket("default", 1, clock=Clock())
        with pytest.raises(ModelError, match="magma"):
            b.create_collection("_default", "c", history=True)
        with pytest.raises(ModelError, match="magma"):
            Bucket("d", 1, clock=Clock(), collections={"s": [{"name": "c", "history": True}]})
        assert b.manifest.uid == 0

    def test_magma_with_zero_retention_keeps_no_history(self) -> None:
        b = magma(history_retention_bytes=0, history_retention_seconds=0)
        assert not b.retains_history
        with pytest.raises(ModelError):
            b.purge_history()


class TestManifest:
    def test_magma_collections_default_to_history_and_say_so(self) -> None:
        b = magma()
        cols = {c["name"]: c for sc in b.manifest_json()["scopes"] for c in sc["collections"]}  # type: ignore[attr-defined]
        assert cols["hotel"]["history"] is True
        assert "history" not in cols["log"]
        assert "history" not in cols["_default"]

    def test_modify_collection_history_writes_a_flatbuffers_modify_event(self) -> None:
        b = magma()
        b.modify_collection("inventory", "hotel", history=False)
        ev = b.vbucket(0).system_events[-1]
        assert ev.event is SystemEventType.MODIFY_COLLECTION
        assert decode_flatbuffers_value(int(ev.event), ev.flatbuffers_value()).history is False  # type: ignore[union-attr]
        begin = b.vbucket(0).system_events[1]
        assert decode_flatbuffers_value(int(begin.event), begin.flatbuffers_value()).history is True  # type: ignore[union-attr]
        with pytest.raises(ModelError, match="already"):
            b.modify_collection("inventory", "hotel", history=False)


class TestCheckpoints:
    def test_repeated_key_of_history_collection_closes_the_checkpoint(self) -> None:
        b = magma()
        hotel = b.resolve_collection("inventory.hotel")
        vb = b.vbucket(0)
        before = len(vb.checkpoints)
        for v in (b"1", b"2", b"3"):
            b.set("k", v, collection_id=hotel, vbucket=0)
        assert len(vb.checkpoints) == before + 2
        assert all(cp.historical for cp in vb.checkpoints)
        assert [e.value for cp in vb.checkpoints for e in cp.entries if e is not None][-3:] == [
            b"1",
            b"2",
            b"3",
        ]

    def test_non_history_collection_still_deduplicates(self) -> None:
        b = magma()
        log = b.resolve_collection("inventory.log")
        vb = b.vbucket(0)
        before = len(vb.checkpoints)
        for v in (b"1", b"2", b"3"):
            b.set("k", v, collection_id=log, vbucket=0)
        assert len(vb.checkpoints) == before
        assert sum(e is not None and e.key == b"k" for e in vb.checkpoints[-1].entries) == 1

    def test_bulk_rows_of_a_history_collection_keep_every_revision(self) -> None:
        b = magma()
        hotel = b.resolve_collection("inventory.hotel")
        b.set_many([b"k", b"k"], [b"1", b"2"], collection_ids=[hotel, hotel])
        b.persist()
        assert len(seqnos_of(b, hotel, b"k")) == 2


class TestDiskHistory:
    def test_history_snapshot_has_every_revision_of_history_collections_only(self) -> None:
        b = magma()
        hotel, log = b.resolve_collection("inventory.hotel"), b.resolve_collection("inventory.log")
        for v in ("1", "2", "3"):
            b.set("h", v, collection_id=hotel, vbucket=0)
            b.set("l", v, collection_id=log, vbucket=0)
        b.persist()
        assert len(seqnos_of(b, hotel, b"h")) == 3
        assert len(seqnos_of(b, log, b"l")) == 1
        # the de-duplicated view keeps one of each
        snap = b.vbucket(0).disk_snapshot(0, frames=True)
        assert sum(c == hotel for c in snap.cids) == 1

    def test_purge_history_moves_the_start_and_drops_old_revisions(self) -> None:
        b = magma()
        hotel = b.resolve_collection("inventory.hotel")
        for v in ("1", "2", "3"):
            b.set("h", v, collection_id=hotel, vbucket=0)
        b.persist()
        vb = b.vbucket(0)
        second = vb.high_seqno - 1
        b.purge_history(vbucket=0, upto=second)
        assert vb.history_start_seqno == second + 1
        assert seqnos_of(b, hotel, b"h") == [vb.high_seqno]
        with pytest.raises(ModelError):
            b.purge_history(vbucket=0, upto=vb.high_seqno + 1)

    def test_retention_by_seconds_follows_the_bucket_clock(self) -> None:
        clock = Clock()
        b = magma(clock, history_retention_seconds=60)
        hotel = b.resolve_collection("inventory.hotel")
        b.set("h", "old", collection_id=hotel, vbucket=0)
        b.persist()
        old = b.vbucket(0).high_seqno
        clock.now += 120
        b.set("h", "new", collection_id=hotel, vbucket=0)
        b.persist()
        assert b.vbucket(0).history_start_seqno == old + 1

    def test_retention_by_bytes_keeps_the_share_of_the_vbucket(self) -> None:
        b = magma(history_retention_bytes=200)
        hotel = b.resolve_collection("inventory.hotel")
        for i in range(20):
            b.set("h", f"v{i}", collection_id=hotel, vbucket=0)
        b.persist()
        vb = b.vbucket(0)
        assert vb.history_start_seqno > 1
        assert 0 < vb.history_bytes <= 200

    def test_failover_keeps_history_below_the_cut(self) -> None:
        b = magma()
        hotel = b.resolve_collection("inventory.hotel")
        b.set("h", "1", collection_id=hotel, vbucket=0)
        b.persist()
        b.set("h", "2", collection_id=hotel, vbucket=0)
        b.restart(vbucket=0)
        vb = b.vbucket(0)
        assert vb.history_start_seqno == 1
        assert len(seqnos_of(b, hotel, b"h")) == 1


class TestHistoryColumns:
    """A history backfill of history collections alone slices the persisted log's
    columns (``VBucket.history_columns``); it must equal the item-by-item read."""

    @staticmethod
    def _by_items(b: Bucket, after: int) -> tuple[object, ...]:
        from mockdcp.model._history_log import HistoryColumns

        vb = b.vbucket(0)
        kept, vb.history_columns = vb.history_columns, HistoryColumns()  # not the log
        try:
            return TestHistoryColumns._fields(vb.history_snapshot(after))
        finally:
            vb.history_columns = kept

    @staticmethod
    def _fields(snap: object) -> tuple[object, ...]:
        names = ("start_seqno", "end_seqno", "seqnos", "heads", "tails", "tags", "cids", "sizes")
        versions = getattr(snap, "versions", None)
        assert versions is not None
        seqnos = list(getattr(snap, "seqnos"))  # noqa: B009 - snap is any DiskSnapshot
        return (*(list(getattr(snap, n)) if n not in ("start_seqno", "end_seqno", "tags")
                  else getattr(snap, n) for n in names),
                [versions[s] for s in seqnos])  # fmt: skip

    def test_a_backfill_from_the_columns_equals_one_from_the_items(self) -> None:
        b = magma()
        hotel = b.resolve_collection("inventory.hotel")
        for round_ in range(3):
            for i in range(20):
                value = f'{{"round": {round_}, "i": {i}}}'
                b.set(f"k{i % 7}", value, collection_id=hotel, vbucket=0)
            b.persist(0, upto=b.vbucket(0).high_seqno - 5)  # a tail left in memory
        b.restart()  # the cut keeps what was persisted: the columns are rebuilt
        b.set("after", '{"restart": true}', collection_id=hotel, vbucket=0)
        b.persist(0)
        vb = b.vbucket(0)
        for after in (0, 3, vb.history_start_seqno, vb.persisted_seqno - 2):
            fast = self._fields(vb.history_snapshot(after))
            assert fast == self._by_items(b, after)
        assert len(vb.history_columns.seqnos) == len(vb.log)
        assert vb.history_bytes == sum(vb.history_columns.sizes)

    def test_a_backfill_with_a_collection_without_history_reads_the_items(self) -> None:
        b = magma()
        hotel = b.resolve_collection("inventory.hotel")
        log = b.resolve_collection("inventory.log")
        for i in range(10):
            b.set("same", f'{{"i": {i}}}', collection_id=log, vbucket=0)  # de-duplicated on disk
            b.set("rev", f'{{"i": {i}}}', collection_id=hotel, vbucket=0)  # every revision
        b.persist(0)
        snap = self._fields(b.vbucket(0).history_snapshot(0))
        assert snap == self._by_items(b, 0)
        cids = snap[6]
        assert isinstance(cids, list)
        assert cids.count(log) == 1
        assert cids.count(hotel) == 10
