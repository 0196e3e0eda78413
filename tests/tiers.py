"""Which tier a test belongs to (tests/conftest.py applies it).

The full tier is every test marked with one of ``FULL_MARKERS``: real clients (interop),
Docker, long property runs (slow) and whatever else takes long or needs another toolchain
(full: the benches, the tooling checks, the fuzzer, the packaging test). Everything else
is the fast tier, the default.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pytest

FULL_MARKERS = ("interop", "docker", "slow", "full")


class Tier(enum.Enum):
    """The tiers a run selects: ``pytest``, ``pytest --full-only``, ``pytest --full``."""

    FAST = "fast"
    FULL = "full"
    BOTH = "fast and full"


def is_full(item: pytest.Item) -> bool:
    """A test of the full tier: it carries one of FULL_MARKERS (directly, or through its
    module's or class's pytestmark)."""
    return any(item.get_closest_marker(name) is not None for name in FULL_MARKERS)


def split(items: Iterable[pytest.Item], tier: Tier) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """The items the tier runs and those it leaves out, each in collection order."""
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        full = is_full(item)
        runs = tier is Tier.BOTH or full == (tier is Tier.FULL)
        (kept if runs else left_out).append(item)
    return kept, left_out
