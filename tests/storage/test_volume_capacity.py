"""A storage class's capacity on a node: the ``local`` driver makes each persistent volume
its own ext4 filesystem of that size (loop-mounted, real ENOSPC past it), and every driver's
ingress is refused before it would bring more than the capacity leaves. Needs root (mount,
loop devices), as Substrate has."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.storage import plugin_driver, unmount_under

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import FailedPrecondition, InvalidArgument
from fuzzball_core.orchestrate.storage_catalog import check_class
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_plugins.storage import quota

MIB = 1 << 20

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a volume's filesystem needs root"
)


def kept(
    capacity: int, *, volume_id: str = "3f0c2f6e-1111-4222-8333-444455556666"
) -> VolumeLocation:
    return VolumeLocation(
        driver="local",
        storage_class="quota",
        organization_id="org-acme",
        volume_id=volume_id,
        name="results",
        capacity_bytes=capacity,
    )


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    unmount_under(tmp_path)


def write(path: Path, size: int) -> None:
    with path.open("wb") as out:
        out.write(b"\0" * size)
        out.flush()
        os.fsync(out.fileno())


def test_a_local_volume_with_a_capacity_is_its_own_filesystem_of_that_size(work_dir) -> None:
    path = plugin_driver("local").directory(kept(32 * MIB), work_dir=work_dir)
    assert os.path.ismount(path)
    filesystem = os.statvfs(path)
    assert 28 * MIB <= filesystem.f_blocks * filesystem.f_frsize <= 32 * MIB
    assert sorted(os.listdir(path)) == []  # no lost+found left in the user's volume


def test_a_job_writing_past_the_capacity_gets_no_space_left(work_dir) -> None:
    path = plugin_driver("local").directory(kept(16 * MIB), work_dir=work_dir)
    with pytest.raises(OSError) as failure:
        write(path / "big", 24 * MIB)
    assert failure.value.errno == errno.ENOSPC


def test_the_node_disk_holds_what_the_volume_holds_not_its_capacity(work_dir) -> None:
    path = plugin_driver("local").directory(kept(512 * MIB), work_dir=work_dir)
    write(path / "small", MIB)
    image = path.with_name(path.name + ".ext4")
    assert image.stat().st_blocks * 512 < 64 * MIB


def test_the_volume_keeps_its_bytes_when_the_node_mounts_it_again(work_dir) -> None:
    driver = plugin_driver("local")
    path = driver.directory(kept(16 * MIB), work_dir=work_dir)
    (path / "energy.txt").write_text("-4.2\n")
    subprocess.run(["umount", str(path)], check=True)  # as after a reboot
    assert driver.directory(kept(16 * MIB), work_dir=work_dir) == path
    assert os.path.ismount(path)
    assert (path / "energy.txt").read_text() == "-4.2\n"


def test_the_volume_root_keeps_the_directory_mode(work_dir) -> None:
    path = plugin_driver("local").directory(kept(16 * MIB), work_dir=work_dir)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_files_already_in_a_volume_move_into_its_new_filesystem(work_dir) -> None:
    driver = plugin_driver("local")
    path = driver.directory(kept(0), work_dir=work_dir)
    (path / "runs").mkdir()
    (path / "runs" / "1.out").write_text("done\n")
    os.symlink("runs/1.out", path / "latest")
    driver.directory(kept(16 * MIB), work_dir=work_dir)
    assert os.path.ismount(path)
    assert (path / "runs" / "1.out").read_text() == "done\n"
    assert os.readlink(path / "latest") == "runs/1.out"


def test_files_larger_than_a_new_capacity_refuse_the_quota_and_stay(work_dir) -> None:
    driver = plugin_driver("local")
    path = driver.directory(kept(0), work_dir=work_dir)
    write(path / "big", 12 * MIB)
    with pytest.raises(FailedPrecondition, match="capacity of 8388608 bytes"):
        driver.directory(kept(8 * MIB), work_dir=work_dir)
    assert not os.path.ismount(path)
    assert (path / "big").stat().st_size == 12 * MIB
    assert not path.with_name(path.name + ".ext4").exists()


def size_of(path: Path) -> int:
    filesystem = os.statvfs(path)
    return filesystem.f_blocks * filesystem.f_frsize


@pytest.fixture
def node_volumes(work_dir: Path) -> WorkflowVolumes:
    return WorkflowVolumes(work_dir, drivers=plugin_driver)


@pytest.fixture
def filesystem_tools(monkeypatch) -> list[str]:
    """The tools the quota module runs (umount, e2fsck, resize2fs...), in order."""
    ran: list[str] = []
    real_run = subprocess.run

    def recording(command, *args, **kwargs):
        ran.append(Path(command[0]).name)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(quota.subprocess, "run", recording)
    return ran


def test_a_raised_capacity_grows_the_volume_when_a_run_takes_it_unused(node_volumes) -> None:
    path = node_volumes.locate("wf-1", "results", kept(16 * MIB))
    taken = node_volumes.take([kept(64 * MIB)])
    assert size_of(node_volumes.locate("wf-1", "results", kept(64 * MIB))) > 48 * MIB
    assert os.path.ismount(path)
    node_volumes.let_go(taken)


def test_a_raised_capacity_waits_while_a_run_on_the_node_uses_the_volume(
    node_volumes, filesystem_tools
) -> None:
    first = node_volumes.take([kept(16 * MIB)])
    path = node_volumes.locate("wf-1", "results", kept(16 * MIB))
    with (path / "checkpoint").open("w") as held:  # the job's container writes it
        held.write("step 1\n")
        filesystem_tools.clear()
        second = node_volumes.take([kept(64 * MIB)])
        assert node_volumes.locate("wf-2", "results", kept(64 * MIB)) == path
        assert filesystem_tools == []  # no umount, no e2fsck, no resize2fs
        assert size_of(path) < 16 * MIB
        node_volumes.let_go(first)
        node_volumes.let_go(second)
        held.write("step 2\n")
    third = node_volumes.take([kept(64 * MIB)])
    assert "resize2fs" in filesystem_tools
    assert size_of(path) > 48 * MIB
    assert (path / "checkpoint").read_text() == "step 1\nstep 2\n"
    node_volumes.let_go(third)


def test_a_growth_cut_short_is_finished_by_the_next_run_taking_the_volume_unused(
    node_volumes,
) -> None:
    path = node_volumes.locate("wf-1", "results", kept(16 * MIB))
    subprocess.run(["umount", str(path)], check=True)
    with path.with_name(path.name + ".ext4").open("r+b") as image:
        image.truncate(64 * MIB)  # the node died before resize2fs
    node_volumes.let_go(node_volumes.take([kept(64 * MIB)]))
    assert size_of(node_volumes.locate("wf-1", "results", kept(64 * MIB))) > 48 * MIB


def test_measuring_a_volume_after_its_run_never_grows_it(node_volumes, filesystem_tools) -> None:
    path = node_volumes.locate("wf-1", "results", kept(16 * MIB))
    filesystem_tools.clear()
    measured = node_volumes.persistent_directories({"results": kept(64 * MIB)})
    assert measured == {kept(0).volume_id: path}
    assert filesystem_tools == []
    assert size_of(path) < 16 * MIB


def test_an_adopted_volume_image_gets_its_name_only_once_the_copy_is_whole(
    work_dir, monkeypatch
) -> None:
    driver = plugin_driver("local")
    path = driver.directory(kept(0), work_dir=work_dir)
    (path / "energy.txt").write_text("-4.2\n")
    image = path.with_name(path.name + ".ext4")
    real_adopt = quota._adopt

    def node_dies_mid_copy(directory, partial, capacity):
        assert not image.exists()
        real_adopt(directory, partial, capacity)
        raise SystemExit("the agent was killed")

    monkeypatch.setattr(quota, "_adopt", node_dies_mid_copy)
    with pytest.raises(SystemExit):
        driver.directory(kept(16 * MIB), work_dir=work_dir)
    assert not image.exists()
    assert not os.path.ismount(path)
    assert (path / "energy.txt").read_text() == "-4.2\n"


_KILLED_MID_COPY = """
import os, signal, subprocess, sys
from pathlib import Path
from fuzzball_core.drivers import VolumeLocation
from fuzzball_plugins.storage import quota
from support.storage import plugin_driver

real_run = subprocess.run
def run(command, *args, **kwargs):
    if command[0] == "cp":  # the node dies while it copies the files in
        os.kill(os.getpid(), signal.SIGKILL)
    return real_run(command, *args, **kwargs)
quota.subprocess.run = run
location = VolumeLocation(**eval(sys.argv[2]))
plugin_driver("local").directory(location, work_dir=Path(sys.argv[1]))
"""


def test_a_node_killed_while_adopting_files_adopts_them_again_on_its_next_start(
    work_dir,
) -> None:
    driver = plugin_driver("local")
    path = driver.directory(kept(0), work_dir=work_dir)
    (path / "energy.txt").write_text("-4.2\n")
    location = kept(16 * MIB)
    fields = {
        "driver": location.driver,
        "storage_class": location.storage_class,
        "organization_id": location.organization_id,
        "volume_id": location.volume_id,
        "capacity_bytes": location.capacity_bytes,
    }
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_COPY, str(work_dir), repr(fields)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert killed.returncode == -9
    assert not path.with_name(path.name + ".ext4").exists()
    assert driver.directory(location, work_dir=work_dir) == path
    assert os.path.ismount(path)
    assert (path / "energy.txt").read_text() == "-4.2\n"
    assert not path.with_name(f".{path.name}.ext4.partial").exists()


def test_removing_the_volume_unmounts_it_and_deletes_its_image(work_dir) -> None:
    driver = plugin_driver("local")
    path = driver.directory(kept(16 * MIB), work_dir=work_dir)
    driver.remove(kept(16 * MIB), work_dir=work_dir)
    assert not os.path.ismount(path)
    assert not path.exists()
    assert not path.with_name(path.name + ".ext4").exists()


class _Serve(BaseHTTPRequestHandler):
    body = b""
    send_length = True

    def do_GET(self) -> None:
        self.send_response(200)
        if self.send_length:
            self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def file_server() -> Iterator[tuple[str, type[_Serve]]]:
    handler = type("Handler", (_Serve,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/data.bin", handler
    server.shutdown()


def hostpath_volume(root: Path, capacity: int) -> VolumeLocation:
    return VolumeLocation(
        driver="hostpath",
        storage_class="shared",
        organization_id="org-acme",
        volume_id="9a9a9a9a-1111-4222-8333-444455556666",
        name="shared",
        parameters={"root": str(root)},
        capacity_bytes=capacity,
    )


def ingress(work_dir: Path, location: VolumeLocation, url: str) -> None:
    volumes = WorkflowVolumes(work_dir / "work", drivers=plugin_driver)
    fetch_ingress(
        volumes,
        "wf-1",
        {"inputs": [{"source": url, "destination": "data.bin"}]},
        locations={"inputs": location},
    )


def test_ingress_larger_than_the_capacity_is_refused_naming_the_transfer(
    work_dir, file_server
) -> None:
    url, handler = file_server
    handler.body = b"x" * (2 * MIB)
    location = hostpath_volume(work_dir / "shared", MIB)
    with pytest.raises(
        FailedPrecondition, match=r"volumes\.inputs\.ingress\[0\]: .* 2097152 bytes"
    ):
        ingress(work_dir, location, url)
    assert not list((work_dir / "shared").rglob("data.bin"))


def test_ingress_without_a_length_stops_at_the_capacity(work_dir, file_server) -> None:
    url, handler = file_server
    handler.body = b"x" * (3 * MIB)
    handler.send_length = False
    with pytest.raises(FailedPrecondition, match="capacity leaves 1048576 bytes"):
        ingress(work_dir, hostpath_volume(work_dir / "shared", MIB), url)


def test_ingress_counts_what_the_volume_already_holds(work_dir, file_server) -> None:
    url, handler = file_server
    handler.body = b"x" * (600 * 1024)
    location = hostpath_volume(work_dir / "shared", MIB)
    root = plugin_driver("hostpath").directory(location, work_dir=work_dir / "work")
    (root / "earlier.bin").write_bytes(b"y" * (600 * 1024))
    with pytest.raises(FailedPrecondition, match="leaves 434176 bytes"):
        ingress(work_dir, location, url)


def test_ingress_within_the_capacity_arrives(work_dir, file_server) -> None:
    url, handler = file_server
    handler.body = b"x" * (512 * 1024)
    location = hostpath_volume(work_dir / "shared", MIB)
    ingress(work_dir, location, url)
    assert (
        work_dir / "shared" / "org-acme" / location.volume_id / "data.bin"
    ).stat().st_size == 512 * 1024


def class_definition(driver: str, **more) -> dict:
    return {"name": "quota", "driver": driver, "capacity": {"size": "10", "unit": "GIB"}, **more}


def test_a_persistent_local_class_with_a_capacity_has_no_warning(work_dir) -> None:
    accepted = check_class(
        class_definition("local", properties={"persistent": True}), plugin_driver
    )
    assert not [w for w in accepted.warnings if w.startswith("class.capacity")]


def test_a_hostpath_class_with_a_capacity_is_warned_it_is_checked_only_at_ingress() -> None:
    accepted = check_class(
        class_definition("hostpath", parameters={"root": "/srv/x"}), plugin_driver
    )
    assert any("only before each ingress transfer" in w for w in accepted.warnings)


@pytest.mark.parametrize(
    ("capacity", "named"),
    [
        ({"size": "10"}, "class.capacity.unit"),
        ({"size": "10", "unit": "KIB"}, "class.capacity.unit"),
        ({"size": "-1", "unit": "GIB"}, "class.capacity.size"),
        ({"size": "ten", "unit": "GIB"}, "class.capacity.size"),
        ({"size": "10", "unit": "GIB", "hard": True}, "class.capacity"),
    ],
)
def test_a_malformed_capacity_is_refused_naming_the_field(capacity, named) -> None:
    with pytest.raises(InvalidArgument, match=rf"^{named}"):
        check_class({"name": "quota", "driver": "local", "capacity": capacity}, plugin_driver)
