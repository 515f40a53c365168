"""Orchestrate's Alertmanager receiver: ``POST /v4/monitoring/alerts`` on its own port
(``monitoring.webhook-listen``), over TLS that requires a client certificate issued by the
monitoring CA (``monitoring.ca-dir``, made on first start; ``fuzzball admin monitoring
issue-cert`` issues one to an external Alertmanager). A client without a certificate, or with
one another CA issued, never gets past the handshake. What the alerts do is
:mod:`~fuzzball_core.orchestrate.alert_holds`'.
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

from aiohttp import web

from fuzzball_core.api.http_errors import RestRunner
from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.rest import status_response
from fuzzball_core.certificates import CertificateAuthority, local_hosts
from fuzzball_core.config import split_listen
from fuzzball_core.errors import FuzzballError
from fuzzball_core.orchestrate.alert_holds import AlertHolds, outcomes_json

log = logging.getLogger("fuzzball.orchestrate.monitoring")

ALERTS_PATH = "/v4/monitoring/alerts"
SERVER_CERT, SERVER_KEY = "webhook.crt", "webhook.key"


def webhook_ssl_context(ca: CertificateAuthority, directory: Path, host: str) -> ssl.SSLContext:
    """TLS for the receiver: its certificate (issued by ``ca`` for ``host`` and this
    machine's names, written into ``directory``) and client certificates required, checked
    against ``ca`` alone."""
    issued = ca.issue_server_certificate(
        directory / SERVER_CERT, directory / SERVER_KEY, local_hosts([host])
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ca.pem.decode())
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(issued.cert_file, issued.key_file)
    return context


def webhook_app(holds: AlertHolds) -> web.Application:
    """The receiver's one route."""

    async def alerts(request: web.Request) -> web.Response:
        try:
            payload = parse_json_body(await request.read())
            outcomes = holds.notify(payload)
        except FuzzballError as exc:
            return status_response(exc)
        for outcome in outcomes:
            if outcome.result != "ignored":
                log.info(
                    "alert %s on %s: %s %s",
                    outcome.alert,
                    outcome.node,
                    outcome.result,
                    outcome.detail,
                )
        return web.json_response({"alerts": outcomes_json(outcomes)})

    app = web.Application()
    app.router.add_post(ALERTS_PATH, alerts)
    return app


class AlertWebhook:
    """The receiver, served while Orchestrate serves."""

    def __init__(self, listen: str, holds: AlertHolds, ca_dir: Path) -> None:
        self.listen = listen
        self.holds = holds
        self.ca_dir = ca_dir
        self._runner: RestRunner | None = None

    async def start(self) -> None:
        """Serve on ``listen`` (nothing when it is empty)."""
        if not self.listen:
            return
        host, port = split_listen(self.listen)
        self.ca_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        ca = CertificateAuthority.load_or_create(self.ca_dir)
        context = webhook_ssl_context(ca, self.ca_dir, host)
        self._runner = RestRunner(webhook_app(self.holds))
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, host, port, ssl_context=context).start()
        except OSError as exc:  # Orchestrate serves on; only alerts cannot place holds
            log.warning(
                "the monitoring webhook is not served: cannot listen on %s (%s)",
                self.listen,
                exc.strerror or exc,
            )
            await self._runner.cleanup()
            self._runner = None
            return
        log.info(
            "monitoring webhook on https://%s%s (mTLS, CA %s)",
            self.listen,
            ALERTS_PATH,
            ca.cert_file,
        )

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
