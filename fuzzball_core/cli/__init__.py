"""The ``fuzzball`` command-line interface."""
