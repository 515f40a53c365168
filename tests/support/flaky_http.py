"""A loopback HTTP server that fails a set number of requests before it answers: a source
for tests of volume transfers' retries and of where fetched files land."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: what the server answers at every path once it stops failing
BODY = b"the fetched bytes\n"


class FlakyServer:
    """Serves BODY at every path, after answering 503 to the first ``failures`` requests."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.requests = 0
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests += 1
                ok = served.requests > served.failures
                body = BODY if ok else b""
                self.send_response(200 if ok else 503)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/in.txt"

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
