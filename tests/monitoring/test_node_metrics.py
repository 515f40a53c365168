"""The node's health metric sources and the health settings that govern its endpoints."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fuzzball_core.config import ConfigError, parse_config
from fuzzball_core.substrate.metrics import advertised
from fuzzball_plugins.metrics import node_health


def test_edac_counts_each_controllers_corrected_and_uncorrected_errors(tmp_path: Path) -> None:
    for name, (ce, ue) in {"mc0": (3, 0), "mc1": (0, 2)}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "ce_count").write_text(f"{ce}\n")
        (tmp_path / name / "ue_count").write_text(f"{ue}\n")
    assert node_health.memory_errors(tmp_path) == {
        'fuzzball_node_memory_errors_total{controller="mc0",type="corrected"}': 3.0,
        'fuzzball_node_memory_errors_total{controller="mc0",type="uncorrected"}': 0.0,
        'fuzzball_node_memory_errors_total{controller="mc1",type="corrected"}': 0.0,
        'fuzzball_node_memory_errors_total{controller="mc1",type="uncorrected"}': 2.0,
    }


def test_a_machine_without_edac_reports_no_memory_errors(tmp_path: Path) -> None:
    assert node_health.memory_errors(tmp_path / "absent") == {}


def test_disk_io_errors_are_read_as_hexadecimal_and_loop_devices_left_out(tmp_path: Path) -> None:
    for disk, count in {"sda": "0x1f", "loop0": "0x5"}.items():
        (tmp_path / disk / "device").mkdir(parents=True)
        (tmp_path / disk / "device" / "ioerr_cnt").write_text(f"{count}\n")
    (tmp_path / "nvme0n1").mkdir()  # no counter: nothing reported
    assert node_health.disk_io_errors(tmp_path) == {
        'fuzzball_node_disk_io_errors_total{device="sda"}': 31.0
    }


def test_read_only_disk_filesystems_are_1_and_images_and_pseudo_filesystems_absent(
    tmp_path: Path,
) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 ro,relatime 0 0\n"
        "/dev/sdb1 /scratch\\040space xfs rw,noatime 0 0\n"
        "/dev/loop3 /var/lib/fuzzball/images/x erofs ro 0 0\n"
        "proc /proc proc rw 0 0\n"
    )
    assert node_health.readonly_filesystems(mounts) == {
        'fuzzball_node_filesystem_readonly{mountpoint="/",device="/dev/sda1",fstype="ext4"}': 1.0,
        'fuzzball_node_filesystem_readonly{mountpoint="/scratch space",device="/dev/sdb1",'
        'fstype="xfs"}': 0.0,
    }


def test_node_metrics_default_to_9101_and_node_exporter_to_9100_on_every_interface() -> None:
    config = parse_config({})
    assert config.node_metrics_listen == "0.0.0.0:9101"
    assert config.node_exporter_listen == "0.0.0.0:9100"


def test_health_metrics_address_narrows_both_endpoints() -> None:
    config = parse_config({"health": {"metrics-address": "10.1.2.3"}})
    assert (config.node_metrics_listen, config.node_exporter_listen) == (
        "10.1.2.3:9101",
        "10.1.2.3:9100",
    )


def test_health_metrics_disabled_turns_both_endpoints_off() -> None:
    config = parse_config({"health": {"metrics-disabled": True}})
    assert (config.node_metrics_listen, config.node_exporter_listen) == ("", "")


def test_a_wildcard_listen_address_is_advertised_as_the_nodes_address() -> None:
    assert advertised("0.0.0.0:9101", "10.0.0.7") == "10.0.0.7:9101"
    assert advertised("127.0.0.1:9101", "10.0.0.7") == "127.0.0.1:9101"
    assert advertised("", "10.0.0.7") == ""


def test_retired_node_health_keys_load_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fuzzball.config"):
        config = parse_config(
            {"node-health": {"reliabilityScore": 0.8, "max-monitoring-held-percent": 40}}
        )
    assert config.node_health.max_monitoring_held_percent == 40
    assert "node-health.reliabilityScore is retired" in caplog.text


def test_an_unknown_node_health_key_is_still_refused() -> None:
    with pytest.raises(ConfigError, match=r"node-health\.max-held: unknown key"):
        parse_config({"node-health": {"max-held": 3}})


def test_the_ceiling_is_a_percentage() -> None:
    with pytest.raises(ConfigError, match="max-monitoring-held-percent"):
        parse_config({"node-health": {"max-monitoring-held-percent": 120}})
