"""The reference consumer and cluster config pushes (kv_engine docs/BinaryProtocol.md,
"0x01 Clustermap Change Notification"; the HELLO features DUPLEX, ClustermapChange-
Notification and its brief form): asked for only when wanted, taken between DCP frames
without a reply and without flow-control bytes."""

from __future__ import annotations

from mockdcp.client import ConsumerCore
from mockdcp.client._core import STREAM_OPAQUE_BASE
from mockdcp.protocol import (
    ClusterMapChangeNotification,
    Frame,
    FrameReader,
    HelloFeature,
    Message,
    Mutation,
)

PUSH_FEATURES = {
    HelloFeature.DUPLEX,
    HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION,
    HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
}


def _frame(msg: Message) -> Frame:
    reader = FrameReader()
    reader.feed(msg.encode())
    frame = reader.next_frame()
    assert frame is not None
    return frame


class _Recording(ConsumerCore):
    def __init__(self) -> None:
        super().__init__(
            vbuckets=[0], collections=False, clustermap_notification=True, buffer_size=10_000
        )
        self.pushed: list[int] = []

    def on_config_push(self, notice: ClusterMapChangeNotification) -> None:
        self.pushed.append(notice.revision)


def test_hello_asks_for_config_pushes_only_when_wanted() -> None:
    assert (
        set(ConsumerCore(vbuckets=[0], clustermap_notification=True).hello().features)
        >= PUSH_FEATURES
    )
    assert not PUSH_FEATURES & set(ConsumerCore(vbuckets=[0]).hello().features)


def test_a_push_between_dcp_frames_takes_no_reply_and_no_flow_control_bytes() -> None:
    core = _Recording()
    mutation = Mutation(
        opaque=STREAM_OPAQUE_BASE, vbucket=0, key=b"k", value=b"v" * 20, by_seqno=1, rev_seqno=1
    )
    received = _frame(mutation)
    core.receive(received)
    pushed = ClusterMapChangeNotification(
        opaque=0, bucket="default", epoch=1, revision=7, config=b'{"rev": 7}'
    )
    brief = ClusterMapChangeNotification(opaque=0, bucket="default", epoch=1, revision=8)
    assert core.receive(_frame(pushed)) == []
    assert core.receive(_frame(brief)) == []
    assert core.pushed == [7, 8]
    assert core.state.config_pushes == 2
    # only the mutation counts towards the buffer
    assert core._unacked == received.size
