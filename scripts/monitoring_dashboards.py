#!/usr/bin/env python3
"""Writes the Grafana dashboards shipped in fuzzball_core/monitoring/dashboards/.

The dashboards are package files (sites import them into their own Grafana); this script is
where they are written from, so the three share one panel layout and their queries sit next
to each other. Run it after changing a panel; tests/monitoring/test_dashboards.py checks that
the shipped files are what it writes.

    python3 scripts/monitoring_dashboards.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DASHBOARDS = Path(__file__).resolve().parents[1] / "fuzzball_core" / "monitoring" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: Grafana's dashboard JSON model version these files follow
SCHEMA_VERSION = 39
WIDTH = 24


def _templating(*, node_variable: bool) -> dict[str, Any]:
    variables: list[dict[str, Any]] = [
        {
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        }
    ]
    if node_variable:
        variables.append(
            {
                "name": "node",
                "label": "Node",
                "type": "query",
                "datasource": DATASOURCE,
                "query": {"query": "label_values(fuzzball_node_connected, node)", "refId": "node"},
                "definition": "label_values(fuzzball_node_connected, node)",
                "refresh": 2,
                "current": {},
                "hide": 0,
                "includeAll": False,
                "multi": False,
                "sort": 1,
            }
        )
    return {"list": variables}


def _panel(
    index: int,
    title: str,
    queries: list[tuple[str, str]],
    *,
    kind: str = "timeseries",
    unit: str = "short",
    width: int = 12,
    description: str = "",
) -> dict[str, Any]:
    per_row = WIDTH // width
    return {
        "id": index + 1,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {
            "h": 8,
            "w": width,
            "x": (index % per_row) * width,
            "y": (index // per_row) * 8,
        },
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {
                "refId": chr(ord("A") + n),
                "expr": expr,
                "legendFormat": legend,
                "datasource": DATASOURCE,
            }
            for n, (expr, legend) in enumerate(queries)
        ],
    }


def _dashboard(
    uid: str, title: str, panels: list[dict[str, Any]], *, node_variable: bool
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["fuzzball", "node-health"],
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": _templating(node_variable=node_variable),
        "annotations": {"list": []},
        "panels": panels,
    }


def fleet_health() -> dict[str, Any]:
    """Every node at once: connections, holds, the rules' inputs, the ceiling."""
    specs = [
        (
            "Connected nodes",
            [
                ("sum(fuzzball_node_connected)", "connected"),
                ("count(fuzzball_node_connected)", "scraped"),
            ],
            "stat",
        ),
        (
            "Firing node-health alerts",
            [
                (
                    "count by (alertname) "
                    '(ALERTS{alertstate="firing", alertname=~"FuzzballNode.*"})',
                    "{{alertname}}",
                )
            ],
            "timeseries",
        ),
        (
            "Memory errors (15m)",
            [
                (
                    "sum by (node, type) (increase(fuzzball_node_memory_errors_total[15m]))",
                    "{{node}} {{type}}",
                )
            ],
            "timeseries",
        ),
        (
            "Disk I/O errors (30m)",
            [("sum by (node) (increase(fuzzball_node_disk_io_errors_total[30m]))", "{{node}}")],
            "timeseries",
        ),
        (
            "GPU ECC errors (15m)",
            [
                (
                    "sum by (node, type) (increase(fuzzball_node_gpu_ecc_errors_total[15m]))",
                    "{{node}} {{type}}",
                )
            ],
            "timeseries",
        ),
        (
            "Job failures attributed to nodes (1h)",
            [
                (
                    "sum by (node, reason) "
                    "(increase(fuzzball_node_attributed_job_failures_total[1h]))",
                    "{{node}} {{reason}}",
                )
            ],
            "timeseries",
        ),
        (
            "Read-only filesystems",
            [("sum by (node) (fuzzball_node_filesystem_readonly)", "{{node}}")],
            "timeseries",
        ),
        (
            "Monitoring hold ceiling reached",
            [("max by (pool) (fuzzball_monitoring_hold_ceiling_reached)", "{{pool}}")],
            "stat",
        ),
    ]
    panels = [
        _panel(i, title, queries, kind=kind) for i, (title, queries, kind) in enumerate(specs)
    ]
    return _dashboard(
        "fuzzball-fleet-health", "Fuzzball / Fleet Health", panels, node_variable=False
    )


def node_health() -> dict[str, Any]:
    """One node: what the node-health rules look at."""
    n = '{node="$node"}'
    specs = [
        ("Connected to Orchestrate", [(f"fuzzball_node_connected{n}", "connected")]),
        ("Running jobs", [(f"fuzzball_node_running_jobs{n}", "jobs")]),
        ("Memory errors", [(f"fuzzball_node_memory_errors_total{n}", "{{controller}} {{type}}")]),
        ("Disk I/O errors", [(f"fuzzball_node_disk_io_errors_total{n}", "{{device}}")]),
        ("GPU ECC errors", [(f"fuzzball_node_gpu_ecc_errors_total{n}", "GPU {{gpu}} {{type}}")]),
        ("Read-only filesystems", [(f"fuzzball_node_filesystem_readonly{n}", "{{mountpoint}}")]),
        ("Failed device plugin", [(f"fuzzball_node_device_plugin_failed{n}", "failed")]),
        (
            "Job failures attributed to the node",
            [(f"fuzzball_node_attributed_job_failures_total{n}", "{{reason}}")],
        ),
    ]
    panels = [_panel(i, title, queries) for i, (title, queries) in enumerate(specs)]
    return _dashboard("fuzzball-node-health", "Fuzzball / Node Health", panels, node_variable=True)


#: LSF's lsload indices from node_exporter's series (and Substrate's for allocation)
LSLOAD = [
    ("r15s", "run queue now (15 s)", 'node_procs_running{node="$node"}', "short"),
    ("r1m", "load average, 1 minute", 'node_load1{node="$node"}', "short"),
    ("r15m", "load average, 15 minutes", 'node_load15{node="$node"}', "short"),
    (
        "ut",
        "CPU utilisation",
        '1 - avg(rate(node_cpu_seconds_total{node="$node", mode="idle"}[1m]))',
        "percentunit",
    ),
    (
        "pg",
        "paging rate (pages/s)",
        'rate(node_vmstat_pgpgin{node="$node"}[1m]) + rate(node_vmstat_pgpgout{node="$node"}[1m])',
        "short",
    ),
    (
        "io",
        "disk I/O (KB/s)",
        'sum(rate(node_disk_read_bytes_total{node="$node"}[1m])'
        ' + rate(node_disk_written_bytes_total{node="$node"}[1m])) / 1024',
        "short",
    ),
    (
        "ls",
        "login sessions (node_exporter --collector.logind)",
        'sum(node_logind_sessions{node="$node"})',
        "short",
    ),
    (
        "it",
        "idle time of interactive sessions (minutes; a textfile collector's"
        " fuzzball_node_interactive_idle_minutes)",
        'min(fuzzball_node_interactive_idle_minutes{node="$node"})',
        "m",
    ),
    (
        "tmp",
        "free space in /tmp",
        'node_filesystem_avail_bytes{node="$node", mountpoint="/tmp"}',
        "bytes",
    ),
    ("swp", "free swap", 'node_memory_SwapFree_bytes{node="$node"}', "bytes"),
    ("mem", "available memory", 'node_memory_MemAvailable_bytes{node="$node"}', "bytes"),
]


def node_resources() -> dict[str, Any]:
    """One node's load indices in LSF lsload's terms, and what Fuzzball allocated there."""
    panels = [
        _panel(i, index, [(expr, index)], kind="stat", unit=unit, width=6, description=meaning)
        for i, (index, meaning, expr, unit) in enumerate(LSLOAD)
    ]
    n = '{node="$node"}'
    allocation = [
        (
            "Cores: allocatable and allocated",
            [
                (f"fuzzball_node_allocatable_cores{n}", "allocatable"),
                (f"fuzzball_node_allocated_cores{n}", "allocated"),
            ],
            "short",
        ),
        (
            "Memory: allocatable and allocated",
            [
                (f"fuzzball_node_allocatable_memory_bytes{n}", "allocatable"),
                (f"fuzzball_node_allocated_memory_bytes{n}", "allocated"),
            ],
            "bytes",
        ),
    ]
    rows = (len(panels) + 3) // 4
    for offset, (title, queries, unit) in enumerate(allocation):
        panel = _panel(offset, title, queries, unit=unit)
        panel["id"] = len(panels) + 1
        panel["gridPos"]["y"] += rows * 8
        panels.append(panel)
    return _dashboard(
        "fuzzball-node-resources", "Fuzzball / Node Resources", panels, node_variable=True
    )


BUILDERS = {
    "fleet-health.json": fleet_health,
    "node-health.json": node_health,
    "node-resources.json": node_resources,
}


def rendered() -> dict[str, str]:
    """File name -> the JSON text this script writes."""
    return {name: json.dumps(build(), indent=2) + "\n" for name, build in BUILDERS.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the shipped files differ")
    args = parser.parse_args()
    stale = []
    for name, text in rendered().items():
        path = DASHBOARDS / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print("stale dashboards (run scripts/monitoring_dashboards.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
