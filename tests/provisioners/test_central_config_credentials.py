"""Credentials in the central configuration (``/admin/centralconfig``): the settings a driver
reads as secrets (aws ``secret-access-key``, oci ``key-content``...) are sealed at rest, shown
as ``<redacted>`` by every read (the newest revision, an earlier one, ``fuzzball admin config
get``), and a document sent back as read keeps the stored values. Revisions stored in the
clear before are sealed when Orchestrate starts."""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner
from support.cluster import InProcessOrchestrate, free_port

from fuzzball_core.cli.main import cli
from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.orchestrate.central_config import CentralConfig
from fuzzball_core.orchestrate.central_config_secrets import REDACTED
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.models import CentralConfigRevision
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_provisioners.aws import AwsProvisioner

ACCESS_KEY_ID = "AKIACENTRALTESTKEY01"
SECRET_ACCESS_KEY = "central-secret-access-key-never-shown"
ROTATED_SECRET = "central-rotated-secret-access-key"

DOCUMENT = f"""\
# spot capacity for the night shift
provisioner:
  definitions:
    - id: extra
      driver: aws
      cores: 4
      memory: 8GiB
      config:
        region: us-east-1
        endpoint-url: http://127.0.0.1:9
        access-key-id: {ACCESS_KEY_ID}
        secret-access-key: "{SECRET_ACCESS_KEY}"  # rotated monthly
        instance-type: m5.xlarge
        image: ami-12345678
"""


class Served:
    """Orchestrate with no definition in its file, and an administrator's token."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.database = directory / "orchestrate.db"
        rest = f"127.0.0.1:{free_port()}"
        self.orchestrate = InProcessOrchestrate(
            {
                "data-dir": str(directory / "data"),
                "database": {"url": f"sqlite:///{self.database}"},
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": rest,
                    "node-token": "central-credentials-node-token",
                },
                "tls": {"plaintext": True},
            }
        )
        self.address = f"http://{rest}"
        service = self.orchestrate.service
        self.admin = self.orchestrate.call(lambda: service.create_account("ops", admin=True))[1]

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.address}/v3{path}",
            headers={"Authorization": f"Bearer {self.admin}"},
            json=body,
            timeout=30,
        )

    def set_config(self, text: str) -> httpx.Response:
        encoded = base64.b64encode(text.encode()).decode()
        return self.call("POST", "/admin/centralconfig", {"config": encoded})

    def get_config(self, revision: int = 0) -> str:
        query = f"?revision={revision}" if revision else ""
        answer = self.call("GET", f"/admin/centralconfig{query}")
        assert answer.status_code == 200, answer.text
        return base64.b64decode(answer.json()["config"]).decode()

    def in_force(self, definition_id: str) -> dict[str, Any]:
        """The driver settings the provisioning loop holds for a definition."""
        provisioning = self.orchestrate.orchestrate.engine.context.provisioning
        return dict(provisioning.definitions[definition_id].config)

    def close(self) -> None:
        self.orchestrate.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    running = Served(tmp_path)
    try:
        yield running
    finally:
        running.close()


def stored_columns(database: Path) -> list[str]:
    """Every value of every column of the revisions table, as the database file holds it."""
    with sqlite3.connect(database) as connection:
        rows = connection.execute("select * from central_config_revisions").fetchall()
    return [str(value) for row in rows for value in row]


def test_a_read_shows_the_credentials_redacted_and_the_rest_as_set(served):
    assert served.set_config(DOCUMENT).status_code == 200

    shown = served.get_config()

    assert SECRET_ACCESS_KEY not in shown
    assert ACCESS_KEY_ID not in shown
    assert shown == DOCUMENT.replace(ACCESS_KEY_ID, REDACTED).replace(
        f'"{SECRET_ACCESS_KEY}"', REDACTED
    )


def test_an_earlier_revision_shows_its_credentials_redacted(served):
    served.set_config(DOCUMENT)
    served.set_config(DOCUMENT.replace(SECRET_ACCESS_KEY, ROTATED_SECRET))

    first = served.get_config(revision=1)

    assert SECRET_ACCESS_KEY not in first
    config = yaml.safe_load(first)["provisioner"]["definitions"][0]["config"]
    assert config["secret-access-key"] == REDACTED


def test_the_database_holds_no_credential_in_the_clear(served):
    served.set_config(DOCUMENT)
    served.set_config(DOCUMENT.replace(SECRET_ACCESS_KEY, ROTATED_SECRET))

    columns = " ".join(stored_columns(served.database))

    for credential in (ACCESS_KEY_ID, SECRET_ACCESS_KEY, ROTATED_SECRET):
        assert credential not in columns


def test_a_document_sent_back_as_read_keeps_the_stored_credentials(served):
    served.set_config(DOCUMENT)
    edited = served.get_config().replace("m5.xlarge", "m5.2xlarge")

    assert served.set_config(edited).status_code == 200

    in_force = served.in_force("extra")
    assert in_force["instance-type"] == "m5.2xlarge"
    assert in_force["secret-access-key"] == SECRET_ACCESS_KEY
    assert in_force["access-key-id"] == ACCESS_KEY_ID
    assert served.get_config() == edited


def test_a_redacted_credential_the_newest_revision_does_not_hold_is_refused_naming_it(served):
    served.set_config(DOCUMENT)
    renamed = served.get_config().replace("id: extra", "id: other")

    answer = served.set_config(renamed)

    assert answer.status_code == 400
    message = answer.json()["message"]
    assert "provisioner.definitions[other].config.access-key-id" in message
    assert "provisioner.definitions[other].config.secret-access-key" in message
    assert "the newest revision holds none there" in message
    listed = served.call("GET", "/admin/centralconfig/revisions").json()["revisions"]
    assert [r["revision"] for r in listed] == ["1"]


def test_admin_config_get_prints_the_credentials_redacted(served):
    served.set_config(DOCUMENT)
    env = {"XDG_CONFIG_HOME": str(served.directory / "home")}
    runner = CliRunner()
    created = runner.invoke(
        cli,
        ["context", "create", "t", "--address", served.address, "--token", served.admin],
        env=env,
    )
    assert created.exit_code == 0, created.output

    for output in ("yaml", "json"):
        shown = runner.invoke(cli, ["admin", "config", "get", "-o", output], env=env)
        assert shown.exit_code == 0, shown.output
        assert SECRET_ACCESS_KEY not in shown.output
        assert REDACTED in shown.output


def test_a_revision_stored_in_the_clear_before_is_sealed_when_orchestrate_starts(tmp_path):
    database = connect(f"sqlite:///{tmp_path / 'orchestrate.db'}")
    migrate(database)
    with session_factory(database)() as session, session.begin():
        # as a revision set before 0022 is stored: the document as set, nothing sealed
        session.add(CentralConfigRevision(revision=1, document=DOCUMENT, created_at=0.0))
    database.dispose()

    served = Served(tmp_path)
    try:
        shown = served.get_config()
        in_force = served.in_force("extra")
    finally:
        served.close()

    assert SECRET_ACCESS_KEY not in shown
    assert REDACTED in shown
    assert in_force["secret-access-key"] == SECRET_ACCESS_KEY
    assert SECRET_ACCESS_KEY not in " ".join(stored_columns(tmp_path / "orchestrate.db"))


def test_rotating_the_secret_key_keeps_the_central_credentials_readable(tmp_path):
    first = Served(tmp_path)
    try:
        first.set_config(DOCUMENT)
    finally:
        first.close()
    sessions = session_factory(connect(f"sqlite:///{tmp_path / 'orchestrate.db'}"))
    box = SecretBox(tmp_path / "data")
    before = stored_columns(tmp_path / "orchestrate.db")

    box.rotate(sessions)

    assert stored_columns(tmp_path / "orchestrate.db") != before
    # a restarted Orchestrate applies the newest revision: it opens with the new key alone
    provisioning = Provisioning(ProvisionerConfig(), {}, node_address="x:1")
    CentralConfig(sessions, provisioning, lambda name: AwsProvisioner(), box=box).apply_latest()
    assert provisioning.definitions["extra"].config["secret-access-key"] == SECRET_ACCESS_KEY
