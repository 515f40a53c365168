"""What each process needs before it may start: a valid configuration and its plugins.

A process whose configuration is invalid, or that needs a plugin which is missing or broken,
refuses to start with one message naming the key or the plugin (exit code 2). Broken plugins
that it does not need are left for ``fuzzball plugin list`` to show.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from fuzzball_core.config import FuzzballConfig, load_config
from fuzzball_core.plugins import HOOK_GROUP, PluginRecord, PluginRegistry, get_registry

PROCESSES = ("orchestrate", "substrate", "federate", "cli")


def needed_plugins(process: str, config: FuzzballConfig) -> list[tuple[str, str]]:
    """The (entry-point group, name) pairs ``process`` cannot run without."""
    needs = [(HOOK_GROUP, name) for name in config.plugins.require]
    if process == "orchestrate":
        needs.append(("fuzzball.schedulers", config.scheduler.driver))
    elif process == "federate":
        needs.append(("fuzzball.routers", config.federate.router))
    return needs


@dataclass
class ProcessContext:
    """A started process's validated configuration, loaded plugins and instantiated drivers."""

    config: FuzzballConfig
    registry: PluginRegistry
    required: list[PluginRecord]
    drivers: dict[str, Any] = field(default_factory=dict)


def prepare_process(
    process: str, config_file: str | os.PathLike[str] | None = None
) -> ProcessContext:
    """Load the configuration and every plugin ``process`` needs.

    Raises ConfigError or PluginLoadError (both mean: refuse to start, exit code 2).
    """
    config = load_config(config_file)
    registry = get_registry(disabled=config.plugins.disable)
    required = [registry.require(group, name) for group, name in needed_plugins(process, config)]
    context = ProcessContext(config=config, registry=registry, required=required)
    if process == "orchestrate":
        context.drivers["scheduler"] = registry.driver(
            "fuzzball.schedulers", config.scheduler.driver, config.scheduler.options
        )
    elif process == "federate":
        context.drivers["router"] = registry.driver(
            "fuzzball.routers", config.federate.router, config.federate.router_options
        )
    return context
