"""ns_server's REST writes for buckets, scopes and collections (issue 42 item 2): each
answers with a node's status and body, applies the step it spells, and a refused call
changes nothing (``mockdcp/server/_rest_buckets.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio

from mockdcp.client import ConsumerState, DcpConsumer

from ..integration._raw import wait_until

if TYPE_CHECKING:
    import httpx

    from mockdcp.server import MockDcpServer

BUCKETS = "/pools/default/buckets"


async def test_a_bucket_made_over_rest_is_listed_with_its_settings_and_deleted(
    server: MockDcpServer, http: httpx.AsyncClient
) -> None:
    form = {"name": "travel", "ramQuota": "256", "bucketType": "couchbase", "flushEnabled": "1"}
    made = await http.post(BUCKETS, data=form)
    assert made.status_code == 202
    assert made.headers["location"] == f"{BUCKETS}/travel"
    assert server.buckets.names == ["default", "travel"]
    info = (await http.get(f"{BUCKETS}/travel")).json()
    assert info["quota"]["rawRAM"] == 256 * 2**20
    assert info["replicaNumber"] == 1  # ns_server's default, placed as far as nodes allow
    assert info["controllers"]["flush"] == f"{BUCKETS}/travel/controller/doFlush"
    assert "flush" not in (await http.get(f"{BUCKETS}/default")).json()["controllers"]
    assert (await http.get("/pools/default/b/travel")).json()["name"] == "travel"
    gone = await http.delete(f"{BUCKETS}/travel")
    assert gone.status_code == 200
    assert server.buckets.names == ["default"]
    assert (await http.get(f"{BUCKETS}/travel")).status_code == 404
    assert (await http.delete(f"{BUCKETS}/travel")).status_code == 404


@pytest.mark.parametrize(
    ("form", "errors"),
    [
        ({"ramQuota": "100"}, {"name": "Bucket name needs to be specified"}),
        ({"name": "default", "ramQuota": "100"}, {"name": "Bucket with given name already exists"}),
        ({"name": "DEFAULT", "ramQuota": "100"}, {"name": "Bucket with given name already exists"}),
        ({"name": ".dot", "ramQuota": "100"}, {"name": "Bucket name cannot start with dot."}),
        ({"name": "b", "ramQuota": "99"}, {"ramQuota": "RAM quota cannot be less than 100 MiB"}),
        (
            {"name": "b"},
            {"ramQuota": "The RAM Quota must be specified and must be a positive integer."},
        ),
        ({"name": "b", "ramQuota": "-5"}, {"ramQuota": "The RAM Quota cannot be negative."}),
        (
            {"name": "b", "ramQuota": "100", "bucketType": "x"},
            {"bucketType": "invalid bucket type"},
        ),
        (
            {"name": "b", "ramQuota": "100", "replicaNumber": "4"},
            {"replicaNumber": "Replica number larger than 3 is not supported."},
        ),
        (
            {"name": "b", "ramQuota": "100", "flushEnabled": "yes"},
            {"flushEnabled": "flushEnabled can only be 1 or 0"},
        ),
        (
            {"name": "b", "ramQuota": "100", "storageBackend": "rocks"},
            {"storage_mode": "storage backend must be couchstore or magma"},
        ),
    ],
)
async def test_a_bucket_a_node_refuses_is_400_with_its_field_errors_and_nothing_made(
    server: MockDcpServer, http: httpx.AsyncClient, form: dict[str, str], errors: dict[str, str]
) -> None:
    answer = await http.post(BUCKETS, data=form)
    assert answer.status_code == 400
    assert answer.json() == {"errors": errors}
    assert server.buckets.names == ["default"]


async def test_a_body_that_is_not_a_form_is_400(
    server: MockDcpServer, http: httpx.AsyncClient
) -> None:
    answer = await http.post(BUCKETS, content=b"\xff\xfe&&=")
    assert answer.status_code == 400
    assert "not a form" in answer.json()["errors"]["_"]
    assert server.buckets.names == ["default"]


async def test_flush_is_refused_unless_enabled_and_empties_the_bucket(
    server: MockDcpServer, http: httpx.AsyncClient
) -> None:
    server.bucket.set("k", b"{}")
    refused = await http.post(f"{BUCKETS}/default/controller/doFlush")
    assert refused.status_code == 400
    assert refused.json() == {"_": "Flush is disabled for the bucket"}
    assert server.bucket.oracle().rows()
    form = {"name": "f", "ramQuota": "100", "flushEnabled": "1"}
    assert (await http.post(BUCKETS, data=form)).status_code == 202
    other = server.buckets.first_node("f").bucket
    other.set("k", b"{}")
    assert (await http.post(f"{BUCKETS}/f/controller/doFlush")).status_code == 200
    assert not other.oracle().rows()
    assert (await http.post(f"{BUCKETS}/nope/controller/doFlush")).status_code == 404


async def test_scopes_and_collections_answer_the_new_manifest_uid_and_stream_their_events(
    server: MockDcpServer, http: httpx.AsyncClient
) -> None:
    state = ConsumerState()
    consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(8), state=state)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        made = await http.post(f"{BUCKETS}/default/scopes", data={"name": "inventory"})
        assert made.status_code == 200
        assert made.json() == {"uid": "1"}
        coll = await http.post(
            f"{BUCKETS}/default/scopes/inventory/collections",
            data={"name": "hotel", "maxTTL": "60"},
        )
        assert coll.json() == {"uid": "2"}
        manifest = (await http.get(f"{BUCKETS}/default/scopes")).json()
        assert manifest["uid"] == "2"
        (inventory,) = [s for s in manifest["scopes"] if s["name"] == "inventory"]
        assert inventory["collections"] == [
            {"name": "hotel", "uid": "8", "maxTTL": 60, "history": False}
        ]
        dropped = await http.delete(f"{BUCKETS}/default/scopes/inventory/collections/hotel")
        assert dropped.json() == {"uid": "3"}
        assert (await http.delete(f"{BUCKETS}/default/scopes/inventory")).json() == {"uid": "4"}
        with trio.fail_after(20):  # four changes, a system event a vbucket
            await wait_until(lambda: state.system_events >= 4 * 8)
        nursery.cancel_scope.cancel()
    assert server.runner.progress.applied == 4  # the same steps as /mock/steps


@pytest.mark.parametrize(
    ("method", "path", "form", "status", "body"),
    [
        (
            "POST",
            "/default/scopes",
            {"name": "_x"},
            400,
            {"errors": {"name": "First character must not be _ or %"}},
        ),
        (
            "POST",
            "/default/scopes",
            {"name": "a.b"},
            400,
            {
                "errors": {
                    "name": "Can only contain characters A-Z, a-z, 0-9 and the following "
                    "symbols _ - %"
                }
            },
        ),
        ("POST", "/default/scopes", {}, 400, {"errors": {"name": "The value must be supplied"}}),
        (
            "POST",
            "/default/scopes",
            {"name": "s", "extra": "1"},
            400,
            {"errors": {"extra": "Unsupported key"}},
        ),
        (
            "POST",
            "/default/scopes",
            {"name": "inventory"},
            400,
            {"errors": {"_": 'Scope with name "inventory" already exists'}},
        ),
        (
            "POST",
            "/default/scopes/inventory/collections",
            {"name": "hotel"},
            400,
            {"errors": {"_": 'Collection with name "hotel" in scope "inventory" already exists'}},
        ),
        (
            "POST",
            "/default/scopes/inventory/collections",
            {"name": "c", "maxTTL": "x"},
            400,
            {"errors": {"maxTTL": "The value must be an integer"}},
        ),
        (
            "POST",
            "/default/scopes/nope/collections",
            {"name": "c"},
            404,
            {"errors": {"_": 'Scope with name "nope" is not found'}},
        ),
        (
            "DELETE",
            "/default/scopes/inventory/collections/nope",
            None,
            404,
            {"errors": {"_": 'Collection with name "nope" in scope "inventory" is not found'}},
        ),
        (
            "DELETE",
            "/default/scopes/_default",
            None,
            400,
            {"errors": {"_": "Deleting _default scope is not allowed"}},
        ),
        ("DELETE", "/nope/scopes/inventory", None, 404, None),
        ("GET", "/nope/scopes", None, 404, None),
    ],
)
async def test_a_scope_or_collection_a_node_refuses_changes_nothing(
    server: MockDcpServer,
    http: httpx.AsyncClient,
    method: str,
    path: str,
    form: dict[str, str] | None,
    status: int,
    body: dict[str, object] | None,
) -> None:
    server.bucket.create_scope("inventory")
    server.bucket.create_collection("inventory", "hotel")
    uid = server.bucket.manifest.uid
    answer = await http.request(method, BUCKETS + path, data=form)
    assert answer.status_code == status
    if body is None:
        assert answer.text == "Requested resource not found.\r\n"
    else:
        assert answer.json() == body
    assert server.bucket.manifest.uid == uid


async def test_the_control_api_takes_a_bucket_for_steps_state_oracle_and_expectations(
    server: MockDcpServer, http: httpx.AsyncClient
) -> None:
    assert (await http.post(BUCKETS, data={"name": "b2", "ramQuota": "100"})).status_code == 202
    steps = [{"set": {"key": "only-b2", "value": "v"}}]
    applied = await http.post("/mock/steps", json=steps, params={"bucket": "b2"})
    assert applied.status_code == 200
    assert not server.oracle().rows()
    rows = (await http.get("/mock/oracle", params={"bucket": "b2"})).json()["rows"]
    assert [r["key"] for r in rows] == ["only-b2"]
    state = (await http.get("/mock/state", params={"bucket": "b2"})).json()
    assert state["bucket"] == "b2"
    assert state["buckets"] == ["default", "b2"]
    assert state["scenario"]["applied"] == 1
    assert (await http.get("/mock/state")).json()["bucket"] == "default"
    assert (await http.get("/mock/expectations", params={"bucket": "b2"})).status_code == 200
    for answer in (
        await http.get("/mock/state", params={"bucket": "nope"}),
        await http.post("/mock/steps", json=steps, params={"bucket": "nope"}),
    ):
        assert answer.status_code == 404
    assert len(server.oracle("b2").rows()) == 1
