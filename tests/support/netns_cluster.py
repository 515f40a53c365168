"""A test cluster on real networks: each Substrate in a network namespace of its own, with
its own address on a bridge, so multinode MPI, services reached from another node and
exposed ports cross real interfaces instead of loopback.

Per cluster (``<tag>`` random, so that clusters of concurrent test sessions never meet)::

    namespace fbtc<tag>-switch   bridge br0, joining the nodes and this machine
    this machine's namespace     fbtc<tag>, 10.211.<n>.1/24, the other end on br0: Orchestrate's
                                 gRPC and REST listen there, and a relay forwards a port of it
                                 to the local registry on loopback (the nodes pull through it)
    namespace fbtc<tag>-node-<i> eth0, 10.211.<n>.<i+1>/24 (the other end on br0), lo, a
                                 default route through 10.211.<n>.1; agent node-<i> runs in
                                 it (``nsenter --net``)

The bridge lives in a namespace of its own so that the nodes' traffic to each other is
bridged there, out of reach of this machine's firewall (br_netfilter would hand bridged
packets of this machine's namespace to its FORWARD chain, which a Docker host drops).
Everything the cluster made (namespaces, the veths in them, the relay) is removed by
:meth:`NetnsCluster.close`, also when starting it failed half-way. The namespaces take with
them whatever the agents set up inside (their job bridges, nft tables, isolated jobs' veths).
:class:`~cluster.Cluster` does the rest, unchanged: this module only gives it an address to
listen on and a wrapper to start each agent with.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute

from support.cluster import Cluster, LocalRegistry
from support.netns_tools import create_namespace, entered, remove_namespace

#: the /16 the clusters' bridges take a /24 of (none of this machine's own, none of the
#: node runtime's default job subnet)
CLUSTER_RANGE = ipaddress.IPv4Network("10.211.0.0/16")


class ClusterNetwork:
    """The switch, this machine's link to it and one namespace per node (see the module
    docstring)."""

    def __init__(self, nodes: int) -> None:
        tag = uuid.uuid4().hex[:8]
        self.switch = f"fbtc{tag}-switch"
        self.namespaces = [f"fbtc{tag}-node-{i + 1}" for i in range(nodes)]
        #: this machine's end of its link to the switch
        self.uplink = f"fbtc{tag}"
        self.subnet = self._free_subnet()
        hosts = list(self.subnet.hosts())
        self.gateway = str(hosts[0])
        #: node i's address (node-1 first)
        self.addresses = [str(hosts[i + 1]) for i in range(nodes)]
        try:
            self._create()
        except BaseException:
            self.remove()
            raise

    def _free_subnet(self) -> ipaddress.IPv4Network:
        with IPRoute() as ipr:
            taken = [
                ipaddress.IPv4Interface(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}").network
                for a in ipr.get_addr(family=socket.AF_INET)
            ]
        candidates = list(CLUSTER_RANGE.subnets(new_prefix=24))
        random.shuffle(candidates)
        return next(c for c in candidates if not any(c.overlaps(t) for t in taken))

    def _create(self) -> None:
        prefix = self.subnet.prefixlen
        for namespace in (self.switch, *self.namespaces):
            create_namespace(namespace)
        with IPRoute() as ipr:
            peer = {"ifname": "uplink", "net_ns_fd": self.switch}
            ipr.link("add", ifname=self.uplink, kind="veth", peer=peer)
            index = ipr.link_lookup(ifname=self.uplink)[0]
            ipr.addr("add", index=index, address=self.gateway, prefixlen=prefix)
            ipr.link("set", index=index, state="up")
        with entered(self.switch), IPRoute() as ipr:
            ipr.link("add", ifname="br0", kind="bridge")
            bridge = ipr.link_lookup(ifname="br0")[0]
            ipr.link("set", index=bridge, state="up")
            ports = ["uplink"]
            for index, namespace in enumerate(self.namespaces):
                ports.append(f"node{index + 1}")
                peer = {"ifname": "eth0", "net_ns_fd": namespace}
                ipr.link("add", ifname=ports[-1], kind="veth", peer=peer)
            for port in ports:
                index = ipr.link_lookup(ifname=port)[0]
                ipr.link("set", index=index, master=bridge, state="up")
        for namespace, address in zip(self.namespaces, self.addresses, strict=True):
            with entered(namespace), IPRoute() as ipr:
                for name in ("lo", "eth0"):
                    ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")
                eth0 = ipr.link_lookup(ifname="eth0")[0]
                ipr.addr("add", index=eth0, address=address, prefixlen=prefix)
                ipr.route("add", dst="0.0.0.0/0", gateway=self.gateway)

    def wrapper(self, index: int) -> list[str]:
        """The command prefix that starts a program in node ``index``'s namespace (0-based)
        without leaving this machine's mount namespace."""
        return ["nsenter", f"--net=/run/netns/{self.namespaces[index]}"]

    def remove(self) -> None:
        """Delete the namespaces and everything in them (this machine's end of the link
        goes with its other end); idempotent."""
        for namespace in (*self.namespaces, self.switch):
            remove_namespace(namespace)
        with IPRoute() as ipr:
            for index in ipr.link_lookup(ifname=self.uplink):
                with contextlib.suppress(Exception):
                    ipr.link("del", index=index)


class TcpRelay:
    """Forwards connections to ``host``:(a free port) to ``target`` (``HOST:PORT``): the
    nodes reach the local registry, which listens on loopback, through it."""

    def __init__(self, host: str, target: str) -> None:
        target_host, _, target_port = target.rpartition(":")
        self._target = (target_host, int(target_port))
        self._server = socket.create_server((host, 0))
        self.url = f"http://{host}:{self._server.getsockname()[1]}"
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._server.accept()
                try:
                    upstream = socket.create_connection(self._target)
                except OSError:
                    client.close()
                    continue
                with self._lock:
                    self._open.update((client, upstream))
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop accepting and cut the connections still open."""
        self._server.close()
        with self._lock:
            for sock in self._open:
                sock.close()
            self._open.clear()


class NetnsCluster:
    """:class:`~cluster.Cluster` with each agent in its own network namespace; ``cluster``
    is that Cluster, ``network`` its :class:`ClusterNetwork`."""

    def __init__(
        self, directory: Path, registry: LocalRegistry, *, agents: int = 2, **settings: Any
    ) -> None:
        """``settings`` are :class:`~cluster.Cluster`'s (cores, memory, per_node...)."""
        self.network = ClusterNetwork(agents)
        self.relay: TcpRelay | None = None
        self.cluster: Cluster | None = None
        try:
            self.relay = TcpRelay(self.network.gateway, registry.server.host)
            self.cluster = Cluster(
                directory,
                self.relay.url,
                agents=agents,
                host=self.network.gateway,
                wrappers=[self.network.wrapper(i) for i in range(agents)],
                **settings,
            )
        except BaseException:
            self.close()
            raise

    @property
    def orchestrate(self) -> Any:
        """The cluster's in-process Orchestrate."""
        assert self.cluster is not None
        return self.cluster.orchestrate

    def node_address(self, name: str) -> str:
        """The address of node ``name`` (``node-1``, ...) on the bridge."""
        return self.network.addresses[int(name.removeprefix("node-")) - 1]

    def node_namespace(self, name: str) -> str:
        """The network namespace node ``name`` runs in."""
        return self.network.namespaces[int(name.removeprefix("node-")) - 1]

    def close(self) -> None:
        """Stop the agents and Orchestrate, then remove the network; idempotent."""
        try:
            if self.cluster is not None:
                self.cluster.close()
                self.cluster = None
        finally:
            if self.relay is not None:
                self.relay.close()
            self.network.remove()
