"""PMI barriers of multinode runs, relayed between the run's nodes.

Each node's Substrate serves the PMI of its own ranks (``fuzzball_core.substrate.pmi``). When
all of them reach a barrier it sends a ``Fence`` holding what they put since the previous
one; once every node of the run has sent fence ``seq``, each gets a ``FenceDone`` holding the
union, the way Slurm's PMI plugins exchange through its daemons rather than through a
server every rank must reach. Only the new keys travel at each fence.

Fences in flight are kept in memory only: after Orchestrate restarts, every node sends the
fence it still waits on again once it has reconnected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fuzzball_core.api.v1 import node_pb2

Outgoing = list[tuple[str, node_pb2.ControlMessage]]


class FenceRelay:
    """Collects each run's fences by sequence number and answers all nodes at once.

    The engine tells it which nodes each multinode run spans (:meth:`watch`) when it sends
    the assignments, so fences are relayed the moment they arrive, without waiting for the
    engine's next pass and its database transaction."""

    def __init__(self) -> None:
        self._nodes: dict[int, list[str]] = {}
        self._arrived: dict[tuple[int, int], dict[str, dict[str, str]]] = {}

    def watch(self, run_id: int, node_ids: Sequence[str]) -> None:
        """Relay fences of ``run_id`` between ``node_ids``."""
        self._nodes[run_id] = list(node_ids)

    def relay(self, node_id: str, fence: node_pb2.Fence) -> Outgoing | None:
        """Record ``node_id``'s fence; the ``FenceDone`` for every node once all arrived.
        None when the run is not watched (the engine looks it up and calls :meth:`watch`)."""
        node_ids = self._nodes.get(fence.run_id)
        if node_ids is None:
            return None
        if node_id not in node_ids:
            return []
        key = (fence.run_id, fence.seq)
        arrived = self._arrived.setdefault(key, {})
        arrived[node_id] = dict(fence.kvs)
        if not set(node_ids) <= set(arrived):
            return []
        del self._arrived[key]
        merged: dict[str, str] = {}
        for part in node_ids:
            merged.update(arrived[part])
        return [(part, _done(fence.run_id, fence.seq, merged)) for part in node_ids]

    def forget(self, run_id: int) -> None:
        """Stop relaying for a run that ended, dropping what it still waited on."""
        self._nodes.pop(run_id, None)
        for key in [key for key in self._arrived if key[0] == run_id]:
            del self._arrived[key]


def _done(run_id: int, seq: int, kvs: Mapping[str, str]) -> node_pb2.ControlMessage:
    return node_pb2.ControlMessage(
        fence_done=node_pb2.FenceDone(run_id=run_id, seq=seq, kvs=dict(kvs))
    )
