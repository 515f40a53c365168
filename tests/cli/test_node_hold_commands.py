"""``fuzzball node hold|cordon|uncordon|evict|deprovision|remove`` and the HOLDS of
``node list|show``, against the real service through the live REST server."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
import yaml
from sqlalchemy import select
from support.live_api import HELLO
from support.sql_stack import ADMIN

from fuzzball_core.cli import node_cmd
from fuzzball_core.errors import FailedPrecondition, NotFound, PermissionDenied
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate import volumes
from fuzzball_core.service.views import FAILED, FINISHED, STARTED
from fuzzball_core.store.models import StorageClass, Volume

GIB = 1024**3
#: HELLO, declaring that losing its node may run it again.
RETRIED_ON_NODE = HELLO.replace(
    "    resource:",
    "    policy:\n      retry:\n        on: [node]\n        attempts: 3\n    resource:",
)


@pytest.fixture(autouse=True)
def fast_polling(monkeypatch):
    monkeypatch.setattr(node_cmd, "DEPROVISION_POLL_INTERVAL", 0.05)


def holds_of(cli, node: str) -> list[tuple[str, str, str]]:
    return [(h.effect, h.source, h.reason) for h in cli.service.list_holds(ADMIN, node)]


def stage_of(cli, workflow_id: str, name: str = "jobs.hello"):
    workflow = cli.service.get_workflow(ADMIN, workflow_id)
    return next(s for s in workflow.stages if s.name == name)


def start_running(cli, spec: str = HELLO) -> str:
    """A workflow as its owner, with its job placed on node-1 and started there."""
    workflow_id = cli.service.start_workflow(cli.who, raw_specification=spec, name="hello")
    cli.service.set_stage(workflow_id, "jobs.hello", STARTED)
    return workflow_id


def table(output: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("|")] for line in output.splitlines()]


# -- hold list|add|release ------------------------------------------------------------------


def test_hold_add_places_a_hold_attributed_to_the_admin(admin):
    result = admin("node", "hold", "add", "node-1", "--effect", "cordon", "--reason", "bios")
    assert result.exit_code == 0, result.output
    (hold,) = admin.service.list_holds(ADMIN, "node-1")
    assert result.output == f'Hold {hold.id} (cordon, admin) placed on node "node-1".\n'
    assert (hold.effect, hold.source, hold.reason, hold.placed_by) == (
        "cordon",
        "admin",
        "bios",
        "admin",
    )


def test_hold_list_shows_each_hold_in_every_format(admin):
    admin("node", "hold", "add", "node-1", "--effect", "cordon", "--reason", "bios")
    rows = table(admin("node", "hold", "list", "node-1").output)
    assert rows[0] == ["ID", "EFFECT", "SOURCE", "REASON", "PLACED BY", "PLACED"]
    assert rows[1][1:5] == ["cordon", "admin", "bios", "admin"]
    as_json = json.loads(admin("node", "hold", "list", "node-1", "-o", "json").output)
    assert [(h["effect"], h["reason"]) for h in as_json] == [("cordon", "bios")]
    assert yaml.safe_load(admin("node", "hold", "list", "node-1", "-o", "yaml").output) == as_json


def test_hold_release_removes_that_hold_only(admin):
    admin("node", "hold", "add", "node-1", "--effect", "cordon")
    admin("node", "hold", "add", "node-1", "--effect", "deprovision")
    first = admin.service.list_holds(ADMIN, "node-1")[0]
    result = admin("node", "hold", "release", "node-1", str(first.id))
    assert result.output == f'Hold {first.id} released from node "node-1".\n'
    assert [effect for effect, _, _ in holds_of(admin, "node-1")] == ["deprovision"]


def test_hold_add_needs_an_effect_the_server_knows(admin):
    result = admin("node", "hold", "add", "node-1", "--effect", "drain")
    assert result.exit_code == 2
    assert "cordon" in result.output


def test_a_non_admin_cannot_place_holds(logged_in):
    result = logged_in("node", "cordon", "node-1")
    assert isinstance(result.exception, PermissionDenied)
    assert logged_in.service.list_holds(ADMIN, "node-1") == []


# -- cordon and uncordon --------------------------------------------------------------------


def test_cordon_holds_several_nodes_with_the_reason(admin):
    admin.service.add_node("node-2", 8, 16 * GIB)
    result = admin("node", "cordon", "node-1", "node-2", "--reason", "kernel update")
    assert result.output == 'Node "node-1" cordoned.\nNode "node-2" cordoned.\n'
    for node in ("node-1", "node-2"):
        assert holds_of(admin, node) == [("cordon", "admin", "kernel update")]


def test_cordon_with_an_unknown_node_changes_nothing(admin):
    result = admin("node", "cordon", "node-1", "ghost")
    assert isinstance(result.exception, NotFound)
    assert holds_of(admin, "node-1") == []


def test_uncordon_releases_several_nodes(admin):
    admin.service.add_node("node-2", 8, 16 * GIB)
    admin("node", "cordon", "node-1", "node-2")
    result = admin("node", "uncordon", "node-1", "node-2")
    assert result.output == (
        'Node "node-1" uncordoned (1 admin cordon hold released).\n'
        'Node "node-2" uncordoned (1 admin cordon hold released).\n'
    )
    assert holds_of(admin, "node-1") == holds_of(admin, "node-2") == []


def test_uncordon_leaves_a_monitoring_hold_and_says_so(admin):
    monitoring, _ = admin.service.create_account("monitoring", kind="monitoring")
    admin("node", "cordon", "node-1")
    kept = admin.service.add_hold(monitoring, "node-1", "cordon", "ECC errors")
    result = admin("node", "uncordon", "node-1")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        'Node "node-1" uncordoned (1 admin cordon hold released).',
        'Node "node-1" is still held: uncordon releases admin cordon holds only.',
        f"  hold {kept.id} cordon(monitoring): ECC errors"
        f" (release with: fuzzball node hold release node-1 {kept.id})",
    ]
    assert holds_of(admin, "node-1") == [("cordon", "monitoring", "ECC errors")]


# -- evict ----------------------------------------------------------------------------------


def test_evict_fails_a_job_without_a_retry_policy_with_the_reason(admin):
    workflow_id = start_running(admin)
    result = admin("node", "evict", "node-1", "--reason", "disk failing")
    assert result.output == 'Node "node-1" evicted.\n'
    stage = stage_of(admin, workflow_id)
    assert stage.status == FAILED
    assert "disk failing" in stage.message
    assert holds_of(admin, "node-1") == [("evict", "admin", "disk failing")]


def test_evict_requeues_a_job_that_retries_on_node(admin):
    workflow_id = start_running(admin, RETRIED_ON_NODE)
    admin("node", "evict", "node-1", "--reason", "disk failing")
    stage = stage_of(admin, workflow_id)
    assert stage.status != FAILED
    assert stage.attempt == 2
    kinds = [e.kind for e in admin.service.list_events(ADMIN, workflow_id)]
    assert "evicted" in kinds and "retried" in kinds


# -- deprovision ----------------------------------------------------------------------------


def test_deprovision_waits_for_running_work_to_end_then_for_the_teardown(admin):
    workflow_id = start_running(admin)

    def finish_once_the_command_waits() -> None:
        deadline = time.monotonic() + 10
        while not holds_of(admin, "node-1") and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # several polls of the command see the job still running
        admin.service.set_stage(workflow_id, "jobs.hello", FINISHED)

    finisher = threading.Thread(target=finish_once_the_command_waits)
    finisher.start()
    result = admin("node", "deprovision", "node-1")
    finisher.join()
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == 'Node "node-1": deprovision hold placed.'
    assert lines[1] == f'Node "node-1": waiting for 1 running job: {workflow_id}/jobs.hello'
    assert lines[-1] == 'Node "node-1" is empty and was torn down.'
    assert stage_of(admin, workflow_id).status == FINISHED  # it was left to finish
    assert admin.service.get_node(ADMIN, "node-1").status == "DEPROVISIONED"


def test_deprovision_force_evicts_and_returns_at_once(admin, monkeypatch):
    def no_waiting(*args: object) -> None:
        raise AssertionError("--force must not wait for the teardown")

    monkeypatch.setattr(node_cmd, "wait_until_deprovisioned", no_waiting)
    workflow_id = start_running(admin)
    result = admin("node", "deprovision", "node-1", "--force", "--reason", "retired")
    assert result.exit_code == 0, result.output
    assert result.output == 'Node "node-1" evicted and deprovisioning (forced; not waiting).\n'
    assert sorted(holds_of(admin, "node-1")) == [
        ("deprovision", "admin", "retired"),
        ("evict", "admin", "retired"),
    ]
    assert stage_of(admin, workflow_id).status == FAILED


def test_deprovision_all_tears_down_every_empty_node(admin):
    admin.service.add_node("node-2", 8, 16 * GIB)
    result = admin("node", "deprovision", "--all")
    assert result.exit_code == 0, result.output
    assert 'Node "node-2" is empty and was torn down.' in result.output
    for node in ("node-1", "node-2"):
        assert admin.service.get_node(ADMIN, node).status == "DEPROVISIONED"


def give_volume(cli, node: str) -> None:
    """A node-local persistent volume whose only copy ``node`` holds."""
    node_id = cli.service.get_node(ADMIN, node).id
    with cli.service.engine.sessions() as session:
        catalog.ensure_defaults(session, 0.0)
        persistent = session.scalars(
            select(StorageClass.id).where(StorageClass.name == catalog.PERSISTENT_CLASS)
        ).one()
        session.add(
            Volume(
                id=str(uuid.uuid4()),
                organization_id="",
                class_id=persistent,
                scope="user",
                owner_id="someone",
                account_id="someone",
                name="results",
                status=volumes.ENABLED,
                node_id=node_id,
                created_at=0.0,
                updated_at=0.0,
            )
        )
        session.commit()


def test_deprovision_all_leaves_a_node_holding_a_volume_and_fails_naming_it(admin):
    admin.service.add_node("node-2", 8, 16 * GIB)
    give_volume(admin, "node-1")
    result = admin("node", "deprovision", "--all")
    assert isinstance(result.exception, FailedPrecondition)
    assert "volume://user/persistent/results" in str(result.exception)
    assert 'Node "node-2" is empty and was torn down.' in result.output
    assert admin.service.get_node(ADMIN, "node-1").status == "READY"
    assert holds_of(admin, "node-1") == []


def test_deprovision_needs_nodes_or_all_but_not_both(admin):
    assert "--all" in admin("node", "deprovision").output
    assert "not both" in admin("node", "deprovision", "node-1", "--all").output
    assert holds_of(admin, "node-1") == []


# -- remove ---------------------------------------------------------------------------------


def test_remove_refuses_a_node_that_is_up(admin):
    result = admin("node", "remove", "node-1")
    assert isinstance(result.exception, FailedPrecondition)
    assert "node-1 is still up" in str(result.exception)
    assert admin.service.get_node(ADMIN, "node-1").status == "READY"


def test_remove_refuses_an_offline_node_holding_a_volume_naming_it(admin):
    admin.service.add_node("old", 2, GIB, lease_seconds=0.1)
    admin.service.wait_for_node_status("old", "OFFLINE")
    give_volume(admin, "old")
    result = admin("node", "remove", "old")
    assert isinstance(result.exception, FailedPrecondition)
    assert "remove node old: it holds node-local persistent volume(s)" in str(result.exception)
    assert sorted(n.name for n in admin.service.list_nodes(ADMIN)) == ["node-1", "old"]


def test_remove_clears_an_offline_node_and_its_holds(admin):
    admin.service.add_node("old", 2, GIB, lease_seconds=0.1)
    admin.service.wait_for_node_status("old", "OFFLINE")
    admin("node", "cordon", "old")
    result = admin("node", "remove", "old")
    assert result.output == 'Node "old" removed.\n'
    assert [n.name for n in admin.service.list_nodes(ADMIN)] == ["node-1"]


# -- seeing holds ---------------------------------------------------------------------------


def test_node_list_has_a_holds_column(admin):
    admin.service.add_node("node-2", 8, 16 * GIB)
    monitoring, _ = admin.service.create_account("monitoring", kind="monitoring")
    admin("node", "cordon", "node-1")
    admin.service.add_hold(monitoring, "node-1", "evict", "GPU ECC")
    rows = table(admin("node", "list").output)
    assert rows[0][-1] == "HOLDS"
    holds = {row[1]: row[-1] for row in rows[1:]}
    assert holds == {"node-1": "cordon(admin), evict(monitoring)", "node-2": "-"}
    as_json = json.loads(admin("node", "list", "-o", "json").output)
    assert [len(n["holds"]) for n in as_json] == [2, 0]


def test_node_show_lists_each_hold_with_who_and_why(admin):
    admin("node", "cordon", "node-1", "--reason", "firmware")
    lines = admin("node", "show", "node-1").output.splitlines()
    assert "Holds:       cordon(admin)" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("ID "))
    rows = table("\n".join(lines[header : header + 2]))
    assert rows[0] == ["ID", "EFFECT", "SOURCE", "REASON", "PLACED BY", "PLACED"]
    assert rows[1][1:5] == ["cordon", "admin", "firmware", "admin"]
    assert rows[1][5].startswith("20")  # when it was placed


# -- node events ------------------------------------------------------------------------------


def test_node_events_record_registration_holds_and_allocations(admin):
    start_running(admin)
    admin("node", "cordon", "node-1", "--reason", "bios")
    admin("node", "uncordon", "node-1")
    result = admin("node", "events", "node-1", "-o", "json")
    assert result.exit_code == 0, result.output
    kinds = [e["kind"] for e in json.loads(result.output)]
    assert kinds[0] == "node_registered"
    assert "scheduled" in kinds
    assert kinds.index("node_hold_added") < kinds.index("node_hold_released")


def test_node_events_table(admin):
    result = admin("node", "events", "node-1")
    assert result.exit_code == 0, result.output
    assert table(result.output)[0] == ["TIME", "KIND", "MESSAGE"]
