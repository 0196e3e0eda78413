from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from mockdcp.model import Bucket
from mockdcp.server import MockDcpServer, serve

from . import _raw

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def server() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 64, seed=3, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as srv:
        yield srv
        while _raw.OPEN:
            await _raw.OPEN.pop().aclose()
