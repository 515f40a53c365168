"""bench/proxy.py's peers (nginx, HAProxy): each installed one forwards to the service from
the configuration the bench writes and is gone once stopped; one not installed is named in
the bench's output, never left out silently."""

from __future__ import annotations

import importlib.util
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support.loopback_http import QuietHandler, serving

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/proxy.py as a module (its directory on the path while it loads: it imports
    its sibling; not after, where bench's scripts would shadow other top-level names)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_proxy", BENCH / "proxy.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


class _Hello(QuietHandler):
    def do_GET(self) -> None:
        self.answer(200, f"hello {self.path}".encode())


@pytest.fixture
def service_port() -> Iterator[int]:
    with serving(_Hello) as port:
        yield port


def test_a_peer_not_installed_is_reported_with_how_to_install_it(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    started, missing = bench.start_peers(tmp_path / "peers", 1)
    assert started == []
    assert missing == [
        "nginx: not installed; apt-get install nginx-light",
        "haproxy: not installed; apt-get install haproxy",
    ]


def test_each_installed_peer_forwards_to_the_service_and_ends_when_stopped(
    bench: ModuleType, tmp_path: Path, service_port: int
) -> None:
    peers, missing = bench.start_peers(tmp_path / "peers", service_port)
    try:
        if not peers:
            pytest.skip("; ".join(missing))
        for peer in peers:
            target = peer.target()
            with urllib.request.urlopen(target.url + "some/path", timeout=10) as answer:
                assert answer.read() == b"hello /some/path", peer.name
            assert peer.process.pid in target.pids()
    finally:
        for peer in peers:
            peer.stop()
    for peer in peers:
        assert peer.process.poll() is not None, f"{peer.name} still runs"
        assert not bench._accepts(peer.port), f"{peer.name} still listens"


class _Zeros(QuietHandler):
    def do_GET(self) -> None:
        size = int(self.path.rsplit("/", 1)[1])
        self.answer(200 if self.path.startswith("/bytes/") else 404, bytes(size))


@pytest.fixture
def zeros_port() -> Iterator[int]:
    with serving(_Zeros) as port:
        yield port


def test_curl_download_counts_every_mib_received_and_curls_cpu_for_them(
    bench: ModuleType, zeros_port: int
) -> None:
    if bench.CURL is None:
        pytest.skip("curl is not installed (scripts/install.sh installs it)")
    got = bench.curl_download(f"http://127.0.0.1:{zeros_port}/bytes/{4 << 20}", {}, 2)
    assert got["curl_mib"] == 8.0
    assert got["curl_mib_s"] > 0
    assert got["curl_client_us"] > 0


def test_curl_download_refused_by_the_service_is_an_error_not_a_figure(
    bench: ModuleType, zeros_port: int
) -> None:
    if bench.CURL is None:
        pytest.skip("curl is not installed (scripts/install.sh installs it)")
    with pytest.raises(RuntimeError, match="curl against"):
        bench.curl_download(f"http://127.0.0.1:{zeros_port}/missing/1", {}, 1)
