"""Answering Orchestrate's scrape proxy: a ``ScrapeMetrics`` that came down the node's stream
is answered with a ``MetricsScraped`` holding the text Prometheus would have read from the
node's own port (``/v4/metrics/node`` relays it, for clusters that cannot reach node IPs).
"""

from __future__ import annotations

import httpx
from prometheus_client import CONTENT_TYPE_LATEST

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.substrate.metrics import MetricsServer

#: seconds the node_exporter gets to answer a relayed scrape
EXPORTER_TIMEOUT = 10.0


async def answer_scrape(
    request: node_pb2.ScrapeMetrics, metrics: MetricsServer | None, node_exporter: str
) -> node_pb2.NodeMessage:
    """The ``MetricsScraped`` answering ``request``: fuzzball_node_* rendered here, or the
    node_exporter's page fetched from ``node_exporter`` (``host:port``), or why neither."""
    answer = node_pb2.MetricsScraped(request_id=request.request_id)
    target = request.target or "fuzzball"
    if target == "fuzzball":
        if metrics is None:
            answer.error = "this node's metrics are off (health.metrics-disabled)"
        else:
            answer.text = metrics.render()
            answer.content_type = CONTENT_TYPE_LATEST
    elif target == "node_exporter":
        if not node_exporter:
            answer.error = "this node runs no node_exporter"
        else:
            try:
                async with httpx.AsyncClient(timeout=EXPORTER_TIMEOUT) as client:
                    reply = await client.get(f"http://{node_exporter}/metrics")
                reply.raise_for_status()
                answer.text = reply.content
                answer.content_type = reply.headers.get("content-type", "text/plain")
            except httpx.HTTPError as exc:
                answer.error = f"node_exporter on {node_exporter}: {exc or type(exc).__name__}"
    else:
        answer.error = f"unknown scrape target {target!r} (fuzzball or node_exporter)"
    return node_pb2.NodeMessage(metrics=answer)
