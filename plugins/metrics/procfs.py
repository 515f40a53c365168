"""Node metrics from the kernel's /proc: load, memory and uptime on every scrape."""

from __future__ import annotations

import os
from pathlib import Path

from fuzzball_core.hookspecs import hookimpl

PROC = Path("/proc")


def _meminfo(proc: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in (proc / "meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            # /proc/meminfo reports kB (KiB in fact) unless the line has no unit.
            scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
            values[key] = int(parts[0]) * scale
    return values


def collect(proc: Path = PROC) -> dict[str, float]:
    """Current samples, named as Prometheus's node_exporter would, under ``fuzzball_node_``."""
    load1, load5, load15 = (float(v) for v in (proc / "loadavg").read_text().split()[:3])
    memory = _meminfo(proc)
    uptime = float((proc / "uptime").read_text().split()[0])
    return {
        "fuzzball_node_load1": load1,
        "fuzzball_node_load5": load5,
        "fuzzball_node_load15": load15,
        "fuzzball_node_cpus": float(os.cpu_count() or 1),
        "fuzzball_node_memory_total_bytes": float(memory.get("MemTotal", 0)),
        "fuzzball_node_memory_available_bytes": float(memory.get("MemAvailable", 0)),
        "fuzzball_node_uptime_seconds": uptime,
    }


@hookimpl
def fuzzball_node_collect_metrics() -> dict[str, float]:
    """Load averages, memory and uptime of this node."""
    return collect()
