"""A node list's views (SqlOrchestrateService.list_nodes): each node's row as stored, its
usage and running stages from the engine's memory, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import dataclasses

from support.engine_workflows import HELLO

from fuzzball_core.scheduling import Resources
from fuzzball_core.service.views import IN_USE


def listed(harness, name: str):
    (view,) = [n for n in harness.service.list_nodes(harness.admin) if n.name == name]
    return view


def test_a_listed_nodes_devices_and_annotations_are_its_rows(harness):
    harness.engine.register_node("gpu", Resources(8, 8 << 30, {"nvidia.com/gpu": 2}), {"z": "a"})
    view = listed(harness, "gpu")
    assert (view.devices, view.annotations) == ({"nvidia.com/gpu": 2}, {"z": "a"})


def test_nodes_alike_are_listed_with_devices_of_their_own(harness):
    for name in ("a", "b"):
        harness.engine.register_node(name, Resources(8, 8 << 30, {"gpu": 1}), {})
    a, b = listed(harness, "a"), listed(harness, "b")
    assert a.devices == b.devices and a.devices is not b.devices


def test_a_listed_nodes_use_and_stages_are_the_engines(harness):
    harness.node("busy", cores=4)
    workflow_id = harness.submit(HELLO)
    view = listed(harness, "busy")
    assert (view.used_cores, view.stages) == (1, (f"{workflow_id}/jobs.hello",))


def test_a_listed_view_has_every_field_a_node_view_has(harness):
    harness.node("busy", cores=4)
    harness.submit(HELLO)
    harness.node("idle", cores=4)
    for view in harness.service.list_nodes(harness.admin):
        # replace() reads every field of the view into a new NodeView
        assert dataclasses.replace(view) == view


def test_a_node_unchanged_since_the_last_list_is_listed_with_the_same_view(harness):
    harness.node("busy", cores=4)
    harness.submit(HELLO)
    harness.node("idle", cores=4)
    first = harness.service.list_nodes(harness.admin)
    again = harness.service.list_nodes(harness.admin)
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True]


def test_a_hold_placed_after_a_list_is_in_the_next(harness):
    harness.node("n1")
    listed(harness, "n1")
    harness.engine.add_hold("n1", "cordon", "admin", "repair", "ops")
    assert [hold.reason for hold in listed(harness, "n1").holds] == ["repair"]


def test_a_node_given_a_run_after_a_list_shows_it_in_the_next(harness):
    harness.node("n1", cores=4)
    assert listed(harness, "n1").stages == ()
    workflow_id = harness.submit(HELLO)
    view = listed(harness, "n1")
    assert (view.used_cores, view.stages) == (1, (f"{workflow_id}/jobs.hello",))


def test_a_list_after_an_administrators_names_another_accounts_stage_in_use(harness):
    harness.node("busy", cores=4)
    workflow_id = harness.submit(HELLO)
    # the monitoring service account reads nodes, not workflows
    other, _ = harness.service.create_account("watcher", kind="monitoring")
    assert listed(harness, "busy").stages == (f"{workflow_id}/jobs.hello",)
    (view,) = harness.service.list_nodes(other)
    assert view.stages == (IN_USE,)
