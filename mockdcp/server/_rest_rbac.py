"""ns_server's REST API for users and roles, as a node answers it (ns_server
``menelaus_web_rbac.erl``, routed by ``menelaus_web.erl``):

* ``GET /settings/rbac/users`` (and ``/settings/rbac/users/local``) → the users, each as
  ``user_to_json`` spells it (``id``, ``domain``, ``roles`` with their ``origins``...);
  ``GET /settings/rbac/users/local/{name}`` → one, 404 ``"Unknown user."``;
* ``GET /settings/rbac/roles`` → the roles (``role``, its parameters as ``*``, ``name``,
  ``desc``);
* ``PUT /settings/rbac/users/local/{name}`` (form ``roles``, ``password``, ``name``) →
  200 ``""``; 400 ``{"errors": {"roles": "Cannot assign roles to user because the
  following roles are unknown, malformed or role parameters are undefined: [...]"}}``,
  ``{"errors": {"password": "..."}}`` (the password policy, "Password is required for
  new user."), ``{"errors": {"_": "Username ..."}}``, ``{"errors": {"key": "Unsupported
  key"}}``; nothing changed;
* ``DELETE /settings/rbac/users/local/{name}`` → 200 ``""``, 404 ``"Unknown user."``;
* ``POST /controller/changePassword`` (form ``password``) → the caller's own password:
  200, 400 ``{"errors": {"password": ...}}`` ("Password has already been used.");
* another domain than ``local`` → 404 ``"Unknown user domain."``.

Reading users needs ``cluster.admin.users!read`` and changing them ``!write`` (the
``admin`` role has both): 403 ``{"message": "Forbidden. User needs the following
permissions", "permissions": [...]}`` otherwise (``menelaus_web_rbac:forbidden_response``).

Each change is the step of the same name (``create_user``, ``delete_user``,
``change_password``), checked and applied by the server's step runner, as
``/mock/steps`` applies it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.responses import Response
from starlette.routing import Route

from mockdcp.model import (
    ROLES,
    Privilege,
    UnknownRoles,
    check_password,
    check_user_name,
    parse_roles,
)
from mockdcp.server._control import JSONResponse, read_body
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from starlette.requests import Request

    from mockdcp.model import Users
    from mockdcp.scenario import Step

    #: applies steps as ``/mock/steps`` does (the control API's lock, the runner)
    ApplySteps = Callable[[Sequence[Step], str], Awaitable[None]]


def _errors(**fields: str) -> Response:
    """ns_server's 400 of field errors (``menelaus_util:reply_error``)."""
    return JSONResponse({"errors": fields}, 400)


def _unknown_user() -> Response:
    return JSONResponse("Unknown user.", 404)


class _FormError(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__("bad form")
        self.response = response


async def _form(request: Request, allowed: frozenset[str]) -> dict[str, str]:
    """The urlencoded body; ``_FormError`` (400) for keys ns_server does not take
    (``validator:unsupported``) or a body that is not a form."""
    body = await read_body(request)
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        raise _FormError(_errors(_="the body is not an urlencoded form")) from None
    form = dict(pairs)
    unsupported = {k: "Unsupported key" for k in form if k not in allowed}
    if unsupported:
        raise _FormError(JSONResponse({"errors": unsupported}, 400))
    return form


class RbacEndpoints:
    """The users and roles routes of one server (module docstring)."""

    def __init__(self, users: Users, apply: ApplySteps, user_key: str) -> None:
        self.users = users
        self.apply = apply
        #: where the guard left the caller's user name in the ASGI scope
        self.user_key = user_key

    def routes(self) -> list[Route]:
        return [
            Route("/settings/rbac/roles", self.get_roles, methods=["GET"]),
            Route("/settings/rbac/users", self.get_users, methods=["GET"]),
            Route("/settings/rbac/users/{domain}", self.get_users, methods=["GET"]),
            Route(
                "/settings/rbac/users/{domain}/{name}",
                self.user,
                methods=["GET", "PUT", "DELETE"],
            ),
            Route("/controller/changePassword", self.change_password, methods=["POST"]),
        ]

    def _forbidden(self, request: Request, operation: str) -> Response | None:
        """403 unless the caller may read or write users (the admin role)."""
        if self.users.allowed(request.scope.get(self.user_key), Privilege.ADMINISTRATOR):
            return None
        return JSONResponse(
            {
                "message": "Forbidden. User needs the following permissions",
                "permissions": [f"cluster.admin.users!{operation}"],
            },
            403,
        )

    async def get_roles(self, request: Request) -> Response:
        denied = self._forbidden(request, "read")
        if denied is not None:
            return denied
        out: list[dict[str, Any]] = []
        for role in ROLES.values():
            entry: dict[str, Any] = {"role": role.name}
            if role.params:
                entry["bucket_name"] = "*"
            if role.params == 3:
                entry.update(scope_name="*", collection_name="*")
            out.append({**entry, "name": role.title, "desc": role.desc})
        return JSONResponse(out)

    async def get_users(self, request: Request) -> Response:
        denied = self._forbidden(request, "read")
        if denied is not None:
            return denied
        if request.path_params.get("domain", "local") != "local":
            return JSONResponse("Unknown user domain.", 404)
        return JSONResponse([u.as_json() for u in self.users.all()])

    async def user(self, request: Request) -> Response:
        denied = self._forbidden(request, "read" if request.method == "GET" else "write")
        if denied is not None:
            return denied
        if request.path_params["domain"] != "local":
            return JSONResponse("Unknown user domain.", 404)
        name = str(request.path_params["name"])
        if request.method == "GET":
            found = self.users.user(name)
            return _unknown_user() if found is None else JSONResponse(found.as_json())
        if request.method == "DELETE":
            if self.users.user(name) is None:
                return _unknown_user()
            from mockdcp.scenario import DeleteUser

            await self.apply([DeleteUser(name=name)], f"DELETE {request.url.path}")
            return JSONResponse("")
        return await self._put(request, name)

    async def _put(self, request: Request, name: str) -> Response:
        """``handle_put_user``: the name first (a global error), then the form's fields."""
        try:
            check_user_name(name)
        except ModelError as exc:
            return _errors(_=str(exc))
        try:
            form = await _form(request, frozenset({"roles", "password", "name", "groups"}))
        except _FormError as exc:
            return exc.response
        errors: dict[str, str] = {}
        try:
            parse_roles(form.get("roles", ""))
        except UnknownRoles as exc:
            errors["roles"] = str(exc)
        password = form.get("password")
        if password is not None:
            try:
                check_password(password)
            except ModelError as exc:
                errors["password"] = str(exc)
        elif self.users.user(name) is None:
            errors["password"] = "Password is required for new user."
        if form.get("groups"):
            errors["groups"] = "Groups do not exist: " + form["groups"]
        if errors:
            return _errors(**errors)
        from mockdcp.scenario import CreateUser

        step = CreateUser(
            name=name, password=password, roles=form.get("roles", ""), full_name=form.get("name")
        )
        await self.apply([step], f"PUT {request.url.path}")
        return JSONResponse("")

    async def change_password(self, request: Request) -> Response:
        """The caller's own password (``handle_change_password``)."""
        user = request.scope.get(self.user_key)
        if user is None or self.users.user(user) is None:
            return JSONResponse("Changing of password is not allowed for this user.", 404)
        try:
            form = await _form(request, frozenset({"password"}))
        except _FormError as exc:
            return exc.response
        password = form.get("password")
        if password is None:
            return _errors(password="The value must be supplied")
        try:
            check_password(password)
        except ModelError as exc:
            return _errors(password=str(exc))
        if self.users.check_password(user, password):
            return _errors(password="Password has already been used.")
        from mockdcp.scenario import ChangePassword

        await self.apply([ChangePassword(user=user, password=password)], "POST " + request.url.path)
        return Response(status_code=200)
