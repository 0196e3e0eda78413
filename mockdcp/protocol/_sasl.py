"""Sans-IO SASL for SASL_LIST_MECHS / SASL_AUTH / SASL_STEP (kv_engine ``docs/sasl.md``).

The server side answers one exchange at a time per connection:

* ``PLAIN``: SASL_AUTH value ``[authzid]\\0user\\0password``; SUCCESS or AUTH_ERROR.
* ``SCRAM-SHA512`` / ``SCRAM-SHA256`` / ``SCRAM-SHA1`` (RFC 5802, Couchbase spelling
  without the dash after SHA): SASL_AUTH carries client-first, the reply is AUTH_CONTINUE
  with server-first ``r=<nonce>,s=<salt>,i=<iterations>`` and nothing else
  (java-dcp-client refuses any other attribute: couchbase-jvm-clients
  ``ScramSaslClient.java``); SASL_STEP carries client-final, the reply is SUCCESS with
  server-final ``v=<signature>`` or AUTH_ERROR.

Both sides derive the keys here (``scram_keys``: RFC 5802's few lines over hashlib), with
the ``scramp`` library's SASLprep, imported only for a name or password beyond printable
ASCII (``_saslprep``; it imports asn1crypto and importlib.metadata, a tenth of a consumer
process's start, and 35 ms of a server's first login when the server made its keys with
scramp); the exchange is checked here, because kv_engine
accepts client nonces (the C++ SDK's, with spaces) that scramp refuses. Unknown users are not
revealed early: the exchange runs with throw-away credentials and fails at the proof, as for
a wrong password.
Nonces and salts come from injectable sources so tests can pin the bytes.

A user's salt and keys are made once per process for a password (``_SHARED_KEYS``), as a
cluster keeps one salted hash per user on every node (ns_server ``menelaus_users.erl``
stores them with the user; kv_engine's ``cbsasl`` reads them from its password
database), not once per connection: the PBKDF2 of 4096 rounds costs several
milliseconds a side, which every reconnection of a consumer paid twice. The client keeps
the salted password of a (password, salt, rounds) likewise (``_salted``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.protocol._enums import Status
from mockdcp.protocol._errors import RemoteProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping

#: Couchbase mechanism name → scramp mechanism name.
SCRAM_MECHANISMS = {
    "SCRAM-SHA512": "SCRAM-SHA-512",
    "SCRAM-SHA256": "SCRAM-SHA-256",
    "SCRAM-SHA1": "SCRAM-SHA-1",
}
PLAIN = "PLAIN"
DEFAULT_MECHANISMS = ("SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1", PLAIN)

#: a user's salt and keys: (salt, stored key, server key, iterations), as scramp's
#: ``make_auth_info`` gives them.
_AuthInfo = tuple[bytes, bytes, bytes, int]


def _random_nonce() -> str:
    return secrets.token_urlsafe(18)


def _random_salt() -> bytes:
    return secrets.token_bytes(16)


@attrs.frozen(kw_only=True)
class SaslResult:
    """What to answer a SASL_AUTH/SASL_STEP with: status, value, and the user on success."""

    status: Status
    payload: bytes = b""
    user: str | None = None


_FAILED = SaslResult(status=Status.AUTH_ERROR)

#: (user, mechanism, password, rounds) -> the user's salt and keys, for every server of
#: the process that draws salts with ``_random_salt`` (module docstring); the oldest
#: dropped beyond ``_KEYS_KEPT`` (a run that makes a user per schedule)
_SHARED_KEYS: OrderedDict[tuple[str, str, str, int], _AuthInfo] = OrderedDict()
_KEYS_KEPT = 256


def parse_plain(payload: bytes) -> tuple[str, str] | None:
    """``[authzid]\\0user\\0password`` → (user, password); None if malformed."""
    parts = payload.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        return parts[1].decode(), parts[2].decode()
    except UnicodeDecodeError:
        return None


class SaslServer:
    """One connection's SASL state: ``start`` on SASL_AUTH, ``step`` on SASL_STEP.

    ``users`` maps user name to password. Never raises for bad client input: every
    failure is a ``SaslResult`` with status AUTH_ERROR.
    """

    def __init__(
        self,
        users: Mapping[str, str],
        mechanisms: tuple[str, ...] = DEFAULT_MECHANISMS,
        iterations: int = 4096,
        *,
        nonce_source: Callable[[], str] = _random_nonce,
        salt_source: Callable[[], bytes] = _random_salt,
        keys: MutableMapping[tuple[str, str, str, int], _AuthInfo] | None = None,
    ) -> None:
        """``keys``: the SCRAM keys already made, shared with the other connections (a
        server makes a user's salt and keys once, when it loads the password: kv_engine
        ``cbsasl/CBSASL.md``, "User database"), filled here as users authenticate;
        without it, this connection's own."""
        unknown = [m for m in mechanisms if m != PLAIN and m not in SCRAM_MECHANISMS]
        if unknown:
            raise ValueError(f"unsupported SASL mechanisms: {unknown}")
        self._users = users
        self._mechanisms = mechanisms
        self._iterations = iterations
        self._nonce = nonce_source
        self._salt = salt_source
        #: (user, mechanism, password, rounds) → auth info; a salt is fixed per user
        #: and password, as a real server's is: ``keys`` (the cluster's users share
        #: theirs), else shared by the process's servers with the default salt source
        #: (module docstring). ``users`` is read at each exchange: a user deleted or a
        #: password changed fails the next authentication.
        self._auth_info: MutableMapping[tuple[str, str, str, int], _AuthInfo] = (
            keys
            if keys is not None
            else _SHARED_KEYS
            if salt_source is _random_salt
            else OrderedDict()
        )
        self._scram: Any = None
        self._scram_mechanism: str | None = None
        self._scram_user: str | None = None

    def mechanisms_string(self) -> str:
        """The SASL_LIST_MECHS reply value: space-separated mechanism names."""
        return " ".join(self._mechanisms)

    def start(self, mechanism: str, payload: bytes) -> SaslResult:
        """Answer SASL_AUTH: PLAIN completes; SCRAM answers AUTH_CONTINUE + server-first."""
        self._scram = None
        if mechanism not in self._mechanisms:
            return _FAILED
        if mechanism == PLAIN:
            return self._plain(payload)
        return self._scram_first(mechanism, payload)

    def step(self, mechanism: str, payload: bytes) -> SaslResult:
        """Answer SASL_STEP: verify the SCRAM client-final; SUCCESS + ``v=...`` or AUTH_ERROR."""
        exchange, user = self._scram, self._scram_user
        self._scram = None
        if exchange is None or mechanism != self._scram_mechanism:
            return _FAILED
        try:
            final = exchange.finish(payload.decode())
        except (ValueError, UnicodeDecodeError):
            return _FAILED
        if final is None:
            return _FAILED
        return SaslResult(status=Status.SUCCESS, payload=final.encode(), user=user)

    def _plain(self, payload: bytes) -> SaslResult:
        creds = parse_plain(payload)
        if creds is None or creds[0] not in self._users:
            return _FAILED
        user, password = creds
        if not secrets.compare_digest(self._users[user].encode(), password.encode()):
            return _FAILED
        return SaslResult(status=Status.SUCCESS, user=user)

    def _lookup(self, mechanism: str, user: str) -> _AuthInfo:
        """The user's (cached) salt and SCRAM keys, or throw-away ones for a user it does
        not know; ``ValueError`` for a password SASLprep prohibits."""
        password = self._users.get(user, secrets.token_hex(16))
        key = (user, mechanism, password, self._iterations)  # a changed password: new keys
        kept = self._auth_info
        known = kept.get(key)
        if known is not None:
            if isinstance(kept, OrderedDict):
                kept.move_to_end(key)
            return known
        salt = self._salt()
        _, stored_key, server_key = scram_keys(_HASHES[mechanism], password, salt, self._iterations)
        info: _AuthInfo = (salt, stored_key, server_key, self._iterations)
        if user not in self._users:
            return info  # never cache throw-away credentials
        kept[key] = info
        while isinstance(kept, OrderedDict) and len(kept) > _KEYS_KEPT:
            kept.popitem(last=False)
        return info

    def _scram_first(self, mechanism: str, payload: bytes) -> SaslResult:
        try:
            text = payload.decode()
            gs2_header, bare, user, c_nonce = _parse_client_first(text)
        except (ValueError, UnicodeDecodeError):
            return _FAILED
        try:
            info = self._lookup(mechanism, user)
        except ValueError:  # a password SASLprep prohibits (``_saslprep``)
            return _FAILED
        exchange = _ScramExchange(
            _HASHES[mechanism], info, gs2_header, bare, c_nonce + self._nonce()
        )
        self._scram, self._scram_mechanism, self._scram_user = exchange, mechanism, user
        return SaslResult(status=Status.AUTH_CONTINUE, payload=exchange.server_first.encode())


#: Couchbase mechanism name → hashlib name.
_HASHES = {"SCRAM-SHA512": "sha512", "SCRAM-SHA256": "sha256", "SCRAM-SHA1": "sha1"}


def _attributes(message: str) -> list[tuple[str, str]]:
    """``a=x,b=y`` → [(a, x), (b, y)]; ``ValueError`` on a part without ``=``."""
    out = []
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1:
            raise ValueError(f"bad SCRAM attribute {part!r}")
        out.append((key, value))
    return out


def _parse_client_first(message: str) -> tuple[str, str, str, str]:
    """RFC 5802 client-first → (gs2 header, client-first-bare, user, client nonce).

    The nonce is taken as any characters but ``,``: kv_engine accepts the nonce the
    Couchbase C++ SDK (and so the Python SDK) sends, which holds spaces, although RFC
    5802's ``printable`` excludes them (scramp refuses it). Raises ``ValueError``.
    """
    flag, authzid, bare = message.split(",", 2)
    if flag not in ("n", "y") or (authzid and not authzid.startswith("a=")):
        raise ValueError("unsupported GS2 header (no channel binding)")
    attrs_ = dict(_attributes(bare)[:2])
    user, nonce = attrs_.get("n"), attrs_.get("r")
    if not user or not nonce:
        raise ValueError("client-first needs n= and r=")
    user = user.replace("=2C", ",").replace("=3D", "=")
    return f"{flag},{authzid},", bare, user, nonce


class _ScramExchange:
    """The server side of one SCRAM exchange (RFC 5802 §3, §5) after client-first."""

    def __init__(
        self, hash_name: str, info: _AuthInfo, gs2_header: str, bare: str, nonce: str
    ) -> None:
        self._hash = hash_name
        salt, self._stored_key, self._server_key, iterations = info
        self._gs2_header = gs2_header
        self._bare = bare
        self._nonce = nonce
        self.server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"

    def _hmac(self, key: bytes, text: str) -> bytes:
        return hmac.new(key, text.encode(), self._hash).digest()

    def finish(self, client_final: str) -> str | None:
        """Check the client-final's nonce, channel binding and proof; the server-final
        ``v=...``, or None when the proof is wrong. ``ValueError`` when malformed."""
        without_proof, sep, proof_b64 = client_final.rpartition(",p=")
        if not sep:
            raise ValueError("client-final has no proof")
        attrs_ = dict(_attributes(without_proof))
        binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attrs_.get("r") != self._nonce or attrs_.get("c") != binding:
            return None
        proof = base64.b64decode(proof_b64, validate=True)
        auth_message = f"{self._bare},{self.server_first},{without_proof}"
        signature = self._hmac(self._stored_key, auth_message)
        if len(proof) != len(signature):
            return None
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), self._stored_key):
            return None
        server_signature = self._hmac(self._server_key, auth_message)
        return "v=" + base64.b64encode(server_signature).decode()


@functools.lru_cache(maxsize=64)
def _salted(hash_name: str, password: str, salt: bytes, rounds: int) -> bytes:
    """RFC 5802 ``SaltedPassword := Hi(Normalize(password), salt, i)``, kept per process
    (module docstring)."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, rounds)


def scram_keys(
    hash_name: str, password: str, salt: bytes, rounds: int
) -> tuple[bytes, bytes, bytes]:
    """RFC 5802 section 3 ``ClientKey := HMAC(SaltedPassword, "Client Key")``,
    ``StoredKey := H(ClientKey)`` and ``ServerKey := HMAC(SaltedPassword, "Server Key")``
    of ``password`` (SASLprep'd: ``_saslprep``): what both sides derive, the server once
    per user and password (``SaslServer``, the keys scramp's ``make_auth_info`` makes:
    ``test_server_keys_are_scramps``), the client at each exchange. The server made them
    with scramp before, whose import (asn1crypto, email) was 35 ms of a server's first
    SCRAM login."""
    salted = _salted(hash_name, _saslprep(password), salt, rounds)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    return (
        client_key,
        hashlib.new(hash_name, client_key).digest(),
        hmac.new(salted, b"Server Key", hash_name).digest(),
    )


class SaslClient:
    """The consumer side: ``first()`` for SASL_AUTH, ``step(server_first)`` for SASL_STEP,
    ``finish(server_final)`` to check the server's signature.

    SCRAM is RFC 5802 §3 without channel binding (gs2 header ``n,,``), the names and
    password normalised by SASLprep (``scramp``'s).
    Raises ``RemoteProtocolError`` (status AUTH_ERROR, field ``value``) when the server's
    messages are malformed or its signature is wrong.
    """

    def __init__(
        self, user: str, password: str, mechanism: str, *, nonce: str | None = None
    ) -> None:
        if mechanism != PLAIN and mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        self.user = user
        self.password = password
        self.mechanism = mechanism
        self._nonce = _random_nonce() if nonce is None else nonce
        self._bare = ""
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        """SASL_AUTH value: ``\\0user\\0password`` for PLAIN, client-first for SCRAM."""
        if self.mechanism == PLAIN:
            return b"\0" + self.user.encode() + b"\0" + self.password.encode()
        name = _saslprep(self.user).replace("=", "=3D").replace(",", "=2C")
        self._bare = f"n={name},r={self._nonce}"
        return f"n,,{self._bare}".encode()

    def step(self, server_first: bytes) -> bytes:
        """SASL_STEP value (client-final) for the server-first of an AUTH_CONTINUE."""
        if self.mechanism == PLAIN:
            raise RemoteProtocolError(
                "PLAIN has no second step", status=Status.AUTH_ERROR, field="value"
            )
        try:
            text = server_first.decode()
            fields = dict(_attributes(text))
            if "e" in fields:
                raise ValueError(f"the server returned an error: {fields['e']}")
            nonce, salt = fields["r"], base64.b64decode(fields["s"], validate=True)
            rounds = int(fields["i"])
            if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
                raise ValueError("the server's nonce does not extend the client's")
            if rounds < 1:
                raise ValueError(f"bad iteration count {rounds}")
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise RemoteProtocolError(
                f"bad SCRAM server-first: {exc}", status=Status.AUTH_ERROR, field="value"
            ) from None
        hash_name = _HASHES[self.mechanism]

        def mac(key: bytes, text: str) -> bytes:
            return hmac.new(key, text.encode(), hash_name).digest()

        client_key, stored_key, server_key = scram_keys(hash_name, self.password, salt, rounds)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}"
        signature = mac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = mac(server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def finish(self, server_final: bytes) -> None:
        """Check the server-final ``v=...`` of the SUCCESS reply (no-op for PLAIN)."""
        if self.mechanism == PLAIN:
            return
        try:
            fields = dict(_attributes(server_final.decode()))
            if "e" in fields:
                raise ValueError(f"the server returned an error: {fields['e']}")
            signature = base64.b64decode(fields["v"], validate=True)
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise RemoteProtocolError(
                f"bad SCRAM server-final: {exc}", status=Status.AUTH_ERROR, field="value"
            ) from None
        if self._server_signature is None or not hmac.compare_digest(
            signature, self._server_signature
        ):
            raise RemoteProtocolError(
                "bad SCRAM server-final: the server's signature does not match",
                status=Status.AUTH_ERROR,
                field="value",
            )


def _saslprep(text: str) -> str:
    """RFC 4013 SASLprep (``scramp``'s); ``ValueError`` for a prohibited character.

    Printable ASCII (U+0020 to U+007E) is left as it is without loading scramp: RFC 4013
    section 2 maps only non-ASCII spaces (table C.1.2) and characters of table B.1 (all
    beyond ASCII) and normalises with NFKC (which leaves ASCII unchanged); of ASCII it
    prohibits only the control characters (table C.2.1, below U+0020 and U+007F); its
    bidirectional check (section 6) concerns RandALCat characters, none of them ASCII."""
    if all(" " <= c <= "~" for c in text):
        return text
    import scramp  # type: ignore[import-untyped]
    from scramp.utils import saslprep  # type: ignore[import-untyped]

    try:
        return str(saslprep(text))
    except scramp.ScramException as exc:
        raise ValueError(str(exc)) from None
