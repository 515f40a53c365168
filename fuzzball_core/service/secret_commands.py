"""``fuzzball-orchestrate secrets rotate-key``: a new secret key, run on the server's machine.

Every stored secret (and every central configuration revision, sealed for its credentials)
is re-encrypted with a new primary key, after which the old keys are dropped from the key
file (``DATA_DIR/secret-keys``). A running Orchestrate reads the new file by itself; nothing
needs a restart.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from fuzzball_core.service.secrets import Secrets


def add_secret_commands(group: click.Group, secrets_for: Callable[[str | None], Secrets]) -> None:
    """Add the ``secrets`` command group to ``group``; ``secrets_for(config file)`` builds
    the secrets service (migrating its store) when a command runs."""

    @group.group("secrets")
    def secrets_group() -> None:
        """Secrets kept by this Orchestrate."""

    @secrets_group.command("rotate-key")
    @click.pass_obj
    def rotate_key(config_file: str | None) -> None:
        """Encrypt every secret with a new key and drop the old one."""
        count = secrets_for(config_file).rotate_key()
        click.echo(
            f"Re-encrypted {count} secret{'' if count == 1 else 's'} with a new key;"
            " the old key is gone."
        )
