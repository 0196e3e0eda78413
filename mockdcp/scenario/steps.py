"""The step vocabulary: what a scenario file, ``POST /mock/steps`` and the Python API
say to the mock node. One attrs class per step; its YAML/JSON key is the snake_case
``NAME``, its fields are the class's fields. The same objects in all three spellings::

    - persist: {upto: 40}                   # YAML
    [{"persist": {"upto": 40}}]             # JSON (HTTP)
    Persist(upto=40)                        # Python

Users name things as they do: ``vbuckets: all | 3 | [0, 5]``, ``collection: scope.name``,
``value:`` a JSON object (encoded compactly) or a string, durations as seconds or
``"500ms"``/``"10s"``/``"2m"``. Do not subclass these classes.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Union

import attrs

#: ``all``, one vbucket, or a list of them.
Vbuckets = Union[Literal["all"], int, tuple[int, ...]]  # noqa: UP007 - cattrs resolves it
#: A document body: a JSON value (object, list) encoded compactly, or a string as is.
Value = Union[str, dict[str, object], list[object]]  # noqa: UP007
#: A seqno, or ``high``: each vbucket's high seqno when the step starts.
SeqnoTarget = Union[int, Literal["high"], None]  # noqa: UP007
#: Seconds (number) or a string with a unit: ``500ms``, ``10s``, ``2m``.
Duration = float
#: The default collection, as users spell it.
DEFAULT_COLLECTION = "_default._default"


@attrs.frozen(kw_only=True)
class Step:
    """Base of every step (``NAME`` is its key in YAML and JSON)."""

    NAME: ClassVar[str] = ""
    #: data, storage, cluster, faults or control
    GROUP: ClassVar[str] = ""


# -- data ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Set(Step):
    """Write a document: a mutation at the next seqno of its vbucket."""

    NAME = "set"
    GROUP = "data"
    key: str
    value: Value
    collection: str = DEFAULT_COLLECTION
    flags: int = 0
    expiry: int = 0


@attrs.frozen(kw_only=True)
class Delete(Step):
    """Delete a live document: a tombstone at the next seqno."""

    NAME = "delete"
    GROUP = "data"
    key: str
    collection: str = DEFAULT_COLLECTION


@attrs.frozen(kw_only=True)
class Expire(Step):
    """Expire a live document now, as the expiry pager does."""

    NAME = "expire"
    GROUP = "data"
    key: str
    collection: str = DEFAULT_COLLECTION


@attrs.frozen(kw_only=True)
class Touch(Step):
    """Give a live document a new expiry (a mutation with the same value)."""

    NAME = "touch"
    GROUP = "data"
    key: str
    expiry: int
    collection: str = DEFAULT_COLLECTION


@attrs.frozen(kw_only=True)
class Generate(Step):
    """``docs`` seeded Faker documents, keys ``{prefix}::{n:06d}`` from ``start`` on
    (generating the same keys again updates them)."""

    NAME = "generate"
    GROUP = "data"
    docs: int
    collection: str = DEFAULT_COLLECTION
    prefix: str = "doc"
    start: int = 0


@attrs.frozen(kw_only=True)
class Load(Step):
    """Load a Parquet corpus directory (``mockdcp corpus``) into the bucket."""

    NAME = "load"
    GROUP = "data"
    corpus: str


# -- storage ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Checkpoint(Step):
    """Close the open checkpoint: the next write starts a new one."""

    NAME = "checkpoint"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"


@attrs.frozen(kw_only=True)
class Persist(Step):
    """Write items up to ``upto`` (default: all) to disk."""

    NAME = "persist"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    upto: int | None = None


@attrs.frozen(kw_only=True)
class Persistence(Step):
    """Hold (``paused: true``) or release the background flusher; ``persist`` works
    while it is held."""

    NAME = "persistence"
    GROUP = "storage"
    paused: bool


@attrs.frozen(kw_only=True)
class Purge(Step):
    """Purge persisted tombstones up to ``upto`` (default: the persisted seqno)."""

    NAME = "purge"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    upto: int | None = None


@attrs.frozen(kw_only=True)
class DropCursor(Step):
    """The memory-to-disk switch: drop the streams' cursors (of the connections named
    ``connection``, or all) so they backfill from disk."""

    NAME = "drop_cursor"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Restart(Step):
    """An unclean node restart: unpersisted items are lost, warmup adds a failover
    entry, every connection drops."""

    NAME = "restart"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"


# -- cluster ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Failover(Step):
    """A replica takes over: items after ``lose_after`` (default: the persisted seqno
    with ``lose_unpersisted``, else none) are lost and a new branch starts. Streams of
    the vbuckets end (STATE_CHANGED), or with ``disconnect`` every connection drops."""

    NAME = "failover"
    GROUP = "cluster"
    vbuckets: Vbuckets = "all"
    lose_unpersisted: bool = True
    lose_after: int | None = None
    disconnect: bool = False


@attrs.frozen(kw_only=True)
class SetVbucketState(Step):
    """Change vbucket states; their streams end with STATE_CHANGED."""

    NAME = "set_vbucket_state"
    GROUP = "cluster"
    vbuckets: Vbuckets
    state: Literal["active", "replica", "pending", "dead"]


@attrs.frozen(kw_only=True)
class MoveVbucket(Step):
    """The vbuckets move away: dead here (NOT_MY_VBUCKET with the config), and the
    config revision advances."""

    NAME = "move_vbucket"
    GROUP = "cluster"
    vbuckets: Vbuckets


@attrs.frozen(kw_only=True)
class Flush(Step):
    """Bucket flush: every vbucket emptied, seqnos from 0, new failover tables."""

    NAME = "flush"
    GROUP = "cluster"


# -- faults ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Disconnect(Step):
    """Drop the connections (named ``connection``, or all)."""

    NAME = "disconnect"
    GROUP = "faults"
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Stall(Step):
    """Write nothing to the connections for ``seconds``."""

    NAME = "stall"
    GROUP = "faults"
    seconds: Duration
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Throttle(Step):
    """Write at most ``bytes_per_second`` to the connections for ``seconds``."""

    NAME = "throttle"
    GROUP = "faults"
    bytes_per_second: int
    seconds: Duration
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Delay(Step):
    """Answer the next ``count`` requests (named by opcode, e.g. ``dcp_stream_req``, or
    any) ``seconds`` late; replies keep their order."""

    NAME = "delay"
    GROUP = "faults"
    seconds: Duration
    request: str | None = None
    count: int = 1
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Corrupt(Step):
    """Damage the next frame written to the connections: ``magic``, ``opcode``,
    ``length`` (body length off by one: framing breaks) or ``value`` (a byte of the
    body flipped)."""

    NAME = "corrupt"
    GROUP = "faults"
    kind: Literal["magic", "opcode", "length", "value"] = "length"
    connection: str | None = None


@attrs.frozen(kw_only=True)
class EndStream(Step):
    """End the vbuckets' live streams with STREAM_END(``reason``)."""

    NAME = "end_stream"
    GROUP = "faults"
    vbuckets: Vbuckets = "all"
    reason: Literal[
        "ok",
        "closed",
        "state_changed",
        "disconnected",
        "too_slow",
        "backfill_failed",
        "rollback",
        "filter_empty",
        "lost_privileges",
    ] = "state_changed"
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Reject(Step):
    """The next ``count`` requests with opcode ``request`` (e.g. ``dcp_stream_req``; on
    ``vbucket`` if given) get ``status`` (e.g. ``not_my_vbucket``, with the config;
    ``etmpfail``)."""

    NAME = "reject"
    GROUP = "faults"
    request: str
    status: str
    count: int = 1
    vbucket: int | None = None


@attrs.frozen(kw_only=True)
class RefuseConnections(Step):
    """While ``enabled``, new connections are closed at once."""

    NAME = "refuse_connections"
    GROUP = "faults"
    enabled: bool = True


# -- control ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ConsumerProgress:
    """What a ``wait`` waits for, all given conditions together (see ``Wait``)."""

    #: the vbuckets the seqno condition is about
    vbucket: Vbuckets = "all"
    #: every frame up to this seqno (``high``: each vbucket's high seqno when the wait
    #: starts) written to the socket; nothing after it is sent until the wait is over
    seqno: SeqnoTarget = None
    #: ... and acknowledged (buffer acks covering those frames; needs flow control)
    acked: bool = False
    #: this many connections open (at least)
    connections: int | None = None
    #: a stream opened on each of the vbuckets (since the wait started)
    streams: bool = False
    #: at least this many bytes acknowledged in all (since the wait started)
    bytes_acked: int | None = None
    #: at least this many noops answered (since the wait started)
    noops_answered: int | None = None
    #: at least this many noops sent and not answered before the next was due
    noops_missed: int | None = None
    #: a rollback taken on each of the vbuckets: ROLLBACK sent, then a request at or
    #: below the rollback seqno (since the wait started)
    rollback: bool = False
    #: only connections with this DCP name count
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Wait(Step):
    """Wait ``seconds``, or until the consumer's progress meets ``consumer`` (failing
    the scenario after ``timeout``)."""

    NAME = "wait"
    GROUP = "control"
    seconds: Duration | None = None
    consumer: ConsumerProgress | None = None
    timeout: Duration = 60.0


@attrs.frozen(kw_only=True)
class RollbackExpectation:
    """The server answered ROLLBACK (to ``to``, if given) on ``vbucket`` and the
    consumer then re-requested it from a seqno at or below that."""

    vbucket: int
    to: int | None = None


@attrs.frozen(kw_only=True)
class ResumeExpectation:
    """The consumer requested ``vbucket`` from ``seqno`` (with this snapshot range and
    vbucket uuid, where given): a correct resume."""

    vbucket: int
    seqno: int
    snap_start: int | None = None
    snap_end: int | None = None
    uuid: int | None = None


@attrs.frozen(kw_only=True)
class Expect(Step):
    """What the consumer must have done, checked against what the server observed
    since the scenario started; waits up to ``within`` for it. Exactly one kind."""

    NAME = "expect"
    GROUP = "control"
    rollback: RollbackExpectation | None = None
    resume: ResumeExpectation | None = None
    #: at least this many bytes acknowledged in all
    acked: int | None = None
    #: a new DCP connection after the last one closed, within ``within``
    reconnected: bool = False
    #: at least this many noops answered
    noops_answered: int | None = None
    #: a free name for reports
    name: str | None = None
    within: Duration = 10.0


@attrs.frozen(kw_only=True)
class Label(Step):
    """A name for this point of the scenario (reports show the current label)."""

    NAME = "label"
    GROUP = "control"
    name: str


STEP_TYPES: tuple[type[Step], ...] = (
    Set,
    Delete,
    Expire,
    Touch,
    Generate,
    Load,
    Checkpoint,
    Persist,
    Persistence,
    Purge,
    DropCursor,
    Restart,
    Failover,
    SetVbucketState,
    MoveVbucket,
    Flush,
    Disconnect,
    Stall,
    Throttle,
    Delay,
    Corrupt,
    EndStream,
    Reject,
    RefuseConnections,
    Wait,
    Expect,
    Label,
)
#: YAML/JSON key -> step class
STEPS_BY_NAME: dict[str, type[Step]] = {cls.NAME: cls for cls in STEP_TYPES}

__all__ = [
    "DEFAULT_COLLECTION",
    "STEPS_BY_NAME",
    "STEP_TYPES",
    "Checkpoint",
    "ConsumerProgress",
    "Corrupt",
    "Delay",
    "Delete",
    "Disconnect",
    "DropCursor",
    "Duration",
    "EndStream",
    "Expect",
    "Expire",
    "Failover",
    "Flush",
    "Generate",
    "Label",
    "Load",
    "MoveVbucket",
    "Persist",
    "Persistence",
    "Purge",
    "RefuseConnections",
    "Reject",
    "Restart",
    "ResumeExpectation",
    "RollbackExpectation",
    "SeqnoTarget",
    "Set",
    "SetVbucketState",
    "Stall",
    "Step",
    "Throttle",
    "Touch",
    "Value",
    "Vbuckets",
    "Wait",
]
