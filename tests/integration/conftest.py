from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from mockdcp.model import Bucket
from mockdcp.server import MockDcpServer, serve

from . import _raw


@pytest.fixture
async def server() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 64, seed=3, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as srv:
        yield srv
        while _raw.OPEN:
            await _raw.OPEN.pop().aclose()
