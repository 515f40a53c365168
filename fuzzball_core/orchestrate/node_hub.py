"""The open Connect streams of nodes, and sending control messages down them.

Each connected node has an outgoing queue that its stream drains. Messages for a node that is
not connected are dropped: the engine re-derives what a node must be told when it reconnects
(its Hello lists the runs it knows).
"""

from __future__ import annotations

import asyncio

from fuzzball_core.api.v1 import node_pb2


class NodeHub:
    """Node id -> the queue feeding its Connect stream."""

    def __init__(self) -> None:
        self._queues: dict[str, asyncio.Queue[node_pb2.ControlMessage | None]] = {}

    def attach(self, node_id: str) -> asyncio.Queue[node_pb2.ControlMessage | None]:
        """Open (or replace) the node's queue; a replaced stream is told to end."""
        previous = self._queues.get(node_id)
        if previous is not None:
            previous.put_nowait(None)
        queue: asyncio.Queue[node_pb2.ControlMessage | None] = asyncio.Queue()
        self._queues[node_id] = queue
        return queue

    def detach(self, node_id: str, queue: asyncio.Queue[node_pb2.ControlMessage | None]) -> None:
        """Forget the node's queue if it is still ``queue``."""
        if self._queues.get(node_id) is queue:
            del self._queues[node_id]

    def connected(self, node_id: str) -> bool:
        return node_id in self._queues

    def send(self, node_id: str, message: node_pb2.ControlMessage) -> bool:
        """Queue ``message`` for the node; False when it is not connected."""
        queue = self._queues.get(node_id)
        if queue is None:
            return False
        queue.put_nowait(message)
        return True

    def close_all(self) -> None:
        for queue in self._queues.values():
            queue.put_nowait(None)
        self._queues.clear()
