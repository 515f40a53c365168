"""The stage graph and the readiness function the engine runs from."""

from __future__ import annotations

import pytest

from fuzzball_core.spec import Condition, StageKind, parse_workflow, plan_workflow
from fuzzball_core.spec.plan import Plan

CHAIN_WITH_CLEANUP = """
version: v4
volumes:
  data: {reference: volume://user/ephemeral}
images:
  tools: {from: {uri: docker://rockylinux:9}, post: dnf install -y jq}
jobs:
  prepare: {image: {uri: docker://x}, mounts: {/data: {volume: data}}}
  analyze:
    image: {uri: fuzzball://user/tools}
    depends-on: [{name: prepare, status: FINISHED}]
  report: {image: {uri: docker://x}, depends-on: [{name: analyze}]}
  cleanup: {image: {uri: docker://x}, depends-on: [{name: analyze, status: FAILED}]}
  after-cleanup: {image: {uri: docker://x}, depends-on: [{name: cleanup}]}
services:
  web: {image: {uri: docker://nginx}, depends-on: [{name: prepare}]}
  client: {image: {uri: docker://x}, depends-on: [{name: web, status: RUNNING}]}
"""


@pytest.fixture
def plan() -> Plan:
    return plan_workflow(parse_workflow(CHAIN_WITH_CLEANUP))


def test_stages_cover_images_volumes_jobs_and_services(plan: Plan) -> None:
    kinds = {stage.id: stage.kind for stage in plan}
    assert kinds == {
        "images.tools": StageKind.IMAGE,
        "volumes.data": StageKind.VOLUME,
        "jobs.prepare": StageKind.JOB,
        "jobs.analyze": StageKind.JOB,
        "jobs.report": StageKind.JOB,
        "jobs.cleanup": StageKind.JOB,
        "jobs.after-cleanup": StageKind.JOB,
        "services.web": StageKind.SERVICE,
        "services.client": StageKind.SERVICE,
    }


def test_edges_carry_the_condition_of_their_dependency(plan: Plan) -> None:
    edges = {(e.source, e.target): e.condition for e in plan.edges}
    assert edges[("volumes.data", "jobs.prepare")] is Condition.ON_SUCCESS
    assert edges[("images.tools", "jobs.analyze")] is Condition.ON_SUCCESS
    assert edges[("jobs.prepare", "jobs.analyze")] is Condition.ON_SUCCESS
    assert edges[("jobs.analyze", "jobs.cleanup")] is Condition.ON_FAILURE
    assert edges[("services.web", "services.client")] is Condition.ON_RUNNING


def test_topological_order_puts_every_stage_after_its_dependencies(plan: Plan) -> None:
    order = plan.topological_order()
    position = {stage_id: i for i, stage_id in enumerate(order)}
    assert len(order) == len(plan)
    assert all(position[e.source] < position[e.target] for e in plan.edges)


def test_at_the_start_only_stages_without_dependencies_are_ready(plan: Plan) -> None:
    assert plan.advance(set(), set(), set()) == (["images.tools", "volumes.data"], [])


def test_a_finished_dependency_makes_its_dependents_ready(plan: Plan) -> None:
    ready, skipped = plan.advance({"images.tools", "volumes.data", "jobs.prepare"}, set(), set())
    assert ready == ["jobs.analyze", "services.web"]
    assert skipped == []


def test_when_a_dependency_succeeds_its_on_failure_dependents_are_skipped_transitively(
    plan: Plan,
) -> None:
    done = {"images.tools", "volumes.data", "jobs.prepare", "jobs.analyze"}
    ready, skipped = plan.advance(done, set(), set(), started={"services.web"})
    assert ready == ["jobs.report"]
    assert skipped == ["jobs.cleanup", "jobs.after-cleanup"]


def test_when_a_dependency_fails_on_failure_dependents_run_and_on_success_ones_are_skipped(
    plan: Plan,
) -> None:
    done = {"images.tools", "volumes.data", "jobs.prepare"}
    ready, skipped = plan.advance(done, {"jobs.analyze"}, set(), started={"services.web"})
    assert ready == ["jobs.cleanup"]
    assert skipped == ["jobs.report"]


def test_a_canceled_dependency_runs_neither_on_success_nor_on_failure_dependents(
    plan: Plan,
) -> None:
    done = {"images.tools", "volumes.data", "jobs.prepare"}
    ready, skipped = plan.advance(done, set(), {"jobs.analyze"}, started={"services.web"})
    assert ready == []
    assert skipped == ["jobs.report", "jobs.cleanup", "jobs.after-cleanup"]


def test_a_failed_image_build_skips_the_jobs_that_use_it_and_everything_behind_them(
    plan: Plan,
) -> None:
    ready, skipped = plan.advance(
        {"volumes.data", "jobs.prepare"}, {"images.tools"}, set(), started={"services.web"}
    )
    assert ready == []
    assert skipped == ["jobs.analyze", "jobs.report", "jobs.cleanup", "jobs.after-cleanup"]


def test_on_running_dependents_start_once_the_service_is_running(plan: Plan) -> None:
    done = {"images.tools", "volumes.data", "jobs.prepare"}
    started = {"jobs.analyze", "services.web"}
    assert "services.client" not in plan.advance(done, set(), set(), started=started).ready
    ready, _ = plan.advance(done, set(), set(), started=started, running={"services.web"})
    assert ready == ["services.client"]


def test_started_and_ended_stages_are_never_offered_again(plan: Plan) -> None:
    done = {"images.tools", "volumes.data"}
    assert plan.advance(done, set(), set(), started={"jobs.prepare"}) == ([], [])


def test_skipped_stages_passed_back_as_canceled_are_not_reported_again(plan: Plan) -> None:
    done = {"images.tools", "volumes.data", "jobs.prepare", "jobs.analyze", "jobs.report"}
    skipped = {"jobs.cleanup", "jobs.after-cleanup"}
    assert plan.advance(done, set(), skipped, started={"services.web", "services.client"}) == (
        [],
        [],
    )


def test_advance_limited_to_changed_stages_agrees_with_a_full_scan(plan: Plan) -> None:
    done = {"images.tools", "volumes.data", "jobs.prepare"}
    started = {"services.web"}
    full = plan.advance(done, {"jobs.analyze"}, set(), started=started)
    partial = plan.advance(done, {"jobs.analyze"}, set(), started=started, changed=["jobs.analyze"])
    assert partial == full


def test_a_task_array_is_one_stage_with_a_lazy_range() -> None:
    parsed = parse_workflow(
        "version: v4\njobs:\n  sweep:\n    image: {uri: docker://x}\n"
        "    task-array: {start: 0, end: 999999999, concurrency: 200}\n"
    )
    plan = plan_workflow(parsed)
    stage = plan.stages["jobs.sweep"]
    assert len(plan) == 1
    assert len(stage.tasks) == 1_000_000_000
    assert stage.tasks.concurrency == 200
    assert stage.tasks.task_ids()[-1] == 999_999_999


def test_multinode_jobs_record_their_node_count() -> None:
    parsed = parse_workflow(
        "version: v4\njobs:\n  mpi: {image: {uri: docker://x}, multinode: {nodes: 4}}\n"
    )
    assert plan_workflow(parsed).stages["jobs.mpi"].nodes == 4


def test_a_plan_can_be_built_from_the_model_directly() -> None:
    parsed = parse_workflow(CHAIN_WITH_CLEANUP)
    assert (
        plan_workflow(parsed.model).topological_order() == plan_workflow(parsed).topological_order()
    )


def test_volumes_mounted_through_defaults_become_dependencies() -> None:
    parsed = parse_workflow(
        "version: v4\ndefaults: {job: {mounts: {/d: {volume: v}}}}\n"
        "volumes: {v: {reference: volume://user/ephemeral}}\njobs: {a: {image: {uri: docker://x}}}\n"
    )
    assert [e.source for e in plan_workflow(parsed).dependencies_of("jobs.a")] == ["volumes.v"]


def test_with_pull_stages_each_registry_image_is_one_stage_its_users_wait_for() -> None:
    plan = plan_workflow(parse_workflow(CHAIN_WITH_CLEANUP), pull_stages=True)
    pulls = {stage.id for stage in plan if stage.id.startswith("images.") and "://" in stage.id}
    assert pulls == {"images.docker://x", "images.docker://nginx", "images.docker://rockylinux:9"}
    edges = {(e.source, e.target) for e in plan.edges}
    assert ("images.docker://x", "jobs.prepare") in edges
    assert ("images.docker://x", "jobs.report") in edges
    assert ("images.docker://rockylinux:9", "images.tools") in edges
    assert ("images.tools", "jobs.analyze") in edges


def test_an_image_built_in_the_workflow_is_not_pulled() -> None:
    plan = plan_workflow(parse_workflow(CHAIN_WITH_CLEANUP), pull_stages=True)
    assert "images.fuzzball://user/tools" not in plan.stages


def test_at_the_start_only_pull_stages_and_volumes_are_ready_when_pulls_are_planned() -> None:
    plan = plan_workflow(parse_workflow(CHAIN_WITH_CLEANUP), pull_stages=True)
    ready, _ = plan.advance(set(), set(), set())
    assert set(ready) == {
        "images.docker://x",
        "images.docker://nginx",
        "images.docker://rockylinux:9",
        "volumes.data",
    }


def test_a_pull_stage_keeps_the_secret_of_a_step_that_names_one() -> None:
    plan = plan_workflow(
        parse_workflow("""
version: v4
jobs:
  a: {image: {uri: docker://x}, command: [true]}
  b: {image: {uri: docker://x, secret: secret://user/reg}, command: [true]}
"""),
        pull_stages=True,
    )
    assert plan.stages["images.docker://x"].definition.secret == "secret://user/reg"


def _pull_ttl(jobs: str) -> int | None:
    plan = plan_workflow(parse_workflow(f"version: v4\njobs:\n{jobs}"), pull_stages=True)
    return plan.stages["images.docker://x"].definition.cache_ttl


def test_a_pull_stage_may_reuse_a_pin_as_long_as_the_least_cache_ttl_of_its_steps() -> None:
    assert (
        _pull_ttl(
            "  a: {image: {uri: docker://x, cache-ttl: 600}, command: [true]}\n"
            "  b: {image: {uri: docker://x, cache-ttl: 60}, command: [true]}\n"
        )
        == 60
    )


def test_a_pull_stage_reuses_no_pin_when_one_of_its_steps_gives_no_cache_ttl() -> None:
    assert (
        _pull_ttl(
            "  a: {image: {uri: docker://x, cache-ttl: 600}, command: [true]}\n"
            "  b: {image: {uri: docker://x}, command: [true]}\n"
        )
        is None
    )


def test_a_built_images_files_hold_the_content_of_the_top_level_files_they_name() -> None:
    plan = plan_workflow(
        parse_workflow(
            "version: v4\nfiles: {conf: 'x=1'}\nimages:\n  t:\n    from: {uri: docker://a}\n"
            "    files: {/etc/a.conf: 'file://conf', /etc/inline: 'y=2'}\n"
            "jobs:\n  j: {image: {uri: fuzzball://user/t}}\n"
        )
    )
    build = next(stage for stage in plan if stage.id == "images.t").definition
    assert build.files == {"/etc/a.conf": "x=1", "/etc/inline": "y=2"}
