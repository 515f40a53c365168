"""State shared by the commands of one CLI invocation (loaded lazily)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from fuzzball_core.config import FuzzballConfig, load_config
from fuzzball_core.plugins import PluginRegistry, get_registry

if TYPE_CHECKING:
    from fuzzball_core.cli.contexts import ContextsFile
    from fuzzball_core.client import FuzzballClient


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

    @cached_property
    def contexts(self) -> ContextsFile:
        """The API contexts file (``~/.config/fuzzball/config.yaml``)."""
        from fuzzball_core.cli.contexts import ContextsFile

        return ContextsFile.load()

    @cached_property
    def api(self) -> FuzzballClient:
        """A REST client for the active context's API (its version base probed once)."""
        from fuzzball_core.cli.sign_in import renewing_auth
        from fuzzball_core.client import FuzzballClient

        context = self.contexts.active()
        # a context with a refresh token renews its API token when the API says it expired
        return FuzzballClient.connect(
            context.address,
            context.token or None,
            verify=context.verify(),
            auth=renewing_auth(self.contexts, context),
        )
