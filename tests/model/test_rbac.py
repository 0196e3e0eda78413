"""Users, roles and the privileges the roles give (``mockdcp.model._rbac``)."""

from __future__ import annotations

import pytest

from mockdcp.model import ROLES, Privilege, Role, UnknownRoles, User, Users, parse_roles
from mockdcp.util import ModelError

P = Privilege

# (role, privilege, bucket, scope, collection, granted): ns_server ``menelaus_roles.erl``
# permissions as ``memcached_permissions.erl`` maps them to kv_engine privileges
TABLE = [
    ("admin", P.DCP_PRODUCER, "default", None, None, True),
    ("admin", P.DCP_STREAM, "other", None, None, True),
    ("admin", P.ADMINISTRATOR, None, None, None, True),
    ("ro_admin", P.DCP_PRODUCER, "default", None, None, False),
    ("ro_admin", P.READ, "default", "_default", "_default", False),
    ("ro_admin", P.SYSTEM_SETTINGS, None, None, None, True),
    ("cluster_admin", P.DCP_STREAM, "default", None, None, False),
    ("bucket_admin[default]", P.DCP_PRODUCER, "default", None, None, False),
    ("bucket_admin[default]", P.READ, "default", "_default", "_default", False),
    ("bucket_admin[default]", P.SIMPLE_STATS, "default", None, None, True),
    ("bucket_full_access[default]", P.DCP_PRODUCER, "default", None, None, True),
    ("bucket_full_access[default]", P.DCP_PRODUCER, "other", None, None, False),
    ("bucket_full_access[*]", P.UPSERT, "other", "s", "c", True),
    ("data_reader[default]", P.READ, "default", "_default", "_default", True),
    ("data_reader[default]", P.UPSERT, "default", "_default", "_default", False),
    ("data_reader[default]", P.DCP_PRODUCER, "default", None, None, False),
    ("data_writer[default]", P.UPSERT, "default", "_default", "_default", True),
    ("data_writer[default]", P.READ, "default", "_default", "_default", False),
    ("data_dcp_reader[default]", P.DCP_PRODUCER, "default", None, None, True),
    ("data_dcp_reader[default]", P.DCP_STREAM, "default", None, None, True),
    ("data_dcp_reader[default]", P.DCP_STREAM, "other", None, None, False),
    ("data_dcp_reader[default]", P.UPSERT, "default", "_default", "_default", False),
    ("data_dcp_reader[*]", P.DCP_STREAM, "other", None, None, True),
    # a role on one scope: DcpProducer on the bucket, DcpStream on that scope only
    ("data_dcp_reader[default:inventory]", P.DCP_PRODUCER, "default", None, None, True),
    ("data_dcp_reader[default:inventory]", P.DCP_STREAM, "default", None, None, False),
    ("data_dcp_reader[default:inventory]", P.DCP_STREAM, "default", "inventory", None, True),
    ("data_dcp_reader[default:inventory]", P.DCP_STREAM, "default", "inventory", "hotel", True),
    ("data_dcp_reader[default:inventory]", P.DCP_STREAM, "default", "_default", "_default", False),
    ("data_dcp_reader[default:inventory:hotel]", P.DCP_STREAM, "default", "inventory", None, False),
    (
        "data_dcp_reader[default:inventory:hotel]",
        P.DCP_STREAM,
        "default",
        "inventory",
        "hotel",
        True,
    ),
    (
        "data_dcp_reader[default:inventory:hotel]",
        P.DCP_STREAM,
        "default",
        "inventory",
        "air",
        False,
    ),
    ("data_backup[default]", P.DCP_STREAM, "default", None, None, True),
    ("data_monitoring[default]", P.DCP_STREAM, "default", None, None, False),
]


@pytest.mark.parametrize(("role", "privilege", "bucket", "scope", "collection", "granted"), TABLE)
def test_roles_give_the_privileges_ns_server_maps_them_to(
    role: str,
    privilege: Privilege,
    bucket: str | None,
    scope: str | None,
    collection: str | None,
    granted: bool,
) -> None:
    users = Users([User(name="u", password="secret", roles=(Role.parse(role),))])
    assert users.allowed("u", privilege, bucket, scope, collection) is granted


def test_every_role_of_the_table_is_tested() -> None:
    assert {r.partition("[")[0] for r, *_ in TABLE} == set(ROLES)


def test_role_spelling_round_trips_and_bad_roles_are_named() -> None:
    for text in ("admin", "bucket_admin[default]", "data_dcp_reader[b:s:c]", "data_reader[*]"):
        assert str(Role.parse(text)) == text
    assert Role.parse("data_reader[b]").as_json() == {
        "role": "data_reader",
        "bucket_name": "b",
        "scope_name": "*",
        "collection_name": "*",
    }
    with pytest.raises(UnknownRoles) as info:
        parse_roles("admin,nosuch,admin[x],bucket_admin,data_reader[*:s],bucket_admin[a:b]")
    assert info.value.roles == [
        "nosuch",
        "admin[x]",
        "bucket_admin",
        "data_reader[*:s]",
        "bucket_admin[a:b]",
    ]
    assert "the following roles are unknown, malformed" in str(info.value)


def test_select_needs_some_privilege_in_the_bucket() -> None:
    users = Users(
        [
            User(name="ba", password="secret", roles=parse_roles("bucket_admin[default]")),
            User(name="none", password="secret"),
            User(name="ro", password="secret", roles=parse_roles("ro_admin")),
        ]
    )
    assert users.may_access_bucket("ba", "default")
    assert not users.may_access_bucket("ba", "other")
    assert not users.may_access_bucket("none", "default")
    assert users.may_access_bucket("ro", "default")
    assert not users.may_access_bucket(None, "default")


def test_changes_advance_the_revision_and_refuse_bad_input_changing_nothing() -> None:
    users = Users.admins({"Administrator": "password"})
    change = users.put("u", password="secret", roles=parse_roles("data_dcp_reader[default]"))
    assert (change.kind, change.revision) == ("created", 1)
    assert users["u"] == "secret"
    with pytest.raises(ModelError, match="at least 6 characters"):
        users.put("v", password="short", roles=())
    with pytest.raises(ModelError, match="Password is required for new user"):
        users.put("v", password=None, roles=())
    with pytest.raises(ModelError, match="must not contain spaces"):
        users.put("a b", password="secret", roles=())
    with pytest.raises(ModelError, match="does not have the roles admin"):
        users.revoke("u", parse_roles("admin"))
    with pytest.raises(ModelError, match="Unknown user"):
        users.delete("v")
    assert users.revision == 1
    assert "v" not in users
    assert users.grant("u", parse_roles("data_reader[default]")).revision == 2
    users.revoke("u", parse_roles("data_dcp_reader[default]"))
    assert not users.allowed("u", P.DCP_PRODUCER, "default")
    assert users.allowed("u", P.READ, "default", "_default", "_default")
    users.change_password("u", "another")
    assert users.check_password("u", "another")
    assert not users.check_password("u", "secret")
    users.put("u", password=None, roles=())  # an update keeps the password
    assert users["u"] == "another"
    assert users.delete("u").kind == "deleted"
    assert not users.allowed("u", P.READ, "default", "_default", "_default")
    assert users.revision == 6


def test_a_privilege_answered_before_a_change_is_answered_anew_after_it() -> None:
    """``Users.allowed`` keeps its answers until a change: each change is seen at once."""
    users = Users.admins({"Administrator": "password"})
    users.put("kafka", password="secret1", roles=(Role("data_dcp_reader", "default"),))
    asked = ("kafka", P.DCP_STREAM, "default")
    assert users.allowed(*asked)
    assert users.allowed(*asked)
    users.revoke("kafka", (Role("data_dcp_reader", "default"),))
    assert not users.allowed(*asked)
    users.grant("kafka", (Role("data_dcp_reader", "*"),))
    assert users.allowed(*asked)
    assert users.allowed("kafka", P.DCP_STREAM, "other")
    users.put("kafka", password=None, roles=(Role("data_reader", "default"),))
    assert not users.allowed(*asked)
    users.delete("kafka")
    assert not users.allowed("kafka", P.READ, "default", "_default", "_default")
