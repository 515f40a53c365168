"""Failover: a member that stops answering loses the work that had not started there.

The members are the harness's real Orchestrates; "stops answering" is its REST listener
closed (connections refused, as for a dead host), "comes back" the listener opened again on
the same port. Failover's turns are called directly with a clock the test moves, so the
grace period passes without waiting for it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from aiohttp import web
from support.federated_workflows import CPU

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import Unavailable
from fuzzball_core.service.views import FINISHED, STARTED
from fuzzball_core.vocabulary import EventKind, Status
from fuzzball_federation.failover import Failover
from fuzzball_federation.models import FederatedWorkflow

GRACE = 30.0


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _row(federation, workflow_id) -> FederatedWorkflow:
    with federation.service.sessions() as session:
        row = session.get(FederatedWorkflow, workflow_id)
        assert row is not None
        return row


def take_down(member) -> None:
    """Close ``member``'s REST listener: every call to it is refused."""

    async def down() -> None:
        runner = member._servers._runner
        for site in list(runner.sites):
            await site.stop()
        # connections kept alive end too, as a dead host's would
        runner.server.pre_shutdown()
        await runner.server.shutdown(1.0)

    member.loop.run(down())


def bring_back(member) -> None:
    """Open ``member``'s REST listener again on its port."""
    port = urlsplit(member.rest_url).port

    async def up() -> None:
        await web.TCPSite(member._servers._runner, "127.0.0.1", port).start()

    member.loop.run(up())


@pytest.fixture
def failover(federation):
    clock = Clock()
    return Failover(federation.service, GRACE, clock=clock), clock


def test_unstarted_work_on_an_unreachable_member_is_rerouted_after_the_grace_period(
    federation, failover
):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    assert _row(federation, workflow_id).cluster == "aws"
    watcher.turn()  # aws answers: the workflow is pending there
    take_down(federation.members["aws"])
    try:
        assert watcher.turn() == []  # unreachable from now on, within the grace period
        clock.now += GRACE
        moved = watcher.turn()
    finally:
        bring_back(federation.members["aws"])
    assert [(m.workflow_id, m.from_cluster, m.to_cluster) for m in moved] == [
        (workflow_id, "aws", "onprem")
    ]
    row = _row(federation, workflow_id)
    assert (row.cluster, row.rerouted_from) == ("onprem", "aws")
    assert "cluster aws unreachable for over 30s" in row.reroute_reason


def test_a_rerouted_workflow_keeps_its_id_and_finishes_on_the_new_member(federation, failover):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    take_down(federation.members["aws"])
    try:
        watcher.turn()
        clock.now += GRACE
        watcher.turn()
    finally:
        bring_back(federation.members["aws"])
    onprem = federation.members["onprem"].stack
    onprem.set_stage(_row(federation, workflow_id).remote_id, "jobs.main", FINISHED)
    shown = client.get_workflow(workflow_id)
    assert (shown.id, shown.status, shown.cluster_name) == (
        workflow_id,
        pb.STAGE_STATUS_FINISHED,
        "onprem",
    )


def test_a_reroute_is_an_event_of_the_workflow(federation, failover):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    take_down(federation.members["aws"])
    try:
        watcher.turn()
        clock.now += GRACE
        watcher.turn()
    finally:
        bring_back(federation.members["aws"])
    (rerouted,) = [
        e for e in client.list_events(workflow_id) if e.kind == EventKind.WORKFLOW_REROUTED
    ]
    assert rerouted.message.startswith("re-routed from cluster aws to onprem")


def test_the_copy_left_on_the_old_member_is_stopped_when_it_answers_again(federation, failover):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    old_remote = _row(federation, workflow_id).remote_id
    watcher.turn()
    aws = federation.members["aws"]
    take_down(aws)
    try:
        watcher.turn()
        clock.now += GRACE
        watcher.turn()
    finally:
        bring_back(aws)
    watcher.turn()
    assert aws.stack.get_workflow(aws.stack.authenticate(aws.token), old_remote).status == (
        Status.CANCELED
    )
    assert _row(federation, workflow_id).stale_remote_id is None


def test_a_workflow_is_rerouted_at_most_once(federation, failover):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    take_down(federation.members["aws"])
    try:
        watcher.turn()
        clock.now += GRACE
        watcher.turn()
    finally:
        bring_back(federation.members["aws"])
    assert _row(federation, workflow_id).cluster == "onprem"
    take_down(federation.members["onprem"])
    try:
        watcher.turn()
        clock.now += GRACE
        assert watcher.turn() == []
    finally:
        bring_back(federation.members["onprem"])
    assert _row(federation, workflow_id).cluster == "onprem"


def test_started_work_on_an_unreachable_member_is_not_rerouted(federation, failover):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    aws = federation.members["aws"]
    aws.stack.set_stage(_row(federation, workflow_id).remote_id, "jobs.main", STARTED)
    watcher.turn()  # aws says the job started
    take_down(aws)
    try:
        watcher.turn()
        clock.now += GRACE
        assert watcher.turn() == []
    finally:
        bring_back(aws)
    assert _row(federation, workflow_id).cluster == "aws"


def test_running_work_on_an_unreachable_member_shows_unknown_with_the_reason(federation, failover):
    watcher, _ = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    aws = federation.members["aws"]
    aws.stack.set_stage(_row(federation, workflow_id).remote_id, "jobs.main", STARTED)
    watcher.turn()
    take_down(aws)
    try:
        shown = client.get_workflow(workflow_id)
        listed = {w.id: w for w in client.list_workflows()}[workflow_id]
    finally:
        bring_back(aws)
    assert shown.status == pb.STAGE_STATUS_UNKNOWN
    assert shown.status_reason.startswith("cluster aws does not answer")
    assert "its status shows again once the cluster answers" in shown.status_reason
    assert listed.status == pb.STAGE_STATUS_UNKNOWN


def test_the_real_status_shows_again_when_the_member_answers_again(federation, failover):
    watcher, _ = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    aws = federation.members["aws"]
    aws.stack.set_stage(_row(federation, workflow_id).remote_id, "jobs.main", STARTED)
    watcher.turn()
    take_down(aws)
    bring_back(aws)
    shown = client.get_workflow(workflow_id)
    assert (shown.status, shown.status_reason) == (pb.STAGE_STATUS_STARTED, "")


def test_unstarted_work_on_an_unreachable_member_says_it_will_be_rerouted(federation, failover):
    watcher, _ = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    take_down(federation.members["aws"])
    try:
        shown = client.get_workflow(workflow_id)
    finally:
        bring_back(federation.members["aws"])
    assert shown.status == pb.STAGE_STATUS_UNKNOWN
    assert "re-routed to another member if the cluster stays unreachable" in (shown.status_reason)


def test_work_with_no_other_member_able_to_run_it_stays_and_is_tried_again(federation, failover):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    take_down(federation.members["aws"])
    take_down(federation.members["onprem"])
    try:
        watcher.turn()
        clock.now += GRACE
        assert watcher.turn() == []
        bring_back(federation.members["onprem"])
        assert [m.to_cluster for m in watcher.turn()] == ["onprem"]
    finally:
        bring_back(federation.members["aws"])
    assert _row(federation, workflow_id).cluster == "onprem"


def _status_on(member, remote_id) -> Status:
    return member.stack.get_workflow(member.stack.authenticate(member.token), remote_id).status


def test_a_stop_while_the_member_is_unreachable_is_recorded_and_the_answer_says_so(
    federation, failover
):
    watcher, _ = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    aws = federation.members["aws"]
    take_down(aws)
    try:
        note = client.stop_workflow(workflow_id)
    finally:
        bring_back(aws)
    assert note.startswith("stop recorded: cluster aws does not answer")
    assert "delivered when it answers again" in note
    row = _row(federation, workflow_id)
    assert row.stop_requested_at is not None and row.stop_pending


def test_a_workflow_asked_to_stop_is_never_rerouted(federation, failover):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    take_down(federation.members["aws"])
    try:
        client.stop_workflow(workflow_id)
        watcher.turn()
        clock.now += GRACE
        assert watcher.turn() == []
        shown = client.get_workflow(workflow_id)
    finally:
        bring_back(federation.members["aws"])
    assert _row(federation, workflow_id).cluster == "aws"
    assert "its stop is recorded and delivered when the cluster answers" in shown.status_reason


def test_a_recorded_stop_is_delivered_when_the_member_answers_again(federation, failover):
    watcher, _ = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    remote_id = _row(federation, workflow_id).remote_id
    watcher.turn()
    aws = federation.members["aws"]
    take_down(aws)
    try:
        client.stop_workflow(workflow_id)
        watcher.turn()
    finally:
        bring_back(aws)
    assert _status_on(aws, remote_id) != Status.CANCELED
    watcher.turn()
    assert _status_on(aws, remote_id) == Status.CANCELED
    assert not _row(federation, workflow_id).stop_pending


def test_a_stop_the_member_takes_at_once_is_answered_without_a_note(federation, failover):
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    assert client.stop_workflow(workflow_id) == ""
    aws = federation.members["aws"]
    assert _status_on(aws, _row(federation, workflow_id).remote_id) == Status.CANCELED


def test_a_stop_asked_during_a_reroute_stops_the_copy_it_made(federation, failover, monkeypatch):
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    watcher.turn()
    submit = federation.service.submit

    def submit_then_user_stops(*args, **kwargs):
        made = submit(*args, **kwargs)
        client.stop_workflow(workflow_id)  # aws is away: recorded
        return made

    monkeypatch.setattr(federation.service, "submit", submit_then_user_stops)
    take_down(federation.members["aws"])
    try:
        watcher.turn()
        clock.now += GRACE
        assert watcher.turn() == []
    finally:
        bring_back(federation.members["aws"])
    assert _row(federation, workflow_id).cluster == "aws"
    onprem = federation.members["onprem"]
    (copy,) = onprem.stack.service.list_workflows(onprem.stack.authenticate(onprem.token))
    assert copy.status == Status.CANCELED


def test_errors_about_an_unreachable_member_name_its_cluster_not_its_address(federation, failover):
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    aws = federation.members["aws"]
    address = urlsplit(aws.rest_url).netloc
    take_down(aws)
    try:
        with pytest.raises(Unavailable) as refused:
            client.list_events(workflow_id)
        shown = client.get_workflow(workflow_id)
    finally:
        bring_back(aws)
    assert "cluster aws: unreachable" in refused.value.message
    assert address not in refused.value.message
    assert address not in shown.status_reason


def test_a_rerouted_workflow_whose_partitioned_member_ran_it_says_it_ran_on_both(
    federation, failover, monkeypatch
):
    """At-least-once under a partition (docs/federate-routing.md, Failover): a member alive
    but unreachable from Federate may start the work after Federate's last answer; the
    re-route then runs it twice, and says so once that member answers again."""
    watcher, clock = failover
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    remote_id = _row(federation, workflow_id).remote_id
    watcher.turn()
    aws = federation.members["aws"]
    member = federation.service.members.get("aws")

    def partitioned():
        raise Unavailable("cluster aws: unreachable (partition)")

    monkeypatch.setattr(member, "client", partitioned)
    aws.stack.set_stage(remote_id, "jobs.main", STARTED)  # aws starts it, unseen
    watcher.turn()
    clock.now += GRACE
    assert [m.to_cluster for m in watcher.turn()] == ["onprem"]
    aws.stack.set_stage(remote_id, "jobs.main", FINISHED)
    monkeypatch.undo()  # the partition heals
    watcher.turn()
    (rerouted,) = [
        e for e in client.list_events(workflow_id) if e.kind == EventKind.WORKFLOW_REROUTED
    ]
    assert "its copy on cluster aws had started work before it was stopped" in rerouted.message
    assert rerouted.message.endswith("it ran on both clusters")
