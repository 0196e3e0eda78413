"""The wire codec: frames, messages, LEB128, SASL, cluster config. Pure: no I/O, no clock."""

from __future__ import annotations

from mockdcp.protocol._enums import *  # noqa: F403
from mockdcp.protocol._frame import (
    DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE,
    HEADER_SIZE as HEADER_SIZE,
    Frame as Frame,
    FrameReader as FrameReader,
    encode_frame as encode_frame,
    iter_frame_infos as iter_frame_infos,
    stream_id_frame_info as stream_id_frame_info,
)
