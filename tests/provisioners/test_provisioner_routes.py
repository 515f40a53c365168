"""The provisioner routes (orchestrate/provisioner_routes.py) through Orchestrate's REST
gateway, over an on-prem inventory whose power commands record what they were asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from support.cluster import InProcessOrchestrate, free_port
from support.openapi_routes import check_reply, openapi_of, undescribed

from fuzzball_core.cli.main import cli


class Served:
    """Orchestrate with one ``onprem`` definition of two machines, an admin and a user."""

    def __init__(self, directory: Path) -> None:
        rest = f"127.0.0.1:{free_port()}"
        self.powered = directory / "powered.log"
        record = f"sh -c 'echo {{0}} {{host}} >> {self.powered}'"
        self.orchestrate = InProcessOrchestrate(
            {
                "data-dir": str(directory / "data"),
                "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": rest,
                    "node-token": "routes-node-token",
                },
                "tls": {"plaintext": True},
                "provisioner": {
                    "definitions": [
                        {
                            "id": "rack",
                            "driver": "onprem",
                            "cores": 8,
                            "memory": "16GiB",
                            "max-nodes": 2,
                            "cost-per-hour-estimate": 0.5,
                            "annotations": {"site": "basement"},
                            "config": {
                                "state-dir": str(directory / "onprem"),
                                "inventory": [
                                    {
                                        "host": f"rack-{n}",
                                        "power-on": record.replace("{0}", "on"),
                                        "power-off": record.replace("{0}", "off"),
                                    }
                                    for n in (1, 2)
                                ],
                            },
                        }
                    ]
                },
            }
        )
        self.url = f"http://{rest}/v3"
        service = self.orchestrate.service
        self.admin = self.orchestrate.call(lambda: service.create_account("ops", admin=True))[1]
        self.user = self.orchestrate.call(lambda: service.create_account("someone"))[1]

    def call(self, token: str, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(
            method,
            self.url + path,
            headers={"Authorization": f"Bearer {token}"},
            json=body,
            timeout=30,
        )

    def powered_lines(self) -> list[str]:
        return self.powered.read_text().splitlines() if self.powered.exists() else []


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    running = Served(tmp_path)
    yield running
    running.orchestrate.close()


def test_users_read_the_definitions_shape_and_cost(served):
    reply = served.call(served.user, "GET", "/provisioner/definitions/rack")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["backendId"] == "onprem"
    assert body["resource"]["total"]["cpu"] == {"cores": 8}
    assert body["resource"]["annotations"] == {"site": "basement"}
    assert body["costPerHourEstimate"] == 0.5


def test_users_may_not_create_instances(served):
    body = {"definitionId": "rack"}
    reply = served.call(served.user, "POST", "/admin/provisioner/instances", body)
    assert reply.status_code == 403
    assert "provision_nodes" in reply.json()["message"]


def test_an_admin_creates_instances_that_power_machines_on(served):
    reply = served.call(
        served.admin,
        "POST",
        "/admin/provisioner/instances",
        {"definitionId": "rack", "count": 2, "annotations": {"team": "ml"}},
    )
    assert reply.status_code == 200, reply.text
    assert len(reply.json()["ids"]) == 2
    assert sorted(served.powered_lines()) == ["on rack-1", "on rack-2"]
    listed = served.call(served.admin, "GET", "/admin/provisioner/instances").json()["instances"]
    assert {i["state"] for i in listed} == {"ADMIN_PROVISIONER_INSTANCE_STATE_CREATING"}
    assert all(i["annotations"] == {"team": "ml"} for i in listed)


def test_deleting_an_instance_powers_its_machine_off_once(served):
    created = served.call(
        served.admin, "POST", "/admin/provisioner/instances", {"definitionId": "rack"}
    )
    (instance,) = created.json()["ids"]
    for _ in range(2):
        reply = served.call(served.admin, "DELETE", f"/admin/provisioner/instances/{instance}")
        assert reply.status_code == 200, reply.text
    assert served.powered_lines() == ["on rack-1", "off rack-1"]
    got = served.call(served.admin, "GET", f"/admin/provisioner/instances/{instance}").json()
    assert got["state"] == "ADMIN_PROVISIONER_INSTANCE_STATE_DELETED"
    assert "deleteTime" in got


def test_more_instances_than_max_nodes_are_refused_naming_the_bound(served):
    reply = served.call(
        served.admin, "POST", "/admin/provisioner/instances", {"definitionId": "rack", "count": 3}
    )
    assert reply.status_code == 400
    assert "max-nodes 2 of rack" in reply.json()["message"]
    assert served.powered_lines() == []


def test_why_an_instance_was_not_created_is_readable_in_the_instance(served, tmp_path):
    (tmp_path / "onprem").mkdir()
    for host in ("rack-1", "rack-2"):  # both machines held by instances of another Orchestrate
        (tmp_path / "onprem" / f"{host}.json").write_text('{"name": "elsewhere"}')
    created = served.call(
        served.admin, "POST", "/admin/provisioner/instances", {"definitionId": "rack"}
    )
    (instance,) = created.json()["ids"]
    got = served.call(served.admin, "GET", f"/admin/provisioner/instances/{instance}").json()
    assert got["state"] == "ADMIN_PROVISIONER_INSTANCE_STATE_ERROR"
    assert got["detail"] == "onprem: every machine of rack is in use (2 in its inventory)"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"definitionId": "rack", "zone": "a"}, "zone: not a field"),
        ({"definitionId": "rack", "backendDirectives": {"spot": "1"}}, "spot not understood"),
        ({"definitionId": "rack", "count": 0}, "count:"),
        ({"definitionId": "rack", "annotations": {"a": 1}}, "annotations:"),
        ({"definitionId": "rack", "annotations": []}, "annotations: expected an object"),
        ({"definitionId": "rack", "backendDirectives": ""}, "backendDirectives: expected"),
        ({}, "definitionId: required"),
    ],
)
def test_a_bad_create_request_is_refused_naming_what_is_wrong(served, body, named):
    reply = served.call(served.admin, "POST", "/admin/provisioner/instances", body)
    assert reply.status_code == 400
    assert named in reply.json()["message"]


def test_an_unknown_definition_is_404(served):
    reply = served.call(
        served.admin, "POST", "/admin/provisioner/instances", {"definitionId": "nope"}
    )
    assert reply.status_code == 404


def test_reset_resource_is_refused_saying_the_shape_is_configured(served):
    reply = served.call(served.admin, "POST", "/admin/provisioner/definitions/rack/reset-resource")
    assert reply.status_code == 400
    assert "configured in provisioner.definitions" in reply.json()["message"]


# -- the OpenAPI document ----------------------------------------------------------------------

DEFINITIONS = "/v3/provisioner/definitions"
ADMIN_DEFINITIONS = "/v3/admin/provisioner/definitions"
INSTANCES = "/v3/admin/provisioner/instances"
PROVISIONER_OPERATIONS = {
    f"GET {DEFINITIONS}",
    f"GET {DEFINITIONS}/{{id}}",
    f"GET {ADMIN_DEFINITIONS}",
    f"GET {ADMIN_DEFINITIONS}/{{id}}",
    f"POST {ADMIN_DEFINITIONS}/{{id}}/reset-resource",
    f"GET {INSTANCES}",
    f"POST {INSTANCES}",
    f"GET {INSTANCES}/{{id}}",
    f"DELETE {INSTANCES}/{{id}}",
}


def test_the_openapi_document_describes_every_provisioner_route(served):
    document = openapi_of(served.url, served.admin)
    assert undescribed(document, PROVISIONER_OPERATIONS) == set()


def test_the_definitions_are_read_as_the_openapi_document_says(served):
    document = openapi_of(served.url, served.admin)
    for operation, path in (
        (f"GET {DEFINITIONS}", "/provisioner/definitions"),
        (f"GET {DEFINITIONS}/{{id}}", "/provisioner/definitions/rack"),
        (f"GET {ADMIN_DEFINITIONS}", "/admin/provisioner/definitions"),
        (f"GET {ADMIN_DEFINITIONS}/{{id}}", "/admin/provisioner/definitions/rack"),
    ):
        check_reply(document, operation, served.call(served.admin, "GET", path))


def test_instances_are_created_read_and_deleted_as_the_openapi_document_says(served):
    document = openapi_of(served.url, served.admin)
    body = {"definitionId": "rack", "count": "1", "ttl": 3600, "annotations": {"team": "ml"}}
    created = served.call(served.admin, "POST", "/admin/provisioner/instances", body)
    check_reply(document, f"POST {INSTANCES}", created)
    path = f"/admin/provisioner/instances/{created.json()['ids'][0]}"
    check_reply(document, f"GET {INSTANCES}/{{id}}", served.call(served.admin, "GET", path))
    check_reply(document, f"DELETE {INSTANCES}/{{id}}", served.call(served.admin, "DELETE", path))
    listed = served.call(served.admin, "GET", "/admin/provisioner/instances")
    check_reply(document, f"GET {INSTANCES}", listed)


# -- fuzzball admin provisioner ----------------------------------------------------------------


def fuzzball(served: Served, home: Path, *args: str) -> str:
    """``fuzzball ARGS`` as the admin; the output of a command that has to succeed."""
    env = {"XDG_CONFIG_HOME": str(home)}
    runner = CliRunner()
    if not (home / "fuzzball").exists():
        address = served.url.removesuffix("/v3")
        created = runner.invoke(
            cli, ["context", "create", "t", "--address", address, "--token", served.admin], env=env
        )
        assert created.exit_code == 0, created.output
    result = runner.invoke(cli, list(args), env=env)
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.output


def test_the_cli_lists_definitions(served, tmp_path):
    listed = fuzzball(served, tmp_path / "home", "admin", "provisioner", "definition", "list")
    assert "rack" in listed
    assert "onprem" in listed


def test_the_cli_creates_lists_and_deletes_instances(served, tmp_path):
    home = tmp_path / "home"
    created = fuzzball(
        served, home, "admin", "provisioner", "instance", "create", "rack", "--annotation", "a=b"
    )
    instance_id = created.split()[-1]
    assert "CREATING" in fuzzball(served, home, "admin", "provisioner", "instance", "list")
    fuzzball(served, home, "admin", "provisioner", "instance", "delete", instance_id)
    shown = fuzzball(served, home, "admin", "provisioner", "instance", "show", instance_id)
    assert "DELETED" in shown
