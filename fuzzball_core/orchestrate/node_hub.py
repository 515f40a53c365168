"""The open Connect streams of nodes, and sending control messages down them.

Each connected node has an outgoing queue that its stream drains. Messages for a node that is
not connected are dropped: the engine re-derives what a node must be told when it reconnects
(its Hello lists the runs it knows). The engine hands over plain messages
(:mod:`fuzzball_core.orchestrate.messages`); :func:`control_message` is where they become the
node protocol's.
"""

from __future__ import annotations

import asyncio

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.messages import (
    Assign,
    Cancel,
    LogsStored,
    RemoveVolume,
    Shutdown,
    ToNode,
    WorkflowEnded,
)


def control_message(message: ToNode) -> node_pb2.ControlMessage:
    """The ``ControlMessage`` that carries an engine's message to a node."""
    if isinstance(message, Assign):
        return node_pb2.ControlMessage(
            assign=node_pb2.Assignment(
                run_id=message.run_id,
                workflow_id=message.workflow_id,
                stage_name=message.stage_name,
                has_task=message.task_id is not None,
                task_id=message.task_id or 0,
                job_json=message.job_json,
                timeout_seconds=message.timeout_seconds,
                node_ids=list(message.node_ids),
                volume_ingress_json=message.volume_ingress_json,
                hosts=dict(message.hosts),
                cpus=dict(message.cpus),
                volumes_json=message.volumes_json,
                workflow_token=message.workflow_token,
                owner=message.owner,
            )
        )
    if isinstance(message, Cancel):
        return node_pb2.ControlMessage(
            cancel=node_pb2.Cancel(run_id=message.run_id, reason=message.reason)
        )
    if isinstance(message, Shutdown):
        return node_pb2.ControlMessage(shutdown=node_pb2.Shutdown(reason=message.reason))
    if isinstance(message, RemoveVolume):
        return node_pb2.ControlMessage(
            remove_volume=node_pb2.RemoveVolume(
                volume_id=message.volume_id, location_json=message.location_json
            )
        )
    if isinstance(message, LogsStored):
        return node_pb2.ControlMessage(
            logs_stored=node_pb2.LogsStored(through_seq=message.through_seq)
        )
    if isinstance(message, WorkflowEnded):
        return node_pb2.ControlMessage(
            workflow_ended=node_pb2.WorkflowEnded(workflow_ids=list(message.workflow_ids))
        )
    raise TypeError(f"not a message for nodes: {message!r}")


#: The most control messages one stream write carries (a pass's assignments for a node are
#: usually far fewer; an assignment is a few KiB at most).
BATCH_MESSAGES = 256


class NodeQueue(asyncio.Queue[node_pb2.ControlMessage | None]):
    """What waits to go down one node's stream; None ends the stream."""

    def __init__(self, *, batches: bool = False) -> None:
        super().__init__()
        #: the node reads ``ControlBatch`` (its Hello said so)
        self.batches = batches
        #: a None was taken while batching: the stream ends after the batch it cut short
        self._ending = False

    async def next_write(self) -> node_pb2.ControlMessage | None:
        """What the stream writes next: the oldest queued message, or, for a node that
        reads batches, every message queued by now in one ``ControlBatch`` (a pass's
        assignments leave in one write instead of one each); None once the stream is to
        end."""
        if self._ending:
            return None
        first = await self.get()
        if first is None or not self.batches or self.empty():
            return first
        messages = [first]
        while not self.empty() and len(messages) < BATCH_MESSAGES:
            message = self.get_nowait()
            if message is None:
                self._ending = True  # what was queued before the end still goes
                break
            messages.append(message)
        if len(messages) == 1:
            return first
        return node_pb2.ControlMessage(batch=node_pb2.ControlBatch(messages=messages))


class NodeHub:
    """Node id -> the queue feeding its Connect stream."""

    def __init__(self) -> None:
        self._queues: dict[str, NodeQueue] = {}

    def attach(self, node_id: str, *, batches: bool = False) -> NodeQueue:
        """Open (or replace) the node's queue; a replaced stream is told to end. With
        ``batches`` the node reads ``ControlBatch``."""
        previous = self._queues.get(node_id)
        if previous is not None:
            previous.put_nowait(None)
        queue = NodeQueue(batches=batches)
        self._queues[node_id] = queue
        return queue

    def detach(self, node_id: str, queue: NodeQueue) -> bool:
        """Forget the node's queue if it is still ``queue``; True when it was (the node has
        no stream now: not one replaced by a newer stream, nor one :meth:`close_all`
        ended)."""
        if self._queues.get(node_id) is queue:
            del self._queues[node_id]
            return True
        return False

    def connected(self, node_id: str) -> bool:
        """Whether the node has an open stream."""
        return node_id in self._queues

    def deliver(self, node_id: str, message: ToNode) -> bool:
        """Queue one of the engine's messages for the node; False when it is not connected."""
        return self.send(node_id, control_message(message))

    def send(self, node_id: str, message: node_pb2.ControlMessage) -> bool:
        """Queue ``message`` for the node; False when it is not connected."""
        queue = self._queues.get(node_id)
        if queue is None:
            return False
        queue.put_nowait(message)
        return True

    def close_all(self) -> None:
        """End every node's stream (Orchestrate is stopping): their queues are forgotten
        here, so no stream's end counts as its node's (:meth:`detach`), and no lease is cut
        to a stream's grace by Orchestrate's own shutdown."""
        for queue in self._queues.values():
            queue.put_nowait(None)
        self._queues.clear()
