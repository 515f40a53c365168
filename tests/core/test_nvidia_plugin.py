"""The builtin NVIDIA device plugin, against a device tree laid out like the driver's."""

from pathlib import Path

from fuzzball_core.config import parse_config
from fuzzball_core.hookspecs import ContainerPreparation
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.substrate.devices import device_annotations
from fuzzball_plugins.devices import nvidia


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
