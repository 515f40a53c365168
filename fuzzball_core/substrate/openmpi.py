"""Open MPI multinode jobs: Open MPI's own launcher, with Fuzzball as its remote agent.

Open MPI 4.1 (``mpirun``/ORTE) starts one daemon (``orted``) per node through a remote
agent, ``ssh HOST orted ARGS...`` by default; the daemons then start the ranks, serve them
PMIx and forward their output to ``mpirun``. Here the agent is a small script Fuzzball binds
into the job's container (:data:`AGENT_SCRIPT`, named by ``OMPI_MCA_plm_rsh_agent``), as the
Kubernetes MPI Operator makes ``kubectl exec`` the agent: no ssh daemon in any container.

* Part 0 of the job runs ``mpirun`` (:func:`mpirun_command`) around the job's command, with
  every part's container hostname as a host of ``procs-per-node`` slots, ranks mapped by
  slot (ranks ``part * P`` to ``part * P + P - 1`` on part ``part``, as for MPICH) and bound
  to cores.
* For each other part, ``mpirun`` runs the agent, which writes the daemon's command line into
  the launch folder (bound writable) under the part's hostname and exits 0. Part 0's
  Substrate notices each line as it is written (inotify, :func:`collect_daemon_commands`) and
  sends them to the other parts through Orchestrate (the run's fence 1; Open MPI's ranks use
  no PMI barrier of Fuzzball's).
* Each other part starts its container at the same time as part 0 does, its command a shell
  waiting for one line on its standard input (:data:`WAITER_COMMAND`); once the daemon's
  line arrives, Substrate writes it there (:func:`daemon_input`) and the shell runs it as
  ssh would have, in the foreground. The daemon then starts as soon as ``mpirun`` asked for
  it, without a container start between the two.

Before any of it, the parts exchange their nodes' addresses (fence 0, as generic jobs do;
:mod:`fuzzball_core.substrate.rendezvous`), and every container resolves every part's
hostname to its node's address: ``mpirun`` and the daemons look each other up by name.

``mpirun`` launches every daemon itself (``plm_rsh_no_tree_spawn``: daemons would otherwise
launch further daemons from their own node) and ranks and daemons talk over the subnet of
the node's address (``btl_tcp_if_include``, ``oob_tcp_if_include``), never over a node-local
bridge whose addresses repeat on every node, unless the job or its image chooses that
framework's interfaces itself (either of its ``_if_include`` and ``_if_exclude``). The agent
and ``no_tree_spawn`` are Fuzzball's whatever the job sets; every other ``OMPI_*`` the job
or its image sets is kept (:func:`environment`). A rank that fails ends ``mpirun`` with its exit
code, which ends part 0 and, through Orchestrate, every other part.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shlex
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from fuzzball_core.spec.multinode import OPEN_MPI_AGENT_ENV, OPEN_MPI_TREE_SPAWN_ENV
from fuzzball_core.substrate.ranks import RankLayout

#: Where the agent and the launch folder appear inside the job's containers.
OPENMPI_DIR = "/.fuzzball-openmpi"
AGENT = f"{OPENMPI_DIR}/agent"
LAUNCH_DIR = f"{OPENMPI_DIR}-launch"
#: the daemon's option to go to the background
DAEMONIZE = "--daemonize"
#: The key of a part's daemon command in the launch exchange: ``orted.<part>``.
DAEMON_KEY = "orted.{part}"
#: How often part 0's Substrate checks that its container still runs while it waits for the
#: agent's files (their arrival itself wakes it at once, through inotify).
RECHECK_SECONDS = 0.5
#: inotify's flags (linux/inotify.h): a file moved into, or written and closed in, the folder
IN_MOVED_TO = 0x00000080
IN_CLOSE_WRITE = 0x00000008
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

#: The container command of every part but the first: a shell that reads the daemon's command
#: line from its standard input and runs it as ssh would have (``/bin/sh -c LINE``), in the
#: foreground. Its input closing without a line (the run stopped first) ends it.
WAITER_COMMAND = ["/bin/sh", "-c", 'IFS= read -r line || exit 1; exec /bin/sh -c "$line"']

#: mpirun's remote agent: ``agent HOST COMMAND...``. The command is written as one line, as
#: ssh would pass it to the remote shell, to a temporary name first so that Substrate never
#: reads half of it.
AGENT_SCRIPT = f"""\
#!/bin/sh
host=$1
shift
printf '%s\\n' "$*" > "{LAUNCH_DIR}/.$host.tmp" && mv "{LAUNCH_DIR}/.$host.tmp" "{LAUNCH_DIR}/$host"
"""


#: What wires the ranks up, whatever the job or its image sets: ``mpirun`` reaches the other
#: parts only through Fuzzball's agent, and only part 0's Substrate watches for the daemon
#: lines (a daemon spawning further daemons, ``no_tree_spawn`` 0, would call the agent on
#: its own node, where nobody reads them). A job cannot sensibly set them: one that does is
#: warned at submission (``fuzzball_core.spec.fields``).
WIRING = {
    OPEN_MPI_AGENT_ENV: AGENT,
    OPEN_MPI_TREE_SPAWN_ENV: "1",
}
#: Defaults the job's ``env`` or its image's ``Env`` replaces: root allowed to run ranks (a
#: container's root is the job's user, not the node's).
DEFAULTS = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
}
#: Open MPI's interface choices, each an include and an exclude setting that must not both
#: be given (Open MPI aborts): the node network's subnet is included only when the job and
#: its image set neither of the pair.
INTERFACE_PAIRS = (
    ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_btl_tcp_if_exclude"),
    ("OMPI_MCA_oob_tcp_if_include", "OMPI_MCA_oob_tcp_if_exclude"),
)


def environment(subnet: str | None, own: Collection[str] = ()) -> dict[str, str]:
    """Open MPI's settings for every part's container (they go over the job's environment):
    :data:`WIRING`; :data:`DEFAULTS` but those named in ``own`` (the variables the job's
    ``env`` or its image's ``Env`` sets); and, when the node network's ``subnet``
    (``10.0.0.0/24``) is known, each include of :data:`INTERFACE_PAIRS` whose pair ``own``
    names neither of."""
    env = dict(WIRING)
    env.update((name, value) for name, value in DEFAULTS.items() if name not in own)
    if subnet:
        for include, exclude in INTERFACE_PAIRS:
            if include not in own and exclude not in own:
                env[include] = subnet
    return env


def mpirun_command(layout: RankLayout, hostnames: Sequence[str], command: list[str]) -> list[str]:
    """Part 0's argv: ``mpirun`` starting ``command`` as every rank of the job."""
    slots = ",".join(f"{host}:{layout.procs_per_node}" for host in hostnames)
    return [
        "mpirun",
        "-np",
        str(layout.size),
        "--host",
        slots,
        "--map-by",
        "slot",
        # more ranks than cores on a node still run, each bound to one of them
        "--bind-to",
        "core:overload-allowed",
        *command,
    ]


def daemon_input(line: str) -> bytes:
    """What another part's waiting shell (:data:`WAITER_COMMAND`) reads: the daemon's command
    line from the agent, run in the foreground: the daemon is the container's command, which
    would end with it if it went to the background (``--daemonize``, which ``mpirun`` asks
    of every daemon it starts through ssh)."""
    words = line.strip().split(" ")
    return " ".join(word for word in words if word != DAEMONIZE).encode() + b"\n"


def daemon_key(part: int) -> str:
    """The launch exchange's key for part ``part``'s daemon command."""
    return DAEMON_KEY.format(part=part)


async def collect_daemon_commands(
    launch_dir: Path, hostnames: Sequence[str], running: Callable[[], bool]
) -> dict[str, str] | None:
    """The daemon command ``mpirun`` gave the agent for every part but the first (the
    exchange's keys), once all are written; None when ``running()`` turns false first.

    The folder is watched with inotify, so a line is read the moment the agent moves it into
    place (``mpirun`` calls the agent for every other node at once when it starts); without
    inotify it is looked at every few milliseconds instead."""
    wanted = {host: part for part, host in enumerate(hostnames) if part > 0}
    commands: dict[str, str] = {}
    with _FolderWatch(launch_dir) as watch:
        while True:
            for host, part in wanted.items():
                key = daemon_key(part)
                path = launch_dir / host
                if key not in commands and path.exists():
                    commands[key] = path.read_text(errors="replace").strip()
            if len(commands) == len(wanted):
                return commands
            if not running():
                return None
            await watch.changed(RECHECK_SECONDS)


class _FolderWatch:
    """Wakes a waiter when a file is written or moved into a folder (inotify on the event
    loop); where inotify is unavailable, :meth:`changed` just waits a short while."""

    #: the wait between looks when there is no inotify
    FALLBACK_SECONDS = 0.01

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._fd = -1
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def __enter__(self) -> _FolderWatch:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return self
        if fd < 0:
            return self
        if libc.inotify_add_watch(fd, os.fsencode(self._folder), IN_MOVED_TO | IN_CLOSE_WRITE) < 0:
            os.close(fd)
            return self
        self._fd = fd
        self._loop.add_reader(fd, self._readable)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    def _readable(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while os.read(self._fd, 4096):  # the events themselves are not needed: look again
                pass
        self._event.set()

    async def changed(self, timeout: float) -> None:
        """Return once the folder changed since the last call, or after ``timeout``."""
        if self._fd < 0:
            await asyncio.sleep(min(timeout, self.FALLBACK_SECONDS))
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()


def describe(command: list[str]) -> str:
    """``command`` as one shell line (for the log)."""
    return shlex.join(command)
