"""Listing output in the real ``fuzzball`` CLI's formats: ``-o table|json|yaml``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click
import yaml

FORMATS = ("table", "json", "yaml")

F = TypeVar("F", bound=Callable[..., Any])


def output_option(func: F) -> F:
    """Add ``-o/--output table|json|yaml`` to a listing command."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Output format.",
    )(func)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, separated by `` | ``, headers upper-cased."""
    cells = [[str(h).upper() for h in headers]]
    cells += [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def emit(
    data: Any,
    fmt: str,
    *,
    headers: Sequence[str] = (),
    rows: Sequence[Sequence[Any]] = (),
) -> None:
    """Print ``data`` as JSON or YAML, or ``headers``/``rows`` as a table."""
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    elif fmt == "yaml":
        click.echo(yaml.safe_dump(_plain(data), sort_keys=False).rstrip())
    else:
        click.echo(format_table(headers, rows))


def _plain(data: Any) -> Any:
    """YAML's safe dumper takes only plain types: round-trip through JSON's view of them."""
    if isinstance(data, Mapping | list | tuple):
        return json.loads(json.dumps(data, default=str))
    return data
