"""The session commands a client sends before (and beside) DCP: HELLO, VERSION, NOOP,
GET_ERROR_MAP, the SASL exchange, SELECT_BUCKET and GET_CLUSTER_CONFIG. Each handler
takes the connection, the request frame, its decoded message and the time, and answers
through ``conn.replies``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mockdcp.producer._privileges import may_select
from mockdcp.protocol import (
    Datatype,
    GetClusterConfig,
    GetErrorMap,
    Hello,
    HelloFeature,
    Noop,
    SaslAuth,
    SaslListMechs,
    SaslStep,
    SelectBucket,
    Status,
    Version,
    encode_hello_features,
    error_map,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.producer._connection import Connection
    from mockdcp.protocol import Frame, SaslResult


def on_hello(conn: Connection, frame: Frame, msg: Hello, now: float) -> None:
    """HELLO grants what the node's server version knows and the mock implements
    (``ServerProfile.features``: kv_engine ``feature.h`` and ``hello_packet_executor.cc``
    at the release's tag); the cluster map notifications need DUPLEX in the same HELLO."""
    asked = list(dict.fromkeys(msg.features))
    notify = {
        HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION,
        HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
    }
    if notify & set(asked) and HelloFeature.DUPLEX not in asked:
        conn.replies.respond(frame, Status.EINVAL, context="cluster map notifications need DUPLEX")
        return
    granted = sorted({f for f in asked if f in conn.node.profile.features})
    if notify <= set(granted):
        # asked for both, a node grants only the brief form (kv_engine
        # ``hello_packet_executor.cc``)
        granted.remove(HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION)
    conn.negotiated(granted)
    conn.replies.respond(frame, value=encode_hello_features(granted))


def on_version(conn: Connection, frame: Frame, msg: Version, now: float) -> None:
    conn.replies.respond(frame, value=conn.node.version.encode())


def on_noop(conn: Connection, frame: Frame, msg: Noop, now: float) -> None:
    conn.replies.respond(frame)


def on_error_map(conn: Connection, frame: Frame, msg: GetErrorMap, now: float) -> None:
    if msg.version < 1:
        conn.replies.respond(frame, Status.EINVAL, context="error map version must be >= 1")
        return
    conn.replies.respond(frame, value=error_map(min(msg.version, 2)), datatype=Datatype.JSON)


def on_sasl_list(conn: Connection, frame: Frame, msg: SaslListMechs, now: float) -> None:
    # a certificate-authenticated connection lists none (kv_engine ``getSaslMechanisms``)
    names = conn.access.sasl.mechanisms_string() if conn.access.sasl_enabled else ""
    conn.replies.respond(frame, value=names.encode())


def on_sasl_auth(conn: Connection, frame: Frame, msg: SaslAuth, now: float) -> None:
    if not conn.access.sasl_enabled:  # kv_engine ``SaslStartCommandContext::initial``
        conn.replies.respond(frame, Status.NOT_SUPPORTED)
        return
    _sasl_result(conn, frame, conn.access.sasl.start(msg.mechanism, msg.payload))


def on_sasl_step(conn: Connection, frame: Frame, msg: SaslStep, now: float) -> None:
    if not conn.access.sasl_enabled:
        conn.replies.respond(frame, Status.NOT_SUPPORTED)
        return
    _sasl_result(conn, frame, conn.access.sasl.step(msg.mechanism, msg.payload))


def _sasl_result(conn: Connection, frame: Frame, result: SaslResult) -> None:
    if result.status == Status.SUCCESS:
        conn.authenticated(result.user or "")
    conn.replies.respond(frame, result.status, value=result.payload)


def on_select_bucket(conn: Connection, frame: Frame, msg: SelectBucket, now: float) -> None:
    """The connection's bucket: it moves to that bucket's node, or KEY_ENOENT when
    there is none (kv_engine ``select_bucket_executor.cc``; after DCP_OPEN the
    admission refuses it, NOT_SUPPORTED); access is asked first, EACCESS without it."""
    if not may_select(conn.node.users, conn.user, msg.bucket):
        conn.replies.respond(frame, Status.EACCESS, context=f"no access to bucket {msg.bucket!r}")
        return
    if not conn.node.select_bucket(conn, msg.bucket):
        conn.replies.respond(frame, Status.KEY_ENOENT, context=f"no bucket {msg.bucket!r}")
        return
    conn.bucket_selected()
    conn.replies.respond(frame)


def on_cluster_config(conn: Connection, frame: Frame, msg: GetClusterConfig, now: float) -> None:
    node = conn.node
    if (msg.epoch, msg.revision) == (node.config_epoch, node.config_rev):
        conn.replies.respond(frame)  # the client has this map (BinaryProtocol.md 0xb5)
        return
    conn.replies.respond(frame, value=conn.config_bytes(), datatype=Datatype.JSON)


#: The session commands' part of the dispatch table (``_dispatch``).
HANDLERS: dict[type, Callable[[Connection, Frame, Any, float], None]] = {
    Hello: on_hello,
    Version: on_version,
    Noop: on_noop,
    GetErrorMap: on_error_map,
    SaslListMechs: on_sasl_list,
    SaslAuth: on_sasl_auth,
    SaslStep: on_sasl_step,
    SelectBucket: on_select_bucket,
    GetClusterConfig: on_cluster_config,
}
