"""Random schedules from the step vocabulary (issue 39's generator).

A schedule is a ``Scenario`` (``mockdcp.scenario``): what ``run`` and ``check`` replay and
what ``explore`` writes in the library's YAML format (``to_yaml``). ``generate(options,
index)`` draws schedule ``index`` of a run from ``random.Random`` seeded with (seed,
index) alone, so the same seed, options and version give the same schedules, each on its
own (a run of 1,000 and the first 10 of it share those 10).

How a step is drawn lives in ``DRAWERS``, a table keyed by step class: each ``Drawer``
has a weight and draws a valid instance (and the steps that must come with it, such as
``node_up`` after ``node_down``) from what the schedule so far will have left
(``_Drafting``). The project's design puts that knowledge in each step class (each
says how to draw itself); keeping it in this table is a deliberate departure for now
(the step classes are being changed by other work), to be folded into them later.

Valid by construction: every drawn group of steps is checked against the scenario
validator's simulation of the cluster and bucket (each step's own ``check``) before it
joins the schedule, and the whole schedule once more with ``check_steps`` at the end;
a group the simulation refuses is drawn again. On top of that the drafting keeps to
what it knows for certain: after a step that can lose writes (failover, restart, node
down, flush) it only deletes or updates documents written since.

Weighted towards what finds bugs: besides single steps, ``PATTERNS`` draws the
sequences failures come from (a write, persistence held, a failover; a delete, a purge,
a disconnect; replication held, a write, a hard node failover...), and every fault or
cluster step is preceded, more often than not, by a trigger (``TRIGGERS``): a wait for
the consumer's progress (all caught up, mid-snapshot on one vbucket, streams open) or
for time, so faults land where consumers are fragile.

The bucket a schedule runs on is drawn too, from its seed alone (``bucket_draw``): now
and then an ephemeral bucket (a purge age of a minute, an hour or a day, so that
``advance_clock`` and ``ephemeral_purge`` purge its tombstones; half the time
nruEviction under a quota small enough that a bulk write evicts, each eviction a
deletion the consumer must apply), and now and then nodes of an older release
(``server_version`` 7.0, 7.2 or 7.6: what the consumer negotiates changes). Steps the
bucket refuses (persistence on an ephemeral bucket) are refused by the simulation and
drawn again; on an evicting bucket no document is certainly live after a write (the
pager may have deleted it), so no step needs one.

Every schedule ends with the consumer caught up (``wait: {consumer: {seqno: high}}``,
whose timeout is the liveness judge) and ``expect: {conformant: true}`` (the protocol
checker's judgement, which ``mockdcp run`` reports too); one that tears a frame
(``corrupt: length``) waits ``TORN_RECOVERY`` seconds before them (``recovery``).
"""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any, Literal

import attrs

from mockdcp.scenario import (
    BucketSpec,
    ConsumerSettings,
    Need,
    Problem,
    Scenario,
    ScenarioProblems,
    Simulation,
    check_steps,
    scenario_bucket,
    steps as st,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: the groups ``--tag``/``--exclude`` know: each step's ``GROUP``, and these themes
THEMES: dict[str, tuple[type[st.Step], ...]] = {
    "collections": (
        st.CreateScope,
        st.DropScope,
        st.CreateCollection,
        st.DropCollection,
        st.FlushCollection,
    ),
    "sync_writes": (st.SyncWrite, st.Commit, st.Abort),
    "failover": (st.Failover, st.FailoverNode),
    "rebalance": (st.AddNode, st.RemoveNode, st.Rebalance),
    "purge": (st.Purge,),
    "connection": (
        st.Disconnect,
        st.Stall,
        st.Throttle,
        st.Delay,
        st.Corrupt,
        st.Reject,
        st.RefuseConnections,
    ),
    "stream_end": (st.EndStream,),
    "ephemeral": (st.EphemeralPurge,),
}
#: what ``--exclude`` knows of the bucket a schedule draws: ``ephemeral`` (never an
#: ephemeral bucket) and ``versions`` (always the newest release)
BUCKET_THEMES = ("ephemeral", "versions")
GROUPS = ("data", "storage", "cluster", "faults")
#: the step names a group covers (a step's own name is a group too)
MAX_VBUCKETS = 1024
MAX_NODES = 8
MAX_STEPS = 200
#: seconds a drawn ``wait`` for the consumer's progress may take (then the schedule fails
#: as ``stuck``); the final wait gets ``FINAL_WAIT``
WAIT_TIMEOUT = 8.0
FINAL_WAIT = 10.0
#: stream-end reasons after which the data goes on: a correct consumer re-opens (OK,
#: FILTER_EMPTY and LOST_PRIVILEGES end the data of the stream, so what follows is
#: rightly never received: not drawn)
REOPEN_REASONS = ("closed", "state_changed", "too_slow", "backfill_failed")


class OptionError(ValueError):
    """An explore option out of range."""


@attrs.frozen(kw_only=True)
class GenerateOptions:
    """What schedules ``generate`` draws (``mockdcp explore``'s options)."""

    seed: int = 0
    nodes: int = 1
    replicas: int = 0
    vbuckets: int = 4
    #: steps drawn per schedule at most (the final wait and expect not counted)
    steps: int = 12
    #: only steps in these groups (step groups, themes or step names; empty: all)
    tags: frozenset[str] = frozenset()
    #: never steps in these
    exclude: frozenset[str] = frozenset()
    #: the consumer settings every schedule gets (``MOCKDCP_*`` for the consumer)
    consumer: ConsumerSettings = attrs.field(factory=ConsumerSettings)

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.seed < 2**63:
            raise OptionError(f"--seed is 0..2**63-1, not {self.seed}")
        if not 1 <= self.nodes <= MAX_NODES:
            raise OptionError(f"--nodes is 1..{MAX_NODES}, not {self.nodes}")
        if not 0 <= self.replicas <= min(3, self.nodes - 1):
            raise OptionError(
                f"--replicas is 0..{min(3, self.nodes - 1)} on {self.nodes} node(s),"
                f" not {self.replicas}"
            )
        if not self.nodes <= self.vbuckets <= MAX_VBUCKETS:
            raise OptionError(f"--vbuckets is {self.nodes}..{MAX_VBUCKETS}, not {self.vbuckets}")
        if not 1 <= self.steps <= MAX_STEPS:
            raise OptionError(f"--steps is 1..{MAX_STEPS}, not {self.steps}")
        known = set(GROUPS) | set(THEMES) | set(BUCKET_THEMES) | set(st.STEPS_BY_NAME)
        for name in sorted(self.tags | self.exclude):
            if name not in known:
                raise OptionError(
                    f"unknown group {name!r} (groups: {', '.join(GROUPS)}; themes: "
                    f"{', '.join(dict.fromkeys([*THEMES, *BUCKET_THEMES]))}; or a step name)"
                )

    def allows(self, cls: type[st.Step]) -> bool:
        """A step class the groups let in."""
        names = {cls.GROUP, cls.NAME} | {t for t, classes in THEMES.items() if cls in classes}
        if names & self.exclude:
            return False
        return not self.tags or bool(names & self.tags)


# -- the drafting state -------------------------------------------------------------------


@attrs.define
class _Drafting:
    """What the schedule drawn so far will have left, as the drawers need it."""

    rng: random.Random
    options: GenerateOptions
    sim: Simulation
    #: (collection, key) documents certainly live, and keys with a durable write pending
    live: list[tuple[str, str]] = attrs.field(factory=list)
    pending: list[tuple[str, str]] = attrs.field(factory=list)
    #: documents certainly deleted (a purge then has tombstones to take)
    deleted: int = 0
    #: collections created and not dropped (``scope.name``), scopes created
    collections: list[str] = attrs.field(factory=list)
    scopes: list[str] = attrs.field(factory=list)
    counter: int = 0
    persistence_held: bool = False
    replication_held: bool = False
    #: per vbucket, the seqno the consumer has certainly been sent and nothing past it
    #: (the runner holds a stream where a seqno wait left it until the next wait);
    #: None: not known (streaming freely, or rolled back)
    sent: list[int | None] = attrs.field(factory=list)
    #: every connection just dropped: a wait for streams re-opened can be met
    reconnecting: bool = False
    #: a wait for the consumer's progress was met: it is connected
    connected: bool = False
    #: the nodes the consumer certainly knows of (``Reach``)
    reach: Reach | None = None

    @property
    def evicts(self) -> bool:
        """An ephemeral bucket with nruEviction under a quota: a write may make the pager
        delete the oldest documents."""
        eph = self.sim.bucket.ephemeral
        return eph is not None and eph.eviction_policy == "nruEviction" and bool(eph.memory_quota)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def value(self) -> dict[str, object]:
        return {"n": self.counter, "v": self.rng.randrange(1000)}

    def collection(self) -> str:
        if self.collections and self.rng.random() < 0.4:
            return self.rng.choice(self.collections)
        return st.DEFAULT_COLLECTION

    def vbuckets(self) -> st.Vbuckets:
        n = self.options.vbuckets
        roll = self.rng.random()
        if roll < 0.4 or n == 1:
            return "all"
        if roll < 0.8:
            return self.rng.randrange(n)
        return tuple(sorted(self.rng.sample(range(n), self.rng.randint(1, min(n, 3)))))

    def nodes_in(self, *statuses: str) -> list[int]:
        return [i for i, s in enumerate(self.sim.nodes.status) if s in statuses]

    def evicted(self) -> None:
        """A write on an evicting bucket: no document is certainly live any more (the
        pager may have deleted any), and its deletions moved the seqnos past what the
        simulation counts (what the consumer was sent is no longer known)."""
        self.live.clear()
        self.deleted = 0
        self.sent = [None] * len(self.sent)

    def forget(self) -> None:
        """A step that can lose writes: no document is certainly live any more, and the
        consumer may roll back (what it was sent is no longer known)."""
        self.live.clear()
        self.pending.clear()
        self.deleted = 0
        self.sent = [None] * len(self.sent)


def _fork(sim: Simulation) -> Simulation:
    """A copy of ``sim`` to try steps on (the bucket, only read, is shared)."""
    return attrs.evolve(
        sim,
        high=list(sim.high),
        persisted=list(sim.persisted),
        manifest=copy.deepcopy(sim.manifest),
        live=dict(sim.live),
        cluster=copy.deepcopy(sim.cluster),
        pending=dict(sim.pending),
        buckets=set(sim.buckets),
    )


#: seconds within which every client has read a changed cluster map: gocbcore's CCCP
#: poller asks every 2.5 s (``CccpPollPeriod``) and java-dcp-client refreshes its
#: config every 2 s (``configRefreshInterval``)
MAP_REFRESH = 2.5
#: a node status the consumer can still reach a map on (a node down comes back up)
_SERVING = ("active", "down")


@attrs.define
class Reach:
    """The nodes the consumer certainly knows of, to refuse a topology step that
    leaves it none of them. A client reaches the cluster only through nodes it has
    seen: its seeds, then the nodes of each cluster map it reads (java-dcp-client opens
    and closes its channels to match each config's ``nodesExt``), and it reads a new
    map within ``MAP_REFRESH`` seconds. So at scenario time ``t`` it knows the
    nodes serving at the start and at every change up to ``t - MAP_REFRESH``; a step
    that takes every such node out of the cluster (remove + rebalance, failover) is out
    of any client's reach: issue 39's schedule 416 of seed 39 swapped node 0 out and
    failed node 1 over at one instant (``mockdcp tail`` and gocbcore failed it on every
    run). Time is only counted where it is certain: ``wait: {seconds}`` (a wait for
    the consumer's progress may be met at once) and the ``out_delay`` of a rebalance or
    of a graceful ``failover_node``, during which the nodes leaving still serve the new
    map (ns_server ``src/ns_rebalancer.erl`` sleeps ``sleep_for_sdk_clients`` after a
    rebalance's moves and after a graceful failover's handovers alike)."""

    #: scenario seconds so far, and each (time, serving nodes) since the start
    now: float = 0.0
    history: list[tuple[float, frozenset[str]]] = attrs.field(factory=list)

    @classmethod
    def of(cls, sim: Simulation) -> Reach:
        return cls(history=[(0.0, _serving(sim))])

    def copy(self) -> Reach:
        return Reach(self.now, list(self.history))

    def known(self) -> frozenset[str]:
        """Every node the consumer certainly has seen in a map by now."""
        seen: set[str] = set(self.history[0][1])
        for at, serving in self.history[1:]:
            if at + MAP_REFRESH <= self.now:
                seen |= serving
        return frozenset(seen)

    def after(self, step: st.Step, sim: Simulation) -> str | None:
        """Take ``step`` (``sim``: as it left the cluster): why no client could follow
        it, or None."""
        if isinstance(step, st.Wait) and step.seconds:
            self.now += step.seconds
        serving = _serving(sim)
        last = self.history[-1][1]
        if isinstance(step, st.Rebalance | st.FailoverNode) and step.out_delay and last - serving:
            # the new map is out at the moves (or the handovers), the leaving nodes go
            # ``out_delay`` later
            self.history.append((self.now, last | serving))
            self.now += step.out_delay
        if serving == self.history[-1][1]:
            return None
        known = self.known()
        self.history.append((self.now, serving))
        if serving and not known & serving:
            return (
                f"{step.NAME}: leaves the consumer no node it knows of (it knows "
                f"{', '.join(sorted(known))}; the cluster is {', '.join(sorted(serving))}): "
                f"a client reads a new map within {MAP_REFRESH} s, so a topology step "
                f"that removes every node it has seen needs that long since the last one"
            )
        return None


def _serving(sim: Simulation) -> frozenset[str]:
    c = sim.nodes
    return frozenset(n for n, s in zip(c.names, c.status, strict=True) if s in _SERVING)


def unreachable(scenario: Scenario) -> Problem | None:
    """The first step that leaves the consumer no node it knows of (``Reach``)."""
    spec = scenario.bucket
    sim = Simulation.of(scenario_bucket(scenario), nodes=spec.nodes, replicas=spec.replicas)
    reach = Reach.of(sim)
    for i, step in enumerate(scenario.steps):
        try:
            step.check(sim)
        except ValueError:
            return None  # check_steps reports it
        reason = reach.after(step, sim)
        if reason is not None:
            return Problem(reason, step=i, source=scenario.name)
    return None


# -- the drawers ---------------------------------------------------------------------------


@attrs.frozen
class Drawer:
    """How often a step class is drawn, and how (``None``: not possible now)."""

    weight: float
    draw: Callable[[_Drafting], list[st.Step] | None]
    #: what a drawn step does to the drafting state once it is taken
    taken: Callable[[_Drafting, st.Step], None] | None = None


#: the TTL of a drawn ``set`` with one, and of a drawn ``touch`` (seconds of the
#: scenario's clock): within the ``advance_clock`` steps ``_advance_clock`` draws
SET_TTL = 3600
TOUCH_TTL = 7200


def _expiry_in(d: _Drafting, ttl: int) -> int:
    """The expiry of a document that lives ``ttl`` seconds from here on the scenario's
    clock (its start, moved by the ``advance_clock`` steps drawn so far): it expires
    once the schedule moves the clock that far, and never at its write. A step's
    ``expiry`` is the absolute time DCP carries (docs/clock.md): a bare TTL there was a
    time in 1970, so the document was expired from the start; over the KV port an
    expiry of up to 30 days is a TTL, larger an absolute Unix time (kv_engine
    ``daemon/mc_time.cc`` ``mc_time_convert_to_real_time``, which
    ``engines/ep/src/ep_time.cc`` ``ep_convert_to_expiry_time`` applies)."""
    clock = d.sim.bucket.virtual_clock
    if d.sim.clock is not None:
        now = d.sim.clock
    else:
        now = clock.now if clock is not None else d.sim.bucket.clock()
    return int(now) + ttl


def _set(d: _Drafting) -> list[st.Step]:
    if d.live and d.rng.random() < 0.4:
        collection, key = d.rng.choice(d.live)
    else:
        collection, key = d.collection(), d.fresh("k")
    expiry = _expiry_in(d, SET_TTL) if d.rng.random() < 0.1 else 0
    return [st.Set(key=key, value=d.value(), collection=collection, expiry=expiry)]


def _set_taken(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.Set)
    if (step.collection, step.key) not in d.live:
        d.live.append((step.collection, step.key))


def _live_one(d: _Drafting) -> tuple[str, str] | None:
    return d.rng.choice(d.live) if d.live else None


def _delete(d: _Drafting) -> list[st.Step] | None:
    doc = _live_one(d)
    return None if doc is None else [st.Delete(key=doc[1], collection=doc[0])]


def _expire(d: _Drafting) -> list[st.Step] | None:
    doc = _live_one(d)
    return None if doc is None else [st.Expire(key=doc[1], collection=doc[0])]


def _removed(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.Delete | st.Expire)
    d.live.remove((step.collection, step.key))
    d.deleted += 1


def _touch(d: _Drafting) -> list[st.Step] | None:
    doc = _live_one(d)
    if doc is None:
        return None
    return [st.Touch(key=doc[1], collection=doc[0], expiry=_expiry_in(d, TOUCH_TTL))]


def _sync_write(d: _Drafting) -> list[st.Step]:
    outcome: Literal["commit", "abort", "pending"] = d.rng.choice(
        ("commit", "abort", "pending", "pending")
    )
    key = d.fresh("s")
    collection = d.collection()
    write = st.SyncWrite(key=key, value=d.value(), collection=collection, outcome=outcome)
    if outcome == "pending" and d.rng.random() < 0.5:
        # the prepare alone at a snapshot's tail, then its commit or abort
        end = d.rng.choice((st.Commit, st.Abort))
        seen = st.Wait(consumer=st.ConsumerProgress(seqno="high"), timeout=WAIT_TIMEOUT)
        return [write, seen, end(key=key, collection=collection)]
    return [write]


def _sync_taken(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.SyncWrite)
    doc = (step.collection, step.key)
    if step.outcome == "commit":
        d.live.append(doc)
    elif step.outcome == "pending":
        d.pending.append(doc)


def _complete(
    kind: type[st.Commit] | type[st.Abort],
) -> Callable[[_Drafting], list[st.Step] | None]:
    def draw(d: _Drafting) -> list[st.Step] | None:
        if not d.pending:
            return None
        collection, key = d.rng.choice(d.pending)
        return [kind(key=key, collection=collection)]

    return draw


def _completed(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.Commit | st.Abort)
    doc = (step.collection, step.key)
    d.pending.remove(doc)
    if isinstance(step, st.Commit):
        d.live.append(doc)


def _generate(d: _Drafting) -> list[st.Step]:
    # now and then a bulk: more than a small flow-control window holds (64 KiB)
    docs = d.rng.randint(150, 400) if d.rng.random() < 0.15 else d.rng.randint(1, 24)
    return [st.Generate(docs=docs, prefix=d.fresh("g"))]


def _generated(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.Generate)
    cid = step.collection
    d.live += [(cid, f"{step.prefix}::{n:06d}") for n in range(step.start, step.start + step.docs)]


def _checkpoint(d: _Drafting) -> list[st.Step]:
    return [st.Checkpoint(vbuckets=d.vbuckets())]


def _persist(d: _Drafting) -> list[st.Step]:
    top = max(d.sim.high)
    upto = None if top == 0 or d.rng.random() < 0.6 else d.rng.randint(0, top)
    if upto is not None and d.vbuckets() != "all":
        upto = None  # a bound checked against every vbucket named: keep it simple
    return [st.Persist(upto=upto)]


def _persistence(d: _Drafting) -> list[st.Step]:
    return [st.Persistence(paused=not d.persistence_held)]


def _persistence_taken(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.Persistence)
    d.persistence_held = step.paused


def _purge(d: _Drafting) -> list[st.Step]:
    return [st.Purge(vbuckets=d.vbuckets())]


def _advance_clock(d: _Drafting) -> list[st.Step] | None:
    """Server time on a virtual clock: minutes (a pager run), a day, or past the
    metadata purge age (tombstones purged: a consumer behind may roll back to 0)."""
    if d.sim.bucket.virtual_clock is None:
        return None
    return [st.AdvanceClock(seconds=d.rng.choice((600, 3600, 86_400, 4 * 86_400)))]


def _ephemeral_purge(d: _Drafting) -> list[st.Step] | None:
    """An ephemeral bucket's purger now: tombstones of the bucket's purge age, or all of
    them (``age: 0``; a consumer behind the purge seqno rolls back)."""
    if d.sim.bucket.ephemeral is None:
        return None
    return [st.EphemeralPurge(vbuckets=d.vbuckets(), age=d.rng.choice((None, 0)))]


def _drop_cursor(d: _Drafting) -> list[st.Step]:
    return [st.DropCursor(vbuckets=d.vbuckets())]


def _restart(d: _Drafting) -> list[st.Step]:
    return [st.Restart()]


def _lost(d: _Drafting, step: st.Step) -> None:
    d.forget()


def _failover(d: _Drafting) -> list[st.Step]:
    return [
        st.Failover(
            vbuckets=d.vbuckets(),
            lose_unpersisted=d.rng.random() < 0.8,
            disconnect=d.rng.random() < 0.3,
        )
    ]


def _failover_node(d: _Drafting) -> list[st.Step] | None:
    active = d.nodes_in("active")
    if len(active) < 2:
        return None
    graceful = d.options.replicas == 0 or d.rng.random() < 0.3
    if d.options.replicas == 0:
        return None  # a hard failover without replicas leaves vbuckets with no copy
    node = d.rng.choice(active)
    # a graceful failover, like a rebalance out, keeps the node up for SDK clients
    # (ns_rebalancer.erl ``sleep_for_sdk_clients("graceful failover")``); a hard one not
    delay = REBALANCE_OUT_DELAY if graceful else 0.0
    return [st.FailoverNode(node=node, graceful=graceful, out_delay=delay), st.Rebalance()]


def _replication(d: _Drafting) -> list[st.Step] | None:
    if d.options.replicas == 0:
        return None
    return [st.Replication(paused=not d.replication_held)]


def _replication_taken(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.Replication)
    d.replication_held = step.paused


#: seconds a node a rebalance removes stays up after the moves, answering NOT_MY_VBUCKET
#: with the new map (the ``rebalance`` step's ``out_delay``): ns_server's default
REBALANCE_OUT_DELAY = 10.0


def _rebalance(d: _Drafting) -> list[st.Step] | None:
    """A rebalance in, out or swapping a node; one that removes a node keeps it up
    ``REBALANCE_OUT_DELAY`` seconds (``_rebalance_out``)."""
    if d.options.nodes < 2:
        return None
    active = d.nodes_in("active")
    kind = d.rng.choice(("in", "out", "swap"))
    interval = d.rng.choice((0.0, 0.0, 0.1))
    if kind == "in" and len(d.sim.nodes.status) < MAX_NODES:
        return [st.AddNode(), st.Rebalance(interval=interval)]
    if len(active) < 2:
        return None
    node = d.rng.choice(active)
    if kind == "out":
        return [st.RemoveNode(node=node), _rebalance_out(interval)]
    return [st.AddNode(), st.RemoveNode(node=node), _rebalance_out(interval)]


def _rebalance_out(interval: float) -> st.Rebalance:
    """A rebalance that removes a node, as a real cluster makes it: ns_server
    ``src/ns_rebalancer.erl`` ``run_mover`` sleeps ``rebalance_out_delay_seconds``
    (``sleep_for_sdk_clients``, read from ns_config with a default of 10 and no REST
    setting; only ns_server's own tests set it to 0) after the moves, before the bucket's
    servers drop the node and it is ejected. Without the delay (the step's default) the
    node's connections close at the last takeover, a fault no cluster makes by default:
    go-dcp v1.3.6 then panicked "cant find self in cluster". Drawn with no extra draw, so
    a seed draws the same steps as before; under explore's virtual clock the delay costs
    no real time."""
    return st.Rebalance(interval=interval, out_delay=REBALANCE_OUT_DELAY)


def _node_down(d: _Drafting) -> list[st.Step] | None:
    active = d.nodes_in("active")
    if not active:
        return None
    node = d.rng.choice(active)
    pause = st.Wait(seconds=round(d.rng.uniform(0.05, 0.5), 2))
    return [st.NodeDown(node=node), pause, st.NodeUp(node=node)]


def _create_scope(d: _Drafting) -> list[st.Step]:
    scope = d.fresh("scope")
    if d.rng.random() < 0.5:
        return [st.CreateScope(name=scope)]
    return [st.CreateScope(name=scope), st.CreateCollection(collection=f"{scope}.{d.fresh('c')}")]


def _scope_taken(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.CreateScope)
    d.scopes.append(step.name)


def _create_collection(d: _Drafting) -> list[st.Step]:
    scope = d.rng.choice(["_default", *d.scopes])
    return [st.CreateCollection(collection=f"{scope}.{d.fresh('c')}")]


def _collection_taken(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.CreateCollection)
    d.collections.append(step.collection)


def _drop_collection(d: _Drafting) -> list[st.Step] | None:
    if not d.collections:
        return None
    return [st.DropCollection(collection=d.rng.choice(d.collections))]


def _collection_dropped(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.DropCollection | st.FlushCollection)
    gone = step.collection
    if isinstance(step, st.DropCollection):
        d.collections.remove(gone)
    d.live = [doc for doc in d.live if doc[0] != gone]
    d.pending = [doc for doc in d.pending if doc[0] != gone]


def _drop_scope(d: _Drafting) -> list[st.Step] | None:
    return [st.DropScope(name=d.rng.choice(d.scopes))] if d.scopes else None


def _scope_dropped(d: _Drafting, step: st.Step) -> None:
    assert isinstance(step, st.DropScope)
    prefix = f"{step.name}."
    d.scopes.remove(step.name)
    d.collections = [c for c in d.collections if not c.startswith(prefix)]
    d.live = [doc for doc in d.live if not doc[0].startswith(prefix)]
    d.pending = [doc for doc in d.pending if not doc[0].startswith(prefix)]


def _flush_collection(d: _Drafting) -> list[st.Step] | None:
    if not d.collections:
        return None
    return [st.FlushCollection(collection=d.rng.choice(d.collections))]


def _flush(d: _Drafting) -> list[st.Step]:
    return [st.Flush()]


def _disconnect(d: _Drafting) -> list[st.Step]:
    return [st.Disconnect()]


def _stall(d: _Drafting) -> list[st.Step]:
    return [st.Stall(seconds=round(d.rng.uniform(0.05, 1.0), 2))]


def _throttle(d: _Drafting) -> list[st.Step]:
    rate = d.rng.choice((512, 4096, 65536))
    return [st.Throttle(bytes_per_second=rate, seconds=round(d.rng.uniform(0.1, 1.0), 2))]


def _delay(d: _Drafting) -> list[st.Step]:
    seconds = round(d.rng.uniform(0.05, 0.5), 2)
    return [st.Delay(seconds=seconds, request="dcp_stream_req", count=d.rng.randint(1, 3))]


def _corrupt(d: _Drafting) -> list[st.Step]:
    return [st.Corrupt(kind=d.rng.choice(("magic", "opcode", "length")))]


#: the noop interval (seconds) a schedule that corrupts a frame's length asks of the
#: consumer (``consumer_settings``): within check's 2 s for a re-open after STREAM_END
TORN_NOOP_INTERVAL = 0.5


def consumer_settings(options: GenerateOptions, steps: Sequence[st.Step]) -> ConsumerSettings:
    """The consumer settings of a schedule: ``options.consumer``, and a noop interval of
    ``TORN_NOOP_INTERVAL`` (unless the options set one) when a step corrupts a frame's
    length. Such a frame is torn: its body runs one byte past it, and only the next
    bytes on its connection break the consumer's framing. On a connection that then
    falls silent (its streams ended, the frame a STREAM_END) those are the producer's
    next DCP_NOOP, an interval later (kv_engine ``engines/ep/src/dcp/producer.cc``
    ``maybeSendNoop``); at the clients' 120 s (the reference consumer, java-dcp-client)
    or 180 s (gocbcore, go-dcp) no consumer could notice within the schedule's waits
    (explore --seed 39, schedule 8536: a STREAM_END STATE_CHANGED torn after a failover,
    ``stream_end.not_reopened``; the consumer was right)."""
    if tears(steps) and options.consumer.noop_interval is None:
        return attrs.evolve(options.consumer, noop_interval=TORN_NOOP_INTERVAL)
    return options.consumer


def tears(steps: Sequence[st.Step]) -> bool:
    """A step corrupts a frame's length (``corrupt: length``): the consumer's framing
    breaks and only a reconnect mends it."""
    return any(map(_tears, steps))


def _tears(step: st.Step) -> bool:
    return isinstance(step, st.Corrupt) and step.kind == "length"


#: seconds of ``wait: {seconds}`` a schedule that tears a frame has after its last
#: ``corrupt: length`` before its final wait (``recovery``)
TORN_RECOVERY = 5.0


def recovery(steps: Sequence[st.Step]) -> list[st.Step]:
    """The wait for time a schedule with a torn frame (``tears``) ends with, before its
    final wait for the consumer: ``TORN_RECOVERY`` seconds to notice the damage and
    reconnect. The final wait cannot tell a consumer that recovered: it waits for frames
    written to the socket, and what was written before the damage (or into the broken
    connection after it) meets it while the consumer still has to see the break (at the
    producer's next DCP_NOOP, ``TORN_NOOP_INTERVAL`` away), close the connection,
    reconnect with its back-off and resume (java-dcp-client re-opens its streams from
    their last offsets on a new connection, and with its rollback mitigation delivers
    what it resumes only once OBSERVE_SEQNO reports it persisted). Without it, issue
    39's schedule 106 of seed 39 on 2 nodes (a ``corrupt: length`` its last drawn step)
    passed java-dcp-client's program 1 run in 3 within check's 2 s settle, 14 documents
    missing; with 5 s after the ``corrupt``, 3 in 3. A wait for the consumer's progress
    that a reconnect must pass (``streams``) is not used: a ``corrupt`` that met no open
    connection damages nothing, and such a wait would never be met. Drawn with no extra
    draw, after the steps: a schedule's steps are those it drew before."""
    return [st.Wait(seconds=TORN_RECOVERY)] if tears(steps) else []


def _recovered(steps: Sequence[st.Step]) -> bool:
    """``TORN_RECOVERY`` seconds of ``wait: {seconds}`` after the last ``corrupt:
    length`` (``recovery``), or no such step."""
    waited: float | None = None
    for step in steps:
        if _tears(step):
            waited = 0.0
        elif waited is not None and isinstance(step, st.Wait) and step.seconds:
            waited += step.seconds
    return waited is None or waited >= TORN_RECOVERY


def _end_stream(d: _Drafting) -> list[st.Step]:
    reason = d.rng.choice(REOPEN_REASONS)
    return [st.EndStream(vbuckets=d.vbuckets(), reason=reason)]  # type: ignore[arg-type]


def _reject(d: _Drafting) -> list[st.Step]:
    status = d.rng.choice(("etmpfail", "not_my_vbucket"))
    vb = None if d.rng.random() < 0.5 else d.rng.randrange(d.options.vbuckets)
    return [
        st.Reject(request="dcp_stream_req", status=status, count=d.rng.randint(1, 2), vbucket=vb)
    ]


def _refuse(d: _Drafting) -> list[st.Step]:
    pause = st.Wait(seconds=round(d.rng.uniform(0.05, 0.5), 2))
    return [
        st.RefuseConnections(enabled=True),
        st.Disconnect(),
        pause,
        st.RefuseConnections(enabled=False),
    ]


#: step class -> how it is drawn (see the module docstring: a table here for now, to
#: move into the step classes later); a drawer that cannot draw now (``commit`` with no
#: durable write pending) gives way to another draw
DRAWERS: dict[type[st.Step], Drawer] = {
    st.Set: Drawer(10, _set, _set_taken),
    st.Delete: Drawer(5, _delete, _removed),
    st.Expire: Drawer(2, _expire, _removed),
    st.Touch: Drawer(1, _touch),
    st.SyncWrite: Drawer(3, _sync_write, _sync_taken),
    st.Commit: Drawer(3, _complete(st.Commit), _completed),
    st.Abort: Drawer(2, _complete(st.Abort), _completed),
    st.Generate: Drawer(6, _generate, _generated),
    st.Checkpoint: Drawer(2, _checkpoint),
    st.Persist: Drawer(3, _persist),
    st.Persistence: Drawer(3, _persistence, _persistence_taken),
    st.Purge: Drawer(2, _purge),
    st.DropCursor: Drawer(2, _drop_cursor),
    st.AdvanceClock: Drawer(1, _advance_clock, _lost),
    st.EphemeralPurge: Drawer(4, _ephemeral_purge),
    st.Restart: Drawer(1, _restart, _lost),
    st.Failover: Drawer(3, _failover, _lost),
    st.FailoverNode: Drawer(2, _failover_node, _lost),
    st.Replication: Drawer(2, _replication, _replication_taken),
    st.Rebalance: Drawer(2, _rebalance),
    st.NodeDown: Drawer(1, _node_down, _lost),
    st.CreateScope: Drawer(2, _create_scope, _scope_taken),
    st.CreateCollection: Drawer(2, _create_collection, _collection_taken),
    st.DropCollection: Drawer(1, _drop_collection, _collection_dropped),
    st.DropScope: Drawer(3, _drop_scope, _scope_dropped),
    st.FlushCollection: Drawer(1, _flush_collection, _collection_dropped),
    st.Flush: Drawer(0.3, _flush, _lost),
    st.Disconnect: Drawer(3, _disconnect),
    st.Stall: Drawer(1, _stall),
    st.Throttle: Drawer(1, _throttle),
    st.Delay: Drawer(1, _delay),
    st.Corrupt: Drawer(1, _corrupt),
    st.EndStream: Drawer(3, _end_stream),
    st.Reject: Drawer(1, _reject),
    st.RefuseConnections: Drawer(1, _refuse),
}

#: sequences failures come from (weights against a single step's ``SINGLE``)
PATTERNS: tuple[tuple[float, tuple[type[st.Step], ...]], ...] = (
    (3, (st.Set, st.Persistence, st.Set, st.Failover)),  # write, hold, failover
    (2, (st.Delete, st.Persist, st.Purge, st.Disconnect)),  # write, purge, disconnect
    (2, (st.Generate, st.Replication, st.Set, st.FailoverNode)),  # replica behind
    (2, (st.Generate, st.DropCursor, st.EndStream)),  # a backfill cut short
    (1, (st.Set, st.Persistence, st.Restart)),  # unpersisted writes lost by a restart
    (1, (st.CreateCollection, st.Set, st.Rebalance, st.DropCollection)),
    (1, (st.Generate, st.Checkpoint, st.Set, st.Disconnect)),  # resume mid-snapshot
)
#: ... and on an ephemeral bucket: a tombstone purged (by the purger, or by age as the
#: clock passes the purge age) behind a consumer that reconnects
EPHEMERAL_PATTERNS: tuple[tuple[float, tuple[type[st.Step], ...]], ...] = (
    (2, (st.Delete, st.EphemeralPurge, st.Disconnect)),
    (2, (st.Delete, st.AdvanceClock, st.Disconnect)),
)
SINGLE = 12.0
#: how often a fault or cluster step gets a trigger before it
TRIGGER_ODDS = 0.7
#: ... and a write (so the consumer has a document before its update or deletion, which
#: deduplication would otherwise hide from it)
DATA_TRIGGER_ODDS = 0.3


def _short(sent: int | None, high: int) -> bool:
    """A seqno lies between what was certainly sent and the high seqno."""
    return sent is not None and sent + 1 < high


def _trigger(d: _Drafting) -> st.Wait:
    """A wait that puts the next step where consumers are fragile."""
    roll = d.rng.random()
    timeout = WAIT_TIMEOUT
    if roll < 0.45:  # the consumer caught up
        return st.Wait(consumer=st.ConsumerProgress(seqno="high"), timeout=timeout)
    high = d.sim.high
    # a seqno the consumer has not been sent yet, short of the vbucket's high seqno
    # (one it was sent already is never written again: the wait could not be met)
    room = [vb for vb, (s, h) in enumerate(zip(d.sent, high, strict=True)) if _short(s, h)]
    if roll < 0.75 and room:  # mid-snapshot: one vbucket part way
        vb = d.rng.choice(room)
        seqno = d.rng.randint((d.sent[vb] or 0) + 1, high[vb] - 1)
        progress = st.ConsumerProgress(vbucket=vb, seqno=seqno)
        return st.Wait(consumer=progress, timeout=timeout)
    if roll < 0.85 and d.reconnecting and d.options.nodes == 1:  # streams re-opened
        return st.Wait(consumer=st.ConsumerProgress(streams=True), timeout=timeout)
    return st.Wait(seconds=round(d.rng.uniform(0.0, 0.3), 2))


#: the triggers' vocabulary, for the docs and tests
TRIGGERS = ("seqno: high", "vbucket + seqno mid-snapshot", "streams", "seconds")


# -- drawing a schedule ------------------------------------------------------------------


def _try(d: _Drafting, group: Sequence[st.Step]) -> bool:
    """Take ``group`` if the simulation accepts it (each step's ``check``)."""
    sim = _fork(d.sim)
    sent = list(d.sent)
    reach = (d.reach or Reach.of(d.sim)).copy()
    try:
        for step in group:
            step.check(sim)
            sent = _sent_after(step, sim, sent)
            if reach.after(step, sim) is not None:
                return False
    except ValueError:
        return False
    d.sim, d.sent, d.reach = sim, sent, reach
    for step in group:
        drawer = DRAWERS.get(type(step))
        if drawer is not None and drawer.taken is not None:
            drawer.taken(d, step)
    if d.evicts and any(step.GROUP == "data" for step in group):
        d.evicted()
    d.reconnecting = isinstance(group[-1], st.Disconnect)
    d.connected = d.connected or any(isinstance(s, st.Wait) and s.consumer for s in group)
    return True


def _listed(vbuckets: st.Vbuckets) -> list[int]:
    return [vbuckets] if isinstance(vbuckets, int) else list(vbuckets) if vbuckets != "all" else []


def _sent_after(step: st.Step, sim: Simulation, sent: list[int | None]) -> list[int | None]:
    """What the consumer has certainly been sent once ``step`` ran (see ``_Drafting``)."""
    if not isinstance(step, st.Wait) or step.consumer is None or step.consumer.seqno is None:
        return sent
    c = step.consumer
    named = range(sim.num_vbuckets) if c.vbucket == "all" else _listed(c.vbucket)
    after: list[int | None] = [None] * len(sent)  # the others stream freely meanwhile
    for vb in named:
        after[vb] = sim.high[vb] if c.seqno == "high" else min(int(c.seqno or 0), sim.high[vb])
    return after


def _draw_one(d: _Drafting, cls: type[st.Step]) -> list[st.Step] | None:
    drawer = DRAWERS[cls]
    group = drawer.draw(d)
    if group is None:
        return None
    if not d.connected and cls.GROUP != "data":
        # nothing but writes before the consumer is in: a fault before it connected
        # tests its bootstrap, not its streaming
        return [_bootstrap(d), *group]
    odds = DATA_TRIGGER_ODDS if cls.GROUP == "data" else TRIGGER_ODDS
    if d.rng.random() < odds:
        group = [_trigger(d), *group]
    return group


def _bootstrap(d: _Drafting) -> st.Wait:
    """The consumer connected and caught up (or, with nothing written, its streams open:
    the wait starts before any client can connect, so it sees them opened)."""
    if any(d.sim.high):
        return st.Wait(consumer=st.ConsumerProgress(seqno="high"), timeout=WAIT_TIMEOUT)
    return st.Wait(consumer=st.ConsumerProgress(streams=True), timeout=WAIT_TIMEOUT)


def _allowed(options: GenerateOptions) -> list[type[st.Step]]:
    return [cls for cls in DRAWERS if options.allows(cls)]


def schedule_seed(seed: int, index: int) -> int:
    """The seed of schedule ``index`` of a run with ``seed`` (a pure function of both)."""
    return (seed * 1_000_003 + index * 7_919 + 0x5EED) % 2**63


#: how often a schedule's bucket is ephemeral, and how often its nodes are of a release
#: older than the newest (see the module docstring)
EPHEMERAL_ODDS = 0.15
OLD_VERSION_ODDS = 0.15
OLD_VERSIONS = ("7.0", "7.2", "7.6")
#: an ephemeral bucket's tombstone purge ages, in seconds: advance_clock's draws pass them
PURGE_AGES = (60, 3600, 86_400)
#: nruEviction quotas, in bytes: a bulk write (150-400 documents) goes past them
EVICTION_QUOTAS = (16_384, 65_536)


#: steps only an ephemeral bucket takes
_EPHEMERAL_ONLY = (st.EphemeralPurge,)


def bucket_draw(options: GenerateOptions, own: int) -> dict[str, Any]:
    """The ``bucket:`` fields schedule seed ``own`` draws beyond the options' (an
    ephemeral bucket, an older release; ``BUCKET_THEMES`` excluded are not drawn), from
    a generator of their own: a schedule that draws neither has the steps it had
    before these were drawn."""
    rng = random.Random(own ^ 0xB0C4E7)
    spec: dict[str, Any] = {}
    if rng.random() < EPHEMERAL_ODDS and "ephemeral" not in options.exclude:
        spec.update(type="ephemeral", ephemeral_purge_age=rng.choice(PURGE_AGES))
        if rng.random() < 0.5:
            spec.update(eviction_policy="nruEviction", memory_quota=rng.choice(EVICTION_QUOTAS))
    if rng.random() < OLD_VERSION_ODDS and "versions" not in options.exclude:
        spec["server_version"] = rng.choice(OLD_VERSIONS)
    return spec


def draw_steps(options: GenerateOptions, index: int) -> tuple[int, list[st.Step]]:
    """Schedule ``index``'s seed and steps (see the module docstring)."""
    own = schedule_seed(options.seed, index)
    rng = random.Random(own)
    bucket = scenario_bucket(_scenario(options, own, ()))
    sim = Simulation.of(bucket, nodes=options.nodes, replicas=options.replicas)
    d = _Drafting(rng, options, sim, sent=[None] * options.vbuckets, reach=Reach.of(sim))
    allowed = _allowed(options)
    if not allowed:
        raise OptionError("--tag/--exclude leave no step to draw")
    if bucket.ephemeral is None:  # drawn on an ephemeral bucket only: the others' draws
        allowed = [c for c in allowed if c not in _EPHEMERAL_ONLY]  # stay as they were
    weights = [DRAWERS[c].weight for c in allowed]
    drawn = PATTERNS + (EPHEMERAL_PATTERNS if bucket.ephemeral is not None else ())
    patterns = [(w, p) for w, p in drawn if all(c in allowed for c in p)]
    steps: list[st.Step] = []
    # start with data the consumer streams
    if st.Generate in allowed:
        first = [st.Generate(docs=rng.randint(4, 24), prefix=d.fresh("g"))]
        if _try(d, first):
            steps += first
    attempts = 0
    while len(steps) < options.steps and attempts < options.steps * 20:
        attempts += 1
        total = SINGLE + sum(w for w, _ in patterns)
        roll = rng.uniform(0, total)
        if roll >= SINGLE and patterns:
            roll -= SINGLE
            for w, pattern in patterns:
                if roll < w:
                    # each part drawn on what the parts before it left (a trigger of a
                    # later part must see the waits and writes of the earlier ones)
                    for cls in pattern:
                        part = _draw_one(d, cls)
                        if part is None or len(steps) + len(part) > options.steps:
                            break
                        if not _try(d, part):
                            break
                        steps += part
                    break
                roll -= w
            continue
        cls = rng.choices(allowed, weights)[0]
        group = _draw_one(d, cls)
        if not group or len(steps) + len(group) > options.steps:
            continue
        if _try(d, group):
            steps += group
    final: list[st.Step] = [
        *recovery(steps),
        st.Wait(consumer=st.ConsumerProgress(seqno="high"), timeout=FINAL_WAIT),
        st.Expect(conformant=True, within=0.2),
    ]
    return own, steps + final


def _scenario(
    options: GenerateOptions, seed: int, steps: Sequence[st.Step], name: str = "explore"
) -> Scenario:
    spec = BucketSpec(
        vbuckets=options.vbuckets,
        nodes=options.nodes,
        replicas=options.replicas,
        **bucket_draw(options, seed),
    )
    needs: tuple[Need, ...] = (Need.SEVERAL_NODES,) if options.nodes > 1 else ()
    return Scenario(
        name=name,
        description=f"explore schedule (seed {options.seed})",
        seed=seed % 2**31,
        bucket=spec,
        steps=tuple(steps),
        tags=("explore",),
        needs=needs,
        consumer=consumer_settings(options, steps),
    )


def generate(options: GenerateOptions, index: int) -> Scenario:
    """Schedule ``index`` of a run, as a scenario, checked whole (``ScenarioProblems``
    here is a bug of the generator's, never the consumer's)."""
    own, steps = draw_steps(options, index)
    scenario = _scenario(options, own, steps, name=f"explore-{options.seed}-{index}")
    validate(scenario)
    return scenario


def validate(scenario: Scenario) -> None:
    """``ScenarioProblems`` if the scenario's steps cannot run on its bucket and cluster,
    or leave the consumer no node it knows of (``unreachable``)."""
    spec = scenario.bucket
    check_steps(
        scenario.steps,
        scenario_bucket(scenario),
        scenario.name,
        nodes=spec.nodes,
        replicas=spec.replicas,
    )
    problem = unreachable(scenario)
    if problem is not None:
        raise ScenarioProblems([problem])


#: steps after which what the consumer was sent is no longer known (it may roll back)
_LOSSES = (st.Failover, st.FailoverNode, st.Restart, st.NodeDown, st.Flush)


def meetable(scenario: Scenario) -> bool:
    """Every wait of the schedule can be met by a correct consumer, as the generator
    draws them: a seqno on one vbucket above what it was certainly sent and at most its
    high seqno, re-opened streams right after a disconnect (a shrunk schedule that
    dropped the writes or the disconnect a wait needs would fail every consumer), and
    nothing but writes before a wait for the consumer's progress, as ``_draw_one``
    draws them (a shrunk schedule that dropped that wait refused every connection
    before any consumer could connect), and no such wait while connections are refused
    (``_refuse`` lets them in again; a shrunk schedule that dropped that step kept a
    disconnected consumer out for good), and ``TORN_RECOVERY`` seconds of waits for time
    after a torn frame (``recovery``: a shrunk schedule that dropped or shortened them
    fails a consumer for the time its reconnect takes)."""
    if not _recovered(scenario.steps):
        return False
    spec = scenario.bucket
    sim = Simulation.of(scenario_bucket(scenario), nodes=spec.nodes, replicas=spec.replicas)
    sent: list[int | None] = [None] * spec.vbuckets
    previous: st.Step | None = None
    connected = refusing = False
    for step in scenario.steps:
        if not connected and step.GROUP not in ("data", "control"):
            return False
        if isinstance(step, st.RefuseConnections):
            refusing = step.enabled
        if refusing and isinstance(step, st.Wait) and step.consumer is not None:
            return False
        try:
            step.check(sim)
        except ValueError:
            return False
        connected = connected or (isinstance(step, st.Wait) and step.consumer is not None)
        if isinstance(step, _LOSSES):
            sent = [None] * len(sent)
        if isinstance(step, st.Wait) and step.consumer is not None:
            c = step.consumer
            if c.streams and not isinstance(previous, st.Disconnect):
                return False
            if isinstance(c.seqno, int) and isinstance(c.vbucket, int):
                before = sent[c.vbucket]
                if before is None or not before < c.seqno <= sim.high[c.vbucket]:
                    return False
            sent = _sent_after(step, sim, sent)
        previous = step
    return True


def is_valid(scenario: Scenario) -> bool:
    """The scenario validator accepts it and every wait can be met (``meetable``)."""
    try:
        validate(scenario)
    except ScenarioProblems:
        return False
    return meetable(scenario)


__all__ = [
    "BUCKET_THEMES",
    "DRAWERS",
    "EPHEMERAL_PATTERNS",
    "GROUPS",
    "MAP_REFRESH",
    "PATTERNS",
    "THEMES",
    "TORN_RECOVERY",
    "TRIGGERS",
    "Drawer",
    "GenerateOptions",
    "OptionError",
    "Reach",
    "bucket_draw",
    "draw_steps",
    "generate",
    "is_valid",
    "meetable",
    "recovery",
    "schedule_seed",
    "tears",
    "unreachable",
    "validate",
]
