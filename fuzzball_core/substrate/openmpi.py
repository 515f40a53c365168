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
  Substrate collects the lines (:func:`collect_daemon_commands`) and sends them to the other
  parts through Orchestrate (the run's fence 1; Open MPI's ranks use no PMI barrier of
  Fuzzball's).
* Each other part waits for them before starting its container, whose command is the
  daemon's line run by ``/bin/sh -c`` (what ssh would have done with it), in the foreground.

Before any of it, the parts exchange their nodes' addresses (fence 0, as generic jobs do;
:mod:`fuzzball_core.substrate.rendezvous`), and every container resolves every part's
hostname to its node's address: ``mpirun`` and the daemons look each other up by name.

``mpirun`` launches every daemon itself (``plm_rsh_no_tree_spawn``: daemons would otherwise
launch further daemons from their own node) and ranks and daemons talk over the subnet of
the node's address (``btl_tcp_if_include``, ``oob_tcp_if_include``), never over a node-local
bridge whose addresses repeat on every node. A rank that fails ends ``mpirun`` with its exit
code, which ends part 0 and, through Orchestrate, every other part.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from fuzzball_core.substrate.ranks import RankLayout

#: Where the agent and the launch folder appear inside the job's containers.
OPENMPI_DIR = "/.fuzzball-openmpi"
AGENT = f"{OPENMPI_DIR}/agent"
LAUNCH_DIR = f"{OPENMPI_DIR}-launch"
#: the daemon's option to go to the background
DAEMONIZE = "--daemonize"
#: The key of a part's daemon command in the launch exchange: ``orted.<part>``.
DAEMON_KEY = "orted.{part}"
#: How often part 0's Substrate looks for the agent's files (mpirun calls the agent for every
#: other node at once when it starts).
POLL_SECONDS = 0.05

#: mpirun's remote agent: ``agent HOST COMMAND...``. The command is written as one line, as
#: ssh would pass it to the remote shell, to a temporary name first so that Substrate never
#: reads half of it.
AGENT_SCRIPT = f"""\
#!/bin/sh
host=$1
shift
printf '%s\\n' "$*" > "{LAUNCH_DIR}/.$host.tmp" && mv "{LAUNCH_DIR}/.$host.tmp" "{LAUNCH_DIR}/$host"
"""


def environment(subnet: str | None) -> dict[str, str]:
    """Open MPI's settings for every part's container: Fuzzball as the remote agent, every
    daemon launched by ``mpirun``, the node network's ``subnet`` (``10.0.0.0/24``) for its
    traffic when it is known, and root allowed to run ranks (a container's root is the job's
    user, not the node's)."""
    env = {
        "OMPI_MCA_plm_rsh_agent": AGENT,
        "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }
    if subnet:
        env["OMPI_MCA_btl_tcp_if_include"] = subnet
        env["OMPI_MCA_oob_tcp_if_include"] = subnet
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


def daemon_command(line: str) -> list[str]:
    """Another part's argv: the daemon's command line from the agent, run as ssh would,
    but in the foreground: the daemon is the container's command, which would end with it
    if it went to the background (``--daemonize``, which ``mpirun`` asks of every daemon
    it starts through ssh)."""
    words = line.split(" ")
    return ["/bin/sh", "-c", " ".join(word for word in words if word != DAEMONIZE)]


def daemon_key(part: int) -> str:
    """The launch exchange's key for part ``part``'s daemon command."""
    return DAEMON_KEY.format(part=part)


async def collect_daemon_commands(
    launch_dir: Path, hostnames: Sequence[str], running: Callable[[], bool]
) -> dict[str, str] | None:
    """The daemon command ``mpirun`` gave the agent for every part but the first (the
    exchange's keys), once all are written; None when ``running()`` turns false first."""
    wanted = {host: part for part, host in enumerate(hostnames) if part > 0}
    commands: dict[str, str] = {}
    while len(commands) < len(wanted):
        if not running():
            return None
        for host, part in wanted.items():
            key = daemon_key(part)
            path = launch_dir / host
            if key not in commands and path.exists():
                commands[key] = path.read_text(errors="replace").strip()
        if len(commands) < len(wanted):
            await asyncio.sleep(POLL_SECONDS)
    return commands


def describe(command: list[str]) -> str:
    """``command`` as one shell line (for the log)."""
    return shlex.join(command)
