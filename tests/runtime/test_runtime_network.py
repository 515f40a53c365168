"""Isolated jobs: their own network namespace on the node's bridge, NAT out, exposed ports
forwarded, the node's own ports out of reach, and everything released (or swept); and the
instance metadata guard, on jobs of either network.

Each test plays "the node" in a network namespace of its own (``node_ns``), with a second
namespace beside it (``outside``, another machine on the node's link at 198.51.100.2, the
node being 198.51.100.1): nothing touches this machine's own network.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyroute2 import IPRoute
from support.netns_tools import (
    Listener,
    create_namespace,
    entered,
    read_from,
    remove_namespace,
)

from fuzzball_core.errors import InvalidArgument
from fuzzball_runtime import Container, ContainerSpec, sweep
from fuzzball_runtime.errors import NetworkError, PortInUse
from fuzzball_runtime.network import (
    METADATA_DNS_COMMENT,
    METADATA_GUARD_CHAIN,
    IsolatedNetwork,
    NodeNetwork,
    resolv_conf_for_isolated,
)
from fuzzball_runtime.state import StateDir

pytestmark = pytest.mark.root

NODE_ADDRESS = "198.51.100.1"
OUTSIDE_ADDRESS = "198.51.100.2"
SUBNET = "10.213.7.0/24"
METADATA_ADDRESS = "169.254.169.254"


@pytest.fixture
def node_ns() -> Iterator[tuple[str, str]]:
    """Two fresh namespaces, (node, outside), joined by a veth pair; removed afterwards
    with everything in them (the bridge, the veths, the nft table)."""
    tag = uuid.uuid4().hex[:8]
    node, outside = f"fbrttest-node-{tag}", f"fbrttest-out-{tag}"
    try:
        create_namespace(node)
        create_namespace(outside)
        with entered(node), IPRoute() as ipr:
            peer = {"ifname": "uplink", "net_ns_fd": outside}
            ipr.link("add", ifname="uplink", kind="veth", peer=peer)
        for name, address in ((node, NODE_ADDRESS), (outside, OUTSIDE_ADDRESS)):
            with entered(name), IPRoute() as ipr:
                for link in ("lo", "uplink"):
                    ipr.link("set", index=ipr.link_lookup(ifname=link)[0], state="up")
                index = ipr.link_lookup(ifname="uplink")[0]
                ipr.addr("add", index=index, address=address, prefixlen=24)
        yield node, outside
    finally:
        remove_namespace(node)
        remove_namespace(outside)


@pytest.fixture
def on_node(node_ns: tuple[str, str], state_dir: Path) -> Iterator[str]:
    """The test's body runs in the node's namespace; the state directory is swept in it
    afterwards (a failed test leaves nothing); yields the outside namespace's name."""
    node, outside = node_ns
    with entered(node):
        try:
            yield outside
        finally:
            sweep(state_dir)


@pytest.fixture
def listener() -> Iterator[Callable[..., Listener]]:
    made: list[Listener] = []

    def make(**kwargs: object) -> Listener:
        made.append(Listener(**kwargs))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for server in made:
        server.close()


def isolated(**fields: object) -> IsolatedNetwork:
    return IsolatedNetwork(subnet=SUBNET, **fields)  # type: ignore[arg-type]


@pytest.fixture
def metadata_service(on_node: str) -> Iterator[Listener]:
    """The cloud's instance metadata service at 169.254.169.254, on the node's link (in the
    outside namespace, routed to from the node's), answering each connection."""
    with entered(on_node), IPRoute() as ipr:
        uplink = ipr.link_lookup(ifname="uplink")[0]
        ipr.addr("add", index=uplink, address=METADATA_ADDRESS, prefixlen=32)
    with IPRoute() as ipr:
        ipr.route("add", dst=f"{METADATA_ADDRESS}/32", gateway=OUTSIDE_ADDRESS)
    with entered(on_node):
        server = Listener(METADATA_ADDRESS, reply=b"user-data\n")
    yield server
    server.close()


def connect_output(
    run: Callable[..., tuple[object, str]], host: str, port: int, **fields: object
) -> str:
    """What a job reading from HOST:PORT got (empty when it could not connect)."""
    _, output = run(f"nc -w 2 {host} {port} </dev/null 2>/dev/null; true", **fields)
    return output


def test_isolated_job_has_its_own_address_on_the_node_subnet(run, on_node) -> None:
    status, output = run("ip -o -4 addr show eth0", isolated=isolated())
    assert status.exit_code == 0
    assert " 10.213.7.2/24 " in output


def test_isolated_jobs_started_together_get_addresses_of_their_own(
    image, state_dir, on_node
) -> None:
    spec = ContainerSpec(
        image=image, command=["sleep", "30"], state_dir=state_dir, isolated=isolated()
    )
    # the pool's threads start in this thread's namespace, the node's
    with ThreadPoolExecutor(max_workers=6) as pool:
        handles = list(pool.map(lambda _: Container(spec).start(), range(6)))
    try:
        assert len({handle.address for handle in handles}) == 6
    finally:
        for handle in handles:
            handle.close()


def test_isolated_job_cannot_reach_a_port_listening_on_its_node(run, on_node, listener) -> None:
    server = listener()
    assert connect_output(run, NODE_ADDRESS, server.port) == "from-the-node\n"  # host network
    assert connect_output(run, NODE_ADDRESS, server.port, isolated=isolated()) == ""
    assert connect_output(run, "10.213.7.1", server.port, isolated=isolated()) == ""


def test_ports_a_container_on_the_node_network_serves_are_open_to_isolated_jobs_while_it_runs(
    image, state_dir, run, on_node, listener
) -> None:
    server = listener()  # what the container on the node's network would serve
    serving = ContainerSpec(
        image=image,
        command=["sleep", "30"],
        state_dir=state_dir,
        node_ports=(f"tcp/{server.port}",),
    )
    with Container(serving).start():
        reached = connect_output(run, NODE_ADDRESS, server.port, isolated=isolated())
    assert reached == "from-the-node\n"
    assert connect_output(run, NODE_ADDRESS, server.port, isolated=isolated()) == ""


def test_isolated_job_reaches_other_machines_through_nat(run, on_node, listener) -> None:
    with entered(on_node):
        server = listener()
    assert connect_output(run, OUTSIDE_ADDRESS, server.port, isolated=isolated()) == (
        "from-the-node\n"
    )
    assert server.peers == [NODE_ADDRESS]  # masqueraded: the subnet stays inside the node


def test_an_isolated_job_does_not_reach_the_instance_metadata_service(
    run, metadata_service
) -> None:
    port = metadata_service.port

    reached = connect_output(run, METADATA_ADDRESS, port, isolated=isolated(), metadata_guard=True)

    assert reached == ""


def test_a_job_on_the_node_network_does_not_reach_the_instance_metadata_service(
    run, metadata_service
) -> None:
    assert connect_output(run, METADATA_ADDRESS, metadata_service.port, metadata_guard=True) == ""


def test_with_the_metadata_guard_off_a_job_reaches_the_metadata_service(
    run, metadata_service
) -> None:
    port = metadata_service.port

    on_node = connect_output(run, METADATA_ADDRESS, port, metadata_guard=False)
    from_isolated = connect_output(
        run, METADATA_ADDRESS, port, isolated=isolated(), metadata_guard=False
    )

    assert (on_node, from_isolated) == ("user-data\n", "user-data\n")


def test_the_metadata_guard_leaves_a_jobs_other_traffic_alone(
    run, on_node, listener, metadata_service
) -> None:
    with entered(on_node):
        outside = listener()
    beside_metadata = Listener(NODE_ADDRESS)  # the node's own port, on the node's network
    try:
        reached = [
            connect_output(run, OUTSIDE_ADDRESS, outside.port, metadata_guard=True),
            connect_output(run, NODE_ADDRESS, beside_metadata.port, metadata_guard=True),
            connect_output(
                run, OUTSIDE_ADDRESS, outside.port, isolated=isolated(), metadata_guard=True
            ),
        ]
    finally:
        beside_metadata.close()

    assert reached == ["from-the-node\n"] * 3


def test_dns_to_a_link_local_resolver_passes_the_metadata_guard(
    run, on_node, metadata_service
) -> None:
    # GCP's resolver is its metadata server, which a node's /etc/resolv.conf may name
    with entered(on_node):
        resolver = Listener(METADATA_ADDRESS, reply=b"an-answer\n", port=53)
    try:
        on_the_node = connect_output(run, METADATA_ADDRESS, 53, metadata_guard=True)
        isolated_job = connect_output(
            run, METADATA_ADDRESS, 53, isolated=isolated(), metadata_guard=True
        )
    finally:
        resolver.close()

    assert (on_the_node, isolated_job) == ("an-answer\n", "an-answer\n")


def test_the_metadata_guard_follows_the_nodes_setting_on_a_table_already_made(
    image, state_dir, run, metadata_service
) -> None:
    port = metadata_service.port
    holding = ContainerSpec(
        image=image,
        command=["sleep", "30"],
        state_dir=state_dir,
        isolated=isolated(),
        metadata_guard=False,
    )
    with Container(holding).start():  # made the table without the guard, and keeps it
        guarded = connect_output(
            run, METADATA_ADDRESS, port, isolated=isolated(), metadata_guard=True
        )
        chain = guard_chain(state_dir)
        unguarded = connect_output(
            run, METADATA_ADDRESS, port, isolated=isolated(), metadata_guard=False
        )

    assert (guarded, unguarded) == ("", "user-data\n")
    assert f'dport 53 accept comment "{METADATA_DNS_COMMENT}"' in chain


def test_an_earlier_agents_guard_chain_without_the_dns_rule_is_made_again(
    image, state_dir, run, metadata_service
) -> None:
    run("true", isolated=isolated(), metadata_guard=True)  # the table, kept for the next
    table = NodeNetwork(StateDir(state_dir)).table
    subprocess.run(
        ["nft", "delete", "rule", "ip", table, METADATA_GUARD_CHAIN, "handle", dns_rule(table)],
        check=True,
    )

    run("true", isolated=isolated(), metadata_guard=True)

    assert f'comment "{METADATA_DNS_COMMENT}"' in guard_chain(state_dir)
    assert guard_chain(state_dir).count(" drop") == 1


def guard_chain(state_dir: Path) -> str:
    """The node table's metadata guard chain as ``nft`` lists it (empty: none)."""
    table = NodeNetwork(StateDir(state_dir)).table
    listed = subprocess.run(
        ["nft", "list", "chain", "ip", table, METADATA_GUARD_CHAIN], capture_output=True
    )
    return listed.stdout.decode()


def dns_rule(table: str) -> str:
    """The handle of the guard chain's DNS rule in ``table``."""
    listed = subprocess.run(
        ["nft", "-a", "list", "chain", "ip", table, METADATA_GUARD_CHAIN],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(line for line in listed.splitlines() if METADATA_DNS_COMMENT in line)
    return line.rsplit("# handle ", 1)[1].strip()


def test_exposed_port_is_reachable_from_another_network_namespace(
    image, state_dir, on_node
) -> None:
    spec = ContainerSpec(
        image=image,
        command=["nc", "-l", "-p", "8080", "-e", "echo", "from-the-job"],
        state_dir=state_dir,
        isolated=isolated(expose_tcp=(8080,)),
    )
    with Container(spec).start() as handle, entered(on_node):
        assert handle.address == "10.213.7.2"
        assert read_from(NODE_ADDRESS, 8080) == b"from-the-job\n"


def test_a_port_another_job_exposes_is_refused_naming_it(image, state_dir, on_node) -> None:
    first = ContainerSpec(
        image=image,
        command=["sleep", "30"],
        state_dir=state_dir,
        isolated=isolated(expose_tcp=(8080,)),
    )
    second = ContainerSpec(
        image=image,
        command=["true"],
        state_dir=state_dir,
        isolated=isolated(expose_tcp=(8080,)),
    )
    with Container(first).start(), pytest.raises(PortInUse, match="port 8080/tcp"):
        Container(second).start()


def test_nothing_of_a_job_network_is_left_after_it_ends(run, state_dir, on_node) -> None:
    status, _ = run("true", isolated=isolated(expose_tcp=(8080,), expose_udp=(5353,)))
    assert status.exit_code == 0
    assert job_leftovers(state_dir) == []


def test_the_sweep_removes_the_node_bridge_and_table_once_no_job_uses_them(
    run, state_dir, on_node
) -> None:
    run("true", isolated=isolated())
    assert node_leftovers(state_dir) != []  # kept for the next isolated job
    sweep(state_dir)
    assert node_leftovers(state_dir) == []


def job_leftovers(state_dir: Path) -> list[str]:
    """What isolated jobs of ``state_dir`` hold in the current namespace: veths, addresses,
    forwarded ports."""
    network = NodeNetwork(StateDir(state_dir))
    with IPRoute() as ipr:
        names = [link.get_attr("IFLA_IFNAME") for link in ipr.get_links()]
    found = [f"link {name}" for name in names if name.startswith("fbv")]
    found += [str(p) for p in network.addresses.glob("*")]
    maps = subprocess.run(["nft", "list", "table", "ip", network.table], capture_output=True)
    found += [line for line in maps.stdout.decode().splitlines() if "elements" in line]
    return found


def node_leftovers(state_dir: Path) -> list[str]:
    """The node's bridge and table for ``state_dir``'s isolated jobs, and the jobs' own."""
    network = NodeNetwork(StateDir(state_dir))
    with IPRoute() as ipr:
        found = [f"link {network.bridge}"] if ipr.link_lookup(ifname=network.bridge) else []
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    found += [line for line in tables.splitlines() if network.table in line]
    return found + job_leftovers(state_dir)


DYING_AGENT = textwrap.dedent(
    """
    import sys
    from fuzzball_runtime import Container, ContainerSpec
    from fuzzball_runtime.network import IsolatedNetwork
    spec = ContainerSpec(image=sys.argv[1], command=["sleep", "60"], state_dir=sys.argv[2],
                         isolated=IsolatedNetwork(subnet=sys.argv[3], expose_tcp=(8080,)))
    handle = Container(spec).start()
    print(handle.pid, flush=True)
    sys.stdin.read()
    """
)


def test_sweep_frees_the_network_of_a_dead_agent(image, state_dir, on_node) -> None:
    # started from this thread, the agent lives in the node's namespace too
    agent = subprocess.Popen(
        [sys.executable, "-c", DYING_AGENT, str(image), str(state_dir), SUBNET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert agent.stdout is not None
    assert int(agent.stdout.readline()) > 0
    agent.kill()
    agent.wait()
    assert node_leftovers(state_dir) != []
    report = sweep(state_dir)
    assert "address 10.213.7.2" in report.network
    assert node_leftovers(state_dir) == []


def test_a_subnet_overlapping_an_address_of_the_node_is_refused(image, state_dir, on_node) -> None:
    spec = ContainerSpec(
        image=image,
        command=["true"],
        state_dir=state_dir,
        isolated=IsolatedNetwork(subnet="198.51.100.128/25"),
    )
    with pytest.raises(NetworkError, match=re.escape("198.51.100.128/25 overlaps 198.51.100.1/24")):
        Container(spec).start()
    assert node_leftovers(state_dir) == []


@pytest.mark.parametrize(
    ("network", "field"),
    [
        (IsolatedNetwork(subnet="10.1.2.0/31"), "spec.isolated.subnet"),
        (IsolatedNetwork(subnet="not-a-subnet"), "spec.isolated.subnet"),
        (IsolatedNetwork(expose_tcp=(0,)), r"spec.isolated.expose_tcp\[0\]"),
        (IsolatedNetwork(expose_udp=(53, 53)), "spec.isolated.expose_udp"),
    ],
)
def test_a_bad_isolated_network_is_rejected_naming_the_field(
    image, state_dir, network, field
) -> None:
    spec = ContainerSpec(image=image, command=["true"], state_dir=state_dir, isolated=network)
    with pytest.raises(InvalidArgument, match=field):
        Container(spec).start()


def test_an_isolated_job_resolves_with_the_node_resolvers_it_can_reach(run, on_node) -> None:
    resolv = "search example.org\nnameserver 127.0.0.53\nnameserver 192.0.2.53\n"
    _, output = run("cat /etc/resolv.conf", isolated=isolated(), resolv_conf=resolv)
    assert output == "search example.org\nnameserver 192.0.2.53\n"


def test_loopback_resolvers_give_way_to_systemd_resolved_upstream_ones(tmp_path) -> None:
    upstream = tmp_path / "resolv.conf"
    upstream.write_text("nameserver 192.0.2.53\n")
    resolv, warning = resolv_conf_for_isolated("nameserver 127.0.0.53\n", upstream)
    assert (resolv, warning) == ("nameserver 192.0.2.53\n", None)


def test_only_loopback_resolvers_and_no_upstream_warn(tmp_path) -> None:
    resolv, warning = resolv_conf_for_isolated("nameserver ::1\n", tmp_path / "missing")
    assert resolv == "\n"
    assert warning is not None and "resolves no names but those in its /etc/hosts" in warning
