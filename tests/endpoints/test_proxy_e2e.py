"""The endpoint proxy end to end: real services in a real cluster, reached with httpx and
aiohttp through the proxy (docs/endpoints.md)."""

from __future__ import annotations

import httpx
import pytest
from support.cluster import free_port
from support.endpoint_stack import DOMAIN, EndpointCluster, bearer, wait_until

from tests.endpoints.conftest import People

pytestmark = pytest.mark.slow

#: busybox httpd guarding /cgi-bin with basic auth (its own Authorization), the CGI script
#: writing what the service was sent
HTTPD = """
version: v1
services:
  web:
    image: {{uri: docker://alpine:latest}}
    script: |
      busybox mkdir -p /www/cgi-bin
      echo "served by web" > /www/index.html
      echo "/cgi-bin:alice:wonderland" > /etc/httpd.conf
      busybox cat > /www/cgi-bin/seen <<'CGI'
      #!/bin/sh
      echo Content-Type: text/plain
      echo
      echo "user=$REMOTE_USER"
      echo "fb=$HTTP_FB_AUTHORIZATION"
      echo "cookie=$HTTP_COOKIE"
      CGI
      busybox chmod +x /www/cgi-bin/seen
      exec busybox httpd -f -p {port} -h /www -c /etc/httpd.conf
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints:
        - {{name: site, port-name: http, type: {kind}, scope: {scope}}}
    readiness-probe: {{http-get: {{port: {port}, path: /index.html}}, period-seconds: 1}}
"""
BASIC_ALICE = "Basic YWxpY2U6d29uZGVybGFuZA=="  # alice:wonderland


def httpd(kind: str = "path", scope: str = "group") -> str:
    return HTTPD.format(port=free_port(), kind=kind, scope=scope)


def serving(stack: EndpointCluster, who, specification: str, name: str = "site") -> tuple[str, str]:
    """Start ``specification`` as ``who``; (workflow id, endpoint id) once it answers."""
    workflow_id = stack.start_workflow(who.principal, specification)
    endpoint_id = stack.endpoint_id(who.principal, workflow_id, name)
    url = f"{stack.proxy_url}/endpoints/{endpoint_id}/"
    wait_until(
        lambda: httpx.get(url, headers=bearer(who.token)),
        lambda answer: answer.status_code != 503,
        timeout=90,
    )
    return workflow_id, endpoint_id


def test_a_path_endpoint_reaches_the_busybox_httpd_service(
    stack: EndpointCluster, people: People
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, httpd())

    answer = httpx.get(
        f"{stack.proxy_url}/endpoints/{endpoint_id}/index.html", headers=bearer(people.alice.token)
    )

    assert answer.status_code == 200
    assert answer.text == "served by web\n"
    stack.orchestrate.stop_workflow(workflow_id)


def test_a_subdomain_endpoint_is_reached_by_its_host_name(
    stack: EndpointCluster, people: People
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, httpd(kind="subdomain"))

    answer = httpx.get(
        f"{stack.proxy_url}/index.html",
        headers={"Host": f"{endpoint_id}.{DOMAIN}", **bearer(people.alice.token)},
    )

    assert answer.status_code == 200
    assert answer.text == "served by web\n"
    stack.orchestrate.stop_workflow(workflow_id)


def test_the_service_gets_its_own_authorization_and_never_the_fuzzball_token(
    stack: EndpointCluster, people: People
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, httpd())
    url = f"{stack.proxy_url}/endpoints/{endpoint_id}/cgi-bin/seen"

    guarded = httpx.get(url, headers=bearer(people.alice.token))
    answer = httpx.get(
        url,
        headers={
            "Authorization": BASIC_ALICE,
            "Cookie": "theme=dark",
            **bearer(people.alice.token),
        },
    )

    assert guarded.status_code == 401  # the service's own basic auth, passed through
    assert answer.status_code == 200
    assert "user=alice\n" in answer.text
    assert "fb=\n" in answer.text
    assert people.alice.token not in answer.text
    assert "cookie=theme=dark\n" in answer.text
    stack.orchestrate.stop_workflow(workflow_id)
