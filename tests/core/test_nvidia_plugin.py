"""The builtin NVIDIA device plugin, against a device tree laid out like the driver's."""

from pathlib import Path

import pytest
from support import fake_nvidia_driver
from support.fake_nvidia_driver import (
    PERSISTENCED_SOCKET,
    VERSION,
    make_driver,
    make_socket,
    on_host,
)

from fuzzball_core.config import parse_config
from fuzzball_core.hookspecs import ContainerPreparation
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.substrate.devices import device_annotations
from fuzzball_plugins.devices import ld_cache, nvidia, nvidia_driver


@pytest.fixture(autouse=True)
def fresh_driver_search(monkeypatch):
    """Each test's driver is searched for anew (an agent searches once), its MPS pipe
    directory the default one."""
    monkeypatch.delenv(nvidia_driver.MPS_PIPE_DIRECTORY_ENV, raising=False)
    nvidia_driver.driver_files.cache_clear()
    nvidia_driver.daemon_paths.cache_clear()
    yield
    nvidia_driver.driver_files.cache_clear()
    nvidia_driver.daemon_paths.cache_clear()


def fake_dev(tmp_path: Path, gpus: int, channels: int = 0) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    for i in range(gpus):
        (dev / f"nvidia{i}").touch()
    if channels:
        (dev / "nvidia-caps-imex-channels").mkdir()
        for i in range(channels):
            (dev / "nvidia-caps-imex-channels" / f"channel{i}").touch()
    return dev


def test_no_gpus_means_no_devices(tmp_path):
    assert nvidia.discover(fake_dev(tmp_path, gpus=0)) == []


def test_each_gpu_node_is_a_device_in_index_order(tmp_path):
    dev = fake_dev(tmp_path, gpus=11)
    gpus = nvidia.discover(dev)
    assert [d.id for d in gpus] == [str(i) for i in range(11)]
    assert {d.kind for d in gpus} == {"nvidia.com/gpu"}
    assert gpus[10].paths == (str(dev / "nvidia10"),)


def test_imex_channels_are_their_own_resource(tmp_path):
    devices = nvidia.discover(fake_dev(tmp_path, gpus=1, channels=2))
    assert [d.kind for d in devices].count("nvidia.com/imex-channel") == 2


def test_discovery_runs_as_a_hook_with_the_node_dev_root(tmp_path):
    dev = fake_dev(tmp_path, gpus=2)
    results = PluginRegistry().hook.fuzzball_node_discover_devices(
        node_config={"dev_root": str(dev)}
    )
    found = [d for result in results for d in result]
    assert len([d for d in found if d.kind == "nvidia.com/gpu"]) == 2


def test_container_gets_control_nodes_gpus_and_visible_devices(tmp_path):
    dev = fake_dev(tmp_path, gpus=4, channels=1)
    devices = nvidia.discover(dev)
    given = [d for d in devices if d.id in {"1", "3"} and d.kind == "nvidia.com/gpu"]
    given += [d for d in devices if d.kind == "nvidia.com/imex-channel"]
    container = ContainerPreparation()
    PluginRegistry().hook.fuzzball_job_prepare_container(job={}, devices=given, container=container)
    assert str(dev / "nvidiactl") in container.device_paths
    assert str(dev / "nvidia1") in container.device_paths
    assert str(dev / "nvidia0") not in container.device_paths
    assert container.env["NVIDIA_VISIBLE_DEVICES"] == "1,3"
    assert container.env["NVIDIA_IMEX_CHANNELS"] == "0"


def test_job_without_gpus_is_left_alone():
    container = ContainerPreparation()
    PluginRegistry().hook.fuzzball_job_prepare_container(job={}, devices=[], container=container)
    assert container == ContainerPreparation()


def fake_driver_proc(root: Path, models: dict[int, str]) -> None:
    """The driver's ``driver/nvidia/gpus/<pci>/information`` files under ``root``."""
    for minor, model in models.items():
        info = root / "driver" / "nvidia" / "gpus" / f"0000:0{minor}:00.0" / "information"
        info.parent.mkdir(parents=True)
        info.write_text(f"Model: \t\t {model}\nIRQ: 42\nDevice Minor: \t {minor}\n")


def test_a_gpus_model_is_reported_as_the_qualified_nvidia_gpu_model_attribute(tmp_path):
    dev = fake_dev(tmp_path, gpus=2)
    fake_driver_proc(tmp_path / "proc", {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3"})
    gpus = nvidia.discover(dev)
    assert [g.attributes for g in gpus] == [{"nvidia.com/gpu.model": "NVIDIA H100 80GB HBM3"}] * 2


def test_the_gpu_model_becomes_the_nodes_annotation(tmp_path):
    dev = fake_dev(tmp_path, gpus=1)
    fake_driver_proc(tmp_path / "proc", {0: "H100"})
    assert device_annotations(nvidia.discover(dev)) == {"nvidia.com/gpu.model": "H100"}


def test_a_dev_root_without_the_drivers_proc_tree_beside_it_reads_proc(tmp_path):
    assert nvidia.driver_proc_root(fake_dev(tmp_path, gpus=1)) == Path("/proc")


def test_discovery_reads_the_dev_root_of_the_substrate_section_as_the_agent_hands_it(tmp_path):
    dev = fake_dev(tmp_path, gpus=1)
    settings = parse_config({"substrate": {"dev-root": str(dev)}}).substrate
    node_config = settings.model_dump(mode="json", by_alias=True)  # as agent.py hands it
    results = PluginRegistry().hook.fuzzball_node_discover_devices(node_config=node_config)
    assert [d.id for result in results for d in result if d.kind == "nvidia.com/gpu"] == ["0"]


def prepare_gpu_job(dev: Path) -> ContainerPreparation:
    """The container of a job given the first GPU under ``dev``, as the plugin prepares it."""
    gpu = next(d for d in nvidia.discover(dev) if d.kind == "nvidia.com/gpu")
    container = ContainerPreparation()
    PluginRegistry().hook.fuzzball_job_prepare_container(job={}, devices=[gpu], container=container)
    return container


def test_a_gpu_job_gets_the_real_driver_libraries_under_their_sonames(tmp_path):
    dev = make_driver(tmp_path)

    binds = dict((dst, src) for src, dst in prepare_gpu_job(dev).binds)

    lib_dir = tmp_path / fake_nvidia_driver.LIB_DIR
    assert binds["/usr/local/nvidia/lib64/libcuda.so.1"] == str(lib_dir / f"libcuda.so.{VERSION}")
    assert binds["/usr/local/nvidia/lib64/libnvidia-ml.so.1"] == str(
        lib_dir / f"libnvidia-ml.so.{VERSION}"
    )
    assert "/usr/local/nvidia/lib64/libc.so.6" not in binds  # not the driver's


def test_a_gpu_job_gets_the_driver_tools_under_usr_local_nvidia_bin(tmp_path):
    dev = make_driver(tmp_path)

    binds = dict((dst, src) for src, dst in prepare_gpu_job(dev).binds)

    assert binds["/usr/local/nvidia/bin/nvidia-smi"] == str(tmp_path / "usr/bin/nvidia-smi")


def test_a_gpu_job_gets_the_running_drivers_gsp_firmware_at_its_own_path(tmp_path):
    dev = make_driver(tmp_path)

    binds = dict((dst, src) for src, dst in prepare_gpu_job(dev).binds)

    firmware = f"/lib/firmware/nvidia/{VERSION}/gsp_ga10x.bin"
    assert binds[firmware] == str(tmp_path / firmware.lstrip("/"))


def test_the_library_and_tool_directories_go_on_the_search_paths(tmp_path):
    container = prepare_gpu_job(make_driver(tmp_path))

    assert container.search_paths == {
        "LD_LIBRARY_PATH": ["/usr/local/nvidia/lib64"],
        "PATH": ["/usr/local/nvidia/bin"],
    }
    assert container.warnings == []


def test_a_library_left_by_another_driver_version_is_passed_over(tmp_path):
    stale = tmp_path / fake_nvidia_driver.LIB_DIR / "libnvidia-cfg.so.535.104.05"
    stale.parent.mkdir(parents=True)
    stale.write_text("old\n")
    entry = ("libnvidia-cfg.so.1", f"/{fake_nvidia_driver.LIB_DIR}/libnvidia-cfg.so.535.104.05")
    dev = make_driver(tmp_path, extra_entries=[(*entry, ld_cache.native_flags())])

    targets = [dst for _, dst in prepare_gpu_job(dev).binds]

    assert "/usr/local/nvidia/lib64/libnvidia-cfg.so.1" not in targets
    assert "/usr/local/nvidia/lib64/libcuda.so.1" in targets


@pytest.mark.skipif(
    ld_cache.native_flags() == ld_cache.ELF_LIBC6, reason="an architecture without 64-bit flags"
)
def test_the_32_bit_libraries_are_left_out(tmp_path):
    lib32 = tmp_path / "usr/lib"
    lib32.mkdir(parents=True)
    (lib32 / f"libnvidia-encode.so.{VERSION}").write_text("32-bit\n")
    entry = ("libnvidia-encode.so.1", f"/usr/lib/libnvidia-encode.so.{VERSION}")
    dev = make_driver(tmp_path, extra_entries=[(*entry, ld_cache.ELF_LIBC6)])

    targets = [dst for _, dst in prepare_gpu_job(dev).binds]

    assert "/usr/local/nvidia/lib64/libnvidia-encode.so.1" not in targets


def test_without_the_modules_version_the_libraries_tell_it(tmp_path):
    dev = make_driver(tmp_path)
    (tmp_path / "proc/driver/nvidia/version").unlink()

    files = nvidia.driver_files(dev)

    assert files.version == VERSION
    assert [dst for _, dst in files.firmware] == [f"/lib/firmware/nvidia/{VERSION}/gsp_ga10x.bin"]


def test_a_node_without_driver_libraries_gives_the_device_nodes_and_a_warning(tmp_path):
    dev = make_driver(tmp_path, libraries=False)

    container = prepare_gpu_job(dev)

    assert str(dev / "nvidia0") in container.device_paths
    assert container.binds == []
    assert container.search_paths == {}
    (warning,) = container.warnings
    assert (
        f"no NVIDIA driver libraries of driver {VERSION} in {tmp_path}/etc/ld.so.cache" in warning
    )
    assert "no libcuda, libnvidia-ml or nvidia-smi" in warning


def test_a_job_without_gpus_gets_no_driver_files(tmp_path):
    dev = make_driver(tmp_path)
    channel = dev / "nvidia-caps-imex-channels" / "channel0"
    channel.parent.mkdir()
    channel.touch()
    channels = [d for d in nvidia.discover(dev) if d.kind == "nvidia.com/imex-channel"]
    container = ContainerPreparation()

    PluginRegistry().hook.fuzzball_job_prepare_container(
        job={}, devices=channels, container=container
    )

    assert container.binds == [] and container.search_paths == {} and container.warnings == []


def test_the_driver_is_searched_once_per_agent_at_discovery(tmp_path, monkeypatch):
    dev = make_driver(tmp_path)
    searches = []
    search = nvidia_driver.find_driver_files
    monkeypatch.setattr(
        nvidia_driver, "find_driver_files", lambda *a: searches.append(a) or search(*a)
    )

    PluginRegistry().hook.fuzzball_node_discover_devices(node_config={"dev-root": str(dev)})
    assert len(searches) == 1
    for _ in range(3):
        prepare_gpu_job(dev)

    assert len(searches) == 1


def test_an_absolute_symlink_resolves_inside_the_host_root(tmp_path):
    (tmp_path / "usr/lib64").mkdir(parents=True)
    (tmp_path / "usr/lib64/libcuda.so.1").write_text("real\n")
    (tmp_path / "lib64").symlink_to("/usr/lib64")  # as on the host: absolute

    resolved = nvidia_driver.resolve_in_root(tmp_path, "/lib64/libcuda.so.1")

    assert resolved == tmp_path / "usr/lib64/libcuda.so.1"


def test_a_symlink_loop_resolves_to_nothing(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")

    assert nvidia_driver.resolve_in_root(tmp_path, "/a") is None


def test_a_driver_file_that_cannot_be_read_is_a_warning_not_a_failed_plugin(tmp_path, monkeypatch):
    dev = make_driver(tmp_path)

    def unreadable(*_):
        raise PermissionError(13, "Permission denied", "/usr/lib64")

    monkeypatch.setattr(nvidia_driver, "find_driver_files", unreadable)

    results = PluginRegistry().hook.fuzzball_node_discover_devices(
        node_config={"dev-root": str(dev)}
    )
    container = prepare_gpu_job(dev)

    assert [d.id for result in results for d in result if d.kind == "nvidia.com/gpu"] == ["0"]
    (warning,) = container.warnings
    assert "the driver's files could not be read ([Errno 13] Permission denied" in warning


# -- the driver's daemons' sockets -------------------------------------------------------------


def test_a_gpu_job_gets_the_persistence_daemons_socket_read_write_at_its_own_path(tmp_path):
    container = prepare_gpu_job(make_driver(tmp_path))

    assert container.socket_binds == [
        (str(tmp_path / "run/nvidia-persistenced/socket"), PERSISTENCED_SOCKET)
    ]
    assert PERSISTENCED_SOCKET not in [dst for _, dst in container.binds]  # not read-only


def test_the_fabric_managers_socket_is_bound_where_the_host_runs_one(tmp_path):
    dev = make_driver(tmp_path, persistenced=False)
    make_socket(on_host(tmp_path, nvidia_driver.FABRICMANAGER_SOCKET))

    container = prepare_gpu_job(dev)

    assert container.socket_binds == [
        (str(tmp_path / "run/nvidia-fabricmanager/socket"), nvidia_driver.FABRICMANAGER_SOCKET)
    ]


def test_a_host_running_none_of_the_daemons_gives_no_sockets(tmp_path):
    container = prepare_gpu_job(make_driver(tmp_path, persistenced=False))

    assert container.socket_binds == []
    assert container.warnings == []


def test_an_mps_daemon_started_after_the_agent_is_found_at_the_next_job_start(tmp_path):
    dev = make_driver(tmp_path)
    PluginRegistry().hook.fuzzball_node_discover_devices(node_config={"dev-root": str(dev)})
    before = prepare_gpu_job(dev)
    pipes = tmp_path / "tmp/nvidia-mps"
    make_socket(pipes / "control")

    after = prepare_gpu_job(dev)

    assert "/tmp/nvidia-mps" not in [dst for _, dst in before.socket_binds]
    assert (str(pipes), "/tmp/nvidia-mps") in after.socket_binds


def test_a_daemon_stopped_after_the_agent_started_is_not_bound(tmp_path):
    dev = make_driver(tmp_path)
    PluginRegistry().hook.fuzzball_node_discover_devices(node_config={"dev-root": str(dev)})
    on_host(tmp_path, PERSISTENCED_SOCKET).unlink()

    assert prepare_gpu_job(dev).socket_binds == []


def test_the_mps_pipe_directory_is_the_one_the_agents_environment_names(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/var/lib/nvidia-mps/")
    dev = make_driver(tmp_path, persistenced=False)
    make_socket(tmp_path / "var/lib/nvidia-mps/control")
    make_socket(tmp_path / "tmp/nvidia-mps/control")  # the default, not used

    container = prepare_gpu_job(dev)

    assert container.socket_binds == [(str(tmp_path / "var/lib/nvidia-mps"), "/var/lib/nvidia-mps")]


def test_the_mps_pipe_directory_is_settled_once_per_agent(tmp_path, monkeypatch):
    dev = make_driver(tmp_path, persistenced=False)
    make_socket(tmp_path / "tmp/nvidia-mps/control")
    PluginRegistry().hook.fuzzball_node_discover_devices(node_config={"dev-root": str(dev)})
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/elsewhere")

    container = prepare_gpu_job(dev)

    assert container.socket_binds == [(str(tmp_path / "tmp/nvidia-mps"), "/tmp/nvidia-mps")]


def test_a_relative_mps_pipe_directory_is_left_out(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "nvidia-mps")
    dev = make_driver(tmp_path, persistenced=False)
    make_socket(tmp_path / "tmp/nvidia-mps/control")

    assert prepare_gpu_job(dev).socket_binds == []


def test_a_symlink_in_place_of_the_mps_pipe_directory_is_not_bound(tmp_path):
    dev = make_driver(tmp_path, persistenced=False)
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp/nvidia-mps").symlink_to(tmp_path / "etc")  # left by anyone, in /tmp

    assert prepare_gpu_job(dev).socket_binds == []


def test_a_plain_file_where_a_daemons_socket_belongs_is_not_bound(tmp_path):
    dev = make_driver(tmp_path, persistenced=False)
    socket_path = on_host(tmp_path, PERSISTENCED_SOCKET)
    socket_path.parent.mkdir(parents=True)
    socket_path.write_text("not a socket\n")

    assert prepare_gpu_job(dev).socket_binds == []
