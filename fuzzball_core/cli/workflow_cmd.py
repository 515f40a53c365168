"""``fuzzball workflow``: the offline workflow commands (validate, upgrade).

Both read files exactly as submission does (``fuzzball_core.spec``), need no server, and never
show a traceback: unreadable files and invalid workflows end in messages and exit status 1.

Plugin validators reach ``validate`` through ``ctx.meta[EXTRA_VALIDATORS_KEY]`` (a list of
``fuzzball_core.spec.ExtraValidator``), which the root command fills from the
``fuzzball_validate_workflow`` hook.
"""

from __future__ import annotations

from pathlib import Path

import click

from fuzzball_core.errors import FuzzballError, InvalidArgument
from fuzzball_core.spec import field_violations, parse_workflow

#: ``click.Context.meta`` key under which the root CLI puts plugin workflow validators.
EXTRA_VALIDATORS_KEY = "fuzzball.workflow.extra_validators"


def _read(path: str) -> bytes:
    """The file's bytes, or a ClickException saying in words why it cannot be read."""
    try:
        return Path(path).read_bytes()
    except IsADirectoryError:
        raise click.ClickException(f"{path}: is a directory, not a workflow file") from None
    except FileNotFoundError:
        raise click.ClickException(f"{path}: no such file") from None
    except PermissionError:
        raise click.ClickException(f"{path}: permission denied") from None
    except OSError as exc:
        raise click.ClickException(f"{path}: cannot read: {exc.strerror or exc}") from None


@click.group(name="workflow")
def workflow() -> None:
    """Work with workflow files (Fuzzfiles)."""


@workflow.command(name="validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.pass_context
def validate(ctx: click.Context, files: tuple[str, ...]) -> None:
    """Check workflow FILES (v1 files are upgraded first, as on submission).

    Prints "FILE: valid" for each good file and its warnings on stderr; for a bad file prints
    every error with its field path. Exits 1 if any file is invalid or unreadable.
    """
    validators = ctx.meta.get(EXTRA_VALIDATORS_KEY, ())
    failed = False
    for path in files:
        try:
            parsed = parse_workflow(_read(path), source=path, extra_validators=validators)
            # the stages as a submission plans them: what only the plan can refuse (a
            # volume taking the name of another's egress stage) is refused here too
            parsed.plan(pull_stages=True)
        except click.ClickException as exc:
            click.echo(f"Error: {exc.message}", err=True)
            failed = True
            continue
        except InvalidArgument as exc:
            click.echo(f"{path}: invalid", err=True)
            for field, description in field_violations(exc) or [("", exc.message)]:
                click.echo(f"  {field or '(file)'}: {description}", err=True)
            failed = True
            continue
        except FuzzballError as exc:
            click.echo(f"{path}: {exc.code_name}: {exc.message}", err=True)
            failed = True
            continue
        for warning in parsed.warnings:
            click.echo(f"{path}: warning: {warning}", err=True)
        click.echo(f"{path}: valid")
    if failed:
        ctx.exit(1)


@workflow.command(name="upgrade")
@click.argument("file", type=click.Path(dir_okay=True))
@click.pass_context
def upgrade(ctx: click.Context, file: str) -> None:
    """Print FILE (a v1 or v4 workflow) as v4 YAML; warnings go to stderr."""
    try:
        parsed = parse_workflow(_read(file), source=file)
    except InvalidArgument as exc:
        click.echo(f"{file}: invalid, not upgraded", err=True)
        for field, description in field_violations(exc) or [("", exc.message)]:
            click.echo(f"  {field or '(file)'}: {description}", err=True)
        ctx.exit(1)
    except FuzzballError as exc:
        raise click.ClickException(f"{file}: {exc.message}") from None
    for warning in parsed.warnings:
        click.echo(f"{file}: warning: {warning}", err=True)
    click.echo(parsed.to_yaml(), nl=False)
