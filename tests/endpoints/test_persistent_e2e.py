"""Persistent endpoints end to end: reserved with ``POST /v3/endpoints``, attached by a
workflow with ``persistent: true``, taken over by the next one with either strategy, and the
URL in the jobs' ``FB_SERVICE_<SERVICE>_ENDPOINT_<NAME>``."""

from __future__ import annotations

import threading

import httpx
import pytest
from support.cluster import free_port
from support.endpoint_stack import EndpointCluster, People, Person, bearer, wait_until

pytestmark = pytest.mark.slow

#: the aiohttp service answering "hello from NAME", attached to the persistent endpoint
ATTACHED = """
version: v1
services:
  app:
    image: {{uri: "{image}"}}
    args: ["{port}", "{name}"]
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints: [{{name: {endpoint}, port-name: http, persistent: true}}]
    readiness-probe: {{http-get: {{port: {port}, path: /}}, period-seconds: 1}}
"""


def attached(image: str, endpoint: str, name: str) -> str:
    return ATTACHED.format(image=image, port=free_port(), name=name, endpoint=endpoint)


def reserve(stack: EndpointCluster, who: Person, name: str, strategy: str) -> dict:
    answer = httpx.post(
        f"{stack.orchestrate.rest_url}/v3/endpoints",
        json={"name": name, "strategy": strategy},
        headers={"Authorization": f"Bearer {who.token}"},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_workflow_attaches_to_a_reserved_endpoint(
    stack: EndpointCluster, people: People, aiohttp_image: str
) -> None:
    endpoint = reserve(stack, people.alice, "notebook", "start")
    before = httpx.get(endpoint["url"], headers=bearer(people.alice.token))

    workflow_id = stack.start_workflow(
        people.alice.principal, attached(aiohttp_image, "notebook", "first")
    )
    answer = wait_until(
        lambda: httpx.get(endpoint["url"], headers=bearer(people.alice.token)),
        lambda answer: answer.status_code != 503,
        timeout=90,
    )

    assert before.status_code == 503  # reserved, no workflow serves it yet
    assert endpoint["url"] == f"{stack.proxy_url}/endpoints/{endpoint['id']}/"
    assert answer.text == "hello from first"
    stack.orchestrate.stop_workflow(workflow_id)


def test_takeover_with_start_stops_the_previous_workflow_at_submission(
    stack: EndpointCluster, people: People, aiohttp_image: str
) -> None:
    endpoint = reserve(stack, people.alice, "lab-start", "start")
    who = people.alice.principal
    first = stack.start_workflow(who, attached(aiohttp_image, "lab-start", "first"))
    wait_until(
        lambda: httpx.get(endpoint["url"], headers=bearer(people.alice.token)),
        lambda answer: answer.text == "hello from first",
        timeout=90,
    )

    second = stack.start_workflow(who, attached(aiohttp_image, "lab-start", "second"))
    stopped = stack.orchestrate.workflow(first)
    answer = wait_until(
        lambda: httpx.get(endpoint["url"], headers=bearer(people.alice.token)),
        lambda answer: answer.text == "hello from second",
        timeout=90,
    )

    assert stopped.status == "CANCELED"
    assert f"taken over by workflow {second}" in stopped.error
    assert answer.status_code == 200
    stack.orchestrate.stop_workflow(second)


def test_takeover_with_ready_keeps_the_url_answering_throughout(
    stack: EndpointCluster, people: People, aiohttp_image: str
) -> None:
    endpoint = reserve(stack, people.alice, "lab-ready", "ready")
    who = people.alice.principal
    first = stack.start_workflow(who, attached(aiohttp_image, "lab-ready", "first"))
    wait_until(
        lambda: httpx.get(endpoint["url"], headers=bearer(people.alice.token)),
        lambda answer: answer.text == "hello from first",
        timeout=90,
    )
    answers: list[tuple[int, str]] = []
    done = threading.Event()

    def keep_asking() -> None:
        with httpx.Client(headers=bearer(people.alice.token), timeout=30) as client:
            while not done.is_set():
                reply = client.get(endpoint["url"])
                answers.append((reply.status_code, reply.text))

    asker = threading.Thread(target=keep_asking)
    asker.start()
    try:
        second = stack.start_workflow(who, attached(aiohttp_image, "lab-ready", "second"))
        stack.orchestrate.wait_for(first, timeout=120)
        wait_until(
            lambda: httpx.get(endpoint["url"], headers=bearer(people.alice.token)),
            lambda answer: answer.text == "hello from second",
        )
    finally:
        done.set()
        asker.join()

    texts = [text for _, text in answers]
    switched = texts.index("hello from second")
    assert {status for status, _ in answers} == {200}
    assert set(texts[:switched]) == {"hello from first"}
    assert set(texts[switched:]) == {"hello from second"}
    assert stack.orchestrate.workflow(first).status == "CANCELED"
    stack.orchestrate.stop_workflow(second)


ENV_READER = """
version: v1
services:
  app:
    image: {{uri: docker://alpine:latest}}
    script: |
      busybox mkdir -p /www && echo up > /www/index.html
      exec busybox httpd -f -p {port} -h /www
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints:
        - {{name: {endpoint}, port-name: http, persistent: true}}
        - {{name: own-page, port-name: http, type: subdomain}}
jobs:
  show:
    image: {{uri: docker://alpine:latest}}
    command: [busybox, sh, -c, "env | busybox grep ^FB_SERVICE_ | busybox sort"]
    depends-on: [{{name: app, status: RUNNING}}]
"""


def test_jobs_read_their_endpoints_urls_from_the_environment(
    stack: EndpointCluster, people: People
) -> None:
    endpoint = reserve(stack, people.alice, "shown", "start")
    who = people.alice.principal
    workflow_id = stack.start_workflow(who, ENV_READER.format(port=free_port(), endpoint="shown"))
    own = stack.endpoint_id(who, workflow_id, "own-page")  # a workflow's own: gone with it
    stack.orchestrate.wait_for(
        workflow_id,
        lambda view: any(s.name == "jobs.show" and s.status == "FINISHED" for s in view.stages),
        timeout=90,
    )

    assert stack.orchestrate.logs(workflow_id, "jobs.show").splitlines() == [
        f"FB_SERVICE_APP_ENDPOINT_OWN_PAGE=http://{own}.endpoints.test:{stack.proxy_port}/",
        f"FB_SERVICE_APP_ENDPOINT_SHOWN={endpoint['url']}",
    ]
