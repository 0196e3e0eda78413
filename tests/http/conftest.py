from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import pytest

from mockdcp.model import Bucket
from mockdcp.server import MockDcpServer, serve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

AUTH = ("Administrator", "password")


@pytest.fixture
async def server() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 8, seed=5, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as srv:
        yield srv


@pytest.fixture
async def http(server: MockDcpServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.http_url, auth=AUTH, timeout=10) as client:
        yield client


@pytest.fixture
async def anonymous(server: MockDcpServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.http_url, timeout=10) as client:
        yield client
