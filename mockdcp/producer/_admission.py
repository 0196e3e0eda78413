"""Which commands a connection takes in which state: the status a real node gives a
command that comes out of order (kv_engine ``daemon/mcbp_validators.cc``,
``dcp_open_executor.cc``).

* before SASL completes: SELECT_BUCKET, DCP_OPEN and bucket commands → EACCESS;
* before SELECT_BUCKET: bucket commands → NO_BUCKET;
* any DCP command before DCP_OPEN, or a second DCP_OPEN → EINVAL;
* after DCP_OPEN: SELECT_BUCKET → NOT_SUPPORTED, SASL → NOT_SUPPORTED.

HELLO, SASL, VERSION, NOOP and GET_ERROR_MAP are taken before authentication.
"""

from __future__ import annotations

from mockdcp.producer._state import ConnectionState
from mockdcp.protocol import Opcode, Status

#: Commands that need a selected bucket (NO_BUCKET before), an open DCP connection
#: (EINVAL before), and those taken before authentication.
_BUCKET_OPCODES = frozenset(
    {
        Opcode.GET_ALL_VB_SEQNOS,
        Opcode.OBSERVE_SEQNO,
        Opcode.GET_COLLECTIONS_MANIFEST,
        Opcode.GET_COLLECTION_ID,
        Opcode.GET_SCOPE_ID,
        Opcode.DCP_OPEN,
        Opcode.GET_CLUSTER_CONFIG,
        # KV document commands (_documents.py)
        Opcode.GET,
        Opcode.SET,
        Opcode.ADD,
        Opcode.REPLACE,
        Opcode.DELETE,
        Opcode.TOUCH,
        Opcode.GAT,
        Opcode.GET_META,
        Opcode.SUBDOC_MULTI_LOOKUP,
        Opcode.SUBDOC_MULTI_MUTATION,
    }
)
_DCP_OPCODES = frozenset(
    {
        Opcode.DCP_ADD_STREAM,
        Opcode.DCP_CLOSE_STREAM,
        Opcode.DCP_STREAM_REQ,
        Opcode.DCP_GET_FAILOVER_LOG,
        Opcode.DCP_BUFFER_ACKNOWLEDGEMENT,
        Opcode.DCP_CONTROL,
        Opcode.DCP_SEQNO_ACKNOWLEDGED,
    }
)
_PRE_AUTH_OPCODES = frozenset(
    {
        Opcode.HELLO,
        Opcode.SASL_LIST_MECHS,
        Opcode.SASL_AUTH,
        Opcode.SASL_STEP,
        Opcode.VERSION,
        Opcode.NOOP,
        Opcode.GET_ERROR_MAP,
    }
)


def admission_status(state: ConnectionState, opcode: int) -> Status | None:
    """The status for ``opcode`` arriving in ``state``, or None when it may run (see the
    module docstring for the rules and their sources)."""
    if opcode in _PRE_AUTH_OPCODES:
        if opcode in (Opcode.SASL_AUTH, Opcode.SASL_STEP) and state is ConnectionState.DCP_OPEN:
            return Status.NOT_SUPPORTED
        return None
    if state is ConnectionState.CONNECTED:
        return Status.EACCESS
    if opcode == Opcode.SELECT_BUCKET:
        return Status.NOT_SUPPORTED if state is ConnectionState.DCP_OPEN else None
    if opcode in _BUCKET_OPCODES and state is ConnectionState.AUTHENTICATED:
        return Status.NO_BUCKET
    if opcode in _DCP_OPCODES and state is not ConnectionState.DCP_OPEN:
        return Status.EINVAL
    if opcode == Opcode.DCP_OPEN and state is ConnectionState.DCP_OPEN:
        return Status.EINVAL
    return None
