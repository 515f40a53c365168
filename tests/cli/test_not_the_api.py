"""An address that answers, but not as a Fuzzball API (a proxy's or web server's catch-all
page): every command says so in one line naming the address, never a decoding traceback."""

from __future__ import annotations

import re

import httpx
import pytest
from support.loopback_http import QuietHandler, serving

from fuzzball_core.cli.main import main
from fuzzball_core.client import FuzzballClient, discover_base_url
from fuzzball_core.errors import Unavailable

PAGE = b"<html>hi</html>"


class CatchAll(QuietHandler):
    """Answers every path 200 with an HTML page, as a single-page app's server does."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)


class VersionOnly(CatchAll):
    """Answers ``/v3/version`` as the API does and every other path with the page."""

    def do_GET(self) -> None:
        if self.path == "/v3/version":
            self.answer(200, b'{"version": "v3.3.0"}')
        else:
            super().do_GET()


def fuzzball(monkeypatch, capsys, tmp_path, *args: str) -> tuple[int, str]:
    """``fuzzball ARGS`` as the console script runs it: its exit code and its stderr."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    return int(exited.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [("workflow", "list"), ("node", "list"), ("secret", "list"), ("workflow", "describe", "x")],
)
def test_a_catch_all_page_is_reported_as_no_fuzzball_api(monkeypatch, capsys, tmp_path, command):
    with serving(CatchAll) as port:
        address = f"http://127.0.0.1:{port}"
        fuzzball(monkeypatch, capsys, tmp_path, "context", "create", "web", "--address", address)
        code, err = fuzzball(monkeypatch, capsys, tmp_path, *command)
    assert code == 1
    assert err == (
        f"Error: {address} did not answer as a Fuzzball API"
        " (HTTP 200, text/html: '<html>hi</html>')\n"
    )


def test_a_reply_that_is_no_json_after_a_right_version_names_the_base(
    monkeypatch, capsys, tmp_path
):
    with serving(VersionOnly) as port:
        address = f"http://127.0.0.1:{port}"
        fuzzball(monkeypatch, capsys, tmp_path, "context", "create", "web", "--address", address)
        code, err = fuzzball(monkeypatch, capsys, tmp_path, "workflow", "list")
    assert code == 1
    assert err.startswith(f"Error: {address}/v3 did not answer as a Fuzzball API (HTTP 200,")
    assert "Traceback" not in err


def test_discovery_takes_only_a_version_reply_for_the_api():
    with serving(VersionOnly) as port:
        assert discover_base_url(f"127.0.0.1:{port}", None) == f"http://127.0.0.1:{port}/v3"


def test_a_log_line_that_is_no_json_is_reported_as_no_fuzzball_api():
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>hi</html>\n")

    client = FuzzballClient("http://api.test/v3", "t", transport=httpx.MockTransport(answer))
    with client, pytest.raises(Unavailable, match=re.escape("did not answer as a Fuzzball API")):
        client.read_logs("w1")


def test_an_account_token_reply_without_a_token_is_reported_as_no_fuzzball_api():
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"tokens": []})

    client = FuzzballClient("http://api.test/v3", "t", transport=httpx.MockTransport(answer))
    with client, pytest.raises(Unavailable, match="holds no token"):
        client.account_token("a1")
