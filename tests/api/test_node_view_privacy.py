"""Node views (list and show, over REST, gRPC and the CLI) show another account's running work
only as "in use": never its workflow id or job name. The owner, and administrators, see it.

Before, every account saw every other account's workflow ids and job names on the nodes.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from click.testing import CliRunner
from support.live_api import Stack
from test_grpc_client_api import auth
from test_rest_gateway import get

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.cli.main import cli
from fuzzball_core.service.views import IN_USE, STARTED


@pytest.fixture
def running(stack: Stack) -> str:
    """The first account's workflow, its job running on node-1."""
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", STARTED)
    return workflow_id


@pytest.fixture
def nodes(stack: Stack) -> Iterator[pb_grpc.NodeServiceStub]:
    with grpc.insecure_channel(stack.servers.grpc_target) as channel:
        yield pb_grpc.NodeServiceStub(channel)


def fuzzball_as(stack: Stack, token: str, tmp_path, *args: str) -> str:
    """``fuzzball ARGS`` with a context of ``token`` on the live server; its output."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / token[:8])}
    runner = CliRunner()
    created = runner.invoke(
        cli,
        ["context", "create", "lab", "--address", stack.servers.rest_url, "--token", token],
        env=env,
    )
    assert created.exit_code == 0, created.output
    result = runner.invoke(cli, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_rest_shows_another_accounts_running_job_only_as_in_use(stack, running):
    response = get(stack, "/nodes/node-1", stack.other_token)
    assert response.json()["runningJobs"] == [{"jobName": IN_USE, "workflowId": ""}]
    assert running not in response.text and "hello" not in response.text


def test_rest_shows_the_owner_its_running_job(stack, running):
    response = get(stack, "/nodes/node-1")
    assert response.json()["runningJobs"] == [{"jobName": "jobs.hello", "workflowId": running}]


def test_rest_shows_an_administrator_every_accounts_running_job(stack, running):
    _, admin = stack.service.create_account("root", admin=True)
    response = get(stack, "/nodes/node-1", admin)
    assert response.json()["runningJobs"] == [{"jobName": "jobs.hello", "workflowId": running}]


def test_rest_node_list_counts_another_accounts_work_without_naming_it(stack, running):
    response = get(stack, "/nodes", stack.other_token)
    (node,) = response.json()["nodes"]
    assert node["runningJobs"] == 1
    assert running not in response.text


def test_grpc_shows_another_accounts_running_job_only_as_in_use(stack, running, nodes):
    node = nodes.GetNode(pb.GetNodeRequest(id="node-1"), metadata=auth(stack.other_token))
    assert list(node.running_jobs) == [pb.RunningJob(job_name=IN_USE)]


def test_grpc_shows_the_owner_its_running_job(stack, running, nodes):
    node = nodes.GetNode(pb.GetNodeRequest(id="node-1"), metadata=auth(stack.token))
    assert list(node.running_jobs) == [pb.RunningJob(job_name="jobs.hello", workflow_id=running)]


def test_node_show_prints_another_accounts_job_as_in_use(stack, running, tmp_path):
    output = fuzzball_as(stack, stack.other_token, tmp_path, "node", "show", "node-1")
    assert [line.split() for line in output.splitlines()[-1:]] == [["-", "|", "in", "use"]]
    assert running not in output and "hello" not in output


def test_node_show_prints_the_owner_its_job(stack, running, tmp_path):
    output = fuzzball_as(stack, stack.token, tmp_path, "node", "show", "node-1")
    assert running in output and "jobs.hello" in output
