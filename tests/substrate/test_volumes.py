"""Per-workflow ephemeral volume directories on a node."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from fuzzball_core.drivers import StorageDriver, VolumeLocation
from fuzzball_core.errors import InvalidArgument, Unavailable
from fuzzball_core.substrate.drivers.steps import RunClaims
from fuzzball_core.substrate.volumes import WorkflowVolumes

WORKFLOW = "3f1c2a52-0c4e-4a53-9d55-1f0e3c9a7b10"


def test_volume_directory_lives_under_the_workflow_in_the_work_dir(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path)

    path = volumes.volume_dir(WORKFLOW, "data")

    assert path == tmp_path / "workflows" / WORKFLOW / "volumes" / "data"
    assert path.is_dir()


def test_every_job_of_a_workflow_gets_the_same_directory(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path)

    assert volumes.volume_dir(WORKFLOW, "data") == volumes.volume_dir(WORKFLOW, "data")


@pytest.mark.parametrize("name", ["..", "a/b", "", "/etc"])
def test_volume_names_that_would_escape_the_directory_are_refused(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(InvalidArgument, match="volume"):
        WorkflowVolumes(tmp_path).volume_dir(WORKFLOW, name)


def test_directories_are_removed_only_after_the_last_run_ended_plus_retention(
    tmp_path: Path,
) -> None:
    volumes = WorkflowVolumes(tmp_path, retention=10)
    path = volumes.volume_dir(WORKFLOW, "data")
    volumes.acquire(WORKFLOW)
    volumes.acquire(WORKFLOW)
    volumes.release(WORKFLOW, now=100)

    assert volumes.expire(now=1000) == []  # one run still uses it
    volumes.release(WORKFLOW, now=200)
    assert volumes.expire(now=205) == []
    assert path.is_dir()
    assert volumes.expire(now=210) == [WORKFLOW]
    assert not (tmp_path / "workflows" / WORKFLOW).exists()


def test_a_new_run_keeps_an_idle_workflow_directory(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path, retention=10)
    volumes.volume_dir(WORKFLOW, "data")
    volumes.acquire(WORKFLOW)
    volumes.release(WORKFLOW, now=100)

    volumes.acquire(WORKFLOW)

    assert volumes.expire(now=500) == []


def test_a_restarted_agent_expires_leftovers_one_retention_after_it_started(
    tmp_path: Path,
) -> None:
    WorkflowVolumes(tmp_path).volume_dir(WORKFLOW, "data")
    volumes = WorkflowVolumes(tmp_path, retention=10)

    assert volumes.adopt_leftovers(now=100) == [WORKFLOW]
    assert volumes.expire(now=105) == []
    assert volumes.expire(now=110) == [WORKFLOW]


def test_a_run_starting_while_its_workflow_expires_keeps_its_directory(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path, retention=10)
    data = volumes.volume_dir(WORKFLOW, "data")
    (data / "kept").write_text("the dependent run's")
    volumes.acquire(WORKFLOW)
    volumes.release(WORKFLOW, now=100)
    take_due = volumes._take_due

    def a_run_starts_meanwhile(now: float) -> list[str]:
        # the agent expires in a worker thread: a dependent run of the workflow starts
        # (on another thread) after the expiry found it due, before its removal
        due = take_due(now)
        volumes.acquire(WORKFLOW)
        return due

    with mock.patch.object(volumes, "_take_due", a_run_starts_meanwhile):
        assert volumes.expire(now=110) == []
    assert (data / "kept").read_text() == "the dependent run's"
    volumes.release(WORKFLOW, now=200)
    assert volumes.expire(now=210) == [WORKFLOW]


def test_workflows_go_idle_again_in_the_order_of_their_last_release(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path, retention=10)
    for workflow_id in ("wf-a", "wf-b"):
        volumes.acquire(workflow_id)
    volumes.release("wf-a", now=100)
    volumes.release("wf-b", now=150)
    volumes.acquire("wf-a")  # a dependent run: wf-a is idle again after wf-b
    volumes.release("wf-a", now=200)

    assert volumes.expire(now=170) == ["wf-b"]
    assert volumes.expire(now=210) == ["wf-a"]


class _ResizingDriver(StorageDriver):
    """A storage driver noting each volume it was asked to fit to its capacity."""

    def __init__(self, fails: bool = False) -> None:
        super().__init__()
        self.fitted: list[str] = []
        self.fails = fails

    def directory(self, location: VolumeLocation, *, work_dir: Path) -> Path:
        return work_dir / location.volume_id

    def remove(self, location: VolumeLocation, *, work_dir: Path) -> None:
        pass

    def fit_capacity(self, location: VolumeLocation, *, work_dir: Path) -> None:
        if self.fails and location.volume_id == "vol-b":
            raise Unavailable("volume vol-b: resize2fs failed: no space")
        self.fitted.append(location.volume_id)


def _kept(volume_id: str = "vol-a") -> VolumeLocation:
    return VolumeLocation(
        driver="resizing", storage_class="kept", organization_id="org", volume_id=volume_id
    )


def test_only_a_run_taking_a_volume_no_other_run_uses_lets_its_driver_resize_it(
    tmp_path: Path,
) -> None:
    driver = _ResizingDriver()
    volumes = WorkflowVolumes(tmp_path, drivers=lambda _name: driver)

    first = volumes.take([_kept()])
    second = volumes.take([_kept()])
    volumes.let_go(first)
    third = volumes.take([_kept()])
    assert driver.fitted == ["vol-a"]  # the first run's: the others found it in use

    volumes.let_go(second)
    volumes.let_go(third)
    assert volumes.users("vol-a") == 0
    volumes.take([_kept()])
    assert driver.fitted == ["vol-a", "vol-a"]


def test_per_workflow_volumes_are_not_counted_or_resized(tmp_path: Path) -> None:
    driver = _ResizingDriver()
    volumes = WorkflowVolumes(tmp_path, drivers=lambda _name: driver)
    scratch = VolumeLocation(
        driver="resizing", storage_class="s", organization_id="org", workflow_id=WORKFLOW
    )
    assert volumes.take([scratch]) == []
    assert driver.fitted == []


def test_a_run_whose_volume_could_not_be_prepared_holds_none_of_them(tmp_path: Path) -> None:
    driver = _ResizingDriver(fails=True)
    volumes = WorkflowVolumes(tmp_path, drivers=lambda _name: driver)
    with pytest.raises(Unavailable, match="vol-b"):
        volumes.take([_kept("vol-a"), _kept("vol-b")])
    assert volumes.users("vol-a") == volumes.users("vol-b") == 0


def test_a_run_uses_its_persistent_volumes_from_its_claim_until_it_is_released(
    tmp_path: Path,
) -> None:
    driver = _ResizingDriver()
    volumes = WorkflowVolumes(tmp_path, drivers=lambda _name: driver)
    node = mock.Mock(volumes=volumes, runs_dir=tmp_path / "runs")
    request = mock.Mock(workflow_id=WORKFLOW, run_id=7, volume_locations={"data": _kept()})
    claims = RunClaims(node, request)

    claims.claim_volumes()
    claims.claim_volumes()
    assert volumes.users("vol-a") == 1
    claims.release()
    assert volumes.users("vol-a") == 0


# -- lifetimes: until Orchestrate says the workflow ended ---------------------------------

DAY = 24 * 3600.0


def _used_and_left(volumes: WorkflowVolumes, at: float) -> Path:
    """A job of WORKFLOW wrote ``result`` in its volume and ended at ``at``."""
    volumes.acquire(WORKFLOW)
    data = volumes.volume_dir(WORKFLOW, "data")
    (data / "result").write_text("job A's")
    volumes.release(WORKFLOW, now=at)
    return data


def test_a_dependent_job_long_after_the_last_run_still_sees_its_files(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path)
    _used_and_left(volumes, at=1000)

    # job B waited behind a long sibling: far more than the five minutes volumes once had
    assert volumes.expire(now=1000 + 301) == []
    assert volumes.expire(now=1000 + 3 * DAY) == []
    volumes.acquire(WORKFLOW)

    assert (volumes.volume_dir(WORKFLOW, "data") / "result").read_text() == "job A's"


def test_while_orchestrate_tells_workflow_ends_no_retention_removes_a_directory(
    tmp_path: Path,
) -> None:
    volumes = WorkflowVolumes(tmp_path, retention=10)
    data = _used_and_left(volumes, at=100)

    for now in (105, 500, 10 * DAY):
        volumes.vouch(now)  # each heartbeat turn with such an Orchestrate connected
        assert volumes.expire(now) == []
    assert (data / "result").read_text() == "job A's"


def test_the_backstop_counts_from_when_orchestrate_was_last_connected(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path, retention=10)
    _used_and_left(volumes, at=100)
    volumes.vouch(500)  # then only an Orchestrate that never tells workflow ends

    assert volumes.expire(now=505) == []
    assert volumes.expire(now=510) == [WORKFLOW]


def test_the_backstop_is_a_week_by_default(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path)
    _used_and_left(volumes, at=100)

    assert volumes.expire(now=100 + 7 * DAY - 1) == []
    assert volumes.expire(now=100 + 7 * DAY) == [WORKFLOW]


def test_an_ended_workflows_directory_and_ingress_markers_go_at_the_next_expiry(
    tmp_path: Path,
) -> None:
    volumes = WorkflowVolumes(tmp_path)
    _used_and_left(volumes, at=100)
    markers = volumes.workflow_dir(WORKFLOW) / "ingress-done"
    markers.mkdir()
    (markers / "data").touch()

    volumes.end([WORKFLOW])

    assert volumes.expire(now=101) == [WORKFLOW]
    assert not volumes.workflow_dir(WORKFLOW).exists()
    assert volumes.kept(100) == []


def test_an_ended_workflow_with_a_run_still_here_goes_once_that_run_is_released(
    tmp_path: Path,
) -> None:
    volumes = WorkflowVolumes(tmp_path)
    volumes.acquire(WORKFLOW)  # its container still being stopped
    volumes.volume_dir(WORKFLOW, "data")

    volumes.end([WORKFLOW])
    assert volumes.expire(now=100) == []
    assert volumes.workflow_dir(WORKFLOW).is_dir()
    volumes.release(WORKFLOW, now=101)

    assert volumes.expire(now=101) == [WORKFLOW]


def test_ending_other_or_malformed_workflows_leaves_this_one(tmp_path: Path) -> None:
    volumes = WorkflowVolumes(tmp_path)
    data = _used_and_left(volumes, at=100)

    volumes.end(["another-workflow", "../..", ""])

    assert volumes.expire(now=101) == ["another-workflow"]
    assert (data / "result").is_file()
    assert (tmp_path / "workflows").is_dir()


def test_the_kept_workflows_are_those_running_then_the_idle_oldest_first(
    tmp_path: Path,
) -> None:
    volumes = WorkflowVolumes(tmp_path)
    for workflow_id in ("wf-a", "wf-b", "wf-c"):
        volumes.acquire(workflow_id)
    volumes.release("wf-b", now=100)
    volumes.release("wf-a", now=200)

    assert volumes.kept(10) == ["wf-c", "wf-b", "wf-a"]
    assert volumes.kept(2) == ["wf-c", "wf-b"]


def test_a_restarted_agent_keeps_its_leftovers_and_names_them_for_orchestrate(
    tmp_path: Path,
) -> None:
    WorkflowVolumes(tmp_path).volume_dir(WORKFLOW, "data")
    volumes = WorkflowVolumes(tmp_path)
    volumes.adopt_leftovers(now=100)

    assert volumes.kept(10) == [WORKFLOW]
    volumes.end([WORKFLOW])
    assert volumes.expire(now=100) == [WORKFLOW]


def test_an_ended_workflow_a_late_run_takes_during_its_removal_goes_after_that_run(
    tmp_path: Path,
) -> None:
    volumes = WorkflowVolumes(tmp_path)
    volumes.volume_dir(WORKFLOW, "data")
    volumes.end([WORKFLOW])
    take_due = volumes._take_due

    def a_canceled_run_starts_meanwhile(now: float) -> list[str]:
        due = take_due(now)
        volumes.acquire(WORKFLOW)
        return due

    with mock.patch.object(volumes, "_take_due", a_canceled_run_starts_meanwhile):
        assert volumes.expire(now=100) == []
    volumes.release(WORKFLOW, now=101)

    assert volumes.expire(now=101) == [WORKFLOW]
