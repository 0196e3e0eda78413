"""Users, their roles, and the privileges the roles give, as a cluster keeps them.

ns_server keeps the users and their roles (``menelaus_roles.erl``: each role's
permissions on objects such as ``[{bucket, B}, data, dcp]``); ``memcached_permissions.erl``
turns those permissions into the privileges kv_engine checks (``DcpProducer``,
``DcpStream``, ``Read``...), per bucket, scope and collection, and memcached asks them
before each request (kv_engine ``daemon/mcbp_privileges.cc``). This module holds both
halves as one table: ``ROLES`` says, for each role DCP consumers and their tools are
given, which privileges it grants on its bucket (or every bucket: ``*``) and on the
data its scope/collection parameters name.

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
import secrets
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

import attrs

from mockdcp.util import ModelError, fields_repr

#: a role parameter that matches every bucket, scope or collection
ANY = "*"
#: ns_server's default password policy (``ns_config_default.erl``: ``min_length`` 6)
MIN_PASSWORD_LENGTH = 6
#: characters ns_server refuses in a user name (``menelaus_web_rbac:validate_id``)
_BAD_NAME_CHARS = set('()<>,;:\\"/[]?={}')


class Privilege(enum.Enum):
    """The kv_engine privileges DCP consumers and SDKs need (kv_engine
    ``include/memcached/rbac/privileges.h``; their ns_server source:
    ``memcached_permissions.erl``)."""

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

    __repr__ = fields_repr

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

    __repr__ = fields_repr

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


def check_user_name(name: str) -> None:
    """``ModelError`` with ns_server's words for a name it refuses
    (``menelaus_web_rbac:validate_id``)."""
    if not name:
        raise ModelError("Username must not be empty")
    if len(name) > 128:
        raise ModelError("Username may not exceed 128 characters")
    if name.startswith("@"):
        raise ModelError("Username cannot start with '@'")
    if any(ord(c) <= 32 or ord(c) == 127 or c in _BAD_NAME_CHARS for c in name):
        raise ModelError(
            "Username must not contain spaces, control or any of "
            '()<>,;:\\"/[]?={} characters and must be valid utf8'
        )


def check_password(password: str) -> None:
    """``ModelError`` with ns_server's words for a password its default policy refuses
    (``menelaus_web_rbac:is_valid_password``)."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ModelError(f"The password must be at least {MIN_PASSWORD_LENGTH} characters long.")
    if any(ord(c) < 32 or ord(c) == 127 for c in password):
        raise ModelError("The password must not contain control characters")


@attrs.frozen(kw_only=True)
class User:
    """A local user: name, password, roles, and the display name ns_server keeps."""

    __repr__ = fields_repr

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

    __repr__ = fields_repr

    kind: Literal["created", "updated", "deleted", "granted", "revoked", "password"]
    user: str
    revision: int
    roles: tuple[Role, ...] = ()


class Users(Mapping[str, str]):
    """The cluster's local users. As a mapping: user name → password (what SASL and
    HTTP Basic authentication check). ``allowed`` is the one privilege function the
    producer asks. Every change returns a ``UserChange`` and advances ``revision``.
    """

    def __init__(self, users: Iterable[User] = ()) -> None:
        self._users: dict[str, User] = {u.name: u for u in users}
        self.revision = 0

    @classmethod
    def default(cls) -> Users:
        """A node's users when none are given: ``Administrator``/``password``, admin."""
        return cls.admins({"Administrator": "password"})

    @classmethod
    def admins(cls, passwords: Mapping[str, str]) -> Users:
        """Users with the admin role (the default ``Administrator``/``password``)."""
        return cls(User(name=n, password=p, roles=(Role("admin"),)) for n, p in passwords.items())

    # -- Mapping[str, str] ---------------------------------------------------------------

    def __getitem__(self, name: str) -> str:
        return self._users[name].password

    def __iter__(self) -> Iterator[str]:
        return iter(self._users)

    def __len__(self) -> int:
        return len(self._users)

    # -- reading -------------------------------------------------------------------------

    def user(self, name: str) -> User | None:
        return self._users.get(name)

    def all(self) -> list[User]:
        """Every user, by name."""
        return [self._users[n] for n in sorted(self._users)]

    def require(self, name: str) -> User:
        """The user ``name``; ``ModelError`` "Unknown user." (ns_server's 404 text)."""
        user = self._users.get(name)
        if user is None:
            raise ModelError("Unknown user.")
        return user

    def check_password(self, name: str, password: str) -> bool:
        user = self._users.get(name)
        return user is not None and secrets.compare_digest(
            user.password.encode(), password.encode()
        )

    def allowed(
        self,
        name: str | None,
        privilege: Privilege,
        bucket: str | None = None,
        scope: str | None = None,
        collection: str | None = None,
    ) -> bool:
        """True if user ``name`` holds ``privilege`` on ``bucket`` (None: a global
        privilege), on its scope or ``scope.collection`` when given. A deleted user
        holds nothing (kv_engine: its connections keep their identity, not its
        privileges)."""
        user = self._users.get(name) if name is not None else None
        if user is None:
            return False
        return any(r.grants(privilege, bucket, scope, collection) for r in user.roles)

    def may_access_bucket(self, name: str | None, bucket: str) -> bool:
        """True if user ``name`` has some privilege in ``bucket`` (kv_engine
        ``select_bucket_executor.cc``: ``Cookie::mayAccessBucket``)."""
        user = self._users.get(name) if name is not None else None
        return user is not None and any(r.touches(bucket) for r in user.roles)

    # -- changes -------------------------------------------------------------------------

    def _changed(self, kind: str, user: str, roles: tuple[Role, ...] = ()) -> UserChange:
        self.revision += 1
        return UserChange(kind=kind, user=user, revision=self.revision, roles=roles)  # type: ignore[arg-type]

    def put(
        self,
        name: str,
        *,
        password: str | None,
        roles: tuple[Role, ...],
        full_name: str | None = None,
    ) -> UserChange:
        """ns_server's ``PUT /settings/rbac/users/local/{name}``: create the user, or
        replace an existing one's roles (and its password and name when given).
        ``ModelError`` before anything changes for a bad name or password, or a new
        user without a password."""
        check_user_name(name)
        if password is not None:
            check_password(password)
        old = self._users.get(name)
        if old is None:
            if password is None:
                raise ModelError("Password is required for new user.")
            self._users[name] = User(
                name=name, password=password, roles=roles, full_name=full_name or ""
            )
            return self._changed("created", name, roles)
        self._users[name] = attrs.evolve(
            old,
            password=old.password if password is None else password,
            roles=roles,
            full_name=old.full_name if full_name is None else full_name,
        )
        return self._changed("updated", name, roles)

    def delete(self, name: str) -> UserChange:
        """Remove the user; ``ModelError`` "Unknown user." if there is none."""
        self.require(name)
        del self._users[name]
        return self._changed("deleted", name)

    def grant(self, name: str, roles: tuple[Role, ...]) -> UserChange:
        """Add ``roles`` to the user's (those it has stay once)."""
        user = self.require(name)
        self._users[name] = attrs.evolve(user, roles=tuple(dict.fromkeys(user.roles + roles)))
        return self._changed("granted", name, roles)

    def revoke(self, name: str, roles: tuple[Role, ...]) -> UserChange:
        """Take ``roles`` from the user; ``ModelError`` naming a role it does not have."""
        user = self.require(name)
        missing = [str(r) for r in roles if r not in user.roles]
        if missing:
            raise ModelError(f"user {name!r} does not have the roles {', '.join(missing)}")
        self._users[name] = attrs.evolve(user, roles=tuple(r for r in user.roles if r not in roles))
        return self._changed("revoked", name, roles)

    def change_password(self, name: str, password: str) -> UserChange:
        """Set the user's password (connections already authenticated stay so)."""
        user = self.require(name)
        check_password(password)
        self._users[name] = attrs.evolve(user, password=password)
        return self._changed("password", name)

    def copy(self) -> Users:
        """An independent copy (a scenario check's simulation)."""
        out = Users(self._users.values())
        out.revision = self.revision
        return out


def as_users(users: Mapping[str, str] | Users) -> Users:
    """``Users`` as given, or made of a name → password mapping, each an admin."""
    return users if isinstance(users, Users) else Users.admins(users)
