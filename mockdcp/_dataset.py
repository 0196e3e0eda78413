"""The seeded Faker data set ``mockdcp serve`` loads into its default bucket.

Faker is imported here, lazily, so the server is listening before it loads. The same seed
gives the same documents (Faker seeded per instance).
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

# fixed bounds: relative ones ("-5y", "now") would make the data depend on today's date
_START = datetime.datetime(2020, 1, 1)
_END = datetime.datetime(2025, 1, 1)


def faker_documents(count: int, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """``count`` (key, JSON body) pairs of user profiles, reproducible for a seed."""
    from faker import Faker

    fake = Faker()
    fake.seed_instance(seed)
    for i in range(count):
        doc = {
            "type": "user",
            "id": i,
            "name": fake.name(),
            "email": fake.email(),
            "city": fake.city(),
            "joined": fake.date_time_between(_START, _END).isoformat(),
            "score": fake.pyint(0, 1000),
        }
        yield f"user::{i:06d}", json.dumps(doc, separators=(",", ":")).encode()
