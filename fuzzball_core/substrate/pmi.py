"""The PMI-1 process manager a node offers the ranks of its part of a multinode job.

MPICH's ``libpmi`` speaks PMI-1's "simple" wire protocol: newline-terminated lines of
``key=value`` words starting with ``cmd=``, over the TCP address in ``PMI_PORT``; a rank
introduces itself with ``cmd=initack pmiid=<PMI_ID>``. Ranks publish connection details with
``put``, meet at ``barrier_in`` and read each other's with ``get``. Slurm's ``srun
--mpi=pmi2`` and Hydra's proxies play this role elsewhere; here the node agent does, and the
barrier spans nodes through Orchestrate (``fence``: this node's new keys in, everyone's out).

The service listens on loopback only: multinode containers share the host's network, and
each rank may introduce itself once, as one of this node's ranks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.substrate.ranks import RankLayout

log = logging.getLogger("fuzzball.substrate.pmi")

#: Sizes announced to ranks (``get_maxes``); longer keys or values are refused.
KVSNAME_MAX = 256
KEY_MAX = 256
VALUE_MAX = 4096
#: A line longer than this ends the connection (a rank never sends one).
LINE_MAX = 2 * (KEY_MAX + VALUE_MAX)

Fence = Callable[[int, dict[str, str]], Awaitable[dict[str, str]]]
_Waiting = tuple[node_pb2.Fence, "asyncio.Future[dict[str, str]]"]


class PmiService:
    """One node's PMI-1 service for one multinode run."""

    def __init__(
        self, layout: RankLayout, kvsname: str, fence: Fence, abort: Callable[[str], None]
    ) -> None:
        self.layout = layout
        self.kvsname = kvsname[:KVSNAME_MAX]
        self._fence = fence
        self._abort = abort
        self._kvs: dict[str, str] = {"PMI_process_mapping": layout.process_mapping}
        self._unsent: dict[str, str] = {}
        self._introduced: set[int] = set()
        self._at_barrier: dict[int, asyncio.StreamWriter] = {}
        self._barriers = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen on loopback; the port to put in ``PMI_PORT``."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=LINE_MAX)
        return int(self._server.sockets[0].getsockname()[1])

    def close(self) -> None:
        """Stop listening and drop every rank's connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in self._connections:
            task.cancel()

    # -- one rank's connection -----------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        rank: int | None = None
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, ConnectionError):  # over LINE_MAX, or reset
                    break
                if not line:
                    break
                words = _parse(line)
                command = words.get("cmd", "")
                if rank is None:
                    rank = self._introduce(command, words, writer)
                    if rank is None:
                        break
                else:
                    await self._answer(rank, command, words, writer)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            # A rank that ended (even without finalizing) is the launcher's business: the
            # first to fail takes its node's part down, and that ends the run everywhere.
            self._connections.discard(task)
            writer.close()
            if rank is not None:
                self._at_barrier.pop(rank, None)

    def _introduce(
        self, command: str, words: dict[str, str], writer: asyncio.StreamWriter
    ) -> int | None:
        """The rank a new connection speaks for (``initack``), or None to hang up."""
        try:
            rank = int(words.get("pmiid", ""))
        except ValueError:
            rank = -1
        if command != "initack" or rank not in self.layout.local_ranks:
            log.warning("PMI: refused a connection introducing itself as %r", words)
            return None
        if rank in self._introduced:
            log.warning("PMI: rank %d introduced itself twice", rank)
            return None
        self._introduced.add(rank)
        # one write for the four lines: each write to a rank is a system call that wakes it
        writer.write(
            b"".join(
                (
                    _line("initack"),
                    _line("set", size=self.layout.size),
                    _line("set", rank=rank),
                    _line("set", debug=0),
                )
            )
        )
        return rank

    async def _answer(
        self, rank: int, command: str, words: dict[str, str], writer: asyncio.StreamWriter
    ) -> None:
        if command == "init":
            _send(writer, "response_to_init", pmi_version=1, pmi_subversion=1, rc=0)
        elif command == "get_maxes":
            _send(
                writer,
                "maxes",
                kvsname_max=KVSNAME_MAX,
                keylen_max=KEY_MAX,
                vallen_max=VALUE_MAX,
                rc=0,
            )
        elif command == "get_appnum":
            _send(writer, "appnum", appnum=0, rc=0)
        elif command == "get_universe_size":
            _send(writer, "universe_size", size=self.layout.size, rc=0)
        elif command == "get_my_kvsname":
            _send(writer, "my_kvsname", kvsname=self.kvsname, rc=0)
        elif command == "put":
            self._put(words, writer)
        elif command == "get":
            value = self._kvs.get(words.get("key", ""))
            if value is None:
                _send(writer, "get_result", rc=-1, msg="key_not_found")
            else:
                _send(writer, "get_result", rc=0, value=value)
        elif command == "barrier_in":
            self._at_barrier[rank] = writer
            if len(self._at_barrier) == len(self.layout.local_ranks):
                await self._complete_barrier()
        elif command == "finalize":
            _send(writer, "finalize_ack")
        elif command == "abort":
            self._abort(f"rank {rank} called MPI_Abort (exit code {words.get('exitcode', '?')})")
        else:
            _send(writer, command or "unknown", rc=-1, msg="unsupported")

    def _put(self, words: dict[str, str], writer: asyncio.StreamWriter) -> None:
        key, value = words.get("key", ""), words.get("value", "")
        if not key or len(key) > KEY_MAX or len(value) > VALUE_MAX:
            _send(writer, "put_result", rc=-1, msg="bad_key_or_value")
            return
        self._kvs[key] = value
        self._unsent[key] = value
        _send(writer, "put_result", rc=0)

    async def _complete_barrier(self) -> None:
        """Every local rank is at the barrier: exchange keys with the other nodes, release."""
        waiting, self._at_barrier = self._at_barrier, {}
        unsent, self._unsent = self._unsent, {}
        self._barriers += 1
        self._kvs.update(await self._fence(self._barriers, unsent))
        for writer in waiting.values():
            _send(writer, "barrier_out")
            with contextlib.suppress(ConnectionError):
                await writer.drain()


def _parse(line: bytes) -> dict[str, str]:
    words: dict[str, str] = {}
    for word in line.decode("utf-8", errors="replace").split():
        key, _, value = word.partition("=")
        words[key] = value
    return words


def _line(command: str, **fields: object) -> bytes:
    text = " ".join([f"cmd={command}", *(f"{key}={value}" for key, value in fields.items())])
    return text.encode() + b"\n"


def _send(writer: asyncio.StreamWriter, command: str, **fields: object) -> None:
    writer.write(_line(command, **fields))


class FenceClient:
    """The node's side of cross-node barriers: sends each ``Fence`` to Orchestrate and
    wakes the waiting service when the matching ``FenceDone`` comes back."""

    def __init__(self, send: Callable[[node_pb2.NodeMessage], None]) -> None:
        self._send = send
        self._waiting: dict[tuple[int, int], _Waiting] = {}

    def for_run(self, run_id: int) -> Fence:
        """The ``fence`` callable of one run's :class:`PmiService`."""

        async def fence(seq: int, kvs: dict[str, str]) -> dict[str, str]:
            message = node_pb2.Fence(run_id=run_id, seq=seq, kvs=kvs)
            future: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
            self._waiting[(run_id, seq)] = (message, future)
            self._send(node_pb2.NodeMessage(fence=message))
            try:
                return await future
            finally:
                self._waiting.pop((run_id, seq), None)

        return fence

    def done(self, message: node_pb2.FenceDone) -> None:
        """Orchestrate's answer: every node of the run reached barrier ``seq``."""
        entry = self._waiting.get((message.run_id, message.seq))
        if entry is not None and not entry[1].done():
            entry[1].set_result(dict(message.kvs))

    def unanswered(self) -> list[node_pb2.NodeMessage]:
        """Fences still waiting, to send again on a new stream (Orchestrate may have lost
        them when it restarted)."""
        return [node_pb2.NodeMessage(fence=message) for message, _ in self._waiting.values()]
