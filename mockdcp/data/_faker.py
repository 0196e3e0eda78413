"""Faker, the one source of realistic values: pools drawn once per seed.

Faker is slow (tens of microseconds a value) and costly to create (about 0.1 s), so both
document generators (``mockdcp serve --docs`` and the ``generate`` step in ``_dataset``;
the Spark corpus in ``mockdcp.pipeline``) draw small pools of values here, once per seed,
and combine them with numpy draws. One Faker per process, re-seeded for each draw: the
same seed and spec give the same pools. The seeded documents' pools are also kept on
disk (``cached_pools``): a later start reads them instead of importing Faker.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from faker import Faker

_FAKER: list[Faker] = []

#: the layout of a kept pools file (``cached_pools``): a change draws every pool again
POOLS_FORMAT = 1


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


def cached_pools(seed: int, spec: Mapping[str, tuple[str, int]]) -> dict[str, list[str]]:
    """``draw_pools`` of the Faker providers ``spec`` names (pool name -> (provider
    method, count)), kept in ``cache_root()/faker-pools`` per seed, spec and installed
    Faker: the next process reads them back instead of importing Faker, making one and
    drawing (0.2 s of ``mockdcp serve``'s start with its 1,000 default documents). Drawn
    again when the file is missing, unreadable or of another shape; drawn and not kept
    where the directory cannot be written."""
    path = _pools_file(seed, spec)
    if path is not None:
        kept = _read_pools(path, spec)
        if kept is not None:
            return kept
    drawn = draw_pools(
        seed, {name: (_provider(method), count) for name, (method, count) in spec.items()}
    )
    if path is not None:
        _write_pools(path, drawn)
    return drawn


def _provider(method: str) -> Callable[[Faker], str]:
    return lambda fake: str(getattr(fake, method)())


def _pools_file(seed: int, spec: Mapping[str, tuple[str, int]]) -> Path | None:
    """The file of these pools: named by the seed, the spec and the installed Faker
    (its package's path, size and modification time: another Faker, other values).
    None without Faker."""
    from importlib.util import find_spec

    from mockdcp.data._cache import cache_root

    found = find_spec("faker")
    if found is None or found.origin is None:
        return None
    try:
        stat = os.stat(found.origin)
    except OSError:
        return None
    key = [POOLS_FORMAT, seed, sorted(spec.items()), found.origin, stat.st_size, stat.st_mtime_ns]
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]
    try:
        root = cache_root()
    except RuntimeError:  # no $MOCKDCP_CACHE and no home directory (an unnamed user)
        return None
    return root / "faker-pools" / f"{digest}.json"


def _read_pools(path: Path, spec: Mapping[str, tuple[str, int]]) -> dict[str, list[str]] | None:
    """The pools kept at ``path`` if they have ``spec``'s names and counts, else None."""
    try:
        kept = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or list(kept) != list(spec):
        return None
    for name, (_, count) in spec.items():
        pool = kept[name]
        if not isinstance(pool, list) or len(pool) != count:
            return None
        if not all(isinstance(value, str) for value in pool):
            return None
    return kept


def _write_pools(path: Path, pools: Mapping[str, list[str]]) -> None:
    """Keep ``pools`` at ``path`` (whole or not at all: written aside, by this process's
    thread, then renamed)."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(pools))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
