"""The pieces of a chaos round that stand outside the cluster: a marker server the jobs report
their executions to, an API client that keeps every answer it got, a private PostgreSQL server
that can be restarted, a small tmpfs data directory that can be filled, and a SQLite lock.

Every one of them talks on loopback only and is undone by its ``close``/``stop`` (safe to call
twice), so a round that fails half-way still leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

# --- executions, as the jobs themselves report them -------------------------------------------


@dataclass(frozen=True)
class Marker:
    """One report of a job: ``start`` when its command began, ``end`` with the exit code it is
    about to exit with. ``key`` is ``WORKFLOW/JOB/TASK`` (task 0 for a job without an array)."""

    at: float
    kind: str
    key: str
    code: int | None


class MarkerServer:
    """A loopback HTTP server the jobs call (``busybox wget``) as they start and end.

    ``GET /start/KEY`` answers with the number of earlier starts of KEY, so a job can behave
    differently on a rerun (fail first, succeed after); ``GET /end/KEY/CODE`` records the
    code the job exits with. Markers are kept in order and appended to ``log_path`` so a
    failed round can be read afterwards.
    """

    def __init__(self, log_path: Path) -> None:
        self.markers: list[Marker] = []
        self._lock = threading.Lock()
        self._log = log_path.open("a")
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the name http.server calls
                body = server._record(self.path).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL the jobs' scripts call."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _record(self, path: str) -> str:
        kind, _, rest = path.strip("/").partition("/")
        code: int | None = None
        if kind == "end":
            rest, _, text = rest.rpartition("/")
            code = int(text)
        with self._lock:
            earlier = sum(1 for m in self.markers if m.kind == "start" and m.key == rest)
            marker = Marker(time.monotonic(), kind, rest, code)
            self.markers.append(marker)
            self._log.write(f"{marker.at:.3f} {kind} {rest} {'' if code is None else code}\n")
            self._log.flush()
        return str(earlier)

    def of(self, key: str) -> list[Marker]:
        """The markers of one job or task, in order."""
        with self._lock:
            return [m for m in self.markers if m.key == key]

    def keys(self) -> set[str]:
        """Every job or task that reported at least once."""
        with self._lock:
            return {m.key for m in self.markers}

    def close(self) -> None:
        """Stop serving and close the log (idempotent)."""
        if not self._log.closed:
            self._server.shutdown()
            self._server.server_close()
            self._log.close()


# --- the API, every answer kept ---------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One request and what came back: ``status`` 0 when nothing answered (connection refused
    or cut: the server was down), with ``problem`` saying what is wrong with the body, if
    anything."""

    method: str
    path: str
    status: int
    problem: str | None
    body: str


def status_shape_problem(status: int, body: bytes) -> str | None:
    """What is wrong with an answer's body: an error must be a ``google.rpc.Status`` (an
    object with an integer ``code``, a string ``message`` and, if present, a list
    ``details``), a success a JSON object. None when it is right."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return "the body is not JSON"
    if not isinstance(parsed, dict):
        return "the body is not a JSON object"
    if status < 400:
        return None
    if not isinstance(parsed.get("code"), int) or isinstance(parsed.get("code"), bool):
        return "an error without an integer code"
    if not isinstance(parsed.get("message"), str):
        return "an error without a message"
    if "details" in parsed and not isinstance(parsed["details"], list):
        return "an error whose details are not a list"
    if "Traceback (most recent call last)" in parsed["message"]:
        return "an error carrying a traceback"
    return None


class RecordingApi:
    """Orchestrate's REST API as an administrator sees it, keeping every answer."""

    def __init__(self, rest_url: str, token: str, timeout: float = 5.0) -> None:
        self.answers: list[Answer] = []
        #: why each refused submission was refused
        self.refusals: list[str] = []
        self._lock = threading.Lock()
        self._http = httpx.Client(
            base_url=rest_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )

    def request(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """(HTTP status, parsed JSON body or None) of a call under ``/v3`` (``/healthz`` and
        ``/readyz`` at the root); status 0 when nothing answered."""
        url = path if path in ("/healthz", "/readyz") else f"/v3{path}"
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self._keep(Answer(method, path, 0, None, f"{type(exc).__name__}: {exc}"))
            return 0, None
        problem = status_shape_problem(response.status_code, response.content)
        self._keep(Answer(method, path, response.status_code, problem, response.text[:500]))
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    def _keep(self, answer: Answer) -> None:
        with self._lock:
            self.answers.append(answer)

    def submit(self, specification: str, name: str, *, patience: float) -> str | None:
        """Start a workflow, trying again while the server is down or unavailable for up to
        ``patience`` seconds (as a client would); its id, or None if it was refused."""
        deadline = time.monotonic() + patience
        while True:
            status, body = self.request(
                "POST", "/workflows", json={"rawSpecification": specification, "name": name}
            )
            if status == 200 and isinstance(body, dict):
                return str(body["id"])
            if status not in (0, 503) or time.monotonic() > deadline:
                self.refusals.append(f"{status}: {json.dumps(body)[:300]}")
                return None
            time.sleep(0.3)

    def workflow(self, workflow_id: str) -> dict[str, Any] | None:
        """``GET /workflows/ID``, or None when it did not answer 200."""
        status, body = self.request("GET", f"/workflows/{workflow_id}")
        return body if status == 200 and isinstance(body, dict) else None

    def events(self, workflow_id: str) -> list[dict[str, Any]] | None:
        """The workflow's events, or None when the call did not answer 200."""
        status, body = self.request("GET", f"/workflows/{workflow_id}:events")
        if status != 200 or not isinstance(body, dict):
            return None
        return list(body.get("events", []))

    def workflow_ids(self) -> list[str] | None:
        """Every workflow the server lists, or None when the call did not answer 200."""
        status, body = self.request("GET", "/workflows")
        if status != 200 or not isinstance(body, dict):
            return None
        return [str(w["id"]) for w in body.get("workflows", [])]

    def logs(self, workflow_id: str) -> None:
        """Read the workflow's log once; each line of the stream must be a result or a
        Status-shaped error (kept as an answer of its own when it is not)."""
        path = f"/workflows/{workflow_id}:log"
        try:
            response = self._http.get(f"/v3{path}")
        except httpx.HTTPError as exc:
            self._keep(Answer("GET", path, 0, None, f"{type(exc).__name__}: {exc}"))
            return
        status = response.status_code
        if status >= 400:
            problem = status_shape_problem(status, response.content)
            self._keep(Answer("GET", path, status, problem, response.text[:500]))
            return
        problem = None
        for line in response.text.splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                problem = "a log stream line that is not JSON"
                break
            if "error" in item:
                problem = status_shape_problem(500, json.dumps(item["error"]).encode())
            elif "result" not in item:
                problem = "a log stream line with neither result nor error"
            if problem:
                break
        self._keep(Answer("GET", path, status, problem, response.text[:500]))

    def close(self) -> None:
        """Close the connections."""
        self._http.close()


# --- a PostgreSQL server of the suite's own ---------------------------------------------------


def postgres_binaries() -> Path | None:
    """Debian's newest PostgreSQL server binaries, or None when it is not installed."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*") if (p / "bin" / "pg_ctl").exists()),
        key=lambda p: int(p.name) if p.name.isdigit() else 0,
    )
    return versions[-1] / "bin" if versions else None


class PrivatePostgres:
    """A PostgreSQL server in a temporary directory on a loopback port, run as the
    ``postgres`` user: the suite restarts it, which it must not do to a server other tests
    share (``scripts/start-postgres.sh``'s)."""

    def __init__(self, bin_dir: Path, port: int) -> None:
        self.bin_dir = bin_dir
        self.port = port
        self.root = Path(tempfile.mkdtemp(prefix="fb-chaos-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        shutil.chown(self.root, "postgres", "postgres")
        self._as_postgres(
            "initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres", "--no-sync"
        )
        self.start()

    def _as_postgres(self, program: str, *args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.bin_dir / program), *args],
            check=True,
            capture_output=True,
            cwd=self.root,
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"
        )

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server (``immediate``: as a crash would, no checkpoint)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._as_postgres("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of one of its databases."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        self._sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database made by :meth:`create_database` (a server that is down: nothing)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _sql(self, statement: str) -> None:
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(self.bin_dir / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-qAtc",
                statement,
            ],
            check=True,
            capture_output=True,
            cwd=self.root,
        )

    def close(self) -> None:
        """Stop the server and remove its files."""
        if self.root.exists():
            self.stop("fast")
            shutil.rmtree(self.root, ignore_errors=True)


# --- faults on the data directory -------------------------------------------------------------


@dataclass
class SmallDataDir:
    """A tmpfs of ``size`` mounted at ``path``: Orchestrate's data directory, small enough to
    fill."""

    path: Path
    size: str = "48m"
    mounted: bool = field(default=False, init=False)

    def mount(self) -> None:
        """Mount it (the directory is created if needed)."""
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0700", "tmpfs", str(self.path)],
            check=True,
            capture_output=True,
        )
        self.mounted = True

    @property
    def filler(self) -> Path:
        return self.path / "chaos-filler"

    def fill(self) -> None:
        """Write zeros until the file system is full (ENOSPC ends it)."""
        chunk = b"\0" * (1 << 20)
        with contextlib.suppress(OSError), self.filler.open("wb") as out:
            while True:
                out.write(chunk)
                out.flush()

    def free(self) -> None:
        """Give the space back."""
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        """Unmount it (lazily, so a process still holding a file cannot keep it)."""
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)
            self.mounted = False


class SqliteLock:
    """Another connection holding the SQLite database with ``BEGIN EXCLUSIVE`` (a backup tool
    or a second writer), until :meth:`release`."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self._connection: sqlite3.Connection | None = None

    def hold(self) -> bool:
        """Take the lock; False when it could not be had within a few seconds."""
        connection = sqlite3.connect(self.database, timeout=5.0, isolation_level=None)
        try:
            connection.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError:
            connection.close()
            return False
        self._connection = connection
        return True

    def release(self) -> None:
        """Let go of it (idempotent)."""
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.execute("ROLLBACK")
            self._connection.close()
            self._connection = None
