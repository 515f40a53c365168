"""What Fuzzball ships for monitoring its nodes, as package files (issue 15):

* ``rules/fuzzball-node-health.rules.yml``: the seven node-health alerting rules
  (``promtool check rules``);
* ``alertmanager/fuzzball-routes.yml``: Alertmanager routes sending alerts with ``fb_action``
  to Orchestrate's receiver and still to the site's own (``amtool check-config``);
* ``dashboards/*.json``: the Fleet Health, Node Health and Node Resources Grafana dashboards
  (written by ``scripts/monitoring_dashboards.py``).

:mod:`fuzzball_core.monitoring.stack` writes the bundled stack's configuration from them;
sites with their own Prometheus import them as they are (docs/monitoring.md).
"""

from __future__ import annotations

from pathlib import Path

FILES = Path(__file__).resolve().parent
RULES = FILES / "rules" / "fuzzball-node-health.rules.yml"
ROUTES = FILES / "alertmanager" / "fuzzball-routes.yml"
DASHBOARDS = FILES / "dashboards"
#: the alerts the rules define, in file order
RULE_NAMES = (
    "FuzzballNodeAttributedJobFailures",
    "FuzzballNodeMemoryErrors",
    "FuzzballNodeGPUUncorrectableECC",
    "FuzzballNodeDiskIOErrors",
    "FuzzballNodeRootFilesystemReadOnly",
    "FuzzballNodeDevicePluginFailed",
    "FuzzballNodeHoldCeilingReached",
)


def dashboards() -> list[Path]:
    """The shipped dashboards' files."""
    return sorted(DASHBOARDS.glob("*.json"))
