"""The endpoint proxy end to end: real services in a real cluster, reached with httpx and
aiohttp through the proxy (docs/endpoints.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import aiohttp
import httpx
import pytest
import sqlalchemy
import yaml
from support.cluster import free_port
from support.endpoint_stack import DOMAIN, EndpointCluster, People, bearer, wait_until

from fuzzball_core.certificates import CertificateAuthority

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


#: the aiohttp service of tests/fixtures/endpoints (websocket echo, SSE, headers)
AIOHTTP = """
version: v1
services:
  app:
    image: {{uri: "{image}"}}
    args: ["{port}", "{name}"]
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints: [{{name: app, port-name: http}}]
    readiness-probe: {{http-get: {{port: {port}, path: /}}, period-seconds: 1}}
"""


def aiohttp_service(image: str, name: str = "app") -> str:
    return AIOHTTP.format(image=image, port=free_port(), name=name)


def test_a_websocket_round_trips_messages_through_the_proxy(
    stack: EndpointCluster, people: People, aiohttp_image: str
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, aiohttp_service(aiohttp_image), "app")
    url = f"{stack.proxy_url}/endpoints/{endpoint_id}/ws"

    async def talk() -> list[object]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, headers=bearer(people.alice.token)) as socket,
        ):
            await socket.send_str("hello")
            text = await socket.receive_str(timeout=30)
            await socket.send_bytes(b"\x00\x01binary")
            data = await socket.receive_bytes(timeout=30)
            return [text, data]

    assert asyncio.run(talk()) == ["hello", b"\x00\x01binary"]
    stack.orchestrate.stop_workflow(workflow_id)


def test_server_sent_events_arrive_one_by_one(
    stack: EndpointCluster, people: People, aiohttp_image: str
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, aiohttp_service(aiohttp_image), "app")
    base = f"{stack.proxy_url}/endpoints/{endpoint_id}"
    received = []

    # each event is sent only after the one before was acknowledged: a proxy that held the
    # stream back would never let the first one through
    with (
        httpx.Client(headers=bearer(people.alice.token), timeout=30) as client,
        client.stream("GET", f"{base}/sse?events=3") as stream,
    ):
        lines = stream.iter_lines()
        for _ in range(3):
            event = next(line for line in lines if line)
            received.append(event)
            if len(received) < 3:
                assert client.get(f"{base}/next").status_code == 200

    assert received == ["data: event 0", "data: event 1", "data: event 2"]
    stack.orchestrate.stop_workflow(workflow_id)


def test_a_request_body_reaches_the_service_whole(
    stack: EndpointCluster, people: People, aiohttp_image: str
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, aiohttp_service(aiohttp_image), "app")
    body = bytes(range(256)) * 4096  # 1 MiB

    answer = httpx.post(
        f"{stack.proxy_url}/endpoints/{endpoint_id}/echo?check=1",
        content=body,
        headers=bearer(people.alice.token),
        timeout=60,
    )

    assert answer.status_code == 200
    assert answer.headers["X-Received"] == str(len(body))
    assert answer.content == body
    stack.orchestrate.stop_workflow(workflow_id)


def test_a_client_leaving_mid_stream_leaves_no_error_behind(
    stack: EndpointCluster, people: People, aiohttp_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, aiohttp_service(aiohttp_image), "app")
    base = f"{stack.proxy_url}/endpoints/{endpoint_id}"

    with caplog.at_level(logging.WARNING):
        with (
            httpx.Client(headers=bearer(people.alice.token), timeout=30) as client,
            client.stream("GET", f"{base}/sse?events=3") as stream,
        ):
            first = next(line for line in stream.iter_lines() if line)
        # the service sends the next event once acknowledged: into a connection now gone
        acknowledged = httpx.get(f"{base}/next", headers=bearer(people.alice.token))
        after = wait_until(
            lambda: httpx.get(f"{base}/", headers=bearer(people.alice.token)),
            lambda answer: answer.status_code == 200,
        )

    assert first == "data: event 0"
    assert acknowledged.status_code == after.status_code == 200
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    stack.orchestrate.stop_workflow(workflow_id)


# -- answers of the proxy's own -------------------------------------------------------------


def test_an_unknown_endpoint_is_404(stack: EndpointCluster, people: People) -> None:
    answer = httpx.get(
        f"{stack.proxy_url}/endpoints/no-such-endpoint/", headers=bearer(people.alice.token)
    )

    assert answer.status_code == 404
    assert answer.json()["code"] == 5


def test_a_request_without_a_token_is_401(stack: EndpointCluster) -> None:
    answer = httpx.get(f"{stack.proxy_url}/endpoints/no-such-endpoint/")

    assert answer.status_code == 401
    assert "FB-Authorization" in answer.json()["message"]


NEVER_READY = """
version: v1
services:
  slow:
    image: {{uri: docker://alpine:latest}}
    command: [busybox, sleep, "3600"]
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints: [{{name: slow, port-name: http}}]
    readiness-probe: {{tcp-socket: {{port: {port}}}, period-seconds: 1}}
"""


def test_an_endpoint_whose_service_is_not_ready_is_503_with_retry_after(
    stack: EndpointCluster, people: People
) -> None:
    workflow_id = stack.start_workflow(people.alice.principal, NEVER_READY.format(port=free_port()))
    endpoint_id = stack.endpoint_id(people.alice.principal, workflow_id, "slow")

    answer = httpx.get(
        f"{stack.proxy_url}/endpoints/{endpoint_id}/", headers=bearer(people.alice.token)
    )

    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "5"
    assert "not ready" in answer.json()["message"]
    stack.orchestrate.stop_workflow(workflow_id)


def test_a_failed_lookup_is_503_not_404(stack: EndpointCluster, people: People) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, httpd())
    engine = stack.engine()

    def rename(old: str, new: str) -> None:
        with engine.sessions() as session, session.begin():
            session.execute(sqlalchemy.text(f"ALTER TABLE {old} RENAME TO {new}"))

    # the endpoints' table missing, as during an upgrade before the database was migrated
    stack.orchestrate.call(lambda: rename("service_endpoints", "service_endpoints_away"))
    try:
        time.sleep(1.1)  # past the proxy's kept answer for this endpoint
        answer = httpx.get(
            f"{stack.proxy_url}/endpoints/{endpoint_id}/", headers=bearer(people.alice.token)
        )
    finally:
        stack.orchestrate.call(lambda: rename("service_endpoints_away", "service_endpoints"))

    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "5"
    assert "could not be looked up" in answer.json()["message"]
    stack.orchestrate.stop_workflow(workflow_id)


def test_an_https_service_is_reached_over_tls(
    stack: EndpointCluster, people: People, aiohttp_image: str, tmp_path: Path
) -> None:
    authority = CertificateAuthority.create(tmp_path / "ca")
    issued = authority.issue_server_certificate(
        tmp_path / "cert.pem", tmp_path / "key.pem", ["127.0.0.1"]
    )
    port = free_port()
    service = {
        "image": {"uri": aiohttp_image},
        "args": [str(port), "tls", "/opt/tls"],
        "files": {
            "/opt/tls/cert.pem": issued.cert_file.read_text(),
            "/opt/tls/key.pem": issued.key_file.read_text(),
        },
        "network": {
            "ports": [{"name": "https", "port": port}],
            "endpoints": [{"name": "secure", "port-name": "https", "protocol": "https"}],
        },
        "readiness-probe": {
            "http-get": {"port": port, "path": "/", "scheme": "HTTPS"},
            "period-seconds": 1,
        },
    }
    specification = yaml.safe_dump({"version": "v1", "services": {"secure": service}})
    workflow_id, endpoint_id = serving(stack, people.alice, specification, "secure")

    answer = httpx.get(
        f"{stack.proxy_url}/endpoints/{endpoint_id}/", headers=bearer(people.alice.token)
    )

    assert answer.status_code == 200
    assert answer.text == "hello from tls"
    stack.orchestrate.stop_workflow(workflow_id)


def test_the_token_may_come_in_the_cookie_which_the_service_never_sees(
    stack: EndpointCluster, people: People
) -> None:
    workflow_id, endpoint_id = serving(stack, people.alice, httpd())

    answer = httpx.get(
        f"{stack.proxy_url}/endpoints/{endpoint_id}/cgi-bin/seen",
        headers={
            "Authorization": BASIC_ALICE,
            "Cookie": f"theme=dark; fuzzball_endpoint_token={people.alice.token}; lang=en",
        },
    )

    assert answer.status_code == 200
    assert "cookie=theme=dark; lang=en\n" in answer.text
    assert people.alice.token not in answer.text
    stack.orchestrate.stop_workflow(workflow_id)
