"""Root of the ``fuzzball`` CLI."""

from __future__ import annotations

import click


@click.group()
def cli() -> None:
    """Fuzzball: containerized HPC and AI/ML workflows."""


def main() -> None:
    cli()
