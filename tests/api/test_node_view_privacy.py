"""Node views (list and show, over REST, gRPC and the CLI) show another account's running work
only as "in use": never its workflow id or job name. Administrators (READ_CLUSTER) see it.

Nodes are an administrator's and the node service accounts' to see (READ_NODES): a user's
node calls are refused. The monitoring service account reads nodes but no account's
workflows, so it is the caller that sees others' work as "in use". Before, every account saw
every other account's workflow ids and job names on the nodes.
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
from fuzzball_core.service.views import IN_USE, STARTED, Principal
from fuzzball_core.vocabulary import Permission


@pytest.fixture
def running(stack: Stack) -> str:
    """The first account's workflow, its job running on node-1."""
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", STARTED)
    return workflow_id


@pytest.fixture
def monitoring(stack: Stack) -> str:
    """A token of the monitoring service account: it reads nodes, not workflows."""
    return stack.service.create_account("monitoring", kind="monitoring")[1]


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


def test_rest_shows_another_accounts_running_job_only_as_in_use(stack, running, monitoring):
    response = get(stack, "/nodes/node-1", monitoring)
    assert response.json()["runningJobs"] == [{"jobName": IN_USE, "workflowId": ""}]
    assert running not in response.text and "hello" not in response.text


def test_rest_shows_an_administrator_every_accounts_running_job(stack, running):
    _, admin = stack.service.create_account("root", admin=True)
    response = get(stack, "/nodes/node-1", admin)
    assert response.json()["runningJobs"] == [{"jobName": "jobs.hello", "workflowId": running}]


def test_rest_node_list_counts_another_accounts_work_without_naming_it(stack, running, monitoring):
    response = get(stack, "/nodes", monitoring)
    (node,) = response.json()["nodes"]
    assert node["runningJobs"] == 1
    assert running not in response.text


def test_the_owner_of_the_running_job_who_may_read_nodes_sees_it_named(stack, running):
    owner = stack.who
    reader = Principal(
        owner.account_id,
        owner.name,
        permissions=frozenset({Permission.RUN_WORKFLOWS, Permission.READ_NODES}),
    )
    assert stack.service.get_node(reader, "node-1").stages == (f"{running}/jobs.hello",)


def test_a_user_is_refused_the_node_views_the_job_runs_on(stack, running):
    assert get(stack, "/nodes/node-1").status_code == 403
    assert get(stack, "/nodes").status_code == 403


def test_grpc_shows_another_accounts_running_job_only_as_in_use(stack, running, nodes, monitoring):
    node = nodes.GetNode(pb.GetNodeRequest(id="node-1"), metadata=auth(monitoring))
    assert list(node.running_jobs) == [pb.RunningJob(job_name=IN_USE)]


def test_grpc_shows_an_administrator_the_running_job(stack, running, nodes):
    _, admin = stack.service.create_account("root", admin=True)
    node = nodes.GetNode(pb.GetNodeRequest(id="node-1"), metadata=auth(admin))
    assert list(node.running_jobs) == [pb.RunningJob(job_name="jobs.hello", workflow_id=running)]


def test_node_show_prints_another_accounts_job_as_in_use(stack, running, tmp_path, monitoring):
    output = fuzzball_as(stack, monitoring, tmp_path, "node", "show", "node-1")
    assert [line.split() for line in output.splitlines()[-1:]] == [["-", "|", "in", "use"]]
    assert running not in output and "hello" not in output


def test_node_show_prints_an_administrator_the_job(stack, running, tmp_path):
    _, admin = stack.service.create_account("root", admin=True)
    output = fuzzball_as(stack, admin, tmp_path, "node", "show", "node-1")
    assert running in output and "jobs.hello" in output
