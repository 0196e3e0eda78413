"""What the cluster's parts stand on: the map, the copies on each node, the nodes down
or leaving, and publishing a step's change on the bucket's feed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.util import ModelError

if TYPE_CHECKING:
    import random
    from collections.abc import Iterable

    from mockdcp.model._bucket import Bucket
    from mockdcp.model._changes import ChangeNote
    from mockdcp.model._vbmap import VBucketMap
    from mockdcp.model._vbucket import VBucket


class ClusterCore:
    """The state of a ``Cluster`` (its constructor sets what is declared here) and the
    checks every step makes first."""

    map: VBucketMap
    bucket: Bucket
    rng: random.Random
    _limits: tuple[int, int]
    _copies: dict[str, dict[int, VBucket]]
    _old: dict[str, dict[int, VBucket]]
    _down: set[str]
    _leaving: set[str]
    _paused: set[tuple[str | None, int | None]]
    auto_replicate: bool

    def _check_node(self, node: str) -> None:
        if node not in self._copies:
            raise ModelError(f"no node {node!r} in the cluster ({list(self._copies)})")

    def _check_vbucket(self, vbucket: int) -> None:
        self.bucket.vbucket(vbucket)  # ModelError if there is none

    def _check_up(self, node: str) -> None:
        self._check_node(node)
        if node in self._down:
            raise ModelError(f"node {node!r} is down")

    def _publish(self, note: ChangeNote) -> None:
        """Publish what a step changed (nothing when it changed nothing)."""
        if note:
            self.bucket.publish(note.change())

    def _forget(self, nodes: Iterable[str]) -> None:
        gone = set(nodes)
        for node in gone:
            self._old.pop(node, None)
        self._paused = {(n, v) for n, v in self._paused if n not in gone}
        self._down -= gone
