"""Where Prometheus finds each node's metrics, and scrapes relayed over the node's stream.

* :class:`NodeTargets`: what each node said when it registered (its fuzzball_node_* and
  node_exporter addresses, ``health.disabled``). Nodes register again on every connection,
  so an Orchestrate that restarted learns them again as they come back.
* :class:`ScrapeRelay`: ``/v4/metrics/node`` sends a ``ScrapeMetrics`` down the node's
  Connect stream and waits for the ``MetricsScraped`` the agent answers with, for clusters
  whose Prometheus cannot reach node IPs.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Protocol

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import Unavailable
from fuzzball_core.orchestrate.node_hub import NodeHub

#: seconds a relayed scrape waits for the node's answer
SCRAPE_TIMEOUT = 10.0


@dataclass(frozen=True)
class NodeTarget:
    """A node's metrics endpoints (``host:port``; empty: not served) and health setting."""

    metrics_address: str = ""
    node_exporter_address: str = ""
    health_disabled: bool = False


class NodeTargets:
    """Node id -> the endpoints it registered with."""

    def __init__(self) -> None:
        self._targets: dict[str, NodeTarget] = {}

    def registered(self, node_id: str, request: node_pb2.RegisterRequest) -> None:
        """Remember what a node's ``RegisterRequest`` says about its metrics."""
        self._targets[node_id] = NodeTarget(
            request.metrics_address, request.node_exporter_address, request.health_disabled
        )

    def get(self, node_id: str) -> NodeTarget:
        """The node's endpoints (none known: nothing served)."""
        return self._targets.get(node_id, NodeTarget())


class ScrapeRelay:
    """Scrapes sent down nodes' streams, each waiting for its answer."""

    def __init__(self, hub: NodeHub) -> None:
        self.hub = hub
        self._waiting: dict[str, tuple[str, asyncio.Future[node_pb2.MetricsScraped]]] = {}

    async def scrape(
        self, node_id: str, node_name: str, target: str, timeout: float = SCRAPE_TIMEOUT
    ) -> node_pb2.MetricsScraped:
        """The node's answer to a scrape of ``target`` (``fuzzball`` or ``node_exporter``);
        ``Unavailable`` when the node is not connected or does not answer in time."""
        request_id = uuid.uuid4().hex
        answer: asyncio.Future[node_pb2.MetricsScraped] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (node_id, answer)
        try:
            message = node_pb2.ControlMessage(
                scrape=node_pb2.ScrapeMetrics(request_id=request_id, target=target)
            )
            if not self.hub.send(node_id, message):
                raise Unavailable(f"node {node_name} is not connected: its metrics cannot be read")
            try:
                return await asyncio.wait_for(answer, timeout)
            except TimeoutError:
                raise Unavailable(
                    f"node {node_name} did not answer the scrape within {timeout:g}s"
                ) from None
        finally:
            self._waiting.pop(request_id, None)

    def answered(self, node_id: str, answer: node_pb2.MetricsScraped) -> None:
        """A node's ``MetricsScraped`` arrived: hand it to the scrape waiting for it (an
        answer from another node than the one asked, or too late, is dropped)."""
        waiting = self._waiting.get(answer.request_id)
        if waiting is None or waiting[0] != node_id or waiting[1].done():
            return
        waiting[1].set_result(answer)


class NodeMonitoring(Protocol):
    """What the node API tells monitoring: registrations and relayed scrapes' answers."""

    def registered(self, node_id: str, request: node_pb2.RegisterRequest) -> None:
        """A node registered (its metrics endpoints are in ``request``)."""

    def answered(self, node_id: str, answer: node_pb2.MetricsScraped) -> None:
        """A node answered a relayed scrape."""
