"""The local and on-prem drivers read a definition's ``config`` by its keys: a key neither
reads (a misspelling) is refused naming it, as the cloud drivers' settings are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fuzzball_core.drivers import InstanceSpec
from fuzzball_core.errors import InvalidArgument
from fuzzball_provisioners.local import LocalProvisioner
from fuzzball_provisioners.onprem import OnPremProvisioner


def spec(config: dict[str, Any]) -> InstanceSpec:
    return InstanceSpec(definition="lab", cores=1, memory=1 << 30, driver_config=config)


def test_a_local_definition_with_an_unknown_key_is_refused_naming_it(tmp_path: Path) -> None:
    config = {"state-dir": str(tmp_path), "base_config": "/etc/fuzzball.yaml"}
    with pytest.raises(InvalidArgument, match="base_config: unknown key"):
        LocalProvisioner().check_definition(spec(config))


def test_a_local_definitions_substrate_settings_are_checked_at_once(tmp_path: Path) -> None:
    config = {"state-dir": str(tmp_path), "substrate": {"cores": 0}}
    with pytest.raises(InvalidArgument, match=r"substrate\.cores"):
        LocalProvisioner().check_definition(spec(config))


def test_an_onprem_definition_with_an_unknown_key_is_refused_naming_it(tmp_path: Path) -> None:
    machine = {"host": "m1", "power-on": "true", "power-off": "true"}
    with pytest.raises(InvalidArgument, match="inventroy: unknown key"):
        OnPremProvisioner().check_definition(
            spec({"state-dir": str(tmp_path), "inventory": [machine], "inventroy": []})
        )


def test_an_onprem_machine_with_an_unknown_key_is_refused_naming_it(tmp_path: Path) -> None:
    machine = {"host": "m1", "power-on": "true", "power-off": "true", "poweroff": "x"}
    with pytest.raises(InvalidArgument, match=r"inventory\[0\]\.poweroff: unknown key"):
        OnPremProvisioner().check_definition(
            spec({"state-dir": str(tmp_path), "inventory": [machine]})
        )


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"bogus-key": 1}, "provisioner definition lab: config: bogus-key: unknown key"),
        ({"substrate": {"bogus": 1}}, "provisioner definition lab: config: "),
        ({"base-config": "/nonexistent.yaml"}, "provisioner definition lab: config: base-config"),
    ],
)
def test_a_local_definitions_refusal_names_the_definition(tmp_path: Path, config, named) -> None:
    with pytest.raises(InvalidArgument) as refused:
        LocalProvisioner().check_definition(spec({"state-dir": str(tmp_path), **config}))
    assert named in refused.value.message


def test_a_local_definition_without_a_state_dir_is_refused_naming_it() -> None:
    with pytest.raises(InvalidArgument, match="provisioner definition lab: config: state-dir"):
        LocalProvisioner().check_definition(spec({}))


def test_an_onprem_host_listed_twice_is_refused_naming_both_entries(tmp_path: Path) -> None:
    machine = {"host": "m1", "power-on": "true", "power-off": "true"}
    with pytest.raises(InvalidArgument, match=r"inventory\[1\]\.host: m1 is listed twice"):
        OnPremProvisioner().check_definition(
            spec({"state-dir": str(tmp_path), "inventory": [machine, dict(machine)]})
        )
