"""Node metrics hook plugins."""
