"""A test cluster serving the endpoint proxy, and what the endpoint tests and
``bench/proxy.py`` do with it: start a service workflow, wait for its endpoint to answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from support.cluster import Cluster, free_port

#: subdomain endpoints are ``{id}.<DOMAIN>``; the tests send the Host header themselves
DOMAIN = "endpoints.test"


@dataclass(frozen=True)
class Person:
    """A caller: its principal (for the service layer) and a token (for the proxy)."""

    principal: Any
    token: str


@dataclass(frozen=True)
class People:
    """Two users of organization A (alice, bob), one of organization B (carol)."""

    alice: Person
    bob: Person
    carol: Person


class EndpointCluster:
    """A :class:`Cluster` of one node whose Orchestrate serves the endpoint proxy."""

    def __init__(self, directory: Path, registry_url: str, **endpoints: Any) -> None:
        self.proxy_port = free_port()
        settings = {
            "listen": f"127.0.0.1:{self.proxy_port}",
            "domain": DOMAIN,
            "wake-timeout": 60,
            "drain": 1,
            **endpoints,
        }
        self.cluster = Cluster(
            directory, registry_url, agents=1, orchestrate={"endpoints": settings}
        )

    @property
    def orchestrate(self) -> Any:
        return self.cluster.orchestrate

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy_port}"

    def service(self) -> Any:
        return self.orchestrate.service

    def engine(self) -> Any:
        return self.orchestrate.orchestrate.engine

    def start_workflow(self, who: Any, specification: str, name: str = "endpoints") -> str:
        return self.orchestrate.call(
            lambda: self.service().start_workflow(who, raw_specification=specification, name=name)
        )

    def endpoints_of(self, who: Any, workflow_id: str) -> list[Any]:
        """The workflow's endpoints as its owner lists them."""
        from fuzzball_core.orchestrate import endpoints

        def listing() -> list[Any]:
            with self.engine().sessions() as session:
                return endpoints.listed(session, who, workflow_id)

        return self.orchestrate.call(listing)

    def endpoint_id(self, who: Any, workflow_id: str, name: str) -> str:
        found = [e for e in self.endpoints_of(who, workflow_id) if e.name == name]
        assert found, f"workflow {workflow_id} has no endpoint {name}"
        return str(found[0].id)

    def close(self) -> None:
        self.cluster.close()


def wait_until(
    check: Callable[[], httpx.Response],
    accept: Callable[[httpx.Response], bool],
    timeout: float = 60.0,
) -> httpx.Response:
    """Ask ``check()`` until its answer is accepted; fail with the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if accept(answer):
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"not answered in {timeout}s: {answer.status_code} {answer.text}")
        time.sleep(0.1)


def bearer(token: str) -> dict[str, str]:
    """The headers carrying a Fuzzball token to the proxy."""
    return {"FB-Authorization": f"Bearer {token}"}
