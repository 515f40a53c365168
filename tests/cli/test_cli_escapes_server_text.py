"""The CLI escapes control characters in what it prints from a server (names in tables,
describe's fields, error messages), so a name stored before the name rules, or a hostile
server, cannot drive the user's terminal. A job's own output (``workflow logs``) is the job's
bytes and is printed unchanged."""

from __future__ import annotations

import click
import pytest
from support.live_api import HELLO

from fuzzball_core.cli.output import format_table
from fuzzball_core.console import run_console_script
from fuzzball_core.errors import NotFound

#: Clears the screen and sets the window title: what an attacker's name would do unescaped.
HOSTILE = "x\x1b[2J\x1b]0;owned\x07y"
SHOWN = "x\\x1b[2J\\x1b]0;owned\\x07y"


def stored_with_name(logged_in, name: str) -> str:
    """A workflow whose stored name is ``name``, as one stored before the name rules was
    (the service itself takes any name; the API refuses such names now)."""
    return logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO, name=name)


def test_workflow_list_escapes_a_stored_name(logged_in):
    stored_with_name(logged_in, HOSTILE)
    result = logged_in("workflow", "list")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert SHOWN in result.output


def test_workflow_describe_escapes_a_stored_name(logged_in):
    workflow_id = stored_with_name(logged_in, HOSTILE)
    result = logged_in("workflow", "describe", workflow_id)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert SHOWN in result.output


def test_json_output_escapes_a_stored_name_itself(logged_in):
    stored_with_name(logged_in, HOSTILE)
    result = logged_in("workflow", "list", "-o", "json")
    assert "\x1b" not in result.output
    assert "\\u001b[2J" in result.output


def test_workflow_logs_prints_the_jobs_own_bytes_unchanged(logged_in):
    workflow_id = stored_with_name(logged_in, "coloured")
    # (click itself drops colour sequences when the output is no terminal, as here)
    logged_in.service.emit_log(workflow_id, "jobs.hello", "bell\x07\ttab\x00nul\n")
    result = logged_in("workflow", "logs", workflow_id, "hello")
    assert result.output == "bell\x07\ttab\x00nul\n"


def test_a_table_cell_is_one_line_whatever_the_server_sent():
    table = format_table(["name", "status"], [["two\nlines", "ok"]])
    assert table.splitlines()[1:] == ["two\\nlines | ok"]


def test_an_error_message_from_a_server_is_printed_escaped(capsys):
    @click.command()
    def failing() -> None:
        raise NotFound(f"workflow {HOSTILE} not found\n  and a second line")

    with pytest.raises(SystemExit) as exited:
        run_console_script(failing, "fuzzball", [])
    assert exited.value.code == 1
    assert capsys.readouterr().err == (f"Error: workflow {SHOWN} not found\n  and a second line\n")
