"""The frames a stream queues: chunks, frames read and not yet queued, and the frames a
stream's selection picks from a run (a memory batch or a backfill), in its connection's
value form (``ItemEncoder.prepare``).

Performance (docs/performance.md, mockdcp's design "Performance rules"): a stream takes
the shared canonical frames by position or by mask, with C loops, and counts their end
offsets from the frame sizes kept beside them; it never reads each frame's pieces.
"""

from __future__ import annotations

from array import array
from itertools import accumulate, compress
from typing import TYPE_CHECKING

import attrs

from mockdcp.model import TAG_COLLECTION, TAG_DURABLE, TAG_EMPTY, TAG_SYSTEM
from mockdcp.producer._encoder import Frames, ItemEncoder
from mockdcp.producer._numpy import numpy_module

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy
    from numpy.typing import NDArray

    from mockdcp.model import Item
    from mockdcp.producer._filter import Selection
    from mockdcp.protocol import StreamEndReason

    #: frame sizes (int64), one per frame of a run
    Sizes = NDArray[numpy.int64]
    #: frames picked, with the seqnos of the first and last of them
    Picked = tuple[Frames, int, int]

#: ``TAG_DURABLE`` alone, for ``bytes.translate`` to delete
_DURABLE = bytes([TAG_DURABLE])

#: the tag of a stream message made by the stream (SEQNO_ADVANCED, OSO markers): no
#: collection prefix, no value form (``ItemEncoder``)
_EXTRA_TAG = TAG_COLLECTION | TAG_EMPTY | TAG_SYSTEM

#: Bytes of canonical frames encoded per chunk (memory batch or backfill). Encoding a
#: whole checkpoint (thousands of frames) for every stream at once made the server
#: fault in hundreds of megabytes of fresh pages for a million-item stream (``mockdcp
#: bench``); a queue of one piece per stream keeps the encoded-ahead memory small.
PIECE_BYTES = 256 * 1024


@attrs.define(slots=True)
class Chunk:
    """Encoded stream messages: ``buf`` holds frames ending at ``ends`` (less ``base``);
    ``pos`` is the index of the next frame to send and ``offset`` its byte offset."""

    buf: bytearray
    #: each frame's end offset in ``buf``, plus ``base``
    ends: Sequence[int]
    base: int = 0
    pos: int = 0
    offset: int = 0

    @property
    def done(self) -> bool:
        return self.pos >= len(self.ends)


@attrs.frozen
class PendingFrames:
    """Frames read (a memory batch or a backfill) and not yet all queued, each in its
    connection's value form (``ItemEncoder.prepare``)."""

    frames: Frames
    last_seqno: int
    #: the end the stream sends once they are queued (its end seqno read, its filter
    #: emptied)
    then_end: StreamEndReason | None = None


def extra_frames(*frames: bytes) -> Frames:
    """Stream messages made by the stream (opaque 0, no stream-id) as frames to queue."""
    heads = list(frames)
    ends = list(accumulate(map(len, heads)))
    return Frames(heads, [b""] * len(heads), bytes([_EXTRA_TAG]) * len(heads), ends, 0)


def take(pieces: Sequence[bytes], positions: Sequence[int]) -> Sequence[bytes]:
    """The pieces at ``positions``: lazy pieces of the cold tier (``take``) stay lazy."""
    take_from = getattr(pieces, "take", None)
    if take_from is not None:
        out: Sequence[bytes] = take_from(positions)
        return out
    return list(map(pieces.__getitem__, positions))  # C loops, no Python per frame


#: fewer frames than this have their ends summed in Python (``frame_ends``): numpy's
#: calls cost more than such a sum
_FEW_ENDS = 64


def frame_ends(sizes: Sizes) -> Sequence[int]:
    """End offsets (an ``array("q")``) of frames of these sizes, one after the other."""
    if len(sizes) < _FEW_ENDS:
        return array("q", accumulate(sizes.tolist()))
    np = numpy_module()
    return array("q", np.cumsum(sizes).tobytes())


def joined(*parts: Frames) -> Frames:
    """Frames one after the other (their end offsets shifted, not counted again)."""
    np = numpy_module()
    heads: list[bytes] = []
    tails: list[bytes] = []
    ends = []
    total = 0
    for part in parts:
        heads += part.heads
        tails += part.tails
        if part.ends:
            shifted = np.asarray(part.ends, np.int64) + (total - part.base)
            ends.append(shifted)
            total = int(shifted[-1])
    together = np.concatenate(ends) if ends else np.empty(0, np.int64)
    tags = b"".join(p.tags for p in parts)
    return Frames(heads, tails, tags, array("q", together.tobytes()), 0)


def pick(
    encoder: ItemEncoder,
    run: tuple[Sequence[bytes], Sequence[bytes], bytes],
    selection: Selection,
    items_at: Callable[[Sequence[int]], Sequence[Item]],
    seqnos: Sequence[int],
    sizes: Sizes,
    sync: int = 0,
) -> Picked | None:
    """The selected frames of a backfill's ``run`` (heads, tails, tags) in the
    connection's value form, with the seqnos of the first and last of them; ``None`` if
    none is selected."""
    heads, tails, tags = run
    if selection.positions is None:
        # the cold tier's pieces know their frames' offsets (``ColdPieces``: kept with a
        # short read, as the pieces are, for every stream of the vbucket)
        offsets = getattr(heads, "frame_offsets", None)
        ends = frame_ends(sizes) if offsets is None else offsets()
        frames = encoder.prepare(heads, tails, tags, ends, 0, items_at, sync=sync)
        return frames, seqnos[0], seqnos[len(heads) - 1]
    return chosen(encoder, run, selection, items_at, sizes, sync)


def chosen(
    encoder: ItemEncoder,
    run: tuple[Sequence[bytes], Sequence[bytes], bytes],
    selection: Selection,
    items_at: Callable[[Sequence[int]], Sequence[Item]],
    sizes: Sizes | None,
    sync: int = 0,
    visible: tuple[list[bytes], list[bytes], Sequence[int], int] | None = None,
) -> Picked | None:
    """The frames of ``run`` at the selection's positions (``None`` if there is none)
    in the connection's value form, with the seqnos of the first and last of them; the
    chosen frames' end offsets come from the run's frame ``sizes``. ``visible``: a
    memory batch's frames without prepares and aborts, as the checkpoint keeps them
    (``MemoryBatch.visible``), for a selection of all of those (``mask``)."""
    heads, tails, tags = run
    positions = selection.positions
    assert positions is not None
    if not positions:
        return None
    np = numpy_module()
    mask = selection.mask
    base = 0
    if mask is not None and visible is not None:
        heads, tails, ends, base = visible
        tags = tags.translate(None, _DURABLE)
    elif mask is not None and isinstance(heads, list) and isinstance(tails, list):
        assert sizes is not None
        # every frame but the prepares and aborts: C loops, no take per frame
        heads, tails = list(compress(heads, mask)), list(compress(tails, mask))
        tags = tags.translate(None, _DURABLE)
        ends = frame_ends(sizes[np.frombuffer(mask, np.bool_)])
    else:
        assert sizes is not None
        at = np.asarray(positions, np.int64)
        heads, tails = take(heads, positions), take(tails, positions)
        tags = np.frombuffer(tags, np.uint8)[at].tobytes()
        ends = frame_ends(sizes[at])

    def chosen_at(indices: Sequence[int]) -> Sequence[Item]:
        return items_at([positions[i] for i in indices])

    frames = encoder.prepare(heads, tails, tags, ends, base, chosen_at, sync=sync)
    first, last = items_at([positions[0], positions[-1]])
    return frames, first.seqno, last.seqno
