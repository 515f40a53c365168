"""The reference workflow examples: all valid, and v1 files upgrade losslessly."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.example_files import EXAMPLE_FILES, V1_EXAMPLE_FILES

from fuzzball_core.spec import Plan, parse_workflow, plan_workflow, upgrade_to_v4


def _graph(plan: Plan) -> tuple[set[tuple[str, str]], set[tuple[str, str, str]]]:
    stages = {(stage.id, stage.kind.value) for stage in plan}
    edges = {(edge.source, edge.target, edge.condition.value) for edge in plan.edges}
    return stages, edges


def test_the_examples_folder_holds_v1_and_v4_files() -> None:
    assert len(V1_EXAMPLE_FILES) >= 5
    assert any(p.read_text().startswith("version: v4") for p in EXAMPLE_FILES) or any(
        "version: v4" in p.read_text() for p in EXAMPLE_FILES
    )


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_validates_and_plans(path: Path) -> None:
    parsed = parse_workflow(path.read_bytes(), source=str(path))
    plan = plan_workflow(parsed)
    assert set(plan.topological_order()) == set(plan.stages)
    assert {f"jobs.{name}" for name in parsed.model.jobs or {}} <= set(plan.stages)


@pytest.mark.parametrize("path", V1_EXAMPLE_FILES, ids=lambda p: p.name)
def test_each_v1_example_upgrades_to_a_valid_v4_file_with_the_same_stage_graph(path: Path) -> None:
    original = parse_workflow(path.read_bytes())
    upgraded_text = upgrade_to_v4(path.read_bytes())
    assert upgraded_text.startswith("version: v4\n")
    upgraded = parse_workflow(upgraded_text)
    assert upgraded.source_version == "v4"
    assert _graph(plan_workflow(upgraded)) == _graph(plan_workflow(original))
    assert upgraded.model == original.model


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_upgrading_a_v4_file_again_changes_nothing(path: Path) -> None:
    once = upgrade_to_v4(path.read_bytes())
    assert upgrade_to_v4(once) == once


def test_blast_example_plans_its_dependency_diamond() -> None:
    plan = plan_workflow(parse_workflow((EXAMPLE_FILES[0].parent / "blast.yaml").read_bytes()))
    deps = {e.source for e in plan.dependencies_of("jobs.make-blast-database")}
    assert deps == {
        "jobs.retrieve-query-sequence",
        "jobs.retrieve-database-sequences",
        "volumes.blast-volume",
    }
    order = plan.topological_order()
    assert order.index("jobs.create-dirs") < order.index("jobs.retrieve-query-sequence")
    assert order[-1] == "jobs.run-blast"


def test_v4_pipeline_example_plans_images_volumes_and_failure_edges() -> None:
    plan = plan_workflow(
        parse_workflow((EXAMPLE_FILES[0].parent / "v4-pipeline.yaml").read_bytes())
    )
    stages, edges = _graph(plan)
    assert ("images.tools.sif", "image") in stages
    assert ("volumes.data", "volume") in stages
    assert ("services.results", "service") in stages
    assert ("images.tools.sif", "jobs.analyze", "on-success") in edges
    assert ("jobs.analyze", "jobs.cleanup-on-failure", "on-failure") in edges
    # defaults.job mounts /data, so every job and the service wait for the volume
    assert ("volumes.data", "services.results", "on-success") in edges
    assert plan.stages["jobs.shards"].tasks is not None
    assert len(plan.stages["jobs.shards"].tasks) == 20
