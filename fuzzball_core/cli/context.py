"""State shared by the commands of one CLI invocation (loaded lazily)."""

from __future__ import annotations

from functools import cached_property

from fuzzball_core.config import FuzzballConfig, load_config
from fuzzball_core.plugins import PluginRegistry, get_registry


class CliState:
    """The ``--config`` path and, on first use, the configuration and plugin registry."""

    def __init__(self, config_file: str | None) -> None:
        self.config_file = config_file

    @cached_property
    def config(self) -> FuzzballConfig:
        return load_config(self.config_file)

    @cached_property
    def registry(self) -> PluginRegistry:
        return get_registry(disabled=self.config.plugins.disable)
