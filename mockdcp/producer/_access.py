"""Who one connection is and what its user may still do: the connection's side of the
privilege rules (the rules themselves are ``_privileges``'s).

* the identity: the user a SASL exchange or a TLS client certificate authenticated, and
  the SASL exchange itself, made on first use. A connection a client certificate
  authenticated cannot change its identity with SASL (kv_engine
  ``Connection::tryAuthUserFromX509Cert``; it lists no mechanism, ``getSaslMechanisms``).
* ``recheck``: the user's roles changed (ns_server pushed a new RBAC revision and
  memcached re-reads the privileges of the user's connections): a producer connection
  without DcpProducer any more is shut down (kv_engine
  ``Connection::tryToProgressDcpStream``), and the live streams without DcpStream on what
  they select end at their next snapshot marker (``losing_streams``; kv_engine
  ``ActiveStream::endIfRequiredPrivilegesLost``).

Pure: reads the users and the bucket's manifest; the connection acts on the verdict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.producer._privileges import keeps_dcp, losing_streams

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mockdcp.model import Bucket, Users
    from mockdcp.producer._stream import Stream
    from mockdcp.protocol import SaslServer, StreamEndReason


@attrs.define(eq=False)
class Access:
    """One connection's identity and its privilege re-check (see the module docstring)."""

    #: the cluster's users (every node of the cluster shares them)
    users: Users
    #: the authenticated user: None until SASL or a client certificate set it
    user: str | None = None
    #: False once a TLS client certificate authenticated the connection
    sasl_enabled: bool = True
    _sasl_server: SaslServer | None = attrs.field(default=None, init=False)

    @property
    def sasl(self) -> SaslServer:
        """The connection's SASL exchange (made on first use)."""
        if self._sasl_server is None:
            from mockdcp.protocol import SaslServer

            # the user's SCRAM keys are the process's (``mockdcp.protocol._sasl``):
            # made once per password for every connection of every node
            self._sasl_server = SaslServer(self.users)
        return self._sasl_server

    def recheck(
        self, bucket: Bucket, streams: Iterable[Stream], collections: bool
    ) -> dict[Stream, StreamEndReason] | None:
        """The user's roles changed: None when the user lost DcpProducer on ``bucket``
        (the connection shuts down), else the live ``streams`` that end at their next
        snapshot marker and the reason each sends (``losing_streams``: LOST_PRIVILEGES
        when the connection negotiated ``collections``, OK without)."""
        if not keeps_dcp(self.users, self.user, bucket.name):
            return None
        return losing_streams(streams, self.users, self.user, bucket, collections)
