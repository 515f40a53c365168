"""The Federate article's scenario, as far as the loopback harness carries it.

Two real Orchestrate members ("onprem" with a GPU node, "aws" with two large CPU nodes; see
``support/federation_harness.py``) behind a Federate, driven with the ``fuzzball`` CLI as
the article shows: ``workflow start`` names the cluster it landed on, a GPU workflow lands
on-prem, ``workflow list -t 10`` has the CLUSTER column, and a workflow waiting on a member
that is killed is re-routed and finishes. The members' nodes are scripted (the harness's);
the whole scenario with real processes (an aws member provisioning through moto, a simulated
GPU) is ``test_article_scenario_e2e.py``.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support.federated_workflows import CPU, GPU
from test_failover import Clock, take_down

from fuzzball_core.cli import context_cmd
from fuzzball_core.cli.main import cli
from fuzzball_core.service.views import FINISHED
from fuzzball_federation.failover import Failover
from fuzzball_federation.models import FederatedWorkflow

context_cmd.register(cli.commands["context"])


def _fuzzball(home, *args):
    return CliRunner().invoke(cli, list(args), env={"XDG_CONFIG_HOME": str(home)})


@pytest.fixture
def user(tmp_path, federation):
    home = tmp_path / "home"
    result = _fuzzball(
        home,
        "context",
        "create",
        "fed",
        "--address",
        federation.rest_url,
        "--token",
        federation.token,
    )
    assert result.exit_code == 0, result.output
    return home


def _start(home, tmp_path, name, text) -> str:
    path = tmp_path / name
    path.write_text(text)
    result = _fuzzball(home, "workflow", "start", str(path))
    assert result.exit_code == 0, result.output
    return result.output.split('"')[1]


def _remote(federation, workflow_id) -> tuple[str, str]:
    with federation.service.sessions() as session:
        row = session.get(FederatedWorkflow, workflow_id)
        return row.cluster, row.remote_id


def test_a_gpu_workflow_lands_on_prem_and_the_list_shows_its_cluster(tmp_path, federation, user):
    gpu_id = _start(user, tmp_path, "gpu.fz", GPU)
    cpu_id = _start(user, tmp_path, "hello-world.fz", CPU)
    table = _fuzzball(user, "workflow", "list", "-t", "10").output.splitlines()
    assert [cell.strip() for cell in table[0].split("|")] == [
        "ID",
        "NAME",
        "EMAIL",
        "STATUS",
        "CLUSTER",
    ]
    rows = {
        cells[0]: cells for cells in ([c.strip() for c in line.split("|")] for line in table[1:])
    }
    assert (rows[gpu_id][1], rows[gpu_id][4]) == ("gpu.fz", "onprem")
    assert (rows[cpu_id][1], rows[cpu_id][4]) == ("hello-world.fz", "aws")


def test_a_workflow_waiting_on_a_killed_member_is_rerouted_and_finishes(tmp_path, federation, user):
    clock = Clock()
    failover = Failover(federation.service, 30.0, clock=clock)
    workflow_id = _start(user, tmp_path, "hello-world.fz", CPU)
    assert _remote(federation, workflow_id)[0] == "aws"
    failover.turn()
    take_down(federation.members["aws"])  # killed: it never answers again in this test
    failover.turn()
    clock.now += 30.0
    failover.turn()
    cluster, remote_id = _remote(federation, workflow_id)
    assert cluster == "onprem"
    federation.members["onprem"].stack.set_stage(remote_id, "jobs.main", FINISHED)
    table = _fuzzball(user, "workflow", "list", "-t", "10").output.splitlines()
    (row,) = [[c.strip() for c in line.split("|")] for line in table[1:]]
    assert row[0] == workflow_id
    assert (row[3], row[4]) == ("Finished", "onprem")


def test_a_rerouted_workflow_records_a_second_routing_decision_shown_by_why(
    tmp_path, federation, user
):
    clock = Clock()
    failover = Failover(federation.service, 30.0, clock=clock)
    workflow_id = _start(user, tmp_path, "hello-world.fz", CPU)
    failover.turn()
    take_down(federation.members["aws"])
    failover.turn()
    clock.now += 30.0
    failover.turn()
    client = federation.client()
    routed = [e for e in client.list_events(workflow_id) if e.kind == "workflow_routed"]
    assert [e.data["cluster"] for e in routed] == ["aws", "onprem"]
    why = _fuzzball(user, "workflow", "why", workflow_id).output
    assert why.count("ROUTED") == 2, why
