"""When the protocol checker can report nothing more before a time
(``CheckerRegistry.at_rest_until``),
which lets a ``conformant`` window end early (issue 44): each thing a consumer may still
owe, or a rule on time may still report, keeps it from rest."""

from __future__ import annotations

from mockdcp.producer import CheckerRegistry
from mockdcp.protocol import DcpNoop, Response, Status, StreamEndReason
from mockdcp.protocol._enums import Opcode
from tests.producer.test_checker import UUID, Recording, ack, filled, noops_on


def connected() -> Recording:
    r = Recording()
    r.connect()
    r.stream(0)
    r.snapshot(0, 1, 10, range(1, 11))
    return r


def test_nothing_owed_on_a_live_connection_is_at_rest_for_any_window() -> None:
    assert connected().registry.at_rest_until(1.0, 1000.0)


def test_no_consumer_yet_is_not_at_rest() -> None:
    # one may yet connect, and its requests are judged
    assert not CheckerRegistry(4).at_rest_until(0.0, 1.0)


def test_a_name_whose_connection_closed_is_not_at_rest() -> None:
    r = connected()
    r.close(1.0)
    assert not r.registry.at_rest_until(1.0, 2.0)
    r.connect(1.5)  # the reconnect: at rest again once it owes nothing
    assert r.registry.at_rest_until(1.5, 2.0)


def test_noops_at_an_interval_that_fits_in_the_window_are_not_at_rest() -> None:
    r = Recording()
    noops_on(r)  # every second
    assert not r.registry.at_rest_until(0.0, 1.0)  # one sent in it could go unanswered
    assert not r.registry.at_rest_until(5.0, 6.5)  # however late in it we look
    assert r.registry.at_rest_until(0.0, 0.9)


def test_a_noop_unanswered_is_not_at_rest_until_answered() -> None:
    r = Recording()
    noops_on(r)
    r.server(DcpNoop(opaque=10_000_001), now=2.0)
    assert r.registry.at_rest_until(2.0, 2.5)  # unanswered is reported at 3.0, no sooner
    assert not r.registry.at_rest_until(2.1, 3.05)
    r.client(Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=10_000_001), 2.1)
    assert r.registry.at_rest_until(2.1, 3.05)


def test_a_rollback_not_yet_taken_is_not_at_rest() -> None:
    r = connected()
    r.stream(0, 10, uuid=UUID, answer=Status.ROLLBACK, rollback=5)
    assert not r.registry.at_rest_until(0.0, 1.0)
    r.stream(0, 5, uuid=UUID)
    assert r.registry.at_rest_until(0.0, 1.0)


def test_a_refused_request_not_yet_retried_is_not_at_rest() -> None:
    r = connected()
    r.stream(1, answer=Status.NOT_MY_VBUCKET)
    assert not r.registry.at_rest_until(0.0, 1.0)
    r.stream(1)
    assert r.registry.at_rest_until(0.0, 1.0)


def test_a_stream_end_to_re_open_is_not_at_rest_until_re_opened() -> None:
    r = connected()
    r.end(0, StreamEndReason.STATE_CHANGED, now=1.0)
    assert not r.registry.at_rest_until(1.0, 1.5)  # not reported before 6.0, but owed
    r.stream(0, 10, uuid=UUID, now=1.05)
    assert r.registry.at_rest_until(1.05, 1.5)


def test_a_full_flow_control_window_is_not_at_rest() -> None:
    r = Recording()
    filled(r, 200, 4)
    assert not r.registry.at_rest_until(0.0, 1.0)  # full before any tick saw it
    r.tick(1.0)  # full from here: a stall is reported at 1.0 + ack_stall
    assert not r.registry.at_rest_until(1.0, 100.0)
    ack(r, r.conn.flow.unacked, now=1.5)
    assert r.registry.at_rest_until(1.5, 100.0)
