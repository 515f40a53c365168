"""What ships for sites' own monitoring passes Prometheus's and Alertmanager's own checks,
and the dashboards are valid Grafana dashboard JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from fuzzball_core.monitoring import ROUTES, RULE_NAMES, RULES, dashboards
from fuzzball_core.substrate.metrics import Sample, exposition

REPO = Path(__file__).resolve().parents[2]
needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="needs Debian's prometheus package (promtool)"
)

#: Grafana's dashboard JSON model: the parts Grafana needs to import a dashboard (its own
#: schema is not published as JSON Schema; this follows the documented model)
DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"type": "integer", "minimum": 30},
        "time": {
            "type": "object",
            "required": ["from", "to"],
            "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
        },
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {
                "list": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "type"],
                        "properties": {
                            "type": {"enum": ["datasource", "query", "custom", "constant"]}
                        },
                    },
                }
            },
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos", "targets", "datasource"],
                "properties": {
                    "id": {"type": "integer", "minimum": 1},
                    "type": {"enum": ["timeseries", "stat", "gauge", "table", "bargauge"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["h", "w", "x", "y"],
                        "properties": {
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                            "x": {"type": "integer", "minimum": 0, "maximum": 23},
                        },
                    },
                    "targets": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["refId", "expr"],
                            "properties": {"expr": {"type": "string", "minLength": 1}},
                        },
                    },
                },
            },
        },
    },
}


@needs_promtool
def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


def test_the_seven_rules_are_the_documented_ones_with_their_actions() -> None:
    rules = {
        rule["alert"]: rule["labels"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
    }
    assert tuple(rules) == RULE_NAMES
    assert rules["FuzzballNodeAttributedJobFailures"]["fb_action"] == "cordon"
    assert rules["FuzzballNodeMemoryErrors"]["fb_action"] == "cordon"
    assert rules["FuzzballNodeGPUUncorrectableECC"]["fb_action"] == "evict"
    assert "fb_action" not in rules["FuzzballNodeHoldCeilingReached"]


@needs_promtool
def test_promtool_accepts_what_a_node_serves() -> None:
    text = exposition(
        [
            Sample(
                "fuzzball_node_memory_errors_total", 2, {"controller": "mc0", "type": "uncorrected"}
            ),
            Sample("fuzzball_node_disk_io_errors_total", 0, {"device": "sda"}),
            Sample(
                "fuzzball_node_filesystem_readonly",
                0,
                {"mountpoint": "/", "device": "/dev/sda1", "fstype": "ext4"},
            ),
            Sample("fuzzball_node_running_jobs", 1, help="Runs this node holds."),
        ]
    )
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# TYPE fuzzball_node_memory_errors_total counter" in text


@pytest.mark.skipif(shutil.which("amtool") is None, reason="needs prometheus-alertmanager (amtool)")
def test_amtool_accepts_the_routes() -> None:
    result = subprocess.run(["amtool", "check-config", str(ROUTES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_holding_alerts_still_reach_the_sites_receiver() -> None:
    routes = yaml.safe_load(ROUTES.read_text())["route"]["routes"]
    assert routes[0]["receiver"] == "fuzzball-holds" and routes[0]["continue"] is True
    assert routes[1]["receiver"] == "site"


@pytest.mark.parametrize("path", dashboards(), ids=lambda p: p.name)
def test_dashboard_is_valid_grafana_json(path: Path) -> None:
    jsonschema.validate(json.loads(path.read_text()), DASHBOARD_SCHEMA)


def test_three_dashboards_ship_and_node_resources_has_the_lsload_indices() -> None:
    titles = {json.loads(p.read_text())["title"]: p for p in dashboards()}
    assert set(titles) == {
        "Fuzzball / Fleet Health",
        "Fuzzball / Node Health",
        "Fuzzball / Node Resources",
    }
    panels = json.loads(titles["Fuzzball / Node Resources"].read_text())["panels"]
    indices = {"r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem"}
    assert indices <= {p["title"] for p in panels}


def test_shipped_dashboards_are_what_the_generator_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "monitoring_dashboards.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout
