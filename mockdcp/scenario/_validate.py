"""A whole step list checked before any of it runs: each step's own ``check`` against a
simulation of what the steps before it will have done (``Simulation``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.scenario._check import Simulation
from mockdcp.scenario._convert import Problem, ScenarioProblems
from mockdcp.scenario.steps import ON_THE_BUCKET

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Bucket, Users
    from mockdcp.producer import Topology
    from mockdcp.scenario.steps import Step


def check_steps(
    steps: Sequence[Step],
    bucket: Bucket,
    source: str = "<steps>",
    topology: Topology | None = None,
    *,
    nodes: int = 1,
    replicas: int = 0,
    users: Users | None = None,
) -> None:
    """Raise ``ScenarioProblems`` naming every step that cannot run on ``bucket`` (each
    step's own ``check``, against what the steps before it will have done), served by
    ``topology``'s nodes (None: a new cluster of ``nodes`` with ``replicas``), with
    ``users`` (None: the topology's, or the default administrator)."""
    sim = Simulation.of(bucket, topology, nodes=nodes, replicas=replicas, users=users)
    sim.peers.append(sim)
    sims = {bucket.name: sim}
    fresh: set[str] = set()  # the buckets the steps make (simulated empty)
    problems: list[Problem] = []
    for i, step in enumerate(steps):
        try:
            target = _target(step, sim, sims, topology, fresh)
            if target.deleted and step.GROUP in ON_THE_BUCKET and not step.BUCKETS:
                name = target.bucket.name
                raise ValueError(f"bucket {name!r} is deleted by then (create_bucket it)")
            step.check(target)
            made = str(getattr(step, "name", ""))
            if step.NAME == "create_bucket" and made != bucket.name:
                sims.pop(made, None)  # made (again): simulated anew, empty
                fresh.add(made)
        except ValueError as exc:
            problems.append(Problem(str(exc), i, step.NAME, None, source))
    if problems:
        raise ScenarioProblems(problems)


def _target(
    step: Step,
    sim: Simulation,
    sims: dict[str, Simulation],
    topology: Topology | None,
    fresh: set[str],
) -> Simulation:
    """The simulation of the bucket ``step`` acts on (its ``bucket`` field): another
    bucket's is made on first use, from the running bucket or, for one the steps
    create, an empty one (``ValueError`` for a bucket the cluster will not have)."""
    name = step.bucket
    if name is None or name == sim.bucket.name:
        return sim
    if step.WAITS or step.BUCKETS:
        raise ValueError(f"{step.NAME} takes no bucket field (it acts on the scenario's bucket)")
    if name not in sim.buckets:
        raise ValueError(f"no bucket {name!r} (the buckets then: {sorted(sim.buckets)})")
    if name not in sims:
        from mockdcp.model import Bucket

        node = None
        if topology is not None and topology.nodes and name not in fresh:
            first = next(iter(topology.nodes.values()))
            node = first.buckets.node(name, first.name)
        model = (
            node.bucket
            if node is not None
            else Bucket(name, sim.num_vbuckets, clock=sim.bucket.clock)
        )
        other = Simulation.of(model, None if node is None else node.topology)
        other.buckets = sim.buckets  # one cluster: the bucket steps seen by every bucket
        other.peers = sim.peers  # and one clock (``advance_clock``)
        other.peers.append(other)
        if sim.clock is not None:  # moved already: its timers ran on this bucket too
            other.clock, other.certain = sim.clock, False
        sims[name] = other
    return sims[name]
