"""Users and roles through ns_server's REST routes and the steps, and what they do to
KV connections (``mockdcp/server/_rest_rbac.py``), on 127.0.0.1 port 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
import trio

from mockdcp.client import DcpConsumer
from mockdcp.client._state import ConsumerError
from mockdcp.protocol import Mutation, StreamEnd, StreamEndReason

from ..integration._raw import wait_until

if TYPE_CHECKING:
    from mockdcp.server import MockDcpServer

FORM = {"content-type": "application/x-www-form-urlencoded"}


async def put_user(http: httpx.AsyncClient, name: str, body: str) -> httpx.Response:
    return await http.put(f"/settings/rbac/users/local/{name}", content=body, headers=FORM)


async def test_put_get_and_delete_a_user_as_a_node_answers(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    r = await put_user(http, "dcp", "password=secret1&roles=data_dcp_reader[default]&name=DCP")
    assert (r.status_code, r.json()) == (200, "")
    users = (await http.get("/settings/rbac/users")).json()
    dcp = next(u for u in users if u["id"] == "dcp")
    assert dcp["domain"] == "local"
    assert dcp["name"] == "DCP"
    assert dcp["roles"] == [
        {
            "role": "data_dcp_reader",
            "bucket_name": "default",
            "scope_name": "*",
            "collection_name": "*",
            "origins": [{"type": "user"}],
        }
    ]
    assert (await http.get("/settings/rbac/users/local/dcp")).json()["id"] == "dcp"
    async with httpx.AsyncClient(base_url=server.http_url, auth=("dcp", "secret1")) as dcp_http:
        who = (await dcp_http.get("/whoami")).json()
    assert (who["id"], [r["role"] for r in who["roles"]]) == ("dcp", ["data_dcp_reader"])
    # a PUT without a password keeps it and replaces the roles
    r = await put_user(http, "dcp", "roles=data_reader[default]")
    assert r.status_code == 200
    assert server.node.users["dcp"] == "secret1"
    assert [str(r) for r in server.node.users.require("dcp").roles] == ["data_reader[default]"]
    r = await http.delete("/settings/rbac/users/local/dcp")
    assert (r.status_code, r.json()) == (200, "")
    r = await http.delete("/settings/rbac/users/local/dcp")
    assert (r.status_code, r.json()) == (404, "Unknown user.")
    r = await http.get("/settings/rbac/users/local/dcp")
    assert (r.status_code, r.json()) == (404, "Unknown user.")
    r = await http.get("/settings/rbac/users/external")
    assert (r.status_code, r.json()) == (404, "Unknown user domain.")
    roles = (await http.get("/settings/rbac/roles")).json()
    dcp_role = next(r for r in roles if r["role"] == "data_dcp_reader")
    assert dcp_role["bucket_name"] == "*"
    assert dcp_role["name"] == "Data DCP Reader"


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        (
            "password=secret1&roles=nosuch,admin[x]",
            {
                "roles": "Cannot assign roles to user because the following roles are unknown,"
                " malformed or role parameters are undefined: [nosuch,admin[x]]"
            },
        ),
        (
            "password=short&roles=admin",
            {"password": "The password must be at least 6 characters long."},
        ),
        ("roles=admin", {"password": "Password is required for new user."}),
        ("password=secret1&colour=blue", {"colour": "Unsupported key"}),
        ("%zz=&&=", {"_": "the body is not an urlencoded form"}),
    ],
)
async def test_bad_user_requests_are_400_with_ns_servers_field_errors_and_change_nothing(
    http: httpx.AsyncClient, server: MockDcpServer, body: str, errors: dict[str, str]
) -> None:
    before = server.node.users.revision
    r = await put_user(http, "someone", body)
    assert (r.status_code, r.json()) == (400, {"errors": errors})
    assert "someone" not in server.node.users
    assert server.node.users.revision == before


async def test_a_bad_user_name_is_a_global_error(http: httpx.AsyncClient) -> None:
    r = await put_user(http, "@svc", "password=secret1")
    assert (r.status_code, r.json()) == (400, {"errors": {"_": "Username cannot start with '@'"}})


async def test_only_an_admin_reads_or_changes_users(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    await put_user(http, "reader", "password=secret1&roles=data_reader[*]")
    async with httpx.AsyncClient(
        base_url=server.http_url, auth=("reader", "secret1"), timeout=10
    ) as reader:
        r = await reader.get("/settings/rbac/users")
        assert r.status_code == 403
        assert r.json() == {
            "message": "Forbidden. User needs the following permissions",
            "permissions": ["cluster.admin.users!read"],
        }
        r = await reader.delete("/settings/rbac/users/local/Administrator")
        assert r.status_code == 403
        # its own password it may change
        r = await reader.post(
            "/controller/changePassword", content="password=secret1", headers=FORM
        )
        assert (r.status_code, r.json()) == (
            400,
            {"errors": {"password": "Password has already been used."}},
        )
        r = await reader.post(
            "/controller/changePassword", content="password=secret2", headers=FORM
        )
        assert r.status_code == 200
    assert server.node.users["reader"] == "secret2"


async def test_steps_spell_the_same_operations(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    steps = [
        {"create_user": {"name": "s", "password": "secret1", "roles": "bucket_admin[default]"}},
        {"grant": {"user": "s", "roles": "data_dcp_reader[default]"}},
        {"revoke": {"user": "s", "roles": "bucket_admin[default]"}},
        {"change_password": {"user": "s", "password": "secret2"}},
    ]
    r = await http.post("/mock/steps", json=steps)
    assert r.status_code == 200
    user = server.node.users.require("s")
    assert [str(r) for r in user.roles] == ["data_dcp_reader[default]"]
    assert user.password == "secret2"
    # checked before anything runs: an unknown role, a revoke of a role it lacks
    bad = [
        {"delete_user": {"name": "s"}},
        {"grant": {"user": "s", "roles": "admin"}},
        {"grant": {"user": "Administrator", "roles": "nosuch"}},
    ]
    r = await http.post("/mock/steps", json=bad)
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert [(e["step"], e["detail"]) for e in errors[:1]] == [(1, "Unknown user.")]
    assert "[nosuch]" in errors[1]["detail"]
    assert "s" in server.node.users


async def consumer_of(server: MockDcpServer, user: str, password: str) -> DcpConsumer:
    return DcpConsumer(
        "127.0.0.1",
        server.kv_port,
        user=user,
        password=password,
        bucket="default",
        vbuckets=range(8),
    )


async def test_sasl_for_each_user_and_a_changed_password_fails_the_next_login_only(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    await put_user(http, "dcp", "password=secret1&roles=data_dcp_reader[default]")
    await put_user(http, "ba", "password=secret1&roles=bucket_admin[default]")
    await http.post("/mock/steps", json=[{"set": {"key": "a", "value": {"n": 1}}}])
    consumer = await consumer_of(server, "dcp", "secret1")
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        with trio.fail_after(10):
            await wait_until(lambda: len(consumer.state.documents()) == 1)
        r = await http.post(
            "/mock/steps", json=[{"change_password": {"user": "dcp", "password": "secret2"}}]
        )
        assert r.status_code == 200
        await http.post("/mock/steps", json=[{"set": {"key": "b", "value": {"n": 2}}}])
        with trio.fail_after(10):  # the authenticated connection goes on
            await wait_until(lambda: len(consumer.state.documents()) == 2)
        nursery.cancel_scope.cancel()
    for user, password, message in (
        ("dcp", "secret1", "authentication failed with status 0x20"),
        ("ba", "secret1", "DCP_OPEN failed with status 0x24"),
    ):
        with pytest.raises(ConsumerError, match=message):
            await (await consumer_of(server, user, password)).run()


async def test_revoke_ends_streams_lost_privileges_at_the_next_marker(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    roles = "data_dcp_reader[default],data_dcp_reader[default:_default]"
    await put_user(http, "dcp", f"password=secret1&roles={roles}")
    ends: list[tuple[int, object]] = []
    consumer = DcpConsumer(
        "127.0.0.1",
        server.kv_port,
        user="dcp",
        password="secret1",
        bucket="default",
        vbuckets=[0],
        on_event=lambda vb, event: ends.append((vb, event)),
    )
    key = next(f"k{i}" for i in range(100) if server.bucket.vbucket_of(f"k{i}") == 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await http.post(
            "/mock/steps", json=[{"revoke": {"user": "dcp", "roles": "data_dcp_reader[default]"}}]
        )
        await http.post("/mock/steps", json=[{"set": {"key": key, "value": {"n": 1}}}])
        with trio.fail_after(10):
            await consumer.finished.wait()
        nursery.cancel_scope.cancel()
    assert consumer.state.documents() == {}
    assert [e.reason for _, e in ends if isinstance(e, StreamEnd)] == [
        StreamEndReason.LOST_PRIVILEGES
    ]
    assert not [e for _, e in ends if isinstance(e, Mutation)]
