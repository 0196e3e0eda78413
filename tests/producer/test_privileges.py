"""Users with roles on a producer connection: SASL against the users, EACCESS for what a
user may not do, and privileges that change under a live connection
(``mockdcp.producer._privileges``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from mockdcp.model import Bucket, Users, parse_roles
from mockdcp.producer import Node
from mockdcp.protocol import (
    DcpBufferAck,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Get,
    Hello,
    HelloFeature,
    Mutation,
    Response,
    SaslAuth,
    SaslClient,
    SaslStep,
    SelectBucket,
    Set,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
    SystemEvent,
)

from ._session import FEATURES, Session, decode_all

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.producer import Connection
    from mockdcp.protocol import Message

MAX = 2**64 - 1
COLLECTIONS = (*FEATURES, HelloFeature.COLLECTIONS)


def bucket() -> Bucket:
    return Bucket(
        "default",
        1,
        seed=5,
        clock=lambda: 1_700_000_000.0,
        collections={"inventory": ["hotel"]},
    )


def node_with(b: Bucket, **roles: str) -> Node:
    users = Users.admins({"Administrator": "password"})
    for name, text in roles.items():
        users.put(name, password="secret", roles=parse_roles(text))
    return Node(bucket=b, users=users)


def statuses(out: Sequence[object]) -> list[int]:
    return [m.status for m in out if isinstance(m, Response)]


def stream_request(value: dict[str, object] | None = None, opaque: int = 7) -> DcpStreamRequest:
    return DcpStreamRequest(
        opaque=opaque,
        vbucket=0,
        flags=0,
        start_seqno=0,
        end_seqno=MAX,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
        value=json.dumps(value).encode() if value else b"",
    )


def enable_noop(s: Session) -> None:
    from mockdcp.protocol import DcpControl

    assert statuses(s.call(DcpControl(opaque=0, key="enable_noop", value="true"))) == [0]


def test_sasl_plain_and_scram_check_each_user_and_a_changed_password_fails_the_next_auth() -> None:
    b = bucket()
    node = node_with(b, alice="data_dcp_reader[default]")
    assert statuses([Session(b, node=node, user="alice", password="secret").auth_reply[0]]) == [0]
    wrong = Session(b, node=node, user="alice", password="nope")
    assert statuses(wrong.auth_reply) == [Status.AUTH_ERROR]
    live = Session(b, node=node, user="alice", password="secret")
    node.steps.users_changed(node.users.change_password("alice", "changed"))
    old = Session(b, node=node, user="alice", password="secret")
    assert statuses(old.auth_reply) == [Status.AUTH_ERROR]
    assert statuses(Session(b, node=node, user="alice", password="changed").auth_reply) == [0]
    # the connection authenticated before the change goes on
    assert statuses(live.call(Get(opaque=1, vbucket=0, key=b"k"))) == [Status.KEY_ENOENT]
    # SCRAM on one connection: the old password fails after the change, the new succeeds
    conn = node.open_connection(0.0)
    for password, expected in (("secret", Status.AUTH_ERROR), ("changed", Status.SUCCESS)):
        client = SaslClient("alice", password, "SCRAM-SHA256", nonce="fixednonce")
        conn.receive_data(
            SaslAuth(opaque=0, mechanism="SCRAM-SHA256", payload=client.first()).encode(), 0.0
        )
        first = read(conn)
        assert isinstance(first[0], Response)
        final = client.step(first[0].value)
        conn.receive_data(SaslStep(opaque=0, mechanism="SCRAM-SHA256", payload=final).encode(), 0.0)
        assert statuses(read(conn)) == [expected]
    node.steps.users_changed(node.users.delete("alice"))
    assert statuses(Session(b, node=node, user="alice", password="changed").auth_reply) == [
        Status.AUTH_ERROR
    ]


def test_the_connections_of_a_cluster_share_a_users_scram_keys() -> None:
    """A user's SCRAM keys are made once for every connection (the process's
    ``_SHARED_KEYS``): the second connection's server-first carries the same salt, and
    authenticates."""
    from mockdcp.protocol import _sasl

    _sasl._SHARED_KEYS.pop(("alice", "SCRAM-SHA512", "secret", 4096), None)
    b = bucket()
    node = node_with(b, alice="data_dcp_reader[default]")
    salts = []
    for nonce in ("one", "two"):
        conn = node.open_connection(0.0)
        client = SaslClient("alice", "secret", "SCRAM-SHA512", nonce=nonce)
        conn.receive_data(
            SaslAuth(opaque=0, mechanism="SCRAM-SHA512", payload=client.first()).encode(), 0.0
        )
        first = read(conn)
        assert isinstance(first[0], Response)
        salts.append(first[0].value.split(b",")[1])
        final = client.step(first[0].value)
        conn.receive_data(SaslStep(opaque=0, mechanism="SCRAM-SHA512", payload=final).encode(), 0.0)
        assert statuses(read(conn)) == [Status.SUCCESS]
    assert salts[0] == salts[1]
    assert ("alice", "SCRAM-SHA512", "secret", 4096) in _sasl._SHARED_KEYS


def read(conn: Connection) -> list[Message | Response]:
    """What a bare connection wrote, decoded."""
    return decode_all(conn.data_to_send(0.0), collections=False)


def test_select_bucket_needs_some_privilege_in_the_bucket_and_comes_before_existence() -> None:
    b = bucket()
    node = node_with(b, admin="bucket_admin[default]", other="bucket_admin[other]")
    users = node.users
    users.put("nobody", password="secret", roles=())
    assert statuses(Session(b, node=node, user="admin", password="secret").select_reply) == [0]
    for user in ("other", "nobody"):
        s = Session(b, node=node, user=user, password="secret")
        assert statuses(s.select_reply) == [Status.EACCESS]
    s = Session(b, node=node, user="nobody", password="secret")
    assert statuses(s.call(SelectBucket(opaque=0, bucket="missing"))) == [Status.EACCESS]


def test_dcp_open_needs_dcp_producer_and_documents_need_read_or_upsert() -> None:
    b = bucket()
    node = node_with(b, ba="bucket_admin[default]", reader="data_reader[default]")
    s = Session(b, node=node, user="ba", password="secret")
    out = s.call(DcpOpen(opaque=0, name=b"n", flags=int(DcpOpenFlag.PRODUCER)))
    assert statuses(out) == [Status.EACCESS]
    r = Session(b, node=node, user="reader", password="secret")
    high = b.vbucket(0).high_seqno
    assert statuses(r.call(Get(opaque=1, vbucket=0, key=b"k"))) == [Status.KEY_ENOENT]
    out = r.call(Set(opaque=2, vbucket=0, key=b"k", value=b"{}", flags=0, expiry=0))
    assert statuses(out) == [Status.EACCESS]
    assert b.vbucket(0).high_seqno == high


def test_a_stream_needs_dcp_stream_on_what_its_filter_selects() -> None:
    b = bucket()
    node = node_with(b, scoped="data_dcp_reader[default:inventory]")
    s = Session(b, node=node, user="scoped", password="secret", features=COLLECTIONS)
    s.open_dcp()
    enable_noop(s)
    assert statuses(s.call(stream_request(opaque=1))) == [Status.EACCESS]
    assert statuses(s.call(stream_request({"scope": "8"}, opaque=2))) == [0]
    d = Session(b, node=node, user="scoped", password="secret", features=COLLECTIONS)
    d.open_dcp(name=b"other")
    enable_noop(d)
    # no privilege at all on _default: kv_engine hides it (Filter::checkPrivileges)
    out = d.call(stream_request({"collections": ["0"]}, opaque=3))
    assert statuses(out) == [Status.UNKNOWN_COLLECTION]
    assert isinstance(out[0], Response)
    assert json.loads(out[0].value)["manifest_uid"] == f"{b.manifest.uid:x}"


def scoped_bucket() -> Bucket:
    return Bucket(
        "default",
        1,
        seed=5,
        clock=lambda: 1_700_000_000.0,
        collections={"inventory": ["hotel", "airline"], "tenant": ["orders"]},
    )


def collection_key(b: Bucket, path: str, key: bytes) -> bytes:
    from mockdcp.protocol import encode_leb128

    scope, name = path.split(".")
    found = b.manifest.collection_named(scope, name)
    assert found is not None
    return encode_leb128(found.cid) + key


def test_a_role_on_one_collection_reaches_its_documents_only() -> None:
    """kv_engine checks a document command on the key's collection
    (``checkCollectionAccess``): EACCESS where the user has some privilege there,
    UNKNOWN_COLLECTION where it has none (a collection it cannot see); a client
    without collections gets EINVAL for those (``remapErrorCode``)."""
    b = scoped_bucket()
    node = node_with(b, reader="data_reader[default:inventory:hotel]")
    s = Session(b, node=node, user="reader", password="secret", features=COLLECTIONS)
    hotel = collection_key(b, "inventory.hotel", b"k")
    assert statuses(s.call(Get(opaque=1, vbucket=0, key=hotel))) == [Status.KEY_ENOENT]
    high = b.vbucket(0).high_seqno
    out = s.call(Set(opaque=2, vbucket=0, key=hotel, value=b"{}", flags=0, expiry=0))
    assert statuses(out) == [Status.EACCESS]
    for path in ("inventory.airline", "tenant.orders", "_default._default"):
        out = s.call(Get(opaque=3, vbucket=0, key=collection_key(b, path, b"k")))
        assert statuses(out) == [Status.UNKNOWN_COLLECTION], path
        assert isinstance(out[0], Response)
        assert json.loads(out[0].value)["manifest_uid"] == f"{b.manifest.uid:x}"
    assert b.vbucket(0).high_seqno == high
    legacy = Session(b, node=node, user="reader", password="secret")
    assert statuses(legacy.call(Get(opaque=4, vbucket=0, key=b"k"))) == [Status.EINVAL]
    # a role on the whole scope: its other collections are refused EACCESS, not hidden
    writer = node_with(b, w="data_writer[default:inventory]")
    w = Session(b, node=writer, user="w", password="secret", features=COLLECTIONS)
    airline = collection_key(b, "inventory.airline", b"k")
    assert statuses(w.call(Get(opaque=5, vbucket=0, key=airline))) == [Status.EACCESS]
    out = w.call(Set(opaque=6, vbucket=0, key=airline, value=b"{}", flags=0, expiry=0))
    assert statuses(out) == [Status.SUCCESS]
    orders = collection_key(b, "tenant.orders", b"k")
    out = w.call(Set(opaque=7, vbucket=0, key=orders, value=b"{}", flags=0, expiry=0))
    assert statuses(out) == [Status.UNKNOWN_COLLECTION]


def test_a_collection_filtered_stream_needs_dcp_stream_on_each_collection_only() -> None:
    """An unfiltered stream needs DcpStream on the bucket; a filter over collections
    the user may stream opens; over one it cannot see: UNKNOWN_COLLECTION; over one it
    may read but not stream: EACCESS; a scope it cannot see: UNKNOWN_SCOPE."""
    b = scoped_bucket()
    node = node_with(
        b, u="data_dcp_reader[default:inventory:hotel],data_reader[default:inventory:airline]"
    )
    manifest = b.manifest

    def cid(path: str) -> str:
        scope, name = path.split(".")
        found = manifest.collection_named(scope, name)
        assert found is not None
        return f"{found.cid:x}"

    cases: list[tuple[dict[str, object] | None, int]] = [
        (None, Status.EACCESS),
        ({"collections": [cid("inventory.hotel")]}, Status.SUCCESS),
        ({"collections": [cid("inventory.airline")]}, Status.EACCESS),
        (
            {"collections": [cid("inventory.hotel"), cid("tenant.orders")]},
            Status.UNKNOWN_COLLECTION,
        ),
        # one unknown collection dominates an EACCESS (Filter::checkPrivileges)
        (
            {"collections": [cid("inventory.airline"), cid("tenant.orders")]},
            Status.UNKNOWN_COLLECTION,
        ),
        ({"scope": "8"}, Status.EACCESS),  # inventory: reached, not as a whole
    ]
    tenant = manifest.scope_named("tenant")
    assert tenant is not None
    cases.append(({"scope": f"{tenant.sid:x}"}, Status.UNKNOWN_SCOPE))
    for i, (value, expected) in enumerate(cases):
        s = Session(b, node=node, user="u", password="secret", features=COLLECTIONS)
        s.open_dcp(name=f"c{i}".encode())
        enable_noop(s)
        answers = statuses(s.call(stream_request(value, opaque=10 + i)))
        assert answers[:1] == [expected], (value, answers)


def test_the_collections_manifest_lists_what_the_user_may_see() -> None:
    """kv_engine ``get_collection_manifest``: a collection is listed unless the user has
    no privilege on it; a scope when it holds a listed collection or the user reaches
    it as a whole."""
    from mockdcp.protocol import GetCollectionsManifest

    b = scoped_bucket()
    node = node_with(
        b,
        hotel="data_reader[default:inventory:hotel]",
        scope="data_dcp_reader[default:tenant]",
        all="data_reader[default]",
    )

    def listed(user: str) -> dict[str, list[str]]:
        s = Session(b, node=node, user=user, password="secret", features=COLLECTIONS)
        (answer,) = s.call(GetCollectionsManifest(opaque=1))
        assert isinstance(answer, Response)
        body = json.loads(answer.value)
        assert body["uid"] == f"{b.manifest.uid:x}"
        return {sc["name"]: [c["name"] for c in sc["collections"]] for sc in body["scopes"]}

    assert listed("hotel") == {"inventory": ["hotel"]}
    assert listed("scope") == {"tenant": ["orders"]}
    assert listed("all") == {
        "_default": ["_default"],
        "inventory": ["hotel", "airline"],
        "tenant": ["orders"],
    }


def lost_privileges_session(*, collections: bool = True) -> tuple[Bucket, Node, Session]:
    """A stream of a user with the bucket's DCP role and one on ``_default``: losing the
    bucket's keeps DcpProducer (the scope's role gives it) but not DcpStream on the
    whole bucket."""
    b = bucket()
    node = node_with(b, u="data_dcp_reader[default],data_dcp_reader[default:inventory]")
    s = Session(b, node=node, user="u", password="secret", features=COLLECTIONS)
    s.open_dcp()
    enable_noop(s)
    return b, node, s


def test_revoking_dcp_stream_ends_the_stream_lost_privileges_at_its_next_marker() -> None:
    b, node, s = lost_privileges_session()
    b.set("a", b"{}", vbucket=0)
    out = s.call(stream_request())
    assert statuses(out) == [0]
    assert [m for m in out + s.read() if isinstance(m, Mutation)]
    node.steps.users_changed(node.users.revoke("u", parse_roles("data_dcp_reader[default]")))
    assert not s.conn.closed
    assert not [m for m in s.read() if not isinstance(m, Response)]  # nothing until a marker
    b.set("b", b"{}", vbucket=0)
    out = s.read()
    assert not [m for m in out if isinstance(m, (SnapshotMarker, Mutation))]
    ends = [m for m in out if isinstance(m, StreamEnd)]
    assert [e.reason for e in ends] == [StreamEndReason.LOST_PRIVILEGES]
    # a new request is refused
    assert statuses(s.call(stream_request(opaque=9))) == [Status.EACCESS]


def test_a_snapshot_being_sent_is_finished_before_the_lost_privileges_end() -> None:
    b, node, s = lost_privileges_session()
    for key in ("a", "b", "c"):
        b.set(key, b"{}", vbucket=0)
    b.checkpoint(0)
    b.set("d", b"{}", vbucket=0)
    from mockdcp.protocol import DcpControl

    s.call(DcpControl(opaque=0, key="connection_buffer_size", value="1"))
    s.conn.flow.resize(1)
    out: list[Message | Response] = [
        m for m in s.call(stream_request()) if not isinstance(m, Response)
    ]
    assert [type(m) for m in out] == [SnapshotMarker]  # the window holds the rest
    node.steps.users_changed(node.users.revoke("u", parse_roles("data_dcp_reader[default]")))
    for _ in range(20):
        s.send(DcpBufferAck(opaque=0, nbytes=10_000).encode())
        out += s.read()
        if any(isinstance(m, StreamEnd) for m in out):
            break
    kinds = [type(m).__name__ for m in out if not isinstance(m, SystemEvent)]
    assert kinds == ["SnapshotMarker", "Mutation", "Mutation", "Mutation", "StreamEnd"]
    assert [m.key for m in out if isinstance(m, Mutation)] == [b"a", b"b", b"c"]
    end = out[-1]
    assert isinstance(end, StreamEnd)
    assert end.reason == StreamEndReason.LOST_PRIVILEGES


def test_granting_back_before_the_marker_keeps_the_stream() -> None:
    b, node, s = lost_privileges_session()
    assert statuses(s.call(stream_request())) == [0]
    role = parse_roles("data_dcp_reader[default]")
    node.steps.users_changed(node.users.revoke("u", role))
    node.steps.users_changed(node.users.grant("u", role))
    b.set("b", b"{}", vbucket=0)
    out = s.read()
    assert [type(m).__name__ for m in out if not isinstance(m, Response)] == [
        "SnapshotMarker",
        "Mutation",
    ]


def test_losing_dcp_producer_shuts_the_connection_down() -> None:
    b = bucket()
    node = node_with(b, u="data_dcp_reader[default]")
    s = Session(b, node=node, user="u", password="secret")
    s.open_dcp()
    assert statuses(s.call(stream_request())) == [0]
    other = Session(b, node=node)  # another user's connection stays
    other.open_dcp(name=b"admin")
    node.steps.users_changed(node.users.revoke("u", parse_roles("data_dcp_reader[default]")))
    assert s.conn.closed
    assert s.conn.close_reason == "DcpProducer privilege no longer available"
    assert not other.conn.closed


def test_hello_needs_no_privilege() -> None:
    b = bucket()
    node = node_with(b, nobody="")
    conn = node.open_connection(0.0)
    conn.receive_data(Hello(opaque=0, agent=b"x", features=FEATURES).encode(), 0.0)
    assert statuses(read(conn)) == [0]


def test_collection_and_scope_ids_of_what_the_user_cannot_see_are_unknown() -> None:
    """kv_engine ``get_collection_id``/``get_scope_id``: a collection or scope the user
    has no privilege on answers as if it did not exist."""
    from mockdcp.protocol import GetCollectionId, GetScopeId

    b = scoped_bucket()
    node = node_with(b, hotel="data_reader[default:inventory:hotel]")
    s = Session(b, node=node, user="hotel", password="secret", features=COLLECTIONS)
    assert statuses(s.call(GetCollectionId(opaque=1, path="inventory.hotel"))) == [0]
    assert statuses(s.call(GetCollectionId(opaque=2, path="inventory.airline"))) == [
        Status.UNKNOWN_COLLECTION
    ]
    assert statuses(s.call(GetScopeId(opaque=3, path="inventory"))) == [0]
    assert statuses(s.call(GetScopeId(opaque=4, path="tenant"))) == [Status.UNKNOWN_SCOPE]
    admin = Session(b, node=node, features=COLLECTIONS)
    assert statuses(admin.call(GetCollectionId(opaque=5, path="inventory.airline"))) == [0]


def test_the_collection_privileges_are_what_a_data_role_grants_on_a_bucket() -> None:
    """Two kv_engine facts that coincide: the privileges checked per collection
    (``is_collection_privilege``) are the data privileges ``bucket_full_access`` grants
    (``[{bucket, B}, data] all``). A privilege added to one table and not the other
    would be checked on a collection no role can grant it on, or granted and never
    checked there."""
    from mockdcp.model._rbac import _ALL_DATA
    from mockdcp.producer._privileges import COLLECTION_PRIVILEGES

    assert COLLECTION_PRIVILEGES == _ALL_DATA
