"""A whole step list checked before any of it runs: each step's own ``check`` against a
simulation of what the steps before it will have done (``Simulation``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.scenario._check import Simulation
from mockdcp.scenario._convert import Problem, ScenarioProblems
from mockdcp.scenario.steps import ON_THE_BUCKET

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Bucket
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
) -> None:
    """Raise ``ScenarioProblems`` naming every step that cannot run on ``bucket`` (each
    step's own ``check``, against what the steps before it will have done), served by
    ``topology``'s nodes (None: a new cluster of ``nodes`` with ``replicas``)."""
    sim = Simulation.of(bucket, topology, nodes=nodes, replicas=replicas)
    problems: list[Problem] = []
    for i, step in enumerate(steps):
        try:
            if sim.deleted and step.GROUP in ON_THE_BUCKET and not step.BUCKETS:
                raise ValueError(f"bucket {bucket.name!r} is deleted by then (create_bucket it)")
            step.check(sim)
        except ValueError as exc:
            problems.append(Problem(str(exc), i, step.NAME, None, source))
    if problems:
        raise ScenarioProblems(problems)
