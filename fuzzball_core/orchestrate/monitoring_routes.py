"""Orchestrate's monitoring: the routes Prometheus uses, the hold receiver, the metrics.

:class:`Monitoring` is what ``server.serve`` adds: the nodes' metrics targets (from their
registrations), the scrape relay, the Alertmanager receiver (:mod:`alert_webhook`, its own
port) and these REST routes beside the API's:

* ``GET /v4/nodes/-/sd_config[?mode=direct|proxy]`` (``read_nodes``): Prometheus ``http_sd``
  JSON, one target group per node endpoint (its fuzzball_node_* port and its node_exporter),
  labelled ``node`` (the name the rules' holds act on), ``node_id``, ``pool`` and
  ``exporter``. ``proxy`` (default ``monitoring.node-metrics-mode``) points every target at
  ``/v4/metrics/node`` on this server instead of at the node;
* ``GET /v4/metrics/node?node=ID[&target=fuzzball|node_exporter]`` (``scrape_node_metrics``):
  the node's metrics, read over its Connect stream;
* ``GET /v4/metrics`` (``scrape_node_metrics``): Orchestrate's own metrics
  (:mod:`orchestrate_metrics`);
* ``POST /v3/monitoring/client-certificates`` ``{"name"}`` (``administer_cluster``): a client
  certificate from the monitoring CA for an external Alertmanager (``fuzzball admin
  monitoring issue-cert``), with its key and the CA certificate, in PEM.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from sqlalchemy import select

from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.openapi import Body, MediaOperation, Query, documented
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.certificates import CertificateAuthority
from fuzzball_core.config import FuzzballConfig
from fuzzball_core.errors import InvalidArgument, Unavailable
from fuzzball_core.orchestrate import monitoring_schemas as schema
from fuzzball_core.orchestrate import nodes
from fuzzball_core.orchestrate.alert_holds import AlertHolds, pool_of
from fuzzball_core.orchestrate.alert_webhook import AlertWebhook
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.node_metrics import NodeTargets, ScrapeRelay
from fuzzball_core.orchestrate.orchestrate_metrics import OrchestrateCollector, exposition
from fuzzball_core.orchestrate.states import DEPROVISIONED
from fuzzball_core.service.permissions import require
from fuzzball_core.service.views import Principal
from fuzzball_core.spec.names import printable
from fuzzball_core.store.models import Node
from fuzzball_core.vocabulary import Permission

SD_CONFIG_PATH = "/v4/nodes/-/sd_config"
NODE_METRICS_PATH = "/v4/metrics/node"
METRICS_PATH = "/v4/metrics"
#: under the API's base (``/v3``), where the CLI's client calls
CLIENT_CERTIFICATES = "/monitoring/client-certificates"
TARGETS = ("fuzzball", "node_exporter")
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
_METRICS_TEXT = "Prometheus text exposition"
OWN_METRICS = MediaOperation(
    "Orchestrate's own metrics (scrape_node_metrics)",
    Body(TEXT_FORMAT, _METRICS_TEXT),
    tags=("monitoring",),
)
NODE_METRICS = MediaOperation(
    "a node's metrics, read over its Connect stream (scrape_node_metrics)",
    Body(TEXT_FORMAT, f"{_METRICS_TEXT} (or the type the node's exporter answers with)"),
    query=(
        Query("node", "string", "the node's id or name", required=True),
        Query("target", "string", "which of the node's exporters", choices=TARGETS),
    ),
    tags=("monitoring",),
)


class Monitoring:
    """Orchestrate's monitoring parts, built from its configuration, engine and node hub."""

    def __init__(self, config: FuzzballConfig, engine: Engine, hub: NodeHub) -> None:
        self.config = config
        self.engine = engine
        self.targets = NodeTargets()
        self.relay = ScrapeRelay(hub)
        self.holds = AlertHolds(
            engine, self.targets, config.node_health.max_monitoring_held_percent
        )
        self.webhook = AlertWebhook(
            config.monitoring.webhook_listen, self.holds, config.monitoring_ca_dir
        )
        self.collector = OrchestrateCollector(
            engine.sessions,
            self.holds,
            lambda: engine.failed_passes,
            engine.timings,
            lambda: engine.context.dropped_reports,
        )

    # -- the node API's calls ------------------------------------------------------------------

    def registered(self, node_id: str, request: node_pb2.RegisterRequest) -> None:
        """A node registered: remember its metrics endpoints."""
        self.targets.registered(node_id, request)

    def answered(self, node_id: str, answer: node_pb2.MetricsScraped) -> None:
        """A node answered a relayed scrape."""
        self.relay.answered(node_id, answer)

    # -- serving -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the Alertmanager receiver (when ``monitoring.webhook-listen`` is set)."""
        await self.webhook.start()

    async def stop(self) -> None:
        """Stop the receiver."""
        await self.webhook.stop()

    def routes(self) -> ExtraRoutes:
        """The REST routes above, for the gateway."""
        return ExtraRoutes(add=lambda app, base, principal_of: self._add(app, base, principal_of))

    def _add(
        self,
        app: web.Application,
        base: str,
        principal_of: Callable[[web.Request], Principal],
    ) -> None:
        @documented(schema.SD_CONFIG)
        async def sd_config(request: web.Request) -> web.Response:
            require(principal_of(request), Permission.READ_NODES, "list node metrics targets")
            mode = request.query.get("mode", self.config.monitoring.node_metrics_mode)
            if mode not in ("direct", "proxy"):
                raise InvalidArgument(f"mode: {printable(mode)!r} is not direct or proxy")
            return web.json_response(self.sd_groups(mode, request.host, request.scheme))

        @documented(NODE_METRICS)
        async def node_metrics(request: web.Request) -> web.Response:
            who = principal_of(request)
            require(who, Permission.SCRAPE_NODE_METRICS, "read node metrics")
            reference = request.query.get("node", "")
            if not reference:
                raise InvalidArgument("node: name the node whose metrics to read (?node=ID)")
            target = request.query.get("target", "fuzzball")
            if target not in TARGETS:
                raise InvalidArgument(f"target: {printable(target)!r} is not one of {TARGETS}")
            with self.engine.sessions() as session:
                node = nodes.find(session, reference)
                node_id, name = node.id, node.name
            answer = await self.relay.scrape(node_id, name, target)
            if answer.error:
                raise Unavailable(f"node {name}: {answer.error}")
            return web.Response(
                body=answer.text, headers={"Content-Type": answer.content_type or TEXT_FORMAT}
            )

        @documented(OWN_METRICS)
        async def own_metrics(request: web.Request) -> web.Response:
            require(principal_of(request), Permission.SCRAPE_NODE_METRICS, "read metrics")
            return web.Response(
                body=exposition(self.collector), headers={"Content-Type": TEXT_FORMAT}
            )

        @documented(schema.CLIENT_CERTIFICATE)
        async def client_certificate(request: web.Request) -> web.Response:
            who = principal_of(request)
            require(who, Permission.ADMINISTER_CLUSTER, "issue monitoring client certificates")
            body = parse_json_body(await request.read())
            name = body.get("name") if isinstance(body, dict) else None
            if not isinstance(name, str) or not name.strip() or len(name) > 64:
                raise InvalidArgument("name: the certificate's name, 1 to 64 characters")
            return web.json_response(self.issue_client_certificate(name.strip()))

        app.router.add_get(SD_CONFIG_PATH, sd_config)
        app.router.add_get(NODE_METRICS_PATH, node_metrics)
        app.router.add_get(METRICS_PATH, own_metrics)
        app.router.add_post(f"{base}{CLIENT_CERTIFICATES}", client_certificate)

    # -- what the routes answer ----------------------------------------------------------------

    def sd_groups(self, mode: str, host: str, scheme: str) -> list[dict[str, Any]]:
        """Prometheus http_sd target groups of every node that is not deprovisioned."""
        with self.engine.sessions() as session:
            listed = list(
                session.scalars(
                    select(Node).where(Node.status != DEPROVISIONED).order_by(Node.name)
                )
            )
            rows = [(n.id, n.name, pool_of(n)) for n in listed]
        groups = []
        for node_id, name, pool in rows:
            target = self.targets.get(node_id)
            addresses = {
                "fuzzball": target.metrics_address,
                "node_exporter": target.node_exporter_address,
            }
            for exporter, address in addresses.items():
                if not address:
                    continue
                labels = {"node": name, "node_id": node_id, "pool": pool, "exporter": exporter}
                if mode == "proxy":
                    labels |= {
                        "__metrics_path__": NODE_METRICS_PATH,
                        "__scheme__": scheme,
                        "__param_node": node_id,
                        "__param_target": exporter,
                    }
                    address = host
                groups.append({"targets": [address], "labels": labels})
        return groups

    def issue_client_certificate(self, name: str) -> dict[str, str]:
        """A client certificate from the monitoring CA (made when there is none yet)."""
        directory = self.config.monitoring_ca_dir
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        ca = CertificateAuthority.load_or_create(directory)
        with tempfile.TemporaryDirectory() as scratch:
            issued = ca.issue_client_certificate(
                Path(scratch) / "client.crt", Path(scratch) / "client.key", name
            )
            return {
                "name": name,
                "certificate": issued.cert_file.read_text(),
                "key": issued.key_file.read_text(),
                "ca": ca.pem.decode(),
            }
