"""Plugin discovery of the builtins, which are registered through entry points like any other."""

import subprocess
import sys

from fuzzball_core.plugins import HOOK_GROUP, PluginRegistry


def test_builtin_hook_plugins_come_from_the_fuzzball_distribution():
    registry = PluginRegistry()
    names = {r.name: r for r in registry.records if r.group == HOOK_GROUP}
    assert {"nvidia", "procfs-metrics"} <= set(names)
    assert names["nvidia"].distribution == "fuzzball"
    assert names["nvidia"].status == "ok"
    assert "fuzzball_node_discover_devices" in names["nvidia"].hooks


def test_builtin_hooks_are_called_through_the_plugin_manager():
    registry = PluginRegistry()
    results = registry.hook.fuzzball_node_collect_metrics(node_id="n1")
    merged = {k: v for result in results if result for k, v in result.items()}
    assert merged["fuzzball_node_memory_total_bytes"] > 0


def test_disabled_hook_plugin_is_listed_but_not_called():
    registry = PluginRegistry(disabled=["procfs-metrics"])
    (record,) = registry.find(HOOK_GROUP, "procfs-metrics")
    assert record.status == "broken"
    assert "disabled" in record.error
    # other metrics plugins (node health, GPU ECC) may answer; procfs's samples are absent
    answers = registry.hook.fuzzball_node_collect_metrics(node_id="n1")
    assert not any("fuzzball_node_load1" in answer for answer in answers)


def test_drivers_are_imported_when_first_looked_at_not_at_discovery():
    # a fresh interpreter: this one's earlier tests have imported the drivers already
    probe = """
import sys
from fuzzball_core.plugins import PluginRegistry
registry = PluginRegistry()
print("fuzzball_provisioners.aws" in sys.modules)
(record,) = registry.find("fuzzball.provisioners", "aws")
print("fuzzball_provisioners.aws" in sys.modules, record.status)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True", "ok"]


def test_listing_imports_and_checks_every_driver():
    registry = PluginRegistry()
    assert all(r.unchecked is None for r in registry.records)
    assert any(r.group == "fuzzball.provisioners" and r.name == "gcp" for r in registry.records)


def test_disabling_a_hook_plugin_not_installed_warns_that_it_has_no_effect(caplog):
    with caplog.at_level("WARNING", logger="fuzzball_core.plugins"):
        PluginRegistry(disabled=["procfs-metrics", "no-such-plugin"])
    (warning,) = caplog.messages
    assert warning.startswith("plugins.disable: 'no-such-plugin' has no effect here: no hook")
    assert "procfs-metrics" in warning  # the installed ones are named


def test_disabling_a_drivers_name_warns_that_drivers_are_chosen_in_their_section(caplog):
    with caplog.at_level("WARNING", logger="fuzzball_core.plugins"):
        PluginRegistry(disabled=["aws"])
    assert caplog.messages == [
        "plugins.disable: 'aws' has no effect here: it is a driver's name;"
        " drivers are chosen in their own section"
    ]
