"""The builtin storage drivers on a node: where each keeps a volume, with which permissions,
and that no location reaches outside the driver's tree."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from support.storage import plugin_driver

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import InvalidArgument, Unavailable
from fuzzball_core.substrate.volumes import WorkflowVolumes


def persistent(driver: str, **parameters: str) -> VolumeLocation:
    return VolumeLocation(
        driver=driver,
        storage_class="kept",
        organization_id="org-acme",
        volume_id="3f0c2f6e-1111-4222-8333-444455556666",
        name="results",
        parameters=parameters,
    )


def test_hostpath_keeps_a_volume_under_its_organization_in_the_shared_tree(tmp_path) -> None:
    root = tmp_path / "shared"
    location = persistent("hostpath", root=str(root))
    path = plugin_driver("hostpath").directory(location, work_dir=tmp_path / "work")
    assert path == root / "org-acme" / location.volume_id
    assert path.is_dir()
    assert stat.S_IMODE(os.stat(root / "org-acme").st_mode) == 0o711
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_hostpath_per_workflow_volumes_live_under_their_workflow(tmp_path) -> None:
    location = VolumeLocation(
        driver="hostpath",
        storage_class="scratch",
        organization_id="org-acme",
        name="data",
        workflow_id="wf-1",
        parameters={"root": str(tmp_path)},
    )
    path = plugin_driver("hostpath").directory(location, work_dir=tmp_path / "work")
    assert path == tmp_path / "org-acme" / "workflows" / "wf-1" / "data"


def test_local_keeps_a_volume_beneath_the_work_directory(tmp_path) -> None:
    location = persistent("local")
    path = plugin_driver("local").directory(location, work_dir=tmp_path)
    assert path == tmp_path / "volumes" / "org-acme" / location.volume_id


def test_the_same_location_is_the_same_directory_with_its_files(tmp_path) -> None:
    location = persistent("local")
    plugin_driver("local").directory(location, work_dir=tmp_path).joinpath("out").write_text("42")
    again = plugin_driver("local").directory(location, work_dir=tmp_path)
    assert (again / "out").read_text() == "42"


@pytest.mark.parametrize("field", ["organization_id", "volume_id"])
def test_a_location_naming_a_path_outside_is_refused(tmp_path, field) -> None:
    location = VolumeLocation(**{**persistent("local").__dict__, field: "../../etc"})
    with pytest.raises(InvalidArgument, match="not a valid directory name"):
        plugin_driver("local").directory(location, work_dir=tmp_path)


def test_a_symlinked_organization_directory_leading_outside_is_refused(tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "volumes").mkdir()
    (tmp_path / "volumes" / "org-acme").symlink_to(outside)
    outside.chmod(0o755)
    with pytest.raises(InvalidArgument, match="leads outside"):
        plugin_driver("local").directory(persistent("local"), work_dir=tmp_path)
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o755  # untouched


def test_hostpath_refuses_a_class_without_an_absolute_root() -> None:
    problems = plugin_driver("hostpath").check_parameters({"root": "relative/dir", "x": "1"})
    assert [name for name, _ in problems] == ["x", "root"]


def test_remove_deletes_the_volumes_data(tmp_path) -> None:
    location = persistent("local")
    path = plugin_driver("local").directory(location, work_dir=tmp_path)
    plugin_driver("local").remove(location, work_dir=tmp_path)
    assert not path.exists()


def removable(driver: str, tmp_path: Path) -> VolumeLocation:
    if driver == "hostpath":
        return persistent("hostpath", root=str(tmp_path / "shared"))
    return persistent("local")


@pytest.mark.parametrize("driver", ["hostpath", "local"])
def test_a_volume_that_could_not_be_deleted_fails_naming_its_path_and_why(
    tmp_path, monkeypatch, driver
) -> None:
    location = removable(driver, tmp_path)
    path = plugin_driver(driver).directory(location, work_dir=tmp_path)
    (path / "result.txt").write_text("42\n")
    real_unlink = os.unlink

    def refused(name, *args, **kwargs):
        if os.path.basename(name) == "result.txt":
            raise PermissionError(errno.EACCES, "Permission denied", name)
        real_unlink(name, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refused)
    with pytest.raises(Unavailable, match=f"{path}: could not be deleted: .*Permission denied"):
        plugin_driver(driver).remove(location, work_dir=tmp_path)
    assert (path / "result.txt").read_text() == "42\n"


@pytest.mark.parametrize("driver", ["hostpath", "local"])
def test_removing_a_volume_this_node_never_held_does_nothing(tmp_path, driver) -> None:
    plugin_driver(driver).remove(removable(driver, tmp_path), work_dir=tmp_path)


def test_substrate_binds_a_located_volume_from_its_driver(tmp_path) -> None:
    volumes = WorkflowVolumes(tmp_path)
    location = persistent("local", permissions="0750")
    path = volumes.locate("wf-1", "results", location)
    assert path == tmp_path / "volumes" / "org-acme" / location.volume_id
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o750


def test_substrate_keeps_an_unlocated_volume_in_the_workflows_directory(tmp_path) -> None:
    path = WorkflowVolumes(tmp_path).locate("wf-1", "data", None)
    assert path == tmp_path / "workflows" / "wf-1" / "volumes" / "data"


def test_substrate_refuses_another_workflows_per_workflow_location(tmp_path) -> None:
    location = VolumeLocation(
        driver="ephemeral",
        storage_class="ephemeral",
        organization_id="o",
        name="d",
        workflow_id="wf-2",
    )
    with pytest.raises(InvalidArgument, match="belongs to workflow wf-2"):
        WorkflowVolumes(tmp_path).locate("wf-1", "d", location)


def test_a_location_orchestrate_could_not_resolve_fails_saying_why() -> None:
    with pytest.raises(InvalidArgument, match="storage class 'x' is disabled"):
        VolumeLocation.from_json({"error": "volumes.d: storage class 'x' is disabled"})


def test_a_location_survives_its_json_round_trip(tmp_path: Path) -> None:
    location = persistent("hostpath", root="/srv")
    assert VolumeLocation.from_json(location.to_json()) == location


def test_a_volume_of_no_organization_lives_in_its_own_directory(tmp_path) -> None:
    location = VolumeLocation(**{**persistent("local").__dict__, "organization_id": ""})
    path = plugin_driver("local").directory(location, work_dir=tmp_path)
    assert path.parent == tmp_path / "volumes" / "no-organization"
