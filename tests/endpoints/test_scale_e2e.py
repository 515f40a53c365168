"""A service that scales to zero (``scale.min: 0``): no instance until a request through its
endpoint wakes it, and none again once it was idle for its ``idle-timeout``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select
from support.cluster import free_port
from support.endpoint_stack import EndpointCluster, People, bearer

from fuzzball_core.store.models import Run, Stage

pytestmark = pytest.mark.slow

POOL = """
version: v1
services:
  pool:
    image: {{uri: docker://alpine:latest}}
    script: |
      busybox mkdir -p /www && echo "awake" > /www/index.html
      exec busybox httpd -f -p {port} -h /www
    scale: {{min: 0, max: 1, idle-timeout: 2s}}
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints: [{{name: pool, port-name: http, scope: {scope}}}]
    readiness-probe: {{http-get: {{port: {port}, path: /index.html}}, period-seconds: 1}}
"""


def runs_of(stack: EndpointCluster, workflow_id: str) -> list[str]:
    """The statuses of the pool's runs, oldest first."""

    def statuses() -> list[str]:
        with stack.engine().sessions() as session:
            return list(
                session.scalars(
                    select(Run.status)
                    .join(Stage, Stage.id == Run.stage_id)
                    .where(Run.workflow_id == workflow_id, Stage.name == "services.pool")
                    .order_by(Run.id)
                )
            )

    return stack.orchestrate.call(statuses)


def wait_for_runs(stack: EndpointCluster, workflow_id: str, wanted: list[str]) -> None:
    deadline = time.monotonic() + 60
    while runs_of(stack, workflow_id) != wanted:
        assert time.monotonic() < deadline, runs_of(stack, workflow_id)
        time.sleep(0.1)


@pytest.fixture
def pool(
    request: pytest.FixtureRequest, stack: EndpointCluster, people: People
) -> Iterator[tuple[str, str]]:
    """(workflow id, endpoint URL) of alice's pool, its images in place and no run yet."""
    who = people.alice.principal
    scope = getattr(request, "param", "group")
    workflow_id = stack.start_workflow(who, POOL.format(port=free_port(), scope=scope))
    stack.orchestrate.wait_for(
        workflow_id,
        lambda view: all(s.status == "FINISHED" for s in view.stages if s.kind == "image"),
    )
    url = f"{stack.proxy_url}/endpoints/{stack.endpoint_id(who, workflow_id, 'pool')}/index.html"
    yield workflow_id, url
    stack.orchestrate.stop_workflow(workflow_id)


def test_a_pool_at_zero_starts_nothing_until_asked(
    stack: EndpointCluster, people: People, pool: tuple[str, str]
) -> None:
    workflow_id, url = pool

    anonymous = httpx.get(url)

    assert anonymous.status_code == 401  # nobody identified: nothing wakes
    assert runs_of(stack, workflow_id) == []


def test_a_request_wakes_a_pool_at_zero_and_is_answered(
    stack: EndpointCluster, people: People, pool: tuple[str, str]
) -> None:
    workflow_id, url = pool

    answer = httpx.get(url, headers=bearer(people.alice.token), timeout=90)

    assert answer.status_code == 200
    assert answer.text == "awake\n"
    assert runs_of(stack, workflow_id) == ["STARTED"]


def test_an_idle_pool_scales_back_to_zero_and_wakes_again(
    stack: EndpointCluster, people: People, pool: tuple[str, str]
) -> None:
    workflow_id, url = pool
    assert httpx.get(url, headers=bearer(people.alice.token), timeout=90).status_code == 200

    wait_for_runs(stack, workflow_id, ["CANCELED"])  # idle past its 2s idle-timeout
    stage = [s for s in stack.orchestrate.workflow(workflow_id).stages if s.name == "services.pool"]
    again = httpx.get(url, headers=bearer(people.alice.token), timeout=90)

    assert stage[0].status == "STARTED"  # the stage goes on without an instance
    assert again.status_code == 200
    assert runs_of(stack, workflow_id) == ["CANCELED", "STARTED"]


@pytest.mark.parametrize("pool", ["public"], indirect=True)
def test_a_public_pool_is_woken_by_a_member_of_its_organization_only(
    stack: EndpointCluster, people: People, pool: tuple[str, str]
) -> None:
    workflow_id, url = pool

    anonymous = httpx.get(url)
    stranger = httpx.get(url, headers=bearer(people.carol.token))
    runs_before = runs_of(stack, workflow_id)
    member = httpx.get(url, headers=bearer(people.bob.token), timeout=90)

    assert (anonymous.status_code, stranger.status_code) == (503, 503)
    assert runs_before == []
    assert member.status_code == 200  # bob: alice's organization, another account
    assert runs_of(stack, workflow_id) == ["STARTED"]
