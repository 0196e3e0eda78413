"""The cluster's local users: name, password and roles, as ns_server keeps them.

``Users`` is what SASL and HTTP Basic authentication check (a name → password mapping)
and what the producer asks for privileges (``allowed``: the roles' table is
``_rbac``). A node made with passwords alone (``Users.admins``: ``Administrator`` /
``password`` by default) makes its ``User`` records, and loads ``_rbac`` for their
``admin`` role, when they are first looked at (a client's first request, a REST
call): starting a server does not need the role table (issue 44). A change (create,
delete, grant, revoke, password) is a ``UserChange``; every change advances
``revision`` (ns_server's RBAC file push advances memcached's privilege context
revision: a connection re-checks what it holds when the revision moved).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import attrs

from mockdcp.util import ModelError

if TYPE_CHECKING:
    from mockdcp.model._rbac import Privilege, Role, User, UserChange

#: ns_server's default password policy (``ns_config_default.erl``: ``min_length`` 6)
MIN_PASSWORD_LENGTH = 6
#: characters ns_server refuses in a user name (``menelaus_web_rbac:validate_id``)
_BAD_NAME_CHARS = set('()<>,;:\\"/[]?={}')


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


class Users(Mapping[str, str]):
    """The cluster's local users. As a mapping: user name → password (what SASL and
    HTTP Basic authentication check). ``allowed`` is the one privilege function the
    producer asks. Every change returns a ``UserChange`` and advances ``revision``.
    """

    def __init__(self, users: Iterable[User] = ()) -> None:
        self._made: dict[str, User] = {u.name: u for u in users}
        #: name -> password of the admins given by password, not made into users yet
        self._admins: dict[str, str] = {}
        self.revision = 0
        #: ``allowed``'s answers since the last change (every request and stream
        #: request asks; a change forgets them all, as it advances ``revision``)
        self._answers: dict[
            tuple[str | None, Privilege, str | None, str | None, str | None], bool
        ] = {}

    @property
    def _users(self) -> dict[str, User]:
        """name -> user; the admins given by password are made on the first look."""
        if self._admins:
            from mockdcp.model._rbac import Role, User

            admin = (Role("admin"),)
            made = [User(name=n, password=p, roles=admin) for n, p in self._admins.items()]
            self._made = {u.name: u for u in made} | self._made
            self._admins = {}
        return self._made

    @classmethod
    def default(cls) -> Users:
        """A node's users when none are given: ``Administrator``/``password``, admin."""
        return cls.admins({"Administrator": "password"})

    @classmethod
    def admins(cls, passwords: Mapping[str, str]) -> Users:
        """Users with the admin role (the default ``Administrator``/``password``), made
        on the first look (``_users``)."""
        users = cls()
        users._admins = dict(passwords)
        return users

    # -- Mapping[str, str] ---------------------------------------------------------------

    def __getitem__(self, name: str) -> str:
        if name in self._admins:
            return self._admins[name]
        return self._users[name].password

    def __iter__(self) -> Iterator[str]:
        return iter(self._admins or self._users)

    def __len__(self) -> int:
        return len(self._admins or self._users)

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
        return user is not None and hmac.compare_digest(user.password.encode(), password.encode())

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
        asked = (name, privilege, bucket, scope, collection)
        answer = self._answers.get(asked)
        if answer is None:
            user = self._users.get(name) if name is not None else None
            answer = user is not None and any(
                r.grants(privilege, bucket, scope, collection) for r in user.roles
            )
            self._answers[asked] = answer
        return answer

    def may_access_bucket(self, name: str | None, bucket: str) -> bool:
        """True if user ``name`` has some privilege in ``bucket`` (kv_engine
        ``select_bucket_executor.cc``: ``Cookie::mayAccessBucket``)."""
        user = self._users.get(name) if name is not None else None
        return user is not None and any(r.touches(bucket) for r in user.roles)

    # -- changes -------------------------------------------------------------------------

    def _changed(self, kind: str, user: str, roles: tuple[Role, ...] = ()) -> UserChange:
        from mockdcp.model._rbac import UserChange

        self.revision += 1
        self._answers.clear()
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
            from mockdcp.model._rbac import User

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
