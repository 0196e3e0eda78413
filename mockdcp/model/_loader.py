"""The bulk loader: a batch of documents written as ``Bucket.set`` would one by one.

A batch is validated whole before anything is written (``check_columns`` now, the rows a
step at a time), then written whole vbuckets at a time, each vbucket's rows through
``VBucket.write_rows`` (the items, seqnos, rev seqnos, de-duplication and frames that
``set`` makes, without a call per row). Steps let an event loop run other work while a
large bucket loads.
"""

from __future__ import annotations

import mmap
import sys
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from mockdcp.model._item import TAG_EXPIRATION, TAG_TOMBSTONE
from mockdcp.model._validate import Columns, Row, check_columns, check_rows
from mockdcp.protocol import collection_prefix
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import numpy as np
    from numpy.typing import NDArray

    from mockdcp.model._bucket_loads import BulkLoads
    from mockdcp.model._cold import ColdSegment
    from mockdcp.model._vbucket import VBucket


class BulkLoad:
    """One batch of ``bucket``: ``steps()`` validates, then writes it (see
    ``Bucket.set_many_steps``)."""

    def __init__(self, bucket: BulkLoads, columns: Columns, rows_per_step: int) -> None:
        self.bucket = bucket
        self.columns = columns
        self.rows_per_step = max(1, rows_per_step)

    def steps(self) -> Iterator[int]:
        """Validate and group ``rows_per_step`` rows at a time (yielding 0 after each
        step but the last), then write them (``_write_steps``). The batch's CAS values
        are reserved at the first step: a ``set`` between two steps takes the CAS after
        them."""
        c, step = self.columns, self.rows_per_step
        count = len(c)
        first = self.bucket.reserve_cas(count)
        vbuckets = self.bucket.vbuckets
        lists: list[list[Row]] = [[] for _ in vbuckets]
        for a in range(0, count, step):
            b = min(a + step, count)
            dts = (
                c.datatypes
                if c.datatypes is None or isinstance(c.datatypes, int)
                else c.datatypes[a:b]
            )
            ks, vs, dt_col, vbids = check_rows(c.keys[a:b], c.values[a:b], dts, vbuckets, a)
            rows = zip(
                ks, c.collection_ids[a:b], vs, dt_col, c.flags[a:b], c.expiry[a:b],
                range(first + a, first + b),
                strict=True,
            )  # fmt: skip
            for vbid, row in zip(vbids, rows, strict=True):
                lists[vbid].append(row)
            if b < count:
                yield 0
        per_vb = {vbid: rows_of for vbid, rows_of in enumerate(lists) if rows_of}
        del lists  # each step frees the rows it wrote: no one long free at the end
        yield from self._write_steps(per_vb)

    def _write_steps(self, per_vb: dict[int, list[Row]]) -> Iterator[int]:
        """Write the grouped rows, whole vbuckets at a time."""
        step: list[int] = []
        size = 0
        for vbid in sorted(per_vb):  # ids only: the rows go as they are written
            step.append(vbid)
            size += len(per_vb[vbid])
            if size >= self.rows_per_step:
                yield self._write_vbuckets(per_vb, step)
                step, size = [], 0
        if step:
            yield self._write_vbuckets(per_vb, step)

    def _write_vbuckets(self, per_vb: dict[int, list[Row]], vbids: list[int]) -> int:
        """One step: the rows of ``vbids``, checked again (the model may have changed
        since the batch was validated), then written; returns how many."""
        bucket = self.bucket
        for cid in self.columns.collections:
            bucket.manifest.check_collection(cid)
        for vbid in vbids:
            bucket.vbuckets[vbid].check_writable()
        # Millions of new objects: the cyclic collector would walk the whole heap again
        # and again while they are made (about a third of a large load's time).
        with bucket.pause_collector():
            written = 0
            for vbid in vbids:
                rows = per_vb.pop(vbid)
                bucket.vbuckets[vbid].write_rows(rows)
                written += len(rows)
        bucket.touched(vbids)
        return written


class ColdLoad:
    """A bulk load into the cold tier (``Bucket.cold_load``): ``add`` validates a batch
    of writes (``remove``: of deletions or expiries) and frames it with numpy (headers
    as one structured array, read out as one bytes object each by ``tolist``; a
    ``bytes.join`` a vbucket), and copies each vbucket's run of frames into that
    vbucket's buffer, an anonymous memory map grown in place (``mremap``: no copy): the
    frames are written to fresh memory once, where they stay. ``finish`` cuts each
    buffer to its size and makes it the vbucket's ``ColdSegment``, with the columns
    gathered from the batches, and installs them all.

    Fresh memory is what a load pays for (a page fault a page: on this project's VM a
    copy into fresh memory ran at a fifth of the speed of one into memory used before),
    and a step a vbucket a batch (1024 vbuckets, 8 rows each) cost more than the rows.
    """

    def __init__(self, bucket: BulkLoads) -> None:
        for vb in bucket.vbuckets:
            vb.check_writable()
            if vb.holds_documents():
                raise ModelError(
                    f"vbucket {vb.vbid} already holds documents: a cold load fills an empty bucket"
                )
        self.bucket = bucket
        self.count = 0
        #: each vbucket's high seqno when the load began (nothing may be written since)
        self._highs = [vb.high_seqno for vb in bucket.vbuckets]
        self._next = [high + 1 for high in self._highs]
        n = len(bucket.vbuckets)
        #: each vbucket's frames
        self._frames = _LoadBuffers(n)
        #: each batch's columns, grouped by vbucket, and where each vbucket's rows begin
        #: in it (``n + 1`` entries)
        self._sizes: list[Any] = []
        self._cids: list[Any] = []
        self._tags: list[Any] = []
        self._hashes: list[Any] = []
        self._rows: list[Any] = []
        self._bounds: list[Any] = []
        #: (first row, its CAS) of each batch; how many tombstones, and (first row, the
        #: clock then) of each batch of them
        self._reserved: list[tuple[int, int]] = []
        self._removed = 0
        self._now: list[tuple[int, int]] = []
        #: the row ``finish`` refused (a removal of a key not live then) and why
        self.refused: tuple[int, str] | None = None
        self._cas_before = bucket.last_cas

    def add(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        flags: Sequence[int] | int = 0,
        expiry: Sequence[int] | int = 0,
        datatypes: Sequence[int | None] | int | None = None,
    ) -> int:
        """Validate and frame a batch (``ModelError`` naming the row and field, nothing
        staged); returns its size."""
        c = check_columns(
            keys,
            values,
            collection_ids=collection_ids,
            flags=flags,
            expiry=expiry,
            datatypes=datatypes,
            check_collection=self.bucket.manifest.check_collection,
        )
        ks, vs, dts, vbids = check_rows(
            c.keys, c.values, c.datatypes, self.bucket.vbuckets, self.count
        )
        # a column given as one int is one for every row (no list of it read again)
        dt_column = datatypes if isinstance(datatypes, int) else dts
        cid_column = None if collection_ids is None else c.collection_ids
        return self._stage(ks, vs, vbids, cid_column, c.collections, dt_column, flags, expiry, 0)

    def remove(
        self,
        keys: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        expiration: bool = False,
    ) -> int:
        """Stage the deletion (``expiration``: the expiry) of each key, as
        ``Bucket.delete`` (``Bucket.expire``) would write it after the rows staged so
        far: a tombstone at the next seqno, its rev seqno one above the key's last, its
        delete time now (an expiry's: the document's expiry, if it had one). The keys
        and collections are checked now (``ModelError`` naming the row, nothing
        staged); that each key is live then is checked by ``finish``, which installs
        the rows before the first that is not and refuses that one. Returns how many."""
        count = len(keys)
        c = check_columns(
            keys,
            [b""] * count,
            collection_ids=collection_ids,
            flags=0,
            expiry=0,
            datatypes=0,
            check_collection=self.bucket.manifest.check_collection,
        )
        ks, vs, _, vbids = check_rows(c.keys, c.values, 0, self.bucket.vbuckets, self.count)
        cid_column = None if collection_ids is None else c.collection_ids
        kind = TAG_TOMBSTONE | (TAG_EXPIRATION if expiration else 0)
        return self._stage(ks, vs, vbids, cid_column, c.collections, 0, 0, 0, kind)

    def _stage(
        self,
        ks: list[bytes],
        vs: list[bytes],
        vbids: list[int],
        collection_ids: Sequence[int] | None,
        collections: frozenset[int],
        datatypes: Sequence[int] | int,
        flags: Sequence[int] | int,
        expiry: Sequence[int] | int,
        tombstone: int,
    ) -> int:
        """Frame validated rows (mutations, or ``tombstone`` tag bits) into buffers."""
        import numpy as np

        from mockdcp.model._cold import DELETION_HEAD, HEAD, build_tags, head_dtype, key_hashes

        bucket = self.bucket
        n = len(ks)
        if not n:
            return 0
        first_cas = bucket.reserve_cas(n)
        self._reserved.append((self.count, first_cas))
        vb_of = np.asarray(vbids, np.int16)  # 16 bits: a radix sort
        order = np.argsort(vb_of, kind="stable")
        sorted_vb = vb_of[order]
        found, group_at, counts = np.unique(sorted_vb, return_index=True, return_counts=True)
        rank = np.arange(n, dtype=np.int64) - np.repeat(group_at, counts)
        nexts = np.asarray(self._next, np.int64)
        seqnos = nexts[sorted_vb] + rank
        for vbid, count in zip(found.tolist(), counts.tolist(), strict=True):
            self._next[vbid] += count
        pick = order.tolist()
        if n > 1:  # in C: a tuple of the rows in vbucket order
            ks, vs = list(itemgetter(*pick)(ks)), list(itemgetter(*pick)(vs))
        cids = (
            np.zeros(n, np.uint32)
            if collection_ids is None
            else np.asarray(collection_ids, np.uint32)[order]
        )
        hashes = key_hashes(ks, cids)
        prefixes = {cid: collection_prefix(cid) for cid in collections}
        plens = np.zeros(n, np.int64)
        for cid, prefix in prefixes.items():
            if len(prefix) != 1:
                plens[cids == cid] = len(prefix)
        plens[plens == 0] = 1
        klens = np.fromiter(map(len, ks), np.int64, n) + plens
        vlens = np.fromiter(map(len, vs), np.int64, n)
        dt = (
            np.full(n, datatypes, np.uint8)
            if isinstance(datatypes, int)
            else np.asarray(datatypes, np.uint8)[order]
        )
        # a one-byte collection prefix (ids below 128) goes in the head's last byte
        short = all(len(prefix) == 1 for prefix in prefixes.values())
        size = DELETION_HEAD if tombstone else HEAD
        head = np.zeros(n, head_dtype(short, deletion=bool(tombstone)))
        head["magic"], head["opcode"], head["extlen"] = 0x80, 0x58 if tombstone else 0x57, size - 24
        head["keylen"], head["datatype"], head["vbucket"] = klens, dt, sorted_vb
        head["bodylen"] = size - 24 + klens + vlens
        head["cas"] = first_cas + order
        head["seqno"], head["rev"] = seqnos, 1
        if not tombstone:
            head["flags"] = flags if isinstance(flags, int) else np.asarray(flags, np.uint32)[order]
            head["expiry"] = (
                expiry if isinstance(expiry, int) else np.asarray(expiry, np.uint32)[order]
            )
        width = 3 if short else 4
        parts: list[bytes] = [b""] * (width * n)
        if short:
            head["prefix"] = cids
            parts[0::3] = head.view(f"V{size + 1}").tolist()  # bytes of 56, each
        else:
            parts[0::4] = head.view(f"V{size}").tolist()
            parts[1::4] = list(map(prefixes.__getitem__, cids.tolist()))
        del head
        parts[width - 2 :: width], parts[width - 1 :: width] = ks, vs
        del ks, vs
        sizes = size + klens + vlens
        # a join a vbucket, copied to its buffer: small, in memory used again and again
        # (one join of the whole batch, 2 MB at 1024 vbuckets, was fresh memory each time)
        write = self._frames.write
        for vbid, at, count in zip(found.tolist(), group_at.tolist(), counts.tolist(), strict=True):
            write(vbid, b"".join(parts[width * at : width * (at + count)]))
        del parts
        bounds = np.zeros(len(bucket.vbuckets) + 1, np.int64)
        bounds[found + 1] = counts
        np.cumsum(bounds, out=bounds)
        self._sizes.append(sizes.astype(np.uint32))
        self._cids.append(cids)
        self._tags.append(build_tags(dt, cids, vlens) | np.uint8(tombstone))
        self._hashes.append(hashes)
        self._rows.append(self.count + order)
        self._bounds.append(bounds)
        if tombstone:
            self._removed += n
            self._now.append((self.count, int(bucket.clock())))
        self.count += n
        return n

    def add_frames(
        self,
        frames: bytearray | memoryview,
        keys: list[bytes],
        counts: NDArray[np.uint32],
        order: NDArray[np.uint32],
        sizes: NDArray[np.uint32],
    ) -> int:
        """Stage a batch of mutations of the default collection framed already, as
        ``add`` frames them (``mockdcp.data``'s documents: drawn and framed by the
        server's own generator, so not validated again; user input goes through
        ``add``): ``frames`` the rows' canonical frames grouped by vbucket (``counts``
        rows of each, in the batch's order within a vbucket), their CAS and seqno left
        to be written here; ``sizes`` of each frame in that order, ``order`` the row
        of the batch each frame is (its CAS is the batch's first plus that); ``keys``
        each row's key, in the batch's order. Only the shape is checked (``ModelError``,
        nothing staged). Returns how many rows.

        The seqnos and CAS are patched into ``frames`` with one numpy scatter; each
        vbucket's run is copied once into its buffer (``_LoadBuffers.write``); the key
        hashes are ``key_hashes`` of ``keys`` (the index of ``ColdSegment``)."""
        import numpy as np

        from mockdcp.model._cold import HEAD, build_tags, key_hashes

        bucket = self.bucket
        n, nvb = len(keys), len(bucket.vbuckets)
        if len(counts) != nvb or len(order) != n or len(sizes) != n or int(counts.sum()) != n:
            raise ModelError(f"a framed batch of {n} rows does not fit {nvb} vbuckets")
        starts = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        if int(starts[-1]) != len(frames):
            raise ModelError(f"a framed batch of {int(starts[-1])} bytes has {len(frames)}")
        self.bucket.manifest.check_collection(0)
        if not n:
            return 0
        first_cas = bucket.reserve_cas(n)
        self._reserved.append((self.count, first_cas))
        group_end = np.cumsum(counts, dtype=np.int64)
        group_at = group_end - counts
        sorted_vb = np.repeat(np.arange(nvb, dtype=np.int64), counts)
        nexts = np.asarray(self._next, np.int64)
        fields = np.empty((n, 2), ">u8")  # the CAS and the seqno: bytes 16 to 32 of a frame
        fields[:, 0] = first_cas + order.astype(np.int64)
        fields[:, 1] = nexts[sorted_vb] + np.arange(n, dtype=np.int64) - group_at[sorted_vb]
        self._next = (nexts + counts).tolist()
        view = np.frombuffer(frames, np.uint8)
        view[starts[:-1, None] + np.arange(16, 32)] = fields.view(np.uint8).reshape(n, 16)
        datatypes = view[starts[:-1] + 5]  # byte 5 of a frame
        # the key's length with its prefix: bytes 2 and 3 (not ``len`` of every key)
        keylens = view[starts[:-1] + 2].astype(np.int64) << 8 | view[starts[:-1] + 3]
        del view
        found = np.flatnonzero(counts)
        write = self._frames.write
        with memoryview(frames) as whole:
            for vbid, a, b in zip(
                found.tolist(),
                starts[group_at[found]].tolist(),
                starts[group_end[found]].tolist(),
                strict=True,
            ):
                write(vbid, whole[a:b])
        cids = np.zeros(n, np.uint32)
        vlens = sizes.astype(np.int64) - HEAD - keylens
        bounds = np.zeros(nvb + 1, np.int64)
        bounds[1:] = group_end
        self._sizes.append(sizes.astype(np.uint32, copy=False))
        self._cids.append(cids)
        self._tags.append(build_tags(datatypes, cids, vlens))
        self._hashes.append(key_hashes(keys, cids)[order])
        self._rows.append(self.count + order.astype(np.int64))
        self._bounds.append(bounds)
        self.count += n
        return n

    def finish(self) -> int:
        """Install every vbucket's segment (``ModelError`` if one was written since the
        load began, or stopped being active: nothing installed); returns how many
        documents were loaded."""
        for _ in self.finish_steps():
            pass
        return self.count

    def finish_steps(self) -> Iterator[int]:
        """``finish`` in steps, for a caller that yields to its event loop between them:
        the first steps (yielding -1) sort the rows by vbucket and join the batches'
        columns, a column a step; then each step builds one vbucket's segment (yielding
        its vbucket id); the last installs them all at once, nothing visible before. A
        removal of a key that is not live at its row (``remove``): the rows before the
        first such row are installed, then ``ModelError`` names it (``refused``)."""
        import numpy as np

        from mockdcp.model._cold import ColdSegment

        bucket = self.bucket
        self._check_unwritten()
        built: list[tuple[VBucket, ColdSegment, Any, Any]] = []
        refused: tuple[int, str] | None = None
        if self.count:
            with bucket.pause_collector():
                # each batch's rows are grouped by vbucket: one stable sort of the rows'
                # vbuckets (16 bits: a radix sort) puts each vbucket's rows together,
                # batch after batch, and every column is gathered once, in that order
                # (a gather a vbucket and column, 1024 vbuckets, cost about an eighth
                # more of finish at a million rows)
                by_vb, firsts = _vbucket_order(self._bounds, len(bucket.vbuckets))
                self._bounds = []
            # the collection ids only if a row is in another than the default one, the
            # rows in the load only if it removed keys (``_delete_times``, ``_cut``): a
            # gather of 10M rows each (``mockdcp bench docs``: ``phase_gather``)
            needed = (True, any(c.any() for c in self._cids), True, True, self._removed > 0)
            columns: list[Any] = []
            parts_of = (self._sizes, self._cids, self._tags, self._hashes, self._rows)
            for parts, gathered in zip(parts_of, needed, strict=True):
                yield -1  # a column a step: the event loop runs between them
                with bucket.pause_collector():
                    columns.append(np.concatenate(parts)[by_vb] if gathered else None)
                    parts.clear()
            sizes, cids, tags, hashes, rows = columns
            del by_vb, columns
            yield -1
        for vb in bucket.vbuckets:
            buf = self._frames.take(vb.vbid)
            if buf is None:
                continue
            with bucket.pause_collector():
                # the vbucket's rows: a run in each batch, batches in order
                at = slice(int(firsts[vb.vbid]), int(firsts[vb.vbid + 1]))
                total = at.stop - at.start
                starts = np.zeros(total + 1, np.int64)
                np.cumsum(sizes[at], out=starts[1:])
                vb_tags, vb_hashes = tags[at].copy(), hashes[at].copy()
                times = _delete_times(self._now, rows[at], vb_tags) if self._removed else None
                segment = ColdSegment(
                    vb.vbid,
                    self._highs[vb.vbid] + 1,
                    buf,
                    starts,
                    np.zeros(total, np.uint32) if cids is None else cids[at].copy(),
                    vb_tags,
                    vb_hashes,
                    times,
                )
                if times is not None:
                    bad = _check_tombstones(segment, rows[at])
                    if bad is not None and (refused is None or bad[0] < refused[0]):
                        refused = bad
                if len(segment.later):
                    segment = _with_revs(segment)
            built.append((vb, segment, None if rows is None else rows[at].copy(), vb_hashes))
            yield vb.vbid
        self._check_unwritten()
        if refused is not None:
            built = self._cut(built, refused[0])
            self.refused = refused
        with bucket.pause_collector():
            for vb, segment, _, _ in built:
                vb.load_cold(segment)
        bucket.touched([vb.vbid for vb, _, _, _ in built])
        if refused is not None:
            raise ModelError(f"row {refused[0]}: key: {refused[1]}")

    def _cut(
        self, built: list[tuple[VBucket, ColdSegment, Any, Any]], row: int
    ) -> list[tuple[VBucket, ColdSegment, Any, Any]]:
        """The segments of the rows before ``row``, and the CAS given back as if the
        rows from there on had not been staged."""
        kept = _cut_segments(built, row)
        cas = self._cas_before
        for first, first_cas in self._reserved:
            if first < row:
                cas = first_cas + row - 1 - first
        self.bucket.give_back_cas(cas)
        self.count = row
        return kept

    def _check_unwritten(self) -> None:
        for vb, high in zip(self.bucket.vbuckets, self._highs, strict=True):
            vb.check_writable()
            if vb.high_seqno != high or vb.holds_documents():
                raise ModelError(f"vbucket {vb.vbid} was written during the cold load")


def _delete_times(
    nows_at: list[tuple[int, int]], rows: NDArray[np.int64], tags: NDArray[np.uint8]
) -> NDArray[np.uint32]:
    """Each tombstone's delete time as staged: the clock when its batch was removed
    (``nows_at``: each such batch's first row and the clock then; an expiry's time is
    set from its document at ``finish``, if it had one)."""
    import numpy as np

    firsts = np.array([row for row, _ in nows_at], np.int64)
    nows = np.array([now for _, now in nows_at], np.uint32)
    times = np.zeros(len(rows), np.uint32)
    tombs = np.flatnonzero(tags & TAG_TOMBSTONE)
    times[tombs] = nows[np.searchsorted(firsts, rows[tombs], side="right") - 1]
    return times


def _cut_segments(
    built: list[tuple[VBucket, ColdSegment, Any, Any]], row: int
) -> list[tuple[VBucket, ColdSegment, Any, Any]]:
    """Each built segment cut to its rows before ``row`` (``ColdLoad._cut``)."""
    import numpy as np

    from mockdcp.model._cold import ColdSegment

    kept = []
    for vb, seg, rows, hashes in built:
        k = int(np.searchsorted(rows, row))
        if k == seg.count:
            kept.append((vb, seg, rows, hashes))
            continue
        if not k:
            continue
        buf = seg.buf
        assert isinstance(buf, mmap.mmap)
        buf.resize(int(seg.starts[k]))
        times = None if seg.delete_times is None else seg.delete_times[:k]
        cut = ColdSegment(
            vb.vbid,
            seg.first_seqno,
            buf,
            seg.starts[: k + 1],
            seg.cids[:k],
            seg.tags[:k],
            hashes[:k],
            times,
        )
        kept.append((vb, cut, rows[:k], hashes[:k]))  # its rev seqnos were patched
    return kept


def _vbucket_order(
    batch_bounds: list[Any], vbuckets: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The rows of every batch in vbucket order (batch after batch within a vbucket),
    and where each vbucket's rows begin in that order (``vbuckets + 1`` entries), from
    each batch's ``bounds``."""
    import numpy as np

    bounds = np.stack(batch_bounds)  # a row a batch
    vb_ids = np.arange(vbuckets, dtype=np.int16)
    by_vb = np.argsort(
        np.concatenate([np.repeat(vb_ids, np.diff(b)) for b in bounds]), kind="stable"
    )
    per_vb = bounds[:, 1:].sum(axis=0) - bounds[:, :-1].sum(axis=0)
    firsts = np.zeros(len(per_vb) + 1, np.int64)
    np.cumsum(per_vb, out=firsts[1:])
    return by_vb, firsts


class _LoadBuffers:
    """Each vbucket's frames of a cold load (``ColdLoad``): an anonymous memory map
    (``None`` until the vbucket has frames) grown in place (``mremap``: no copy), how
    many bytes of it hold frames, and how many are made resident (``_populate``)."""

    #: the first size of a vbucket's buffer (virtual: only what is written is resident)
    FIRST_CAPACITY = 1 << 20

    def __init__(self, vbuckets: int) -> None:
        self.bufs: list[mmap.mmap | None] = [None] * vbuckets
        self.used = [0] * vbuckets
        self.populated = [0] * vbuckets

    def write(self, vbid: int, frames: bytes | memoryview) -> None:
        """Append ``frames`` to the vbucket's buffer, grown (doubled, in place) as
        needed, its pages made ``POPULATE_AHEAD`` bytes at a time (``_populate``)."""
        buf, used = self.bufs[vbid], self.used[vbid]
        end = used + len(frames)
        if buf is None:
            buf = self.bufs[vbid] = _anonymous(max(self.FIRST_CAPACITY, end))
        elif end > len(buf):
            buf.resize(max(2 * len(buf), end))
        if end > self.populated[vbid]:
            self.populated[vbid] = _populate(buf, self.populated[vbid], end)
        buf[used:end] = frames
        self.used[vbid] = end

    def take(self, vbid: int) -> mmap.mmap | None:
        """The vbucket's buffer cut to its frames (the unwritten rest goes back), no
        longer held here; None if it has no frames."""
        buf = self.bufs[vbid]
        if buf is not None:
            self.bufs[vbid] = None
            buf.resize(self.used[vbid])
        return buf


def _anonymous(size: int) -> mmap.mmap:
    """Private anonymous memory of ``size`` bytes (resident as it is written)."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


#: bytes of a load's buffer made resident at once (``_populate``): at most this much a
#: vbucket is resident ahead of its frames until ``finish`` cuts the buffer to its size
POPULATE_AHEAD = 64 << 10
#: ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14, ``include/uapi/asm-generic/mman-common.h``;
#: the ``mmap`` module of Python 3.11 does not name it)
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
#: whether this kernel has it (unknown until the first call)
_populating: list[bool] = [sys.platform == "linux"]


def _populate(buf: mmap.mmap, made: int, end: int) -> int:
    """Make the pages of ``buf`` from ``made`` (a page's start) resident up to
    ``end`` rounded up to ``POPULATE_AHEAD`` (whole pages within ``buf``), in one
    ``madvise``; returns how far they are made. A page first written otherwise faults
    one at a time (on this project's VM, copying 512 MiB in 2 KiB pieces into fresh
    pages cost 0.33 CPU s, 0.24 s with 64 KiB made ahead so, 0.06 s into resident
    pages). Where the kernel has no ``MADV_POPULATE_WRITE`` (an ``OSError``) the pages
    fault as before."""
    stop = -(-end // POPULATE_AHEAD) * POPULATE_AHEAD
    if stop > len(buf):  # whole pages only (the last, part of one, faults)
        stop = len(buf) // mmap.PAGESIZE * mmap.PAGESIZE
    if _populating[0] and stop > made:
        try:
            buf.madvise(_MADV_POPULATE_WRITE, made, stop - made)
        except OSError:
            _populating[0] = False
    return stop


def _check_tombstones(segment: ColdSegment, rows: NDArray[np.int64]) -> tuple[int, str] | None:
    """The first row of the segment whose tombstone removes a key that is not live
    there (``Bucket.delete`` and ``Bucket.expire`` refuse it: never written, or deleted
    already), with why; else None. An expiry's delete time becomes its document's
    expiry, if it had one (``Bucket.expire``)."""
    import struct

    import numpy as np

    first = segment.first_seqno
    previous = dict(
        zip((segment.later_seqnos - first).tolist(), segment.later.tolist(), strict=True)
    )
    tags, times, buf = segment.tags, segment.delete_times, segment.buf
    assert times is not None
    for slot in np.flatnonzero(tags & TAG_TOMBSTONE).tolist():
        before = previous.get(slot)
        if before is None or tags[before] & TAG_TOMBSTONE:
            key = segment.key_at(slot)
            return int(rows[slot]), f"no live document {key!r} in vbucket {segment.vbid}"
        if tags[slot] & TAG_EXPIRATION:
            (expiry,) = struct.unpack_from(">I", buf, int(segment.starts[before]) + 44)
            if expiry:
                times[slot] = expiry
    return None


def _with_revs(segment: ColdSegment) -> ColdSegment:
    """The segment with the rev seqno of each key loaded again one above its previous
    version's (``set`` gives it so), patched into the frames."""
    import numpy as np

    from mockdcp.model._cold import REV_AT, ColdSegment

    revs: dict[int, int] = {}
    first = segment.first_seqno
    for slot, seqno in zip(segment.later.tolist(), segment.later_seqnos.tolist(), strict=True):
        revs[seqno - first] = revs.get(slot, 1) + 1
    # a buffer of the load's is patched in place (no one holds it yet)
    buf = segment.buf if isinstance(segment.buf, mmap.mmap) else bytearray(segment.buf)
    for slot, rev in revs.items():
        at = int(segment.starts[slot]) + REV_AT
        buf[at : at + 8] = rev.to_bytes(8, "big")
    hashes = np.empty_like(segment.hashes)
    hashes[segment.order] = segment.hashes
    return ColdSegment(
        segment.vbid,
        first,
        buf if isinstance(buf, mmap.mmap) else bytes(buf),
        segment.starts,
        segment.cids,
        segment.tags,
        hashes,
        segment.delete_times,
    )
