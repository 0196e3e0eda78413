"""The status a command gets in each connection state (kv_engine
``daemon/mcbp_validators.cc``, ``dcp_open_executor.cc``)."""

from __future__ import annotations

import pytest

from mockdcp.producer._admission import admission_status
from mockdcp.producer._state import ConnectionState
from mockdcp.protocol import Opcode, Status

C = ConnectionState


@pytest.mark.parametrize(
    ("state", "opcode", "status"),
    [
        # taken before authentication
        (C.CONNECTED, Opcode.HELLO, None),
        (C.CONNECTED, Opcode.SASL_AUTH, None),
        (C.CONNECTED, Opcode.GET_ERROR_MAP, None),
        (C.CONNECTED, Opcode.VERSION, None),
        # everything else needs SASL first
        (C.CONNECTED, Opcode.SELECT_BUCKET, Status.EACCESS),
        (C.CONNECTED, Opcode.DCP_OPEN, Status.EACCESS),
        (C.CONNECTED, Opcode.GET_ALL_VB_SEQNOS, Status.EACCESS),
        (C.CONNECTED, Opcode.DCP_STREAM_REQ, Status.EACCESS),
        # bucket commands need a bucket
        (C.AUTHENTICATED, Opcode.SELECT_BUCKET, None),
        (C.AUTHENTICATED, Opcode.DCP_OPEN, Status.NO_BUCKET),
        (C.AUTHENTICATED, Opcode.GET_CLUSTER_CONFIG, Status.NO_BUCKET),
        (C.AUTHENTICATED, Opcode.OBSERVE_SEQNO, Status.NO_BUCKET),
        # DCP commands need DCP_OPEN
        (C.BUCKET_SELECTED, Opcode.DCP_OPEN, None),
        (C.BUCKET_SELECTED, Opcode.SELECT_BUCKET, None),
        (C.BUCKET_SELECTED, Opcode.DCP_STREAM_REQ, Status.EINVAL),
        (C.BUCKET_SELECTED, Opcode.DCP_CONTROL, Status.EINVAL),
        (C.BUCKET_SELECTED, Opcode.DCP_BUFFER_ACKNOWLEDGEMENT, Status.EINVAL),
        # after DCP_OPEN: no second open, no re-selection, no re-authentication
        (C.DCP_OPEN, Opcode.DCP_STREAM_REQ, None),
        (C.DCP_OPEN, Opcode.GET_ALL_VB_SEQNOS, None),
        (C.DCP_OPEN, Opcode.DCP_OPEN, Status.EINVAL),
        (C.DCP_OPEN, Opcode.SELECT_BUCKET, Status.NOT_SUPPORTED),
        (C.DCP_OPEN, Opcode.SASL_AUTH, Status.NOT_SUPPORTED),
        (C.DCP_OPEN, Opcode.SASL_STEP, Status.NOT_SUPPORTED),
        (C.DCP_OPEN, Opcode.SASL_LIST_MECHS, None),
        (C.DCP_OPEN, Opcode.NOOP, None),
    ],
)
def test_command_gets_the_status_a_real_node_gives_in_this_state(
    state: ConnectionState, opcode: Opcode, status: Status | None
) -> None:
    assert admission_status(state, opcode) == status
