from __future__ import annotations

import logging

import pytest

from mockdcp import RemoteProtocolError
from mockdcp.producer._containment import contain
from mockdcp.protocol import Frame, Magic, Opcode, Status


def _run(frame: Frame, exc: Exception | None, *, replied: bool = False) -> list[tuple[Status, str]]:
    answers: list[tuple[Status, str]] = []
    queued: list[int] = []

    def handle() -> None:
        if replied:
            queued.append(1)
        if exc is not None:
            raise exc

    def answer(status: Status, *, context: str) -> None:
        answers.append((status, context))

    contain(7, frame, handle, queued.__len__, answer)
    return answers


REQUEST = Frame(magic=Magic.REQUEST, opcode=Opcode.VERSION, opaque=5)


def test_unexpected_exception_answers_einternal_and_logs_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = _run(REQUEST, KeyError("x"))
    assert answers == [(Status.EINTERNAL, "internal error (KeyError), logged by mockdcp")]
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert caplog.records[0].exc_info is not None


def test_protocol_error_answers_its_own_status_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    err = RemoteProtocolError("bad key", status=Status.EINVAL)
    assert _run(REQUEST, err) == [(Status.EINVAL, "bad key")]
    assert all(r.levelno < logging.ERROR for r in caplog.records)


def test_no_answer_when_the_handler_replied_before_failing() -> None:
    assert _run(REQUEST, RuntimeError("late"), replied=True) == []


@pytest.mark.parametrize(
    "frame",
    [
        Frame(magic=Magic.RESPONSE, opcode=Opcode.DCP_NOOP, opaque=5),
        Frame(magic=Magic.REQUEST, opcode=Opcode.DCP_BUFFER_ACKNOWLEDGEMENT, opaque=5),
    ],
)
def test_no_answer_where_the_protocol_has_none(frame: Frame) -> None:
    assert _run(frame, RuntimeError("x")) == []


def test_success_answers_nothing() -> None:
    assert _run(REQUEST, None) == []
