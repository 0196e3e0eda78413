"""A whole step list checked before any of it runs: each step's own ``check`` against a
simulation of what the steps before it will have done (``Simulation``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.scenario._check import Simulation
from mockdcp.scenario._convert import Problem, ScenarioProblems

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
    problems: list[Problem] = []
    for i, step in enumerate(steps):
        try:
            step.check(sim)
        except ValueError as exc:
            problems.append(Problem(str(exc), i, step.NAME, None, source))
    if problems:
        raise ScenarioProblems(problems)
