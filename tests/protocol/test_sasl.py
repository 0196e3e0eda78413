from __future__ import annotations

import base64

import pytest
import scramp  # type: ignore[import-untyped]

from mockdcp import RemoteProtocolError
from mockdcp.protocol import SaslClient, SaslServer, Status

USERS = {"Administrator": "password", "odd,user=": "s3cret"}
SCRAMP_NAMES = {
    "SCRAM-SHA512": "SCRAM-SHA-512",
    "SCRAM-SHA256": "SCRAM-SHA-256",
    "SCRAM-SHA1": "SCRAM-SHA-1",
}


def fixed_server(**kw: object) -> SaslServer:
    return SaslServer(
        USERS,
        nonce_source=lambda: "servernonce",
        salt_source=lambda: b"0123456789abcdef",
        **kw,  # type: ignore[arg-type]
    )


def test_mechanisms_string_lists_scram_strongest_first_then_plain() -> None:
    assert SaslServer(USERS).mechanisms_string() == "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 PLAIN"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1"])
def test_scram_exchange_with_scramp_client_succeeds_and_server_signature_verifies(
    mechanism: str,
) -> None:
    server = SaslServer(USERS)
    client = scramp.ScramClient([SCRAMP_NAMES[mechanism]], "Administrator", "password")
    first = server.start(mechanism, client.get_client_first().encode())
    assert first.status == Status.AUTH_CONTINUE
    client.set_server_first(first.payload.decode())
    final = server.step(mechanism, client.get_client_final().encode())
    assert final.status == Status.SUCCESS
    assert final.user == "Administrator"
    client.set_server_final(final.payload.decode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1"])
def test_scram_server_first_has_exactly_r_s_i(mechanism: str) -> None:
    server = fixed_server()
    result = server.start(mechanism, b"n,,n=Administrator,r=clientnonce")
    attrs = [part.split("=", 1) for part in result.payload.decode().split(",")]
    assert [name for name, _ in attrs] == ["r", "s", "i"]
    assert dict(attrs) == {
        "r": "clientnonceservernonce",
        "s": base64.b64encode(b"0123456789abcdef").decode(),
        "i": "4096",
    }


def test_scram_server_final_is_only_v() -> None:
    server = SaslServer(USERS)
    client = SaslClient("Administrator", "password", "SCRAM-SHA256")
    first = server.start("SCRAM-SHA256", client.first())
    final = server.step("SCRAM-SHA256", client.step(first.payload))
    assert final.payload.startswith(b"v=")
    assert b"," not in final.payload


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1"])
def test_scram_with_wrong_password_gives_auth_error(mechanism: str) -> None:
    server = SaslServer(USERS)
    client = SaslClient("Administrator", "wrong", mechanism)
    first = server.start(mechanism, client.first())
    assert first.status == Status.AUTH_CONTINUE
    result = server.step(mechanism, client.step(first.payload))
    assert result.status == Status.AUTH_ERROR
    assert result.user is None


def test_scram_for_unknown_user_fails_at_the_proof_not_earlier() -> None:
    server = SaslServer(USERS)
    client = SaslClient("nobody", "password", "SCRAM-SHA512")
    first = server.start("SCRAM-SHA512", client.first())
    assert first.status == Status.AUTH_CONTINUE
    assert server.step("SCRAM-SHA512", client.step(first.payload)).status == Status.AUTH_ERROR


def test_scram_user_name_with_comma_and_equals_is_unescaped() -> None:
    server = SaslServer(USERS)
    client = SaslClient("odd,user=", "s3cret", "SCRAM-SHA1")
    first = server.start("SCRAM-SHA1", client.first())
    final = server.step("SCRAM-SHA1", client.step(first.payload))
    assert (final.status, final.user) == (Status.SUCCESS, "odd,user=")
    client.finish(final.payload)


def test_mockdcp_client_against_server_for_every_mechanism() -> None:
    for mechanism in ("SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1", "PLAIN"):
        server = SaslServer(USERS)
        client = SaslClient("Administrator", "password", mechanism)
        result = server.start(mechanism, client.first())
        while result.status == Status.AUTH_CONTINUE:
            result = server.step(mechanism, client.step(result.payload))
        assert result.status == Status.SUCCESS
        client.finish(result.payload)


def test_plain_with_right_password_succeeds() -> None:
    result = SaslServer(USERS).start("PLAIN", b"\0Administrator\0password")
    assert (result.status, result.user, result.payload) == (Status.SUCCESS, "Administrator", b"")


def test_plain_accepts_an_authzid() -> None:
    result = SaslServer(USERS).start("PLAIN", b"admin\0Administrator\0password")
    assert result.status == Status.SUCCESS


@pytest.mark.parametrize(
    "payload",
    [
        b"\0Administrator\0nope",
        b"\0nobody\0password",
        b"Administrator\0password",
        b"\0\0",
        b"\0a\0b\0c",
    ],
)
def test_plain_with_bad_credentials_gives_auth_error(payload: bytes) -> None:
    assert SaslServer(USERS).start("PLAIN", payload).status == Status.AUTH_ERROR


def test_mechanism_not_offered_gives_auth_error() -> None:
    server = SaslServer(USERS, mechanisms=("SCRAM-SHA512",))
    assert server.start("PLAIN", b"\0Administrator\0password").status == Status.AUTH_ERROR
    assert server.start("CRAM-MD5", b"").status == Status.AUTH_ERROR


def test_step_without_start_gives_auth_error() -> None:
    assert SaslServer(USERS).step("SCRAM-SHA512", b"c=biws,r=x,p=eA==").status == Status.AUTH_ERROR


def test_step_with_other_mechanism_than_start_gives_auth_error() -> None:
    server = SaslServer(USERS)
    client = SaslClient("Administrator", "password", "SCRAM-SHA512")
    first = server.start("SCRAM-SHA512", client.first())
    assert server.step("SCRAM-SHA1", client.step(first.payload)).status == Status.AUTH_ERROR


def test_malformed_client_first_gives_auth_error() -> None:
    server = SaslServer(USERS)
    assert server.start("SCRAM-SHA512", b"garbage").status == Status.AUTH_ERROR
    assert server.start("SCRAM-SHA512", b"\xff\xfe").status == Status.AUTH_ERROR


def test_client_rejects_a_forged_server_signature() -> None:
    server = SaslServer(USERS)
    client = SaslClient("Administrator", "password", "SCRAM-SHA512")
    first = server.start("SCRAM-SHA512", client.first())
    server.step("SCRAM-SHA512", client.step(first.payload))
    with pytest.raises(RemoteProtocolError) as info:
        client.finish(b"v=" + base64.b64encode(bytes(64)))
    assert info.value.status == Status.AUTH_ERROR


def test_client_plain_first_message_and_no_step() -> None:
    client = SaslClient("user", "pass", "PLAIN")
    assert client.first() == b"\0user\0pass"
    with pytest.raises(RemoteProtocolError):
        client.step(b"r=x,s=eA==,i=4096")


def test_salt_is_stable_per_user_and_mechanism() -> None:
    salts = iter([b"a" * 16, b"b" * 16])
    server = SaslServer(USERS, nonce_source=lambda: "n", salt_source=lambda: next(salts))
    one = server.start("SCRAM-SHA256", b"n,,n=Administrator,r=c1").payload
    two = server.start("SCRAM-SHA256", b"n,,n=Administrator,r=c2").payload
    assert one.split(b",")[1] == two.split(b",")[1]


def test_connections_sharing_keys_make_a_users_scram_keys_once() -> None:
    """The keys (4,096 rounds of PBKDF2) are made once per user and password for every
    connection given the same ``keys``, as a server makes them when it loads the
    password; a changed password makes new ones."""
    salts = iter([b"a" * 16, b"b" * 16, b"c" * 16])
    keys: dict[tuple[str, str, str, int], tuple[bytes, bytes, bytes, int]] = {}
    users = dict(USERS)

    def connection() -> SaslServer:
        return SaslServer(
            users, nonce_source=lambda: "n", salt_source=lambda: next(salts), keys=keys
        )

    one = connection().start("SCRAM-SHA512", b"n,,n=Administrator,r=c1").payload
    two = connection().start("SCRAM-SHA512", b"n,,n=Administrator,r=c2").payload
    assert one.split(b",")[1] == two.split(b",")[1] == b"s=" + base64.b64encode(b"a" * 16)
    assert list(keys) == [("Administrator", "SCRAM-SHA512", "password", 4096)]
    users["Administrator"] = "changed"
    three = connection().start("SCRAM-SHA512", b"n,,n=Administrator,r=c3").payload
    assert three.split(b",")[1] == b"s=" + base64.b64encode(b"b" * 16)
    # a connection of its own (no shared keys) makes its own
    own = SaslServer(users, nonce_source=lambda: "n", salt_source=lambda: next(salts))
    assert own.start("SCRAM-SHA512", b"n,,n=Administrator,r=c4").payload.split(b",")[1] == (
        b"s=" + base64.b64encode(b"c" * 16)
    )


def test_unsupported_mechanism_in_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        SaslServer(USERS, mechanisms=("CRAM-MD5",))


def _manual_client_final(server_first: str, bare: str, password: str) -> tuple[str, bytes]:
    """RFC 5802 client-final for SHA-512, computed by hand (scramp refuses the nonce)."""
    import hashlib
    import hmac

    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha512", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    stored = hashlib.sha512(client_key).digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={fields['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored, auth, "sha512").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.new(salted, b"Server Key", "sha512").digest()
    expected_v = base64.b64encode(hmac.new(server_key, auth, "sha512").digest())
    return f"{without_proof},p={base64.b64encode(proof).decode()}", b"v=" + expected_v


def test_scram_accepts_the_cxx_sdk_nonce_with_spaces() -> None:
    server = fixed_server()
    bare = "n=Administrator,r=0x0d 0x57 0x28 0x5d"
    first = server.start("SCRAM-SHA512", f"n,,{bare}".encode())
    assert first.status == Status.AUTH_CONTINUE
    assert first.payload.startswith(b"r=0x0d 0x57 0x28 0x5dservernonce,")
    final, expected = _manual_client_final(first.payload.decode(), bare, "password")
    result = server.step("SCRAM-SHA512", final.encode())
    assert (result.status, result.payload, result.user) == (
        Status.SUCCESS,
        expected,
        "Administrator",
    )


def test_scram_with_a_spaced_nonce_and_a_wrong_password_fails() -> None:
    server = fixed_server()
    bare = "n=Administrator,r=a b"
    first = server.start("SCRAM-SHA512", f"n,,{bare}".encode())
    final, _ = _manual_client_final(first.payload.decode(), bare, "wrong")
    assert server.step("SCRAM-SHA512", final.encode()).status == Status.AUTH_ERROR


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1"])
def test_mockdcp_client_against_scramps_server(mechanism: str) -> None:
    m = scramp.ScramMechanism(SCRAMP_NAMES[mechanism])
    info = m.make_auth_info("s3cret", iteration_count=4096)
    users: list[str] = []

    def auth_fn(user: str) -> tuple[bytes, bytes, bytes, int]:
        users.append(user)
        return info  # type: ignore[no-any-return]

    server = m.make_server(auth_fn)
    client = SaslClient("odd,user=", "s3cret", mechanism)
    server.set_client_first(client.first().decode())
    server_first = server.get_server_first()
    server.set_client_final(client.step(server_first.encode()).decode())
    assert users == ["odd,user="]
    client.finish(server.get_server_final().encode())


@pytest.mark.parametrize(
    "server_first",
    [b"garbage", b"r=other,s=eA==,i=4096", b"r=mine,s=eA==,i=4096", b"e=other-error"],
)
def test_client_refuses_a_bad_server_first(server_first: bytes) -> None:
    client = SaslClient("Administrator", "password", "SCRAM-SHA256", nonce="mine")
    client.first()
    with pytest.raises(RemoteProtocolError) as info:
        client.step(server_first)
    assert info.value.status == Status.AUTH_ERROR


def test_scram_keys_are_derived_once_a_process_not_once_a_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each connection has its own ``SaslServer``: the user's salt and keys, and the
    client's salted password, are made once for a password (4096 rounds of PBKDF2,
    milliseconds each), as a cluster keeps one salted hash per user."""
    import hashlib

    from mockdcp.protocol import _sasl

    derived: list[bytes] = []
    real = hashlib.pbkdf2_hmac

    def counted(name: str, password: bytes, salt: bytes, rounds: int) -> bytes:
        derived.append(salt)
        return real(name, password, salt, rounds)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counted)
    monkeypatch.setattr(_sasl, "_SHARED_KEYS", type(_sasl._SHARED_KEYS)())
    _sasl._salted.cache_clear()
    users = {"alice": "pw1"}
    for _ in range(3):  # three connections, as a consumer reconnecting
        server, client = SaslServer(users), SaslClient("alice", users["alice"], "SCRAM-SHA512")
        first = server.start("SCRAM-SHA512", client.first())
        final = server.step("SCRAM-SHA512", client.step(first.payload))
        assert final.status == Status.SUCCESS
        client.finish(final.payload)
    # once in all: the server's, which the client (in the same process, given the same
    # salt) finds in the salted passwords both sides keep (``_salted``)
    assert len(derived) == 1
    users["alice"] = "pw2"  # a changed password: new keys, and the old one refused
    server, client = SaslServer(users), SaslClient("alice", "pw1", "SCRAM-SHA512")
    first = server.start("SCRAM-SHA512", client.first())
    assert server.step("SCRAM-SHA512", client.step(first.payload)).status == Status.AUTH_ERROR
    _sasl._salted.cache_clear()


def test_saslprep_of_printable_ascii_is_scramps_without_loading_it() -> None:
    """Printable ASCII is left as it is (RFC 4013 maps and prohibits nothing of it but
    control characters), as scramp's SASLprep leaves it; beyond it, scramp's."""
    from scramp.utils import saslprep  # type: ignore[import-untyped]

    from mockdcp.protocol._sasl import _saslprep

    printable = "".join(chr(c) for c in range(0x20, 0x7F))
    for text in [printable, "password", "run-0123abcd", "a b", ""]:
        assert _saslprep(text) == saslprep(text) == text
    assert _saslprep("I\u00adX") == "IX"  # soft hyphen: mapped to nothing (table B.1)
    assert _saslprep("\u2168") == "IX"  # NFKC
    for bad in ["a\x07b", "tab\there", "del\x7f"]:
        with pytest.raises(ValueError, match="forbidden"):
            _saslprep(bad)


def test_a_client_of_ascii_credentials_never_loads_scramp() -> None:
    """The consumer's side of SCRAM is hashlib's and hmac's: a consumer process does not
    import scramp (with asn1crypto and importlib.metadata) to log in."""
    code = (
        "from mockdcp.protocol import SaslClient\n"
        "c = SaslClient('Administrator', 'password', 'SCRAM-SHA512')\n"
        "first = c.first()\n"
        "nonce = first.split(b'r=')[1].decode()\n"
        "c.step(f'r={nonce}srv,s=MDEyMzQ1Njc4OWFiY2RlZg==,i=4096'.encode())\n"
    )
    assert _scramp_loaded_after(code) == "[]"


def _scramp_loaded_after(code: str) -> str:
    """What a fresh interpreter printed running ``code``, then the scramp and asn1crypto
    modules it had loaded."""
    import subprocess
    import sys

    code += "print(sorted(m for m in sys.modules if m.startswith(('scramp', 'asn1crypto'))))\n"
    done = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True,
                          text=True, check=True, timeout=60)  # fmt: skip
    return done.stdout.strip()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1"])
@pytest.mark.parametrize("password", ["password", "pass\u00a0word", "\u2168 and I\u00adX"])
def test_server_keys_are_scramps(mechanism: str, password: str) -> None:
    """The salt and keys the server makes for a user (``scram_keys``, the derivation its
    client shares) are those scramp's ``make_auth_info`` makes for the same salt, the
    password SASLprep'd as scramp does (a non-ASCII space mapped to a space, NFKC)."""
    salt = b"0123456789abcdef"
    server = SaslServer({"u": password}, salt_source=lambda: salt)
    expected = scramp.ScramMechanism(SCRAMP_NAMES[mechanism]).make_auth_info(
        password, iteration_count=4096, salt=salt
    )
    assert server._lookup(mechanism, "u") == tuple(expected)


def test_a_password_saslprep_prohibits_fails_the_login_without_an_error() -> None:
    server = SaslServer({"u": "bell\x07"})
    assert server.start("SCRAM-SHA512", b"n,,n=u,r=abc").status == Status.AUTH_ERROR


def test_a_server_login_of_ascii_credentials_never_loads_scramp() -> None:
    """The server derives its SCRAM keys as its client does (hashlib, hmac): its first
    SCRAM login paid 35 ms for scramp's import (asn1crypto, email), a fifth of a first
    consumer's pass of ``serve --docs 10000`` (``bench compare``'s ``first_pass``)."""
    code = (
        "from mockdcp.protocol import SaslClient, SaslServer\n"
        "c = SaslClient('Administrator', 'password', 'SCRAM-SHA512')\n"
        "s = SaslServer({'Administrator': 'password'})\n"
        "first = s.start('SCRAM-SHA512', c.first())\n"
        "done = s.step('SCRAM-SHA512', c.step(first.payload))\n"
        "c.finish(done.payload)\n"
        "print(done.status.name)\n"
    )
    assert _scramp_loaded_after(code) == "SUCCESS\n[]"
