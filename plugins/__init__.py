"""fuzzball_plugins: builtin schedulers, image backends and device/metrics hook plugins."""
