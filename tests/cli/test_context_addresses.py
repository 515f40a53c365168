"""What a context's address may be: ``context create`` refuses one without a host or with a
user name or password in it, and an address a file already holds with a password is never
printed with it (listings and errors show ``***``)."""

from __future__ import annotations

import socket

import pytest
import yaml

from fuzzball_core.cli.main import main
from fuzzball_core.client import shown_url

PASSWORD = "hunter2pw"


def fuzzball(monkeypatch, capsys, tmp_path, *args: str) -> tuple[int, str, str]:
    """``fuzzball ARGS`` as the console script runs it: exit code, stdout and stderr."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("address", ["http://", "https://", "http:///", "https:// "])
def test_an_address_without_a_host_is_refused_at_create(monkeypatch, capsys, tmp_path, address):
    code, _, err = fuzzball(
        monkeypatch, capsys, tmp_path, "context", "create", "e", "--address", address
    )
    assert code == 1
    assert err.startswith(f"Error: address: {address.strip()!r} is not host:port or")
    assert not (tmp_path / "fuzzball" / "config.yaml").exists()


@pytest.mark.parametrize(
    "address", [f"https://user:{PASSWORD}@127.0.0.1:1", f"user:{PASSWORD}@api.example.org:443"]
)
def test_an_address_with_a_password_is_refused_at_create_without_showing_it(
    monkeypatch, capsys, tmp_path, address
):
    code, out, err = fuzzball(
        monkeypatch, capsys, tmp_path, "context", "create", "cred", "--address", address
    )
    assert code == 1
    assert "holds a user name or password" in err and "--token" in err
    assert "***@" in err
    assert PASSWORD not in out + err
    assert not (tmp_path / "fuzzball" / "config.yaml").exists()


@pytest.fixture
def file_with_a_password(tmp_path):
    """A contexts file written by hand (or by another tool) with a password in the address."""
    address = f"https://user:{PASSWORD}@127.0.0.1:{closed_port()}"
    path = tmp_path / "fuzzball" / "config.yaml"
    path.parent.mkdir()
    document = {"activeContext": "cred", "contexts": [{"name": "cred", "address": address}]}
    path.write_text(yaml.safe_dump(document))
    return address


@pytest.mark.parametrize("output", ["table", "json", "yaml"])
def test_context_list_shows_a_password_in_an_address_as_stars(
    monkeypatch, capsys, tmp_path, file_with_a_password, output
):
    code, out, _ = fuzzball(monkeypatch, capsys, tmp_path, "context", "list", "-o", output)
    assert code == 0
    assert PASSWORD not in out
    assert shown_url(file_with_a_password) in out


def test_an_unreachable_address_is_named_without_its_password(
    monkeypatch, capsys, tmp_path, file_with_a_password
):
    code, _, err = fuzzball(monkeypatch, capsys, tmp_path, "workflow", "list")
    assert code == 1
    assert err.startswith(
        f"Error: cannot reach the Fuzzball API at {shown_url(file_with_a_password)}"
    )
    assert PASSWORD not in err


def test_a_shown_url_keeps_everything_but_the_user_name_and_password():
    assert shown_url("https://user:pw@h:1/v3") == "https://***@h:1/v3"
    assert shown_url("tok@h:1") == "***@h:1"
    assert shown_url("https://h:1/a@b") == "https://h:1/a@b"
