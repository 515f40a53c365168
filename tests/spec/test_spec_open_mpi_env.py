"""An ``env`` entry naming a variable an Open MPI job's launch sets itself (its remote agent,
``no_tree_spawn``) is accepted with a warning naming the entry; elsewhere it is used."""

from __future__ import annotations

import pytest
from test_spec_rules import Parse, one_job

from fuzzball_core.spec.multinode import OPEN_MPI_LAUNCH_ENV
from fuzzball_core.substrate import openmpi

OPEN_MPI_JOB = "    multinode: {nodes: 2, implementation: openmpi}\n"


def _launch_warnings(parsed_warnings: list[str]) -> list[str]:
    return [w for w in parsed_warnings if "Open MPI" in w]


@pytest.mark.parametrize("name", OPEN_MPI_LAUNCH_ENV)
@pytest.mark.parametrize("implementation", ["openmpi", "ompi", "OpenMPI"])
def test_a_launch_variable_in_an_open_mpi_jobs_env_is_warned_naming_the_entry(
    parse: Parse, name: str, implementation: str
) -> None:
    parsed = parse(
        one_job(
            f"    env: [A=1, {name}=ssh-secret]\n"
            f"    multinode: {{nodes: 2, implementation: {implementation}}}\n"
        )
    )
    [warning] = _launch_warnings(parsed.warnings)
    assert warning.startswith("jobs.a.env[1]: has no effect on an Open MPI multinode job here")
    assert f"its launch sets {name} itself" in warning
    assert "ssh-secret" not in warning


def test_other_variables_of_an_open_mpi_job_are_not_warned(parse: Parse) -> None:
    env = "    env: [OMPI_MCA_btl_tcp_if_include=eth1, OMPI_MCA_plm_rsh_agent_x=1]\n"
    assert parse(one_job(env + OPEN_MPI_JOB)).warnings == []


@pytest.mark.parametrize(
    "multinode",
    ["", "    multinode: {nodes: 2}\n", "    multinode: {nodes: 2, implementation: mpich}\n"],
)
def test_a_launch_variable_outside_an_open_mpi_job_is_not_warned(
    parse: Parse, multinode: str
) -> None:
    text = one_job("    env: [OMPI_MCA_plm_rsh_agent=ssh]\n" + multinode)
    assert parse(text).warnings == []


@pytest.mark.parametrize("level", ["defaults", "defaults.job"])
def test_a_launch_variable_an_open_mpi_job_inherits_is_warned_at_the_defaults_entry(
    parse: Parse, level: str
) -> None:
    head = "defaults:\n  env: [OMPI_MCA_plm_rsh_no_tree_spawn=0]\n"
    if level == "defaults.job":
        head = "defaults:\n  job:\n    env: [OMPI_MCA_plm_rsh_no_tree_spawn=0]\n"
    parsed = parse(one_job(OPEN_MPI_JOB, head=head))
    assert [w.split(": ")[0] for w in _launch_warnings(parsed.warnings)] == [f"{level}.env[0]"]


def test_a_launch_variable_in_the_service_defaults_is_not_warned_for_an_open_mpi_job(
    parse: Parse,
) -> None:
    head = "defaults:\n  service:\n    env: [OMPI_MCA_plm_rsh_agent=ssh]\n"
    assert parse(one_job(OPEN_MPI_JOB, head=head)).warnings == []


def test_the_warned_variables_are_those_the_open_mpi_launch_sets() -> None:
    assert set(openmpi.WIRING) == set(OPEN_MPI_LAUNCH_ENV)


def test_a_launch_variable_in_an_open_mpi_services_env_is_warned_naming_the_entry(
    parse: Parse,
) -> None:
    parsed = parse(
        "version: v4\nservices:\n  s:\n    image: {uri: docker://nginx}\n"
        "    env: [OMPI_MCA_plm_rsh_agent=ssh]\n" + OPEN_MPI_JOB
    )
    assert [w.split(": ")[0] for w in _launch_warnings(parsed.warnings)] == ["services.s.env[0]"]
