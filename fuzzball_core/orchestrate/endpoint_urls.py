"""Where users reach endpoints, and the ``FB_SERVICE_<SERVICE>_ENDPOINT_<NAME>`` variables
that tell a workflow's jobs and services its endpoints' URLs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from ipaddress import ip_address
from urllib.parse import urlsplit

from sqlalchemy import or_, select

from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import ParsedWorkflow
from fuzzball_core.store.models import ServiceEndpoint


@dataclass(frozen=True)
class EndpointUrls:
    """How users reach endpoints: the proxy's public URL and its subdomain domain
    (``orchestrate.endpoints``: ``url``, ``domain``, or ``http://<listen>``)."""

    base: str = ""
    domain: str = ""

    @classmethod
    def of(cls, url: str, listen: str, domain: str, *, secure: bool = False) -> EndpointUrls:
        """From the configuration's ``url``, ``listen`` and ``domain``; without a ``url`` the
        proxy is reached at its listener, over https when it serves TLS (``secure``)."""
        scheme = "https" if secure else "http"
        base = (url or (f"{scheme}://{listen}" if listen else "")).rstrip("/")
        return cls(base, domain or urlsplit(base).hostname or "")

    def subdomain_problem(self) -> str | None:
        """Why a subdomain endpoint (``{id}.<domain>``) cannot be reached here, or None:
        a domain that is an IP address (the proxy's host when ``domain`` is unset, as with
        ``fuzzball local up``) has no names under it."""
        try:
            ip_address(self.domain)
        except ValueError:
            return None
        return (
            f"this deployment has no endpoints domain (orchestrate.endpoints.domain) and its"
            f" proxy's host, {self.domain}, is an IP address: no name ID.{self.domain} resolves"
        )

    def url(self, row: ServiceEndpoint) -> str:
        """The endpoint's URL ('' when no proxy is configured)."""
        if not self.base:
            return ""
        if row.kind == "subdomain" and self.domain:
            parts = urlsplit(self.base)
            port = f":{parts.port}" if parts.port else ""
            return f"{parts.scheme}://{row.id}.{self.domain}{port}/"
        return f"{self.base}/endpoints/{row.id}/"


def env_name(service: str, endpoint: str) -> str:
    """``FB_SERVICE_<SERVICE>_ENDPOINT_<NAME>`` (upper case, ``-`` as ``_``)."""
    return f"FB_SERVICE_{service}_ENDPOINT_{endpoint}".upper().replace("-", "_")


def with_endpoint_env(
    tx: Transaction, urls: EndpointUrls, parsed: ParsedWorkflow, workflow_id: str, payload: str
) -> str:
    """A run's ``job_json`` with the workflow's endpoint URLs in its environment."""
    services = parsed.model.services or {}
    if not urls.base or not any(s.network and s.network.endpoints for s in services.values()):
        return payload
    rows = tx.session.scalars(
        select(ServiceEndpoint).where(
            or_(
                ServiceEndpoint.workflow_id == workflow_id,
                ServiceEndpoint.pending_workflow_id == workflow_id,
            )
        )
    )
    variables = []
    for row in rows:
        service = row.service if row.workflow_id == workflow_id else row.pending_service
        variables.append(f"{env_name(service, row.name)}={urls.url(row)}")
    if not variables:
        return payload
    job = json.loads(payload)
    job["env"] = [*job.get("env", []), *sorted(variables)]
    return json.dumps(job, separators=(",", ":"))
