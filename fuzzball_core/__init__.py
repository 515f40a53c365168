"""fuzzball_core: errors, configuration, hookspecs, plugin manager, workflow spec, services, CLI."""

__version__ = "0.1.0"
