"""Provisioner definitions through the central configuration (``/admin/centralconfig``),
through Orchestrate's REST gateway: revisions are kept, a definition added there is usable
at once beside the file's, and what the document may not hold is refused naming it."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from support.cluster import InProcessOrchestrate, free_port
from support.openapi_routes import check_reply, openapi_of, undescribed

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.orchestrate.central_config import CentralConfig
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.scheduling import JobRequest, Resources
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_provisioners.onprem import OnPremProvisioner


def onprem(directory: Path, definition_id: str, host: str) -> dict[str, Any]:
    """An onprem definition of one machine whose power commands record what they did."""
    record = f"sh -c 'echo {{0}} {{host}} >> {directory / 'powered.log'}'"
    return {
        "id": definition_id,
        "driver": "onprem",
        "cores": 8,
        "memory": "16GiB",
        "config": {
            "state-dir": str(directory / f"onprem-{definition_id}"),
            "inventory": [
                {
                    "host": host,
                    "power-on": record.replace("{0}", "on"),
                    "power-off": record.replace("{0}", "off"),
                }
            ],
        },
    }


class Served:
    """Orchestrate with one file definition (``rack``), an admin and a user."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        rest = f"127.0.0.1:{free_port()}"
        self.orchestrate = InProcessOrchestrate(
            {
                "data-dir": str(directory / "data"),
                "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": rest,
                    "node-token": "central-node-token",
                },
                "tls": {"plaintext": True},
                "provisioner": {"definitions": [onprem(directory, "rack", "rack-1")]},
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

    def set_config(self, document: dict[str, Any], token: str = "") -> httpx.Response:
        encoded = base64.b64encode(yaml.safe_dump(document).encode()).decode()
        return self.call(token or self.admin, "POST", "/admin/centralconfig", {"config": encoded})

    def definitions(self, *central: str) -> dict[str, Any]:
        return {
            "provisioner": {
                "definitions": [onprem(self.directory, name, f"{name}-1") for name in central]
            }
        }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    running = Served(tmp_path)
    try:
        yield running
    finally:
        running.orchestrate.close()


def definition_ids(served: Served) -> list[str]:
    answer = served.call(served.admin, "GET", "/admin/provisioner/definitions")
    assert answer.status_code == 200, answer.text
    return sorted(d["id"] for d in answer.json()["definitions"])


def test_a_definition_posted_to_the_central_configuration_is_listed_beside_the_files(served):
    assert served.set_config(served.definitions("extra")).status_code == 200
    assert definition_ids(served) == ["extra", "rack"]


def test_a_central_definition_takes_instances_without_a_restart(served):
    served.set_config(served.definitions("extra"))
    created = served.call(
        served.admin, "POST", "/admin/provisioner/instances", {"definitionId": "extra"}
    )
    assert created.status_code == 200, created.text
    assert len(created.json()["ids"]) == 1


def test_appending_keeps_the_earlier_central_definitions(served):
    served.set_config(served.definitions("extra"))
    served.set_config(served.definitions("extra", "more"))
    assert definition_ids(served) == ["extra", "more", "rack"]


def test_a_definition_id_the_file_has_is_refused_naming_it(served):
    answer = served.set_config(served.definitions("rack"))
    assert answer.status_code == 400
    assert "rack: already defined in the configuration file" in answer.json()["message"]
    assert served.call(served.admin, "GET", "/admin/centralconfig/revisions").json() == {
        "revisions": []
    }


def test_a_section_the_central_configuration_does_not_hold_is_refused_naming_it(served):
    answer = served.set_config({"orchestrate": {"rest-listen": "0.0.0.0:1"}})
    assert answer.status_code == 400
    assert "config: orchestrate: not held by the central configuration" in answer.json()["message"]


def test_a_bad_definition_value_is_refused_naming_the_key(served):
    document = served.definitions("extra")
    document["provisioner"]["definitions"][0]["cores"] = "many"
    answer = served.set_config(document)
    assert answer.status_code == 400
    assert "cores" in answer.json()["message"]


def test_every_revision_is_kept_and_readable(served):
    served.set_config(served.definitions("extra"))
    served.set_config(served.definitions("extra", "more"))
    listed = served.call(served.admin, "GET", "/admin/centralconfig/revisions").json()
    assert [r["revision"] for r in listed["revisions"]] == ["1", "2"]
    first = served.call(served.admin, "GET", "/admin/centralconfig?revision=1").json()
    assert yaml.safe_load(base64.b64decode(first["config"])) == served.definitions("extra")
    latest = served.call(served.admin, "GET", "/admin/centralconfig").json()
    assert yaml.safe_load(base64.b64decode(latest["config"])) == served.definitions("extra", "more")


CENTRAL_CONFIG = "/v3/admin/centralconfig"
CENTRAL_CONFIG_OPERATIONS = {
    f"GET {CENTRAL_CONFIG}",
    f"POST {CENTRAL_CONFIG}",
    f"GET {CENTRAL_CONFIG}/revisions",
}


def test_the_openapi_document_describes_every_central_configuration_route(served):
    document = openapi_of(served.url, served.admin)
    assert undescribed(document, CENTRAL_CONFIG_OPERATIONS) == set()


def test_the_central_configuration_is_set_and_read_as_the_openapi_document_says(served):
    document = openapi_of(served.url, served.admin)
    check_reply(document, f"POST {CENTRAL_CONFIG}", served.set_config(served.definitions("extra")))
    for operation, path in (
        (f"GET {CENTRAL_CONFIG}", "/admin/centralconfig?revision=1"),
        (f"GET {CENTRAL_CONFIG}/revisions", "/admin/centralconfig/revisions"),
    ):
        check_reply(document, operation, served.call(served.admin, "GET", path))


def test_an_unknown_revision_is_not_found(served):
    answer = served.call(served.admin, "GET", "/admin/centralconfig?revision=7")
    assert answer.status_code == 404


def test_a_user_may_not_set_the_central_configuration(served):
    answer = served.set_config(served.definitions("extra"), token=served.user)
    assert answer.status_code == 403
    assert definition_ids(served) == ["rack"]


def test_a_user_may_not_read_the_central_configuration(served):
    assert served.call(served.user, "GET", "/admin/centralconfig").status_code == 403
    assert served.call(served.user, "GET", "/admin/centralconfig/revisions").status_code == 403


def test_central_definitions_are_in_force_again_after_a_restart(tmp_path):
    first = Served(tmp_path)
    try:
        first.set_config(first.definitions("extra"))
    finally:
        first.orchestrate.close()
    # a restarted Orchestrate builds its loop from the file, then applies the newest revision
    file_only = ProvisionerConfig.model_validate(
        {"definitions": [onprem(tmp_path, "rack", "rack-1")]}
    )
    provisioning = Provisioning(file_only, {"onprem": OnPremProvisioner()}, node_address="x:1")
    sessions = session_factory(connect(f"sqlite:///{tmp_path / 'orchestrate.db'}"))
    box = SecretBox(tmp_path / "data")
    CentralConfig(sessions, provisioning, lambda name: OnPremProvisioner(), box=box).apply_latest()
    assert sorted(provisioning.definitions) == ["extra", "rack"]


def test_dropping_a_central_definition_that_has_instances_is_refused_naming_it(served):
    served.set_config(served.definitions("extra"))
    served.call(served.admin, "POST", "/admin/provisioner/instances", {"definitionId": "extra"})
    answer = served.set_config(served.definitions())
    assert answer.status_code == 400
    assert "extra: still has instances" in answer.json()["message"]
    assert definition_ids(served) == ["extra", "rack"]


def test_without_a_provisioning_loop_central_definitions_are_refused_saying_why(tmp_path):
    database = connect(f"sqlite:///{tmp_path / 'orchestrate.db'}")
    migrate(database)
    central = CentralConfig(session_factory(database), None, None, box=SecretBox(tmp_path / "data"))
    document = yaml.safe_dump({"provisioner": {"definitions": [onprem(tmp_path, "x", "x-1")]}})
    with pytest.raises(FailedPrecondition, match="runs no provisioning loop"):
        central.set(document)
    assert central.revisions() == []


def test_scale_up_uses_a_central_definition_for_a_job_only_it_can_hold(tmp_path):
    file_only = ProvisionerConfig.model_validate(
        {"definitions": [onprem(tmp_path, "rack", "rack-1")]}
    )
    provisioning = Provisioning(file_only, {"onprem": OnPremProvisioner()}, node_address="x:1")
    big = {**onprem(tmp_path, "big", "big-1"), "cores": 64}
    provisioning.set_central_definitions(
        ProvisionerConfig.model_validate({"definitions": [big]}).definitions, {}
    )
    created = provisioning.scale_up([JobRequest("run-1", Resources(32, 1024**3))])
    assert [record.definition_id for record in created] == ["big"]
