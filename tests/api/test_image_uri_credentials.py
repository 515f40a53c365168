"""An image URI with credentials (``docker://user:pass@registry/...``) is refused when the file
is validated, naming the field, and the password appears in no answer, stored row, event or
log line.

Before, such a URI passed ``validate``, was stored with the workflow, and submitting it echoed
the password back.
"""

from __future__ import annotations

import logging

import grpc
import pytest
from click.testing import CliRunner
from support.live_api import HELLO
from support.sql_stack import ADMIN
from test_grpc_client_api import auth, channel, workflows  # noqa: F401 (fixture)
from test_rest_gateway import assert_status_body, call

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.cli.main import cli
from fuzzball_core.spec.references import has_credentials

PASSWORD = "s3cret-Pw-417"
WITH_CREDENTIALS = HELLO.replace(
    "docker://alpine:latest", f"docker://alice:{PASSWORD}@registry.example:5000/alpine:latest"
)
FIELD = "jobs.hello.image.uri"


@pytest.fixture(autouse=True)
def every_log_line(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


def assert_never_shown(text: str, caplog) -> None:
    assert PASSWORD not in text
    assert PASSWORD not in caplog.text


def test_rest_validate_refuses_it_naming_the_field(stack, caplog):
    response = call(
        stack, "POST", "/workflows:validate", json={"rawSpecification": WITH_CREDENTIALS}
    )
    body = assert_status_body(response, 400, 3)
    assert FIELD in body["message"]
    assert_never_shown(response.text, caplog)


def test_rest_submit_refuses_it_and_keeps_nothing(stack, caplog):
    response = call(stack, "POST", "/workflows", json={"rawSpecification": WITH_CREDENTIALS})
    body = assert_status_body(response, 400, 3)
    assert FIELD in body["message"]
    assert_never_shown(response.text, caplog)
    assert stack.service.list_workflows(ADMIN) == []


def test_grpc_submit_refuses_it_naming_the_field(stack, channel, caplog):  # noqa: F811
    with pytest.raises(grpc.RpcError) as refused:
        workflows(channel).StartWorkflow(
            pb.StartWorkflowRequest(raw_specification=WITH_CREDENTIALS),
            metadata=auth(stack.token),
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert FIELD in refused.value.details()
    assert_never_shown(refused.value.details(), caplog)


def test_cli_validate_refuses_it_without_printing_the_password(tmp_path, caplog):
    spec = tmp_path / "workflow.yaml"
    spec.write_text(WITH_CREDENTIALS)
    result = CliRunner().invoke(cli, ["workflow", "validate", str(spec)])
    assert result.exit_code != 0
    assert FIELD in result.output
    assert_never_shown(result.output, caplog)


@pytest.mark.parametrize(
    "uri",
    [
        "docker://alice:pw@registry.example/alpine",
        "docker://alice@registry.example/alpine",
        "oras://bob:pw@ghcr.io/org/tool:1",
    ],
)
def test_a_user_or_password_before_the_registry_is_credentials(uri):
    assert has_credentials(uri)


@pytest.mark.parametrize(
    "uri",
    [
        "docker://alpine@sha256:" + "ab" * 32,
        "docker://registry.example:5000/library/alpine@sha256:" + "0f" * 32,
        "docker://alpine:latest",
    ],
)
def test_a_digest_is_not_credentials(uri):
    assert not has_credentials(uri)
