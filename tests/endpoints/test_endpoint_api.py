"""``/v3/endpoints`` and ``fuzzball endpoint`` against a served Orchestrate (no nodes): what
a persistent endpoint is, what is refused and how the refusal reads, and the endpoints of a
workflow at submission."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from support.cluster import InProcessOrchestrate, LocalRegistry, free_port
from support.tenants import Tenants, make_tenants

from fuzzball_core.cli.main import cli
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound

PUBLIC_URL = "https://fb.example"
Fuzzball = Callable[..., Result]


class ApiStack:
    """Orchestrate serving REST (images mirrored from the local registry), two organizations."""

    def __init__(self, directory: Path, registry_url: str, public_url: str = PUBLIC_URL) -> None:
        rest = f"127.0.0.1:{free_port()}"
        self.orchestrate = InProcessOrchestrate(
            {
                "data-dir": str(directory / "data"),
                "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": rest,
                    "node-token": "api-node-token",
                    "endpoints": {"url": public_url},
                },
                "images": {"registries": {"docker.io": {"mirrors": [registry_url]}}},
                "tls": {"plaintext": True},
            }
        )
        self.url = f"http://{rest}"
        service = self.orchestrate.service
        self.tenants: Tenants = self.orchestrate.call(lambda: make_tenants(service))

    def call(self, token: str, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.url}/v3{path}",
            headers={"Authorization": f"Bearer {token}"},
            json=body,
            timeout=30,
        )

    def start(self, token: str, specification: str) -> str:
        service = self.orchestrate.service

        def start() -> str:
            return service.start_workflow(
                service.authenticate(token), raw_specification=specification, name="api"
            )

        return self.orchestrate.call(start)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry
) -> Iterator[ApiStack]:
    running = ApiStack(tmp_path_factory.mktemp("endpoint-api"), local_registry.url)
    yield running
    running.orchestrate.close()


@pytest.fixture
def owner(stack: ApiStack) -> str:
    return stack.tenants.acme_owner.token


@pytest.fixture
def fuzzball(stack: ApiStack, owner: str, tmp_path: Path) -> Fuzzball:
    """``fuzzball ARGS`` with a context holding acme's owner's token."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "home")}

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=env)

    created = run("context", "create", "acme", "--address", stack.url, "--token", owner)
    assert created.exit_code == 0, created.output
    return run


SERVED = """
version: v1
services:
  web:
    image: {{uri: docker://alpine:latest}}
    command: [busybox, httpd, -f, -p, "8080"]
    network:
      ports: [{{name: http, port: 8080}}]
      endpoints: [{{name: {name}, port-name: http, {extra}}}]
"""


def served(name: str, extra: str = "persistent: true") -> str:
    return SERVED.format(name=name, extra=extra)


# -- the CLI ---------------------------------------------------------------------------------


def test_create_reserves_a_persistent_endpoint_and_prints_its_url(fuzzball: Fuzzball) -> None:
    created = fuzzball("endpoint", "create", "notebook", "--strategy", "ready")
    described = fuzzball("endpoint", "describe", "notebook", "-o", "json")

    endpoint = json.loads(described.output)
    assert created.exit_code == 0, created.output
    assert created.output == (
        f"Created endpoint notebook ({endpoint['id']}): {PUBLIC_URL}/endpoints/{endpoint['id']}/\n"
    )
    assert (endpoint["persistent"], endpoint["strategy"], endpoint["workflowId"]) == (
        True,
        "ready",
        "",
    )


def test_a_subdomain_endpoint_is_addressed_by_its_id_under_the_domain(fuzzball: Fuzzball) -> None:
    created = fuzzball("endpoint", "create", "desk", "--type", "subdomain", "-o", "json")

    endpoint = json.loads(created.output)
    assert endpoint["url"] == f"https://{endpoint['id']}.fb.example/"


@pytest.fixture(scope="module")
def stack_at_an_ip(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry
) -> Iterator[ApiStack]:
    """Orchestrate whose proxy is reached at an IP address and has no endpoints domain, as
    ``fuzzball local up``'s is."""
    directory = tmp_path_factory.mktemp("endpoint-api-ip")
    running = ApiStack(directory, local_registry.url, public_url="https://127.0.0.1:8081")
    yield running
    running.orchestrate.close()


def test_a_subdomain_endpoint_without_an_endpoints_domain_is_refused_saying_why(
    stack_at_an_ip: ApiStack, tmp_path: Path
) -> None:
    token = stack_at_an_ip.tenants.acme_owner.token
    refused = stack_at_an_ip.call(token, "POST", "/endpoints", {"name": "ep2", "type": "subdomain"})
    assert refused.status_code == 400
    assert refused.json()["message"] == (
        "type: subdomain: this deployment has no endpoints domain"
        " (orchestrate.endpoints.domain) and its proxy's host, 127.0.0.1, is an IP address:"
        " no name ID.127.0.0.1 resolves; use type path"
    )
    path = stack_at_an_ip.call(token, "POST", "/endpoints", {"name": "ep3", "type": "path"})
    assert path.json()["url"] == f"https://127.0.0.1:8081/endpoints/{path.json()['id']}/"


def test_a_workflow_declaring_a_subdomain_endpoint_without_an_endpoints_domain_is_refused(
    stack_at_an_ip: ApiStack,
) -> None:
    token = stack_at_an_ip.tenants.acme_owner.token
    specification = served("desk", "type: subdomain")

    refused = stack_at_an_ip.call(token, "POST", "/workflows", {"rawSpecification": specification})

    assert refused.status_code == 400
    assert refused.json()["message"].startswith(
        "services.web.network.endpoints[0].type: subdomain: this deployment has no endpoints"
        " domain (orchestrate.endpoints.domain)"
    )
    assert refused.json()["message"].endswith("; use type path")
    listed = stack_at_an_ip.call(token, "GET", "/endpoints")
    assert "desk" not in [e["name"] for e in listed.json()["endpoints"]]


def test_list_of_an_unknown_workflows_endpoints_is_not_found(fuzzball: Fuzzball) -> None:
    listed = fuzzball("endpoint", "list", "--workflow", "bogus")
    assert isinstance(listed.exception, NotFound), listed.output
    assert "bogus" in str(listed.exception)


def test_list_shows_the_accounts_endpoints_and_delete_removes_one(fuzzball: Fuzzball) -> None:
    assert fuzzball("endpoint", "create", "scratch").exit_code == 0
    listed = fuzzball("endpoint", "list")
    deleted = fuzzball("endpoint", "delete", "scratch")
    again = fuzzball("endpoint", "describe", "scratch")

    assert "scratch" in listed.output
    assert deleted.exit_code == 0
    assert again.exit_code != 0
    assert str(again.exception) == "endpoint scratch not found"


def test_a_name_is_reserved_once_per_account(fuzzball: Fuzzball) -> None:
    assert fuzzball("endpoint", "create", "twice").exit_code == 0

    again = fuzzball("endpoint", "create", "twice")

    assert again.exit_code != 0
    assert str(again.exception) == "endpoint twice already exists"


def test_workflow_endpoints_says_it_is_deprecated_and_lists_them(
    fuzzball: Fuzzball, stack: ApiStack, owner: str
) -> None:
    workflow_id = stack.start(owner, served("own", extra="scope: user"))

    listed = fuzzball("workflow", "endpoints", workflow_id, "-o", "json")

    assert "deprecated" in listed.stderr
    assert "fuzzball endpoint list --workflow ID" in listed.stderr
    assert [e["name"] for e in json.loads(listed.stdout)] == ["own"]
    stack.orchestrate.stop_workflow(workflow_id)


# -- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "Has Spaces"}, "name: endpoint names use lowercase letters, digits"),
        ({"name": "ok", "scope": "everyone"}, "scope: must be one of user, group"),
        ({"name": "ok", "strategy": "later"}, "strategy: must be one of start, ready"),
        ({"name": "ok", "colour": "red"}, "colour: unknown field"),
        ({"scope": "user"}, "name: required"),
    ],
)
def test_a_bad_endpoint_is_refused_naming_the_field(
    stack: ApiStack, owner: str, body: dict, message: str
) -> None:
    answer = stack.call(owner, "POST", "/endpoints", body)

    assert answer.status_code == 400
    assert answer.json()["message"].startswith(message)


def test_a_workflow_claiming_an_endpoint_nobody_reserved_is_refused(
    stack: ApiStack, owner: str
) -> None:
    with pytest.raises(FailedPrecondition) as refused:
        stack.start(owner, served("never-made"))

    assert str(refused.value).startswith(
        "services.web.network.endpoints[0].persistent: no persistent endpoint never-made"
    )


def test_an_endpoint_of_another_protocol_than_http_is_refused(stack: ApiStack, owner: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        stack.start(owner, served("grpc-one", extra="protocol: grpc"))

    assert str(refused.value) == (
        "services.web.network.endpoints[0].protocol: endpoints speak http or https here, not grpc"
    )


def test_an_endpoint_a_running_workflow_serves_is_not_deleted(stack: ApiStack, owner: str) -> None:
    assert stack.call(owner, "POST", "/endpoints", {"name": "busy"}).status_code == 200
    workflow_id = stack.start(owner, served("busy"))

    answer = stack.call(owner, "DELETE", "/endpoints/busy")

    assert answer.status_code == 400
    assert answer.json()["message"] == (
        f"endpoint busy is served by workflow {workflow_id}; stop it first"
    )
    stack.orchestrate.stop_workflow(workflow_id)
    assert stack.call(owner, "DELETE", "/endpoints/busy").status_code == 200


def test_another_account_neither_sees_nor_claims_the_endpoint(stack: ApiStack, owner: str) -> None:
    created = stack.call(owner, "POST", "/endpoints", {"name": "mine-only"}).json()
    member = stack.tenants.acme_member.token

    listed = stack.call(member, "GET", "/endpoints").json()["endpoints"]
    with pytest.raises(FailedPrecondition):
        stack.start(member, served("mine-only"))

    assert created["id"] not in [e["id"] for e in listed]


def test_a_pool_is_accepted_while_no_node_says_what_capacity_there_is(
    stack: ApiStack, owner: str
) -> None:
    specification = """
version: v1
services:
  big:
    image: {uri: docker://alpine:latest}
    command: [busybox, sleep, "60"]
    resource: {cpu: {cores: 512}, memory: {size: 4TiB}}
    network:
      ports: [{name: http, port: 8080}]
      endpoints: [{name: big, port-name: http}]
    scale: {min: 0, max: 4}
"""

    answer = stack.call(owner, "POST", "/workflows", {"rawSpecification": specification})

    assert answer.status_code == 200, answer.text
    assert answer.json()["warnings"] == [
        "services.big.scale.max: above 1 has no effect here; a service runs one instance"
        " (or none, with min 0)"
    ]
    stack.orchestrate.stop_workflow(answer.json()["id"])


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/endpoints/%00nul", 404),
        ("/endpoints/" + "x" * 300, 404),
        ("/endpoints/%E2%80%AEbidi", 404),
        ("/endpoints?workflowId=%00", 400),
    ],
)
def test_a_hostile_reference_is_answered_with_a_status_not_looked_up(
    stack: ApiStack, owner: str, path: str, status: int
) -> None:
    answer = httpx.get(
        f"{stack.url}/v3{path}", headers={"Authorization": f"Bearer {owner}"}, timeout=30
    )

    assert answer.status_code == status
    assert set(answer.json()) == {"code", "message", "details"}


def test_the_openapi_document_describes_the_endpoint_routes(stack: ApiStack, owner: str) -> None:
    document = httpx.get(
        f"{stack.url}/v3/openapi.json", headers={"Authorization": f"Bearer {owner}"}, timeout=30
    ).json()

    listing = document["paths"]["/v3/endpoints"]
    by_reference = document["paths"]["/v3/endpoints/{ref}"]
    assert set(listing) == {"get", "post"}
    assert set(by_reference) == {"get", "delete"}
    assert "requestBody" in listing["post"]
    for path in ("/v3/endpoints", "/v3/endpoints/{ref}"):
        assert "not described" not in str(document["paths"][path]).lower()
