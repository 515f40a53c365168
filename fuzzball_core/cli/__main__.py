"""``python -m fuzzball_core.cli`` is the ``fuzzball`` command."""

from fuzzball_core.cli.entry import main

main()
