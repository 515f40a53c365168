"""Who may use an endpoint: its scope against the caller, across two users of one
organization, a group account and its member, another organization and nobody."""

from __future__ import annotations

import httpx
import pytest
from support.cluster import free_port
from support.endpoint_stack import EndpointCluster, People, Person, bearer, wait_until

pytestmark = pytest.mark.slow

#: one service, an endpoint of each scope
SCOPED = """
version: v1
services:
  web:
    image: {{uri: docker://alpine:latest}}
    script: |
      busybox mkdir -p /www && echo "scoped" > /www/index.html
      exec busybox httpd -f -p {port} -h /www
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints:
        - {{name: mine, port-name: http, scope: user}}
        - {{name: ours, port-name: http, scope: group}}
        - {{name: orgs, port-name: http, scope: organization}}
        - {{name: open, port-name: http, scope: public}}
    readiness-probe: {{http-get: {{port: {port}, path: /index.html}}, period-seconds: 1}}
"""
NAMES = ("mine", "ours", "orgs", "open")


@pytest.fixture(scope="module")
def scoped(stack: EndpointCluster, people: People) -> dict[str, str]:
    """alice's workflow serving one endpoint of each scope: name -> URL."""
    who = people.alice.principal
    workflow_id = stack.start_workflow(who, SCOPED.format(port=free_port()))
    urls = {
        name: f"{stack.proxy_url}/endpoints/{stack.endpoint_id(who, workflow_id, name)}/index.html"
        for name in NAMES
    }
    wait_until(
        lambda: httpx.get(urls["open"]), lambda answer: answer.status_code == 200, timeout=90
    )
    return urls


def statuses(urls: dict[str, str], caller: Person | None) -> dict[str, int]:
    headers = bearer(caller.token) if caller is not None else {}
    return {name: httpx.get(url, headers=headers).status_code for name, url in urls.items()}


def test_the_owner_reaches_every_scope(scoped: dict[str, str], people: People) -> None:
    assert statuses(scoped, people.alice) == {"mine": 200, "ours": 200, "orgs": 200, "open": 200}


def test_another_user_of_the_organization_reaches_organization_and_public(
    scoped: dict[str, str], people: People
) -> None:
    assert statuses(scoped, people.bob) == {"mine": 404, "ours": 404, "orgs": 200, "open": 200}


def test_another_organization_reaches_only_public(scoped: dict[str, str], people: People) -> None:
    assert statuses(scoped, people.carol) == {"mine": 404, "ours": 404, "orgs": 404, "open": 200}


def test_nobody_without_a_token_reaches_only_public(scoped: dict[str, str]) -> None:
    assert statuses(scoped, None) == {"mine": 401, "ours": 401, "orgs": 401, "open": 200}


def test_a_refusal_reads_as_if_the_endpoint_did_not_exist(
    scoped: dict[str, str], stack: EndpointCluster, people: People
) -> None:
    refused = httpx.get(scoped["ours"], headers=bearer(people.carol.token))
    absent = httpx.get(
        f"{stack.proxy_url}/endpoints/00000000-0000-0000-0000-000000000000/index.html",
        headers=bearer(people.carol.token),
    )

    endpoint_id = scoped["ours"].split("/")[-2]
    assert refused.status_code == absent.status_code == 404
    assert refused.json()["message"].replace(endpoint_id, "ID") == absent.json()["message"].replace(
        "00000000-0000-0000-0000-000000000000", "ID"
    )


def test_a_group_endpoint_lets_in_the_groups_members(
    stack: EndpointCluster, people: People
) -> None:
    identity = stack.service().identity
    owner = people.alice.principal

    def group_token() -> tuple[object, str]:
        login = identity.login_principal(owner.user_id)
        lab = identity.create_account(login, "lab")
        identity.add_account_member(login, lab.id, people.bob.principal.user_id)
        token = identity.account_token(login, lab.id)
        return stack.service().authenticate(token), token

    lab, _ = stack.orchestrate.call(group_token)
    workflow_id = stack.start_workflow(lab, SCOPED.format(port=free_port()))
    url = f"{stack.proxy_url}/endpoints/{stack.endpoint_id(lab, workflow_id, 'ours')}/index.html"

    answer = wait_until(
        lambda: httpx.get(url, headers=bearer(people.bob.token)),
        lambda answer: answer.status_code != 503,
        timeout=90,
    )

    assert answer.status_code == 200  # bob, in his personal account, is a member of lab
    assert httpx.get(url, headers=bearer(people.carol.token)).status_code == 404
    stack.orchestrate.stop_workflow(workflow_id)


def test_a_member_removed_from_the_group_is_refused_at_the_next_request(
    stack: EndpointCluster, people: People
) -> None:
    identity = stack.service().identity
    owner = people.alice.principal
    bob = people.bob.principal.user_id

    def group() -> tuple[object, str]:
        login = identity.login_principal(owner.user_id)
        lab = identity.create_account(login, "lab-leaving")
        identity.add_account_member(login, lab.id, bob)
        return stack.service().authenticate(identity.account_token(login, lab.id)), lab.id

    lab, lab_id = stack.orchestrate.call(group)
    workflow_id = stack.start_workflow(lab, SCOPED.format(port=free_port()))
    url = f"{stack.proxy_url}/endpoints/{stack.endpoint_id(lab, workflow_id, 'ours')}/index.html"
    member = wait_until(
        lambda: httpx.get(url, headers=bearer(people.bob.token)),
        lambda answer: answer.status_code != 503,
        timeout=90,
    )
    kept = httpx.get(url, headers=bearer(people.bob.token))  # the proxy keeps this answer

    removal = httpx.delete(
        f"{stack.orchestrate.rest_url}/v3/accounts/{lab_id}/members/{bob}",
        headers={"Authorization": f"Bearer {people.alice.token}"},
    )
    removed = httpx.get(url, headers=bearer(people.bob.token))

    assert (member.status_code, kept.status_code, removal.status_code) == (200, 200, 200)
    assert removed.status_code == 404
    stack.orchestrate.stop_workflow(workflow_id)
