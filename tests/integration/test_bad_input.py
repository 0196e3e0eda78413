from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

import trio

from mockdcp.client import DcpConsumer
from mockdcp.protocol import (
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    Hello,
    HelloFeature,
    Magic,
    Opcode,
    SaslAuth,
    SelectBucket,
    Status,
    encode_frame,
)

from ._raw import RawClient, wait_until

if TYPE_CHECKING:
    from mockdcp.server import MockDcpServer

XERROR_HELLO = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.SELECT_BUCKET)


async def _authenticated(server: MockDcpServer, *, xerror: bool = True) -> RawClient:
    c = await RawClient.connect(server.kv_port)
    features = XERROR_HELLO if xerror else (HelloFeature.JSON,)
    r = await c.call(Hello(opaque=c.next_opaque(), agent=b"raw", features=features))
    assert r.status == Status.SUCCESS
    r = await c.call(
        SaslAuth(opaque=c.next_opaque(), mechanism="PLAIN", payload=b"\0Administrator\0password")
    )
    assert r.status == Status.SUCCESS
    return c


async def _opened(server: MockDcpServer) -> RawClient:
    c = await _authenticated(server)
    assert (await c.call(SelectBucket(opaque=c.next_opaque(), bucket="default"))).status == 0
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"raw", flags=int(DcpOpenFlag.PRODUCER)))
    assert r.status == Status.SUCCESS
    return c


async def test_unknown_opcode_gets_unknown_command_and_connection_stays(
    server: MockDcpServer,
) -> None:
    c = await _authenticated(server)
    await c.send(encode_frame(Magic.REQUEST, 0xE7, opaque=77))
    r = await c.frame()
    assert (r.opcode, r.status, r.opaque) == (0xE7, Status.UNKNOWN_COMMAND, 77)
    r = await c.call(SelectBucket(opaque=c.next_opaque(), bucket="default"))
    assert r.status == Status.SUCCESS


async def test_dcp_open_before_auth_gets_eaccess_with_xerror(server: MockDcpServer) -> None:
    c = await RawClient.connect(server.kv_port)
    await c.call(Hello(opaque=c.next_opaque(), agent=b"raw", features=XERROR_HELLO))
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"x", flags=1))
    assert r.status == Status.EACCESS


async def test_dcp_open_before_auth_without_xerror_disconnects(server: MockDcpServer) -> None:
    c = await RawClient.connect(server.kv_port)
    await c.send(DcpOpen(opaque=1, name=b"x", flags=1))
    assert await c.closed_by_server()


async def test_dcp_open_before_select_bucket_gets_no_bucket(server: MockDcpServer) -> None:
    c = await _authenticated(server)
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"x", flags=1))
    assert r.status == Status.NO_BUCKET


async def test_stream_request_before_dcp_open_gets_einval(server: MockDcpServer) -> None:
    c = await _authenticated(server)
    await c.call(SelectBucket(opaque=c.next_opaque(), bucket="default"))
    r = await c.call(c.stream_request())
    assert r.status == Status.EINVAL


async def test_wrong_password_gets_auth_error(server: MockDcpServer) -> None:
    c = await RawClient.connect(server.kv_port)
    r = await c.call(SaslAuth(opaque=1, mechanism="PLAIN", payload=b"\0Administrator\0nope"))
    assert r.status == Status.AUTH_ERROR


async def test_select_unknown_bucket_gets_key_enoent(server: MockDcpServer) -> None:
    c = await _authenticated(server)
    r = await c.call(SelectBucket(opaque=c.next_opaque(), bucket="nosuch"))
    assert r.status == Status.KEY_ENOENT


async def test_unknown_control_gets_einval(server: MockDcpServer) -> None:
    c = await _opened(server)
    r = await c.call(DcpControl(opaque=c.next_opaque(), key="make_it_fast", value="true"))
    assert r.status == Status.EINVAL


async def test_second_dcp_open_gets_einval(server: MockDcpServer) -> None:
    c = await _opened(server)
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"again", flags=1))
    assert r.status == Status.EINVAL


async def test_stream_request_for_unknown_vbucket_gets_not_my_vbucket_with_config(
    server: MockDcpServer,
) -> None:
    c = await _opened(server)
    r = await c.call(c.stream_request(vb=999))
    assert r.status == Status.NOT_MY_VBUCKET
    assert json.loads(r.value)["nodeLocator"] == "vbucket"


async def test_stream_request_with_start_above_end_gets_erange(server: MockDcpServer) -> None:
    c = await _opened(server)
    r = await c.call(
        c.stream_request(start_seqno=5, end_seqno=2, snap_start_seqno=5, snap_end_seqno=5)
    )
    assert r.status == Status.ERANGE


async def test_duplicate_stream_gets_key_eexists(server: MockDcpServer) -> None:
    c = await _opened(server)
    assert (await c.call(c.stream_request())).status == Status.SUCCESS
    assert (await c.call(c.stream_request())).status == Status.KEY_EEXISTS


async def test_malformed_frame_closes_only_its_connection(server: MockDcpServer) -> None:
    for i in range(300):
        server.bucket.set(f"k{i}", b'{"v":1}')
    healthy = DcpConsumer(server.host, server.kv_port, vbuckets=range(64))
    async with trio.open_nursery() as nursery:
        await nursery.start(healthy.run)
        bad = await _authenticated(server)
        # extras (200) + key exceed the announced body (10): the header itself is wrong
        await bad.send(
            bytes([0x80, 0x5E, 0, 4, 200, 0, 0, 0])
            + (10).to_bytes(4, "big")
            + bytes(12)
            + b"x" * 10
        )
        assert await bad.closed_by_server()
        for i in range(300, 400):
            server.bucket.set(f"k{i}", b'{"v":2}')
        with trio.fail_after(10):
            await wait_until(lambda: healthy.state.items >= 400)
        nursery.cancel_scope.cancel()
    assert healthy.connects == 1
    assert healthy.state.violations == []


async def test_unknown_magic_closes_the_connection(server: MockDcpServer) -> None:
    c = await _authenticated(server)
    await c.send(bytes([0x42]) + bytes(23))
    assert await c.closed_by_server()


async def test_oversized_frame_is_refused_before_it_is_buffered(server: MockDcpServer) -> None:
    c = await _authenticated(server)
    header = (
        bytes([0x80, Opcode.DCP_CONTROL, 0, 1, 0, 0, 0, 0])
        + (1 << 30).to_bytes(4, "big")
        + bytes(12)
    )
    await c.send(header)
    assert await c.closed_by_server()


async def test_request_with_bad_shape_gets_einval_and_connection_stays(
    server: MockDcpServer,
) -> None:
    c = await _opened(server)
    # DCP_CONTROL with no key
    await c.send(encode_frame(Magic.REQUEST, Opcode.DCP_CONTROL, opaque=9, value=b"true"))
    r = await c.frame()
    assert (r.opaque, r.status) == (9, Status.EINVAL)
    r = await c.call(DcpControl(opaque=c.next_opaque(), key="enable_noop", value="true"))
    assert r.status == Status.SUCCESS


async def test_buffer_ack_gets_no_response(server: MockDcpServer) -> None:
    from mockdcp.protocol import DcpBufferAck, Noop

    c = await _opened(server)
    await c.send(DcpBufferAck(opaque=5, nbytes=100))
    r = await c.call(Noop(opaque=c.next_opaque()))
    assert r.opcode == Opcode.NOOP  # the first frame back answers the NOOP, not the ack


async def test_http_config_endpoints(server: MockDcpServer) -> None:
    auth = base64.b64encode(b"Administrator:password").decode()

    async def get(path: str, authz: str | None = auth) -> tuple[int, bytes]:
        stream = await trio.open_tcp_stream("127.0.0.1", server.http_port)
        hdr = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.http_port}\r\nConnection: close\r\n"
        if authz:
            hdr += f"Authorization: Basic {authz}\r\n"
        await stream.send_all((hdr + "\r\n").encode())
        data = b""
        with trio.fail_after(5):
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                data += chunk
                if path.startswith("/pools/default/bs") and b"\n\n\n\n" in data:
                    break
        await stream.aclose()
        status = int(data.split(b" ", 2)[1])
        return status, data.split(b"\r\n\r\n", 1)[1]

    status, body = await get("/pools")
    assert status == 200
    assert json.loads(body)["implementationVersion"].startswith("8.0.")  # the newest by default
    status, body = await get("/pools/default/b/default")
    config = json.loads(body)
    assert config["nodesExt"][0]["services"] == {
        "kv": server.kv_port,
        "mgmt": server.http_port,
        "kvSSL": server.tls_port,
        "mgmtSSL": server.https_port,
    }
    assert len(config["vBucketServerMap"]["vBucketMap"]) == 64
    status, body = await get("/pools/default/bs/default")
    assert status == 200
    assert b'"nodeLocator"' in body
    assert (await get("/pools/default/b/nosuch"))[0] == 404
    assert (await get("/pools", authz=None))[0] == 401
    assert (await get("/whoami"))[0] == 200
