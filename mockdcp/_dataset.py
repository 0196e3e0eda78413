"""The seeded data set ``mockdcp serve`` loads into its default bucket: user profiles.

Faker draws the names, cities, countries and mail domains once (pools of 16 to 256
values, seeded: 65,536 names); each block of ``BLOCK`` documents then combines them with
numpy draws seeded by (seed, block number), formatted in one ``bytes %`` per document.
The same seed gives the same bytes, whatever size the batches are loaded in. Faker and
numpy are imported here, lazily, so the server is listening before it loads.

``load_documents`` writes them with ``Bucket.set_many`` a block at a time and yields to
trio between blocks, so a large load never blocks the event loop for more than a few
milliseconds.
"""

from __future__ import annotations

import gc
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mockdcp.model import Bucket

#: documents drawn, formatted and written in one go (about 3-4 ms on this project's VM)
BLOCK = 1024

# fixed bounds: relative ones ("-5y", "now") would make the data depend on today's date
_START = "2020-01-01T00:00:00"
_SPAN_S = 5 * 365 * 24 * 3600

_TEMPLATE = (
    b'{"type":"user","id":%d,"name":"%s %s","email":"%s.%s%d@%s","city":"%s",'
    b'"country":"%s","joined":"%s","score":%d,"active":%s}'
)
_JSON = 0x01


def _escaped(text: str) -> bytes:
    """``text`` as the inside of a JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode()


def _local_part(text: str) -> bytes:
    """``text`` as the letters of a mail address: lower case ASCII letters only."""
    return "".join(c for c in text.lower() if "a" <= c <= "z").encode() or b"user"


class _Pools:
    """What Faker draws once per seed."""

    def __init__(self, seed: int) -> None:
        from faker import Faker

        fake = Faker()
        fake.seed_instance(seed)
        firsts = [fake.first_name() for _ in range(256)]
        lasts = [fake.last_name() for _ in range(256)]
        self.first = [_escaped(n) for n in firsts]
        self.last = [_escaped(n) for n in lasts]
        self.first_mail = [_local_part(n) for n in firsts]
        self.last_mail = [_local_part(n) for n in lasts]
        self.domain = [_escaped(fake.free_email_domain()) for _ in range(16)]
        self.city = [_escaped(fake.city()) for _ in range(128)]
        self.country = [_escaped(fake.country()) for _ in range(64)]


class DocumentGenerator:
    """User-profile documents ``user::NNNNNN``, reproducible for a seed."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._pools = _Pools(seed)

    def block(self, number: int) -> tuple[list[bytes], list[bytes]]:
        """The keys and JSON bodies of documents ``number * BLOCK`` up to the next block."""
        import numpy as np

        p = self._pools
        rng = np.random.default_rng([self.seed, number])
        first_i = rng.integers(0, len(p.first), BLOCK).tolist()
        last_i = rng.integers(0, len(p.last), BLOCK).tolist()
        domain_i = rng.integers(0, len(p.domain), BLOCK).tolist()
        city_i = rng.integers(0, len(p.city), BLOCK).tolist()
        country_i = rng.integers(0, len(p.country), BLOCK).tolist()
        mail_n = rng.integers(1, 100, BLOCK).tolist()
        score = rng.integers(0, 1001, BLOCK).tolist()
        active = np.where(rng.random(BLOCK) < 0.8, "true", "false").tolist()
        seconds = rng.integers(0, _SPAN_S, BLOCK).astype("timedelta64[s]")
        joined = np.datetime_as_string(np.datetime64(_START) + seconds).tolist()
        first_id = number * BLOCK
        keys = [b"user::%06d" % i for i in range(first_id, first_id + BLOCK)]
        first, last, fmail, lmail = p.first, p.last, p.first_mail, p.last_mail
        domain, city, country = p.domain, p.city, p.country
        values = [
            _TEMPLATE
            % (
                first_id + j,
                first[f],
                last[la],
                fmail[f],
                lmail[la],
                n,
                domain[d],
                city[c],
                country[co],
                when.encode(),
                sc,
                act.encode(),
            )
            for j, (f, la, d, c, co, n, sc, act, when) in enumerate(
                zip(
                    first_i,
                    last_i,
                    domain_i,
                    city_i,
                    country_i,
                    mail_n,
                    score,
                    active,
                    joined,
                    strict=True,
                )
            )
        ]
        return keys, values

    def documents(self, count: int) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """``count`` documents, a block (or the last part of one) at a time."""
        for number in range(-(-count // BLOCK)):
            keys, values = self.block(number)
            left = count - number * BLOCK
            if left < BLOCK:
                keys, values = keys[:left], values[:left]
            yield keys, values


def faker_documents(count: int, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """``count`` (key, JSON body) pairs of user profiles, reproducible for a seed."""
    for keys, values in DocumentGenerator(seed).documents(count):
        for key, value in zip(keys, values, strict=True):
            yield key.decode(), value


async def load_documents(
    bucket: Bucket,
    count: int,
    seed: int = 0,
    progress: Callable[[int, int], Any] | None = None,
) -> int:
    """Load ``count`` generated documents into ``bucket``, a block at a time, yielding
    to trio after each block; ``progress(done, count)`` after each. Returns ``count``.

    The loaded objects are then moved out of the cyclic garbage collector's reach
    (``gc.freeze``, which moves lists, O(1)): they live as long as the server, and a
    full collection walking millions of them would stall streaming.
    """
    import trio

    done = 0
    for keys, values in DocumentGenerator(seed).documents(count):
        done += bucket.set_many(keys, values, datatypes=_JSON)
        if progress is not None:
            progress(done, count)
        await trio.lowlevel.checkpoint()
    gc.freeze()
    return done
