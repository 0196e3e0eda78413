from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from mockdcp.server._control_openapi import openapi_document

if TYPE_CHECKING:
    from collections.abc import Iterator

    from schemathesis import Case
    from schemathesis.checks import CheckFunction


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    """A ``mockdcp serve`` process on free ports; its HTTP base URL."""
    args = ["--port", "0", "--http-port", "0", "--vbuckets", "8", "--docs", "20", "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mockdcp", "serve", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        yield str(ready["http"])
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


# the document the server serves at /mock/openapi.json (test_control checks that it is
# the one served): loaded at collection, so schemathesis makes one test per operation
schema = schemathesis.openapi.from_dict(openapi_document())
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=30
)


@schema.parametrize()
def test_every_control_operation_answers_as_documented_and_never_5xx(
    case: Case[Any], live_url: str
) -> None:
    # a step list or scenario can be valid JSON Schema and still not run on this bucket
    # (a key that is not there, a vbucket it does not have, a field of the wrong kind),
    # and a bucket name can be any string and still name no bucket: 422 and 404 for
    # those are the documented answers, not a rejected valid request
    named = case.query is not None and "bucket" in case.query
    excluded: list[CheckFunction] = (
        [positive_data_acceptance] if case.method == "POST" or named else []
    )
    case.call_and_validate(base_url=live_url, excluded_checks=excluded)


def test_the_http_stack_imports_the_step_vocabulary_only_for_the_document() -> None:
    """The HTTP stack is imported beside a server's first streams (``_http.py``): the
    scenario package, which the OpenAPI document describes, waits for that document."""
    script = (
        "import sys; import mockdcp.server._asgi, mockdcp.server._control; "
        "print(any(m.startswith('mockdcp.scenario') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    assert out.stdout.split() == [b"False"]
