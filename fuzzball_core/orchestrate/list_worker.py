"""The REST gateway's workflow and node lists, served from a process of their own.

In Orchestrate's process the engine's main thread holds the GIL most of the time while a
cluster is busy (62-77 % of the sampled instants during an array at 5,000 nodes), and a
node list's 25-30 ms of CPU, taken in 1 ms turns with it, took 180-240 ms (median) there.
So Orchestrate starts this worker (``python -m fuzzball_core.orchestrate.list_worker``)
beside it, and its REST gateway hands ``GET /v3/workflows`` and ``GET /v3/nodes`` over once
it has authenticated the caller (:class:`ListWorker`, the gateway's
:class:`~fuzzball_core.api.rest.ListServer`): the worker reads the store itself, with its
own connections, and makes the body; the gateway only relays it.

What it shares with the engine's process:

* the caller: the gateway sends an account's API token over and the worker authenticates
  it with the same code (:class:`Accounts`: the token's row read at each request, so a
  revoked token is refused at its next list), over its own connection to the store rather
  than in the engine's process (in GIL turns with its thread); a login's JWT or a Federate's
  forwarded identity the gateway authenticates and sends the :class:`Principal`. The worker
  applies the same permission checks and organization isolation (:class:`ListReads`, the
  same code);
* the engine's memory of nodes (usage, last-heard times): over a socket pair, the worker asks
  for a copy and the engine's process answers with :class:`NodeUsages`' latest one (made on
  its loop, as for the gateway's own thread; serialized in a thread once a copy, not once a
  list, each node only when it changed) or "the same as before". Each node's row is still
  checked against the copy;
* nothing else: the worker changes nothing but the audit log (a refused list is audited).

The requests come over a Unix socket in a private (0700) temporary directory, one connection
a request. Until the worker has said it is ready, or while it is gone, the gateway serves the
lists itself as before; a worker that ended is started again after a pause that doubles while
it keeps ending soon after its start (:func:`restart_delay`). The worker ends when
Orchestrate's process does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import math
import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from multiprocessing.connection import Connection
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.api.node_listing import NodeListBody
from fuzzball_core.api.rest import workflow_list_text
from fuzzball_core.errors import FuzzballError, Internal, Unavailable
from fuzzball_core.orchestrate.node_usage_copies import (
    MAX_AGE,
    NodeUsageCopy,
    NodeUsages,
    WiredCopies,
    WireWriter,
)
from fuzzball_core.orchestrate.service import ListReads
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import connect, session_factory
from fuzzball_core.store.models import Node
from fuzzball_core.vocabulary import Permission

log = logging.getLogger(__name__)

#: the routes the worker serves
WORKFLOWS, NODES = "workflows", "nodes"
#: a reply's head: HTTP status and the body's length
_HEAD = struct.Struct("!HQ")
#: seconds the worker's accept loop waits before checking that Orchestrate still runs
_PARENT_CHECK = 1.0
#: Python's GIL switch interval in the worker (Orchestrate's own: ``server.GIL_SWITCH_INTERVAL``)
_GIL_SWITCH_INTERVAL = 0.001
#: seconds between two looks at the number of nodes (see keep_warm)
WARM_EVERY = 5.0
#: seconds between two looks for a new copy of the engine's memory to make the node list
#: ahead with (see WorkerLists.prepare_nodes), while a node list came within PREPARE_WHILE
#: seconds (a CLI's or UI's polling; the lists made ahead cost CPU only then, and the lease
#: traffic of an idle cluster none)
PREPARE_EVERY = 0.25
PREPARE_WHILE = 10.0
#: a GET shows the copy the list made ahead showed while one was made, or found made, within
#: this many seconds (as old as the engine's copies given to readers may be: ``MAX_AGE``);
#: else it asks for the engine's latest itself, as with no list made ahead
PREPARED_FOR = MAX_AGE
#: who the lists made unasked are made for: one who may read nodes and sees no account's
#: workflows (the texts of idle nodes are everyone's)
_WARMER = Principal("", "list-worker", permissions=frozenset({Permission.READ_NODES}))
#: seconds before a worker that ended is started again; doubled each time one ends within
#: RESTART_RESET seconds of its start (a worker that cannot start, or crashes at once, is not
#: restarted in a tight loop), up to RESTART_MOST
RESTART_FIRST = 1.0
RESTART_MOST = 60.0
RESTART_RESET = 60.0


def restart_delay(before: float | None, lived: float, first: float = RESTART_FIRST) -> float:
    """Seconds to wait before starting the worker again, after one that ran ``lived``
    seconds ended; ``before``: the wait before that one's start (``None``: it was the
    first). ``first`` again after a worker that lived :data:`RESTART_RESET` seconds, else
    twice ``before``, at most :data:`RESTART_MOST`."""
    if before is None or lived >= RESTART_RESET:
        return first
    return min(before * 2, max(RESTART_MOST, first))


class ListWorker:
    """The engine's side: starts the worker (again, after a pause, when it ends), answers
    its requests for copies of the engine's memory, and relays the gateway's list requests
    to it (:meth:`call`)."""

    def __init__(
        self,
        node_usages: NodeUsages,
        database_url: str,
        cluster_name: str,
        *,
        restart_first: float = RESTART_FIRST,
    ) -> None:
        self._node_usages = node_usages
        self._settings = {"database_url": database_url, "cluster_name": cluster_name}
        self._directory = tempfile.mkdtemp(prefix="fuzzball-lists-")  # mode 0700
        self._address = os.path.join(self._directory, "lists.sock")
        self._restart_first = restart_first
        self._process: subprocess.Popen[bytes] | None = None
        self._control: Connection | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        #: held while a worker is started or stopped (stop must not miss one being started)
        self._lock = threading.Lock()
        self._failed = False

    def start(self) -> None:
        """Start the worker process (it says when it is ready; lists are served in this
        process until then) and the thread that keeps it: it answers the worker's requests
        for copies and, when the worker ends, starts another after :func:`restart_delay`."""
        control = self._launch()
        threading.Thread(
            target=self._keep, args=(control,), name="list-worker-copies", daemon=True
        ).start()

    def _launch(self) -> Connection | None:
        """A new worker process and its control connection (``None``: it did not start, or
        the worker is being stopped)."""
        with self._lock:
            if self._stopping.is_set():
                return None
            # a worker that was killed left its socket there: the new one binds the address
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._address)
            ours, theirs = socket.socketpair()
            with ours, theirs:
                try:
                    self._process = subprocess.Popen(
                        [sys.executable, "-m", __name__, str(theirs.fileno())],
                        pass_fds=(theirs.fileno(),),
                    )
                except OSError as exc:  # the lists are served here, as without a worker
                    log.warning("the list worker did not start (%s); lists are served here", exc)
                    return None
                self._control = control = Connection(ours.detach())
            # a worker that ended at once: its control connection's EOF says so, to _keep
            with contextlib.suppress(OSError):
                control.send({**self._settings, "address": self._address})
            return control

    def _keep(self, control: Connection | None) -> None:
        """Serve each worker's requests for copies until it ends, then start another after
        a pause (a thread), until :meth:`stop`."""
        delay: float | None = None
        began = time.monotonic()
        while True:
            if control is not None:
                self._serve_copies(control)
            self._ready.clear()  # the gateway serves the lists itself meanwhile
            self._end_process()
            if self._stopping.is_set():
                return
            delay = restart_delay(delay, time.monotonic() - began, self._restart_first)
            log.warning("the list worker ended; lists are served here, restarting in %g s", delay)
            if self._stopping.wait(delay):
                return
            began = time.monotonic()
            control = self._launch()

    def _serve_copies(self, control: Connection) -> None:
        """Answer the worker's requests for copies of the engine's memory until it ends (the
        copies are made on the engine's loop, and serialized here, off it)."""
        sent: NodeUsageCopy | None = None
        writer = WireWriter()  # this worker's: it holds what the copies written before held
        try:
            while True:
                request = control.recv()
                if request == "ready":
                    self._failed = False
                    self._ready.set()
                    continue
                node_ids, fresh, asked = request
                # the worker names only the nodes its copy lacks; the copy must still cover
                # the others (one made off the engine's loop holds only those named)
                wanted = node_ids if sent is None else sent.nodes.union(node_ids)
                try:
                    copy = self._node_usages.read(wanted, fresh=fresh, asked=asked)
                except FuzzballError as exc:
                    control.send(("error", str(exc)))
                    continue
                if copy is sent:
                    control.send(("same", None))
                    continue
                control.send_bytes(b"C" + writer.write(copy))
                sent = copy
        except (EOFError, OSError):
            return  # the worker ended

    def _end_process(self) -> None:
        """Reap the worker that ended (killing it if only its connection did) and close its
        control connection."""
        with self._lock:
            process, self._process = self._process, None
            control, self._control = self._control, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()
        if control is not None:
            control.close()

    def wait_ready(self, timeout: float) -> bool:
        """Whether the worker said it is ready within ``timeout`` seconds."""
        return self._ready.wait(timeout)

    async def call(self, route: str, caller: Principal | str) -> tuple[int, bytes] | None:
        """The worker's answer to ``route`` for ``caller`` (a caller the gateway
        authenticated, or an account's API token the worker authenticates): HTTP status, JSON
        body; ``None`` when it cannot answer (not ready, or gone): the caller serves the list
        itself."""
        if not self._ready.is_set():
            return None
        try:
            return await asyncio.to_thread(self._ask, route, caller)
        except OSError as exc:
            if not self._failed:
                log.warning("the list worker did not answer (%s); lists are served here", exc)
                self._failed = True
            return None

    def _ask(self, route: str, caller: Principal | str) -> tuple[int, bytes]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(self._address)
            connection = Connection(sock.detach())
            with connection:
                connection.send((route, caller))
                reply = connection.recv_bytes()
        status, length = _HEAD.unpack_from(reply)
        return status, reply[_HEAD.size : _HEAD.size + length]

    def stop(self) -> None:
        """End the worker (it is not started again) and remove its socket's directory."""
        with self._lock:
            self._stopping.set()
            self._ready.clear()
            process = self._process
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # after the worker ended: the keeping thread has its EOF and reaps it; whichever of
        # it and this takes the connection out first closes it (twice is EBADF, or worse, a
        # descriptor number already reused)
        with self._lock:
            control, self._control = self._control, None
        if control is not None:
            control.close()
        shutil.rmtree(self._directory, ignore_errors=True)


class CopyReader:
    """The worker's side of the copies: the engine's latest, asked for over the control
    connection and kept until the engine's process has a newer one."""

    def __init__(self, control: Connection) -> None:
        self._control = control
        self._lock = threading.Lock()
        self._latest: NodeUsageCopy | None = None
        self._copies = WiredCopies()

    def read(
        self, node_ids: Collection[str], *, fresh: bool = False, asked: bool = True
    ) -> NodeUsageCopy:
        """The engine's copy of its memory of ``node_ids`` and every node it knows (see
        :meth:`NodeUsages.read`)."""
        with self._lock:
            latest = self._latest
            # the engine's copies hold every node it knows: only new ones are named
            known = latest.nodes if latest is not None else frozenset()
            self._control.send(([n for n in node_ids if n not in known], fresh, asked))
            reply = self._control.recv_bytes()
            if reply[:1] == b"C":
                self._latest = latest = self._copies.read(reply[1:])
                return latest
            kind, message = pickle.loads(reply)
            if kind == "error":
                raise Unavailable(message)
            assert latest is not None
            return latest


class WorkerLists:
    """What the worker answers with: the lists (:class:`ListReads`, the engine's process's
    own code) and the node list's body (:class:`NodeListBody` keeps each node's text from
    one list to the next), the node list made ahead of its GETs while they come
    (:meth:`prepare_nodes`)."""

    def __init__(self, reads: ListReads, accounts: Accounts) -> None:
        self._reads = reads
        self._accounts = accounts
        self._nodes = NodeListBody()
        #: when the last list was asked for (``time.monotonic``)
        self.last_asked = -math.inf
        #: the last node list's caller and when it asked (the lists made unasked not counted)
        self._node_caller: Principal | None = None
        self._node_asked = -math.inf
        #: the node list's text last made ahead of its GETs (or found made), and when
        self._prepared = ""
        self._prepared_at = -math.inf

    def text(
        self, route: str, caller: Principal | str, *, unasked: bool = False
    ) -> tuple[int, str]:
        """The HTTP status and JSON text of ``route``'s list for ``caller``: a caller the
        gateway authenticated, or an account's API token, authenticated here as the gateway
        would (Orchestrate's ``authenticate`` for a token that is not a JWT: the token's row
        read at each request, so a revoked token is refused at its next list). ``unasked``:
        a list made without a GET (:func:`keep_warm`), which makes none ahead."""
        self.last_asked = now = time.monotonic()
        try:
            who = self._accounts.authenticate(caller) if isinstance(caller, str) else caller
            if route == NODES:
                text = self._node_text(who)
                if not unasked:  # refused callers are not listed for (raised above)
                    self._node_caller, self._node_asked = who, now
                return 200, text
            return 200, workflow_list_text(self._reads.list_workflows(who))
        except FuzzballError as exc:
            return exc.http_status, json.dumps(exc.to_status())
        except Exception:
            log.exception("the list worker's %s list failed", route)
            error = Internal("internal error; the server log has the details")
            return error.http_status, json.dumps(error.to_status())

    def _node_text(self, who: Principal) -> str:
        """The node list's text for ``who``: with the copy of the engine's memory the list
        made ahead showed, while :meth:`prepare_nodes` keeps it current, so a GET whose
        nodes' rows and holds are as that list read them is given its views and text."""
        copy = None
        if time.monotonic() - self._prepared_at <= PREPARED_FOR:
            copy = self._reads.listed_copy
        return self._nodes.body(self._reads.list_nodes(who, copy=copy))

    def prepare_nodes(self) -> None:
        """Make the node list ahead of its GETs while they come (a thread): every
        :data:`PREPARE_EVERY` seconds, while one came within :data:`PREPARE_WHILE`, ask the
        engine's process for its latest copy of its memory and list the nodes with it for
        the last GET's caller (a list with nothing changed since the last is that list, a
        few ms of CPU at 5,000 nodes). As an array starts every node's usage changes
        between two copies, and a third of the rows' leases are written every 5 s: the GET
        that first showed a new copy or read the written rows made every node's view and
        text again (45-120 ms of CPU at 5,000 nodes, 130-1,100 ms of wall on loaded cores),
        the slowest GETs. The GETs then show the copy the list made ahead showed
        (:meth:`_node_text`) and find their rows' views made; no CPU while no GET comes."""
        while True:
            time.sleep(PREPARE_EVERY)
            try:
                self.prepare_once()
            except Exception as exc:  # the GETs ask for their copies themselves meanwhile
                log.debug("making the node list ahead failed: %s", exc)

    def prepare_once(self) -> bool:
        """One look of :meth:`prepare_nodes`: whether a node list other than the last was
        made ahead."""
        who = self._node_caller
        began = time.monotonic()
        if who is None or began - self._node_asked > PREPARE_WHILE:
            return False
        # asked for by a reader only when a GET came since the list made ahead before: the
        # engine keeps making copies unasked while readers come, not while this looks
        latest = self._reads.node_usages.read((), asked=self._node_asked > self._prepared_at)
        text = self._nodes.body(self._reads.list_nodes(who, copy=latest))
        made, self._prepared = text is not self._prepared, text
        self._prepared_at = began
        return made

    def answer(self, connection: Connection) -> None:
        """Serve one request (a connection's thread)."""
        try:
            with connection:
                route, caller = connection.recv()
                status, text = self.text(route, caller)
                body = text.encode()
                connection.send_bytes(_HEAD.pack(status, len(body)) + body)
        except (EOFError, OSError):
            pass  # the gateway went away: nobody to answer


def keep_warm(lists: WorkerLists, sessions: sessionmaker[Session]) -> None:
    """List the nodes unasked when their number changed and no list came for
    :data:`WARM_EVERY` seconds (at the start too): the first list of a new cluster's nodes
    then finds their texts made, the store's connection open and its statements compiled,
    and a copy of the engine's memory no older than the engine makes them for a reader that
    came (``KEEP_READY``: one every 5 s for ten minutes), rather than waiting for the engine's
    loop (250-850 ms during an array) and making 5,000 nodes' texts (about 70 ms of CPU)."""
    listed: int | None = None
    while True:
        try:
            with sessions() as session:
                count = session.scalar(select(func.count()).select_from(Node))
            if count != listed and time.monotonic() - lists.last_asked >= WARM_EVERY:
                lists.text(NODES, _WARMER, unasked=True)
                lists.text(WORKFLOWS, _WARMER, unasked=True)
                listed = count
        except Exception as exc:  # the store away a while: the next look tries again
            log.debug("warming the lists failed: %s", exc)
        time.sleep(WARM_EVERY)


def serve(control: Connection) -> None:
    """The worker's main loop: read the settings, connect to the store, listen, answer each
    request in a thread of its own, until Orchestrate's process ends."""
    settings: dict[str, Any] = control.recv()
    sessions = session_factory(connect(settings["database_url"]))
    # the REST list's nodes do not show when each was last heard (ListNodeInfo)
    reads = ListReads(sessions, CopyReader(control), AuditLog(sessions), last_heard=False)
    reads.cluster_name = settings["cluster_name"]
    lists = WorkerLists(reads, Accounts(sessions))
    # what the process made to start (modules, classes, the store's metadata: some 110,000
    # objects) is never garbage: the collector's full passes, which a 5,000-node list's new
    # views and texts set off every few lists, skip it (a full pass walked them all, about
    # 100 ms on loaded cores, landing on whichever GET allocated at the time)
    gc.collect()
    gc.freeze()
    threading.Thread(target=keep_warm, args=(lists, sessions), daemon=True).start()
    threading.Thread(target=lists.prepare_nodes, daemon=True).start()
    parent = os.getppid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(settings["address"])
        listener.listen(64)
        listener.settimeout(_PARENT_CHECK)
        control.send("ready")
        while os.getppid() == parent:
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            sock.setblocking(True)
            connection = Connection(sock.detach())
            threading.Thread(target=lists.answer, args=(connection,), daemon=True).start()
    # Orchestrate ended without stopping the worker (killed): nobody else removes the socket
    shutil.rmtree(os.path.dirname(settings["address"]), ignore_errors=True)


def main() -> None:
    """``python -m fuzzball_core.orchestrate.list_worker FD``: FD is the control socket."""
    logging.basicConfig(level=logging.WARNING, format="list worker: %(levelname)s %(message)s")
    # a workflow list's thread asks for the GIL while a node list's holds it: 1 ms turns, as
    # in Orchestrate's process, not Python's 5 ms
    sys.setswitchinterval(_GIL_SWITCH_INTERVAL)
    serve(Connection(int(sys.argv[1])))


if __name__ == "__main__":
    main()
