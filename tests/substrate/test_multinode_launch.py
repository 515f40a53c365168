"""How Substrate launches Open MPI and generic multinode parts, without containers: the
mpirun and daemon command lines, the agent's hand-over, torchrun's variables, and the node
topology handed to the ranks' hwloc."""

from __future__ import annotations

import asyncio
import ctypes.util
import os
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from pyroute2 import IPRoute
from support.netns_tools import create_namespace, entered, remove_namespace

from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.spec import Job, parse_workflow
from fuzzball_core.substrate import hwloc, openmpi, rendezvous
from fuzzball_core.substrate.network import NodeInterface, node_interface
from fuzzball_core.substrate.ranks import RankLayout, primary_interface, transport_environment

#: what Open MPI 4.1's mpirun gives its remote agent for a host (abridged)
DAEMON_LINE = (
    '( test ! -r ./.profile || . ./.profile; orted --daemonize -mca ess "env"'
    ' -mca ess_base_vpid 1 -mca orte_hnp_uri "1.0;tcp://10.0.0.2:5000" )'
)


def _job(multinode: str, resource: str = "") -> Job:
    text = (
        "version: v4\njobs:\n  j:\n    image: {uri: docker://a}\n"
        f"    multinode: {multinode}\n{resource}"
    )
    return parse_workflow(text).jobs["j"]


def test_a_part_without_procs_per_node_runs_a_process_per_core_of_the_job() -> None:
    job = _job("{nodes: 2, implementation: openmpi}", "    resource: {cpu: {cores: 6}}\n")
    layout = RankLayout.of(job, ["n0", "n1"], "n1")
    assert (layout.procs_per_node, layout.first_rank, layout.size) == (6, 6, 12)


def test_procs_per_node_wins_over_the_jobs_cores() -> None:
    job = _job("{nodes: 2, procs-per-node: 2}", "    resource: {cpu: {cores: 6}}\n")
    assert RankLayout.of(job, ["n0", "n1"], "n0").procs_per_node == 2


def test_part_0_runs_mpirun_with_every_part_as_a_host_of_its_slots() -> None:
    command = openmpi.mpirun_command(RankLayout(0, 2, 3), ["ring-0", "ring-1"], ["/opt/ring"])

    assert command == [
        "mpirun",
        "-np",
        "6",
        "--host",
        "ring-0:3,ring-1:3",
        "--map-by",
        "slot",
        "--bind-to",
        "core:overload-allowed",
        "/opt/ring",
    ]


def test_other_parts_are_sent_the_daemon_line_without_daemonize() -> None:
    line = openmpi.daemon_input(DAEMON_LINE + "\n")

    assert line == DAEMON_LINE.replace(" --daemonize", "").encode() + b"\n"


def test_the_waiting_shell_runs_the_line_it_reads_in_the_foreground(tmp_path: Path) -> None:
    out = tmp_path / "out"
    line = f'( echo "$0 ran" > {out}; exit 7 ) --daemonize'

    waiter = subprocess.run(openmpi.WAITER_COMMAND, input=openmpi.daemon_input(line), check=False)

    assert waiter.returncode == 7
    assert out.read_text() == "/bin/sh ran\n"  # its own shell, as ssh's remote one


def test_the_waiting_shell_fails_when_its_input_closes_without_a_line() -> None:
    waiter = subprocess.run(openmpi.WAITER_COMMAND, input=b"", check=False)

    assert waiter.returncode == 1


def test_open_mpi_uses_the_node_subnet_and_fuzzballs_agent() -> None:
    env = openmpi.environment("10.211.4.0/24")

    assert env["OMPI_MCA_plm_rsh_agent"] == "/.fuzzball-openmpi/agent"
    assert env["OMPI_MCA_btl_tcp_if_include"] == "10.211.4.0/24"
    assert env["OMPI_MCA_oob_tcp_if_include"] == "10.211.4.0/24"
    assert env["OMPI_MCA_plm_rsh_no_tree_spawn"] == "1"


def test_mpich_and_torchrun_transports_are_pointed_at_the_nodes_interface() -> None:
    env = transport_environment("eth0", {"UCX_TLS"})

    assert env == {
        "UCX_NET_DEVICES": "eth0",
        "NCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
    }


def test_an_interface_choice_the_job_or_image_makes_is_kept() -> None:
    env = transport_environment("eth0", {"UCX_NET_DEVICES"})

    assert "UCX_NET_DEVICES" not in env
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"


def test_the_interface_holding_the_nodes_address_is_found_without_a_netlink_dump() -> None:
    assert primary_interface("127.0.0.1") == NodeInterface(name="lo", subnet="127.0.0.0/8")
    assert primary_interface("127.0.0.1") == node_interface("127.0.0.1")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace")
def test_a_secondary_ipv6_or_unheld_address_is_left_to_the_netlink_lookup() -> None:
    namespace = f"fbtest-ranks-{os.getpid()}"
    create_namespace(namespace)
    try:
        with entered(namespace), IPRoute() as ipr:
            ipr.link("add", ifname="fb0", kind="veth", peer="fb1")
            index = ipr.link_lookup(ifname="fb0")[0]
            ipr.addr("add", index=index, address="10.77.0.5", prefixlen=20)
            ipr.addr("add", index=index, address="10.77.0.9", prefixlen=20)
            ipr.link("set", index=index, state="up")
            found = NodeInterface(name="fb0", subnet="10.77.0.0/20")

            assert primary_interface("10.77.0.5") == found
            assert primary_interface("10.77.0.9") is None
            assert node_interface("10.77.0.9") == found
            assert primary_interface("10.77.0.6") is None
            assert primary_interface("::1") is None
            assert primary_interface("") is None
    finally:
        remove_namespace(namespace)


def test_without_a_known_subnet_open_mpi_chooses_its_interfaces() -> None:
    assert "OMPI_MCA_btl_tcp_if_include" not in openmpi.environment(None)


def test_the_agent_script_writes_the_daemon_line_under_the_hosts_name(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.write_text(openmpi.AGENT_SCRIPT.replace(openmpi.LAUNCH_DIR, str(tmp_path)))

    subprocess.run(["/bin/sh", str(agent), "ring-1", *DAEMON_LINE.split(" ")], check=True)

    assert (tmp_path / "ring-1").read_text() == DAEMON_LINE + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent", "ring-1"]


def test_part_0_collects_a_daemon_line_for_every_other_part(tmp_path: Path) -> None:
    (tmp_path / "ring-1").write_text("orted one\n")
    (tmp_path / "ring-2").write_text("orted two\n")

    commands = asyncio.run(
        openmpi.collect_daemon_commands(tmp_path, ["ring-0", "ring-1", "ring-2"], lambda: True)
    )

    assert commands == {"orted.1": "orted one", "orted.2": "orted two"}


def test_collecting_stops_when_the_part_stops(tmp_path: Path) -> None:
    commands = asyncio.run(
        openmpi.collect_daemon_commands(tmp_path, ["ring-0", "ring-1"], lambda: False)
    )

    assert commands is None


def test_part_0_is_woken_by_the_agent_moving_a_line_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no recheck within the test: only the folder's change can wake the collector
    monkeypatch.setattr(openmpi, "RECHECK_SECONDS", 3600.0)

    async def scenario() -> dict[str, str] | None:
        collecting = asyncio.ensure_future(
            openmpi.collect_daemon_commands(tmp_path, ["ring-0", "ring-1"], lambda: True)
        )
        await asyncio.sleep(0.05)
        assert not collecting.done()
        (tmp_path / ".ring-1.tmp").write_text("orted one\n")
        (tmp_path / ".ring-1.tmp").rename(tmp_path / "ring-1")
        return await asyncio.wait_for(collecting, 60)

    assert asyncio.run(scenario()) == {"orted.1": "orted one"}


def test_part_0_offers_its_address_and_a_meeting_point() -> None:
    offered = rendezvous.offer(RankLayout(0, 2, 2), "127.0.0.1")

    assert offered["address.0"] == "127.0.0.1"
    host, _, port = offered["master"].rpartition(":")
    assert host == "127.0.0.1" and 0 < int(port) < 65536


def test_other_parts_offer_only_their_address() -> None:
    assert rendezvous.offer(RankLayout(1, 2, 2), "10.0.0.3") == {"address.1": "10.0.0.3"}


def test_a_node_without_an_address_cannot_take_part() -> None:
    with pytest.raises(FailedPrecondition, match=r"set substrate\.address"):
        rendezvous.offer(RankLayout(1, 2, 2), "")


def test_each_part_gets_torchruns_variables() -> None:
    exchanged = {"master": "10.0.0.2:29400", "address.0": "10.0.0.2", "address.1": "10.0.0.3"}

    env = rendezvous.environment(RankLayout(1, 2, 4), exchanged)

    assert env == {
        "MASTER_ADDR": "10.0.0.2",
        "MASTER_PORT": "29400",
        "WORLD_SIZE": "8",
        "NODE_RANK": "1",
        "GROUP_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "FB_NODE_ADDRESSES": "10.0.0.2,10.0.0.3",
        "FB_MULTINODE_IMPLEMENTATION": "generic",
    }


def test_a_part_of_one_process_gets_its_rank_directly() -> None:
    exchanged = {"master": "10.0.0.2:29400", "address.0": "10.0.0.2", "address.1": "10.0.0.3"}

    env = rendezvous.environment(RankLayout(1, 2, 1), exchanged)

    assert (env["RANK"], env["LOCAL_RANK"]) == ("1", "0")


def test_ranks_hwloc_reads_the_bound_topology_of_this_very_system() -> None:
    env = hwloc.environment({"PATH": "/usr/bin:/bin", "UCX_TLS": "tcp,self"})

    assert env == {
        "HWLOC_XMLFILE": "/.fuzzball-topology/topology.xml",
        "HWLOC_THISSYSTEM": "1",
        "HWLOC_THISSYSTEM_ALLOWED_RESOURCES": "1",
    }


def test_a_jobs_own_hwloc_setting_wins() -> None:
    env = hwloc.environment({"HWLOC_THISSYSTEM": "0"})

    assert "HWLOC_THISSYSTEM" not in env
    assert env["HWLOC_XMLFILE"] == "/.fuzzball-topology/topology.xml"


@pytest.mark.parametrize("source", ["HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_COMPONENTS"])
def test_a_job_choosing_hwlocs_source_gets_no_topology(source: str) -> None:
    assert hwloc.environment({source: "whatever"}) == {}


@pytest.mark.skipif(ctypes.util.find_library("hwloc") is None, reason="libhwloc not installed")
def test_the_node_topology_is_exported_once_with_every_cpu(tmp_path: Path) -> None:
    exported = hwloc.node_topology(tmp_path)
    assert exported == tmp_path / "topology.xml"
    first = exported.stat().st_mtime_ns

    again = hwloc.node_topology(tmp_path)

    assert again == exported and exported.stat().st_mtime_ns == first
    root = ElementTree.parse(exported).getroot()
    processing_units = root.findall(".//object[@type='PU']")
    assert len(processing_units) == os.cpu_count()
    # containers run as any user: the file must be readable by all
    assert exported.stat().st_mode & 0o444 == 0o444


def test_a_node_without_libhwloc_exports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)

    assert hwloc.node_topology(tmp_path) is None
    assert not (tmp_path / "topology.xml").exists()
