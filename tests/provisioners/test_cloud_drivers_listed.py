"""The cloud provisioners are plugins like any other: ``fuzzball plugin list`` shows them and
each loads. (Needs the editable install's entry points from setup.py.)"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fuzzball_core.cli.main import cli
from fuzzball_core.drivers import Provisioner
from fuzzball_core.plugins import PluginRegistry

CLOUD_DRIVERS = ("aws", "gcp", "oci")


def test_plugin_list_shows_the_cloud_provisioners_loaded_without_error():
    result = CliRunner().invoke(cli, ["plugin", "list", "-o", "json"], catch_exceptions=False)
    listed = {d["name"]: d for d in json.loads(result.output)["drivers"]["provisioner"]}
    for name in CLOUD_DRIVERS:
        assert listed[name]["distribution"] == "fuzzball"
        assert (
            listed[name]["entryPoint"] == f"fuzzball_provisioners.{name}:{name.title()}Provisioner"
        )
        assert listed[name]["status"] == "ok"


@pytest.mark.parametrize("name", CLOUD_DRIVERS)
def test_each_cloud_provisioner_loads_as_orchestrate_loads_it(name):
    driver = PluginRegistry().driver("fuzzball.provisioners", name)
    assert isinstance(driver, Provisioner)
    assert driver.list_instances() == []  # no definition shown yet: no account to ask
