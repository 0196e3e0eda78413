"""Users, their roles, and the privileges the roles give, as a cluster keeps them.

ns_server keeps the users and their roles (``menelaus_roles.erl``: each role's
permissions on objects such as ``[{bucket, B}, data, dcp]``); ``memcached_permissions.erl``
turns those permissions into the privileges kv_engine checks (``DcpProducer``,
``DcpStream``, ``Read``...), per bucket, scope and collection, and memcached asks them
before each request (kv_engine ``daemon/mcbp_privileges.cc``). This module holds both
halves as one table: ``ROLES`` says, for each role DCP consumers and their tools are
given, which privileges it grants on its bucket (or every bucket: ``*``) and on the
data its scope/collection parameters name. The users that hold the roles are
``_users.Users``, which loads this module when a role is first asked for (a server
starts without it).

Roles are spelled as ns_server spells them: ``admin``, ``bucket_admin[default]``,
``data_dcp_reader[default:inventory:hotel]``, ``data_reader[*]``. A change (create,
delete, grant, revoke, password) is a ``UserChange``; every change advances
``Users.revision``, as ns_server's RBAC file push advances memcached's privilege
context revision (a connection re-checks what it holds when the revision moved).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, Literal

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

#: a role parameter that matches every bucket, scope or collection
ANY = "*"


class Privilege(enum.Enum):
    """The kv_engine privileges DCP consumers and SDKs need (kv_engine
    ``include/memcached/rbac/privileges.h``; their ns_server source:
    ``memcached_permissions.erl``)."""

    #: members are singletons compared by identity: hashed by it too, in C (``Enum``
    #: hashes its name in Python; ``Users.allowed`` keys its answers by privilege, asked
    #: twice a stream request)
    __hash__ = object.__hash__

    #: ``[{bucket, B}, data, dcp] read``: DCP_OPEN as a producer and every DCP command
    DCP_PRODUCER = "DcpProducer"
    #: ``[{bucket, B}, data, dcp] write``
    DCP_CONSUMER = "DcpConsumer"
    #: ``[{collection, ..}, data, dcpstream] read``: a stream of that data
    DCP_STREAM = "DcpStream"
    READ = "Read"
    INSERT = "Insert"
    UPSERT = "Upsert"
    DELETE = "Delete"
    RANGE_SCAN = "RangeScan"
    META_WRITE = "MetaWrite"
    SYSTEM_XATTR_READ = "SystemXattrRead"
    SYSTEM_XATTR_WRITE = "SystemXattrWrite"
    #: ``[{collection, ..}, data, docs] sread``: the system collections
    SYSTEM_COLLECTION_LOOKUP = "SystemCollectionLookup"
    SIMPLE_STATS = "SimpleStats"
    #: global: ``[pools] read``
    SYSTEM_SETTINGS = "SystemSettings"
    #: global: ``[stats, memcached] read``
    STATS = "Stats"
    #: global: ``[admin, memcached, idle] write``
    IDLE_CONNECTION = "IdleConnection"
    #: global: ``[admin, memcached] all``
    ADMINISTRATOR = "Administrator"


P = Privilege
#: what ``[{bucket, B}, data] all`` gives on the data (bucket_full_access, data_backup)
_ALL_DATA = frozenset(
    {
        P.READ,
        P.INSERT,
        P.UPSERT,
        P.DELETE,
        P.RANGE_SCAN,
        P.META_WRITE,
        P.SYSTEM_XATTR_READ,
        P.SYSTEM_XATTR_WRITE,
        P.SYSTEM_COLLECTION_LOOKUP,
        P.DCP_STREAM,
        P.SIMPLE_STATS,
    }
)


@attrs.frozen(kw_only=True)
class RoleDefinition:
    """One role: its parameters (none, a bucket, or bucket:scope:collection), its
    ns_server name and description, and the privileges it gives: ``bucket`` on its
    bucket as a whole, ``data`` on the data its parameters name, ``everywhere`` on no
    bucket in particular."""

    name: str
    params: Literal[0, 1, 3]
    title: str
    desc: str
    bucket: frozenset[Privilege] = frozenset()
    data: frozenset[Privilege] = frozenset()
    everywhere: frozenset[Privilege] = frozenset()


def _role(
    name: str,
    params: Literal[0, 1, 3],
    title: str,
    desc: str,
    *,
    bucket: Iterable[Privilege] = (),
    data: Iterable[Privilege] = (),
    everywhere: Iterable[Privilege] = (P.SYSTEM_SETTINGS,),
) -> RoleDefinition:
    return RoleDefinition(
        name=name,
        params=params,
        title=title,
        desc=desc,
        bucket=frozenset(bucket),
        data=frozenset(data),
        everywhere=frozenset(everywhere),
    )


#: The roles (ns_server ``menelaus_roles.erl``, ``default_roles_totoro``), each with the
#: privileges ``memcached_permissions.erl`` derives from its permissions. A role without
#: parameters that reaches bucket data (admin) gives it on every bucket.
ROLES: dict[str, RoleDefinition] = {
    r.name: r
    for r in (
        _role(
            "admin",
            0,
            "Full Admin",
            "Can manage all cluster features (including security). This user can access "
            "the web console. This user can read and write all data.",
            bucket=_ALL_DATA | {P.DCP_PRODUCER, P.DCP_CONSUMER},
            data=_ALL_DATA,
            everywhere=(P.SYSTEM_SETTINGS, P.STATS, P.IDLE_CONNECTION, P.ADMINISTRATOR),
        ),
        # [{bucket, any}, data] none; [] [read, list]: statistics only
        _role(
            "ro_admin",
            0,
            "Read-Only Admin",
            "Can view all cluster statistics. This user cannot read security-related "
            "information, including listing users or groups.",
            bucket=(P.SIMPLE_STATS,),
            everywhere=(P.SYSTEM_SETTINGS, P.STATS),
        ),
        # [{bucket, any}, data] none; [] all but security
        _role(
            "cluster_admin",
            0,
            "Cluster Admin",
            "Can manage all cluster features except security and users. This user cannot "
            "read data.",
            bucket=(P.SIMPLE_STATS,),
            everywhere=(P.SYSTEM_SETTINGS, P.STATS, P.IDLE_CONNECTION),
        ),
        # [{bucket, B}, data] none; [{bucket, B}] all: it may select the bucket, no more
        _role(
            "bucket_admin",
            1,
            "Bucket Admin",
            "Can manage ALL bucket features for a given bucket (including start/stop "
            "XDCR). This user cannot read data.",
            bucket=(P.SIMPLE_STATS,),
        ),
        _role(
            "bucket_full_access",
            1,
            "Application Access",
            "Full access to bucket data. This user is intended only for application "
            "access. This user can read and write data except for the _system scope which "
            "can only be read.",
            bucket=_ALL_DATA | {P.DCP_PRODUCER, P.DCP_CONSUMER},
            data=_ALL_DATA,
        ),
        _role(
            "data_reader",
            3,
            "Data Reader",
            "Can read data from a given bucket, scope or collection. This user is intended "
            "only for application access. This user can read data, but cannot write it.",
            data=(P.READ, P.RANGE_SCAN, P.SYSTEM_COLLECTION_LOOKUP),
        ),
        _role(
            "data_writer",
            3,
            "Data Writer",
            "Can write data to a given bucket, scope or collection. This user is intended "
            "only for application access. This user can write data, but cannot read it.",
            data=(P.INSERT, P.UPSERT, P.DELETE),
        ),
        # [{bucket, B}, data, dcp] read is on the bucket whatever the scope/collection
        _role(
            "data_dcp_reader",
            3,
            "Data DCP Reader",
            "Can initiate DCP streams for a given bucket, scope or collection. This user "
            "is intended only for application access. This user can read data.",
            bucket=(P.DCP_PRODUCER,),
            data=(P.READ, P.SYSTEM_COLLECTION_LOOKUP, P.DCP_STREAM, P.SYSTEM_XATTR_READ),
            everywhere=(P.SYSTEM_SETTINGS, P.IDLE_CONNECTION),
        ),
        _role(
            "data_backup",
            1,
            "Data Backup & Restore",
            "Can backup and restore a given bucket's data. This user is intended only for "
            "application access. This user can read data.",
            bucket=_ALL_DATA | {P.DCP_PRODUCER, P.DCP_CONSUMER},
            data=_ALL_DATA,
        ),
        _role(
            "data_monitoring",
            3,
            "Data Monitor",
            "Can read statistics for a given bucket, scope or collection. This user is "
            "intended only for application access. This user cannot read data.",
            data=(P.SIMPLE_STATS,),
        ),
    )
}

_ROLE_RE = re.compile(r"^([a-z_]+)(?:\[([^\[\]]*)\])?$")


@attrs.frozen(order=True)
class Role:
    """A role as given to a user: ``name``, and for a parameterised role the bucket,
    scope and collection it is on (``*``: any)."""

    name: str
    bucket: str | None = None
    scope: str = ANY
    collection: str = ANY

    @classmethod
    def parse(cls, text: str) -> Role:
        """``admin``, ``bucket_admin[default]``, ``data_reader[default:scope:coll]``;
        ``ValueError`` for an unknown, malformed or wrongly parameterised role."""
        m = _ROLE_RE.match(text.strip())
        if m is None or m.group(1) not in ROLES:
            raise ValueError(text)
        definition = ROLES[m.group(1)]
        raw = m.group(2)
        if definition.params == 0:
            if raw is not None:
                raise ValueError(text)
            return cls(m.group(1))
        if not raw:
            raise ValueError(text)
        parts = raw.split(":")
        if len(parts) > definition.params or any(not p for p in parts):
            raise ValueError(text)
        parts += [ANY] * (3 - len(parts))
        bucket, scope, collection = parts
        if (bucket == ANY and scope != ANY) or (scope == ANY and collection != ANY):
            raise ValueError(text)
        return cls(m.group(1), bucket, scope, collection)

    def __str__(self) -> str:
        if self.bucket is None:
            return self.name
        params = [self.bucket]
        if ROLES[self.name].params == 3 and self.scope != ANY:
            params.append(self.scope)
            if self.collection != ANY:
                params.append(self.collection)
        return f"{self.name}[{':'.join(params)}]"

    def as_json(self) -> dict[str, str]:
        """ns_server's JSON of a role (``menelaus_web_rbac:role_to_json``)."""
        out = {"role": self.name}
        if self.bucket is not None:
            out["bucket_name"] = self.bucket
            if ROLES[self.name].params == 3:
                out["scope_name"] = self.scope
                out["collection_name"] = self.collection
        return out

    def grants(
        self, privilege: Privilege, bucket: str | None, scope: str | None, collection: str | None
    ) -> bool:
        """True if this role gives ``privilege`` on ``bucket`` (None: no bucket in
        particular) and, when given, on ``scope`` / ``scope.collection``."""
        definition = ROLES[self.name]
        if privilege in definition.everywhere:
            return True
        if bucket is None:
            return False
        if self.bucket is not None and self.bucket not in (ANY, bucket):
            return False
        if privilege in definition.bucket and (scope is None or self._covers(scope, collection)):
            return True
        if privilege not in definition.data:
            return False
        if scope is None:
            return self.scope == ANY
        return self._covers(scope, collection)

    def _covers(self, scope: str, collection: str | None) -> bool:
        if self.scope == ANY:
            return True
        if self.scope != scope:
            return False
        return self.collection == ANY or (collection is not None and self.collection == collection)

    def touches(self, bucket: str) -> bool:
        """True if this role gives any privilege in ``bucket`` (kv_engine
        ``Cookie::mayAccessBucket``: SELECT_BUCKET needs one)."""
        definition = ROLES[self.name]
        if not (definition.bucket or definition.data):
            return False
        return self.bucket is None or self.bucket in (ANY, bucket)


class UnknownRoles(ValueError):
    """Roles that are unknown, malformed or wrongly parameterised (``roles``: as given)."""

    def __init__(self, roles: list[str]) -> None:
        super().__init__(
            "Cannot assign roles to user because the following roles are unknown, "
            f"malformed or role parameters are undefined: [{','.join(roles)}]"
        )
        self.roles = roles


def parse_roles(text: str | Iterable[str]) -> tuple[Role, ...]:
    """ns_server's ``roles`` form field (comma separated) or a list of role strings;
    ``UnknownRoles`` naming every bad one (``menelaus_web_rbac:validate_roles``)."""
    items = [r.strip() for r in text.split(",")] if isinstance(text, str) else list(text)
    roles: list[Role] = []
    bad: list[str] = []
    for item in items:
        if not item:
            continue
        try:
            roles.append(Role.parse(item))
        except ValueError:
            bad.append(item)
    if bad:
        raise UnknownRoles(bad)
    return tuple(dict.fromkeys(roles))


@attrs.frozen(kw_only=True)
class User:
    """A local user: name, password, roles, and the display name ns_server keeps."""

    name: str
    password: str
    roles: tuple[Role, ...] = ()
    full_name: str = ""

    def as_json(self) -> dict[str, object]:
        """ns_server's JSON of a user (``menelaus_web_rbac:user_to_json``)."""
        out: dict[str, object] = {
            "id": self.name,
            "domain": "local",
            "roles": [{**r.as_json(), "origins": [{"type": "user"}]} for r in self.roles],
            "groups": [],
            "external_groups": [],
        }
        if self.full_name:
            out["name"] = self.full_name
        return out


@attrs.frozen(kw_only=True)
class UserChange:
    """What one user operation changed: its kind, the user, and the revision it made."""

    kind: Literal["created", "updated", "deleted", "granted", "revoked", "password"]
    user: str
    revision: int
    roles: tuple[Role, ...] = ()
