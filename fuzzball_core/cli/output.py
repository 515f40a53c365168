"""Listing output in the real ``fuzzball`` CLI's formats: ``-o table|json|yaml``.

The API client hands the commands ``fuzzball.v1`` messages; ``-o json|yaml`` prints them as
the API's JSON (``fuzzball_core.api.rest_messages.to_json``), tables read their fields.

Text from a server is escaped before a terminal sees it (``spec.names.printable``: ESC,
NUL, other control characters and bidirectional overrides are shown as ``\\x1b``,
``\\u202e``...): every table cell, and the lines commands print from replies. JSON and YAML
escape such characters themselves. ``fuzzball workflow logs`` is the exception: it writes the
job's own output bytes unchanged (as ``kubectl logs`` and ``docker logs`` do), colours and
all, since they are what the user's own job printed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
import yaml
from google.protobuf.message import Message

from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.spec.names import printable

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


def document_output_option(func: F) -> F:
    """Add ``-o/--output yaml|json`` to a command showing one document that has no table
    (a storage class's definition): offering ``table`` there would print something else."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(("yaml", "json")),
        default="yaml",
        show_default=True,
        help="Output format.",
    )(func)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, separated by `` | ``, headers upper-cased; what
    a cell holds that a terminal would act on is escaped (:func:`printable`)."""
    cells = [[str(h).upper() for h in headers]]
    cells += [["" if v is None else printable(str(v)) for v in row] for row in rows]
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
    """Print ``data`` (messages, or lists of them, or plain data) as JSON or YAML, or
    ``headers``/``rows`` as a table."""
    data = _as_json(data)
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


def _as_json(data: Any) -> Any:
    """``data`` with every message in it as the API's JSON of that message."""
    if isinstance(data, Message):
        return to_json(data)
    if isinstance(data, list | tuple):
        return [_as_json(item) for item in data]
    if isinstance(data, Mapping):
        return {key: _as_json(value) for key, value in data.items()}
    return data


def moment(message: Message, field: str) -> datetime | None:
    """The time in a ``Timestamp`` field of ``message`` (UTC); ``None`` while it is unset."""
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=UTC)


def short_time(message: Message, field: str) -> str:
    """A ``Timestamp`` field to the second in UTC (``2024-05-01 10:00:00``); empty when
    unset."""
    when = moment(message, field)
    return "" if when is None else when.strftime("%Y-%m-%d %H:%M:%S")
