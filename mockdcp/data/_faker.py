"""Faker, the one source of realistic values: pools drawn once per seed.

Faker is slow (tens of microseconds a value) and costly to create (about 0.1 s), so both
document generators (``mockdcp serve --docs`` and the ``generate`` step in ``_dataset``;
the Spark corpus in ``mockdcp.pipeline``) draw small pools of values here, once per seed,
and combine them with numpy draws. One Faker per process, re-seeded for each draw: the
same seed and spec give the same pools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from faker import Faker

_FAKER: list[Faker] = []


def seeded_faker(seed: int | str) -> Faker:
    """The process's Faker (en_US), seeded with ``seed``."""
    if not _FAKER:
        from faker import Faker

        _FAKER.append(Faker("en_US"))
    fake = _FAKER[0]
    fake.seed_instance(seed)
    return fake


def draw_pools(
    seed: int | str, spec: Mapping[str, tuple[Callable[[Faker], str], int]]
) -> dict[str, list[str]]:
    """Pools of Faker values for ``seed``, drawn in ``spec``'s order."""
    fake = seeded_faker(seed)
    return {name: [draw(fake) for _ in range(count)] for name, (draw, count) in spec.items()}
