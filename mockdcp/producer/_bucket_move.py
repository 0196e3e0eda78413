"""SELECT_BUCKET's move: a connection leaves the node of the bucket it had for the node
that serves the bucket it selected, on the same data node (``Buckets.select`` finds that
node). kv_engine ``daemon/protocol/mcbp/select_bucket_executor.cc`` associates the
connection with the named bucket (``daemon/buckets.cc``): from its next command on it is
that bucket's connection, counted there and no longer in the bucket it left; a DCP
connection never moves (the admission refuses SELECT_BUCKET after DCP_OPEN), so no
stream goes with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mockdcp.producer._connection import Connection
    from mockdcp.producer._node import Node


def move_connection(conn: Connection, here: Node, there: Node) -> None:
    """``conn`` leaves ``here`` (its node until now: its producer name there is freed)
    and is ``there``'s from its next request (``Connection.rehome``)."""
    here.connections.pop(conn.conn_id, None)
    if here.producers.get(conn.name) is conn:
        del here.producers[conn.name]
    there.connections[conn.conn_id] = conn
    conn.rehome(there)
